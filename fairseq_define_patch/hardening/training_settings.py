"""fairseq-train and fairseq-validate: no batch size, a training number out of range, or a
precision the device cannot train in, gets one line before any worker starts; the values
--optimizer-overrides puts into a resumed optimizer are checked as they are applied; a loss
that goes to NaN ends in one line naming the update and what to try."""

from ..edits import CopiedModule, Edit, FilePatch

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
        (
            _NO_BATCH_SIZE,
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/validate.py",
        "no batch size: a clear error, not an AssertionError",
        (
            _NO_BATCH_SIZE,
        ),
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
                "            for group in self.param_groups:\n"
                "                group.update(optimizer_overrides)\n",
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
                "            with nan_detector(NanDetector, self.get_model()):  # (fairseq_define) its failure logged\n",
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
        "fairseq/dataclass/utils.py",
        "an unset setting whose default is an interpolation follows it (--total-num-update: --max-update)",
        (
            Edit(
                "        val = get_default(v) if not hasattr(args, k) else getattr(args, k)\n",
                "        from fairseq._define_runtime.training_settings import given_or_default\n\n"
                "        val = given_or_default(args, k, get_default(v), v.type)  # (fairseq_define) unset: the interpolation\n",
            ),
        ),
    ),
)
