"""fairseq-train and fairseq-validate: no batch size, or a training number out of range,
gets one line before any worker starts."""

from ..edits import CopiedModule, Edit, FilePatch

# The check of the numbers is runtime/training_settings.py (copied into fairseq), called in
# cli_main before any worker starts.
COPIES = (CopiedModule("training_settings", "training numbers checked before any worker starts"),)

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
)
