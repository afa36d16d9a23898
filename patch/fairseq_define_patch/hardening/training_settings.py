"""fairseq-train and fairseq-validate: no batch size, a training number out of range, or a
precision the device cannot train in, gets one line before any worker starts; the values
--optimizer-overrides puts into a resumed optimizer are checked as they are applied; a loss
that goes to NaN ends in one line naming the update and what to try; tri_stage's phases and a
world size that no launcher started get one line where fairseq asserted them, a world size
below 1 where fairseq infers how to start the processes."""

from ..edits import CopiedModule, Edit, FilePatch, insert_after

# The check of the numbers is runtime/training_settings.py (copied into fairseq), called in
# cli_main before any worker starts.
COPIES = (
    CopiedModule("precision_devices", "the training precision against the device"),
    CopiedModule("training_settings", "training numbers checked before any worker starts"),
    CopiedModule("training_divergence", "a NaN loss: one line naming the update and what to try"),
)

# fairseq-train and fairseq-validate assert the same thing in the same words
_NO_BATCH_SIZE = Edit(
    "    assert (\n"
    "        cfg.dataset.max_tokens is not None or cfg.dataset.batch_size is not None\n"
    '    ), "Must specify batch size either with --max-tokens or --batch-size"\n',
    "    if cfg.dataset.max_tokens is None and cfg.dataset.batch_size is None:\n"
    "        from fairseq import UserError\n\n"
    '        raise UserError("no batch size: pass --max-tokens N (tokens per batch) or --batch-size N")\n',
)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq_cli/train.py",
        "no batch size: a clear error, not an AssertionError",
        (_NO_BATCH_SIZE,),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/validate.py",
        "no batch size: a clear error, not an AssertionError",
        (_NO_BATCH_SIZE,),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/train.py",
        "training numbers checked before any worker starts (finite; counts and rates in range)",
        (
            Edit(
                "    cfg = convert_namespace_to_omegaconf(args)\n\n    if cfg.common.use_plasma_view:\n",
                "    cfg = convert_namespace_to_omegaconf(args)\n"
                "    from fairseq._define_runtime.training_settings import check_training_numbers  # (fairseq_define)\n"
                "    check_training_numbers(cfg)  # before any worker starts\n"
                "    if cfg.common.use_plasma_view:\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/optim/fairseq_optimizer.py",
        "--optimizer-overrides checked as it is applied (names the optimizer has, values in range)",
        (
            Edit(
                "            for group in self.param_groups:\n                group.update(optimizer_overrides)\n",
                "            from fairseq._define_runtime.training_settings import check_optimizer_overrides\n\n"
                "            for group in self.param_groups:\n"
                "                group.update(check_optimizer_overrides(group, optimizer_overrides))\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/trainer.py",
        "a NaN loss: one line naming the update and what to try, not a StopIteration from NanDetector",
        (
            Edit(
                "            with NanDetector(self.get_model()):\n",
                "            from fairseq._define_runtime.training_divergence import nan_detector, raise_divergence\n\n"
                "            with nan_detector(NanDetector, self.get_model()):  # (fairseq_define) its failure "
                "logged\n",
            ),
            Edit(
                "            raise\n        except OverflowError as e:\n",
                "            raise_divergence(self)  # (fairseq_define) one line: the update and what to try\n"
                "        except OverflowError as e:\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/optim/lr_scheduler/tri_stage_lr_scheduler.py",
        "tri_stage's phases: one line, a --phase-ratio sum within rounding of 1, a decay phase at least one update",
        (
            Edit(
                "        if cfg.phase_ratio is not None:\n"
                "            assert cfg.max_update > 0\n"
                '            assert sum(cfg.phase_ratio) == 1, "phase ratios must add up to 1"\n',
                "        from fairseq._define_runtime.training_settings import check_phase_ratio  # "
                "(fairseq_define)\n\n"
                "        check_phase_ratio(cfg, cfg.max_update)  # one line; 0.1 + 0.2 + 0.7 adds up to 1\n"
                "        if cfg.phase_ratio is not None:\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/distributed/utils.py",
        "--distributed-world-size above the GPUs without torchrun: one line naming torchrun; below 1: one line",
        (
            Edit(
                "    assert (\n"
                "        cfg.distributed_world_size <= torch.cuda.device_count()\n"
                '    ), f"world size is {cfg.distributed_world_size} but have {torch.cuda.device_count()} available '
                'devices"\n',
                "    from fairseq._define_runtime.training_settings import check_world_size  # (fairseq_define)\n\n"
                "    check_world_size(cfg)  # one line naming torchrun\n",
            ),
            insert_after(
                "def infer_init_method(cfg: DistributedTrainingConfig, force_distributed=False):\n",
                "    from fairseq._define_runtime.training_settings import check_world_size_positive  # "
                "(fairseq_define)\n\n"
                "    check_world_size_positive(cfg)  # 0 or -1: one line, not a shard's ValueError\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/dataclass/utils.py",
        "an unset setting whose default is an interpolation follows it (--total-num-update: --max-update)",
        (
            Edit(
                "        val = get_default(v) if not hasattr(args, k) else getattr(args, k)\n",
                "        from fairseq._define_runtime.training_settings import given_or_default\n\n"
                "        val = given_or_default(args, k, get_default(v), v.type)  # (fairseq_define) unset: the "
                "interpolation\n",
            ),
        ),
    ),
)
