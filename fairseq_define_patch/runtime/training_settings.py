"""fairseq-train's numbers checked once, before any worker starts.

fairseq-train used its training numbers without a check: --update-freq 0 and
--warmup-updates -5 ended in a ZeroDivisionError traceback, --lr -1 and --label-smoothing 2
trained nonsense without a word. Each model's own settings are checked where it is built.
"""

import argparse
import math

from omegaconf import OmegaConf

from fairseq import UserError

__all__ = ["check_training_numbers"]


def check_training_numbers(cfg):
    """Every number of the training groups finite; those that mean something only in a range,
    in it (fairseq_cli/train.py calls this in cli_main)."""

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
