"""fairseq-train and fairseq-validate: no batch size, or a training number out of range,
gets one line before any worker starts."""

from ..edits import Edit, FilePatch

# fairseq-train used its training numbers without a check: --update-freq 0 and
# --warmup-updates -5 ended in a ZeroDivisionError traceback, --lr -1 and --label-smoothing 2
# trained nonsense without a word. Checked once in cli_main, before any worker starts (each
# model's own settings are checked where it is built).
_TRAINING_NUMBERS_HELPER = """def _check_training_numbers(cfg):
    # (added by fairseq_define) every number of the training groups finite; those that mean
    # something only in a range, in it
    import math

    from fairseq import UserError

    def flag(name):
        return "--" + name.replace("_", "-")

    def settings(group):  # a group is a DictConfig, or a Namespace for components without a dataclass
        node = cfg.get(group, None)
        if isinstance(node, argparse.Namespace):
            return vars(node)
        return {k: node.get(k, None) for k in node.keys() if k in node} if node is not None else {}

    def values(group, name):
        value = settings(group).get(name, None)
        return list(value) if isinstance(value, (list, tuple)) or OmegaConf.is_list(value) else [value]

    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    for group in ("optimization", "optimizer", "lr_scheduler", "criterion", "dataset", "checkpoint"):
        for name in settings(group):
            for v in values(group, name):
                if number(v) and not math.isfinite(v):
                    raise UserError("{} {} is not a finite number: give a finite value".format(flag(name), v))
    for group, name, low, why in _TRAINING_LOWER_BOUNDS:
        for v in values(group, name):
            if number(v) and v < low:
                raise UserError("{} {} {}".format(flag(name), v, why))
    for v in values("criterion", "label_smoothing"):
        if number(v) and v >= 1:
            raise UserError("--label-smoothing {} must be below 1 (0.1 is usual)".format(v))


_TRAINING_LOWER_BOUNDS = (  # (group, option, lowest value, what the line says below it)
    ("optimization", "lr", 0, "is negative: give a learning rate of 0 or more"),
    ("optimization", "update_freq", 1, "must be at least 1 (batches accumulated per update)"),
    ("optimization", "clip_norm", 0, "is negative: give a norm to clip to, or 0 for no clipping"),
    ("optimization", "max_update", 0, "is negative: give a number of updates, or 0 for no limit"),
    ("optimization", "max_epoch", 0, "is negative: give a number of epochs, or 0 for no limit"),
    ("optimizer", "weight_decay", 0, "is negative: give a weight decay of 0 or more"),
    ("lr_scheduler", "warmup_updates", 0, "is negative: give a number of warmup updates, or 0"),
    ("dataset", "max_tokens", 1, "must be at least 1 (tokens per batch)"),
    ("dataset", "batch_size", 1, "must be at least 1 (sentences per batch)"),
    ("criterion", "label_smoothing", 0, "is negative: give a label smoothing in [0, 1)"),
)


"""

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
                "from fairseq.trainer import Trainer\n\n\ndef main(cfg: FairseqConfig) -> None:\n",
                "from fairseq.trainer import Trainer\n\n\n" + _TRAINING_NUMBERS_HELPER
                + "def main(cfg: FairseqConfig) -> None:\n",
            ),
            Edit(
                "    cfg = convert_namespace_to_omegaconf(args)\n\n    if cfg.common.use_plasma_view:\n",
                "    cfg = convert_namespace_to_omegaconf(args)\n"
                "    _check_training_numbers(cfg)  # (fairseq_define)\n\n"
                "    if cfg.common.use_plasma_view:\n",
            ),
        ),
    ),
)
