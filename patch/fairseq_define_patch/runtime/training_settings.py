"""fairseq-train's numbers checked once, before any worker starts, and the values that
--optimizer-overrides puts into a resumed optimizer checked as they are applied.

fairseq-train used its training numbers without a check: --update-freq 0 and
--warmup-updates -5 ended in a ZeroDivisionError traceback, --required-batch-size-multiple 0
killed the process with SIGFPE, --save-interval 0 trained an epoch and crashed before saving,
--lr -1, --end-learning-rate -5, --adam-eps -1 and --label-smoothing 2 trained nonsense without
a word, and betas outside [0, 1) failed in a math domain error. Every optimizer's, schedule's
and interval's number has a range here (_TRAINING_RANGES), in one table; the precision against
the device is precision_devices.py's. Each model's own settings are checked where it is built.
Settings whose shape the table cannot say are checked beside it: betas that are not two numbers
(--adam-betas 'x' ended in a traceback once the optimizer was built, '(0.9,)' at the first
update), tri_stage's --phase-ratio (an assertion, or a ZeroDivisionError without a decay
phase), an --optimizer-overrides that is no dict (a SyntaxError from the resume), and a
--distributed-world-size that no process launcher started (``check_world_size``, called by
fairseq/distributed/utils.py where fairseq asserted it), or below 1 (``check_world_size_positive``). The
seed (``check_seed``) is numpy's, 0 to 2**32 - 1, for the whole run: epoch E shuffles with
--seed + E, so a seed near the top passed at the start and crashed at a later epoch.
"""

import argparse
import ast
import math
import os
import sys
import typing

from fairseq import UserError
from omegaconf import OmegaConf

from .config_literals import parse_config_literal
from .precision_devices import check_precision_device

__all__ = ["check_optimizer_overrides", "check_phase_ratio", "check_seed", "check_training_numbers", "check_world_size",
           "check_world_size_positive", "given_or_default", "in_range"]


# (group, option, range, what the line says after "--flag VALUE"). Ranges: ">=0", ">0",
# ">=1", "<1", "[0,1)", "(0,1]", "(0,1)", "[0,1]", "-1|>=0" (-1: fairseq's "unset") and "-1|>=1".
# fairseq reads -1 as "off" or "unset" for several options: the ranges keep it.
_TRAINING_RANGES = (
    ("optimization", "lr", ">=0", "is negative: give a learning rate of 0 or more"),
    ("optimization", "update_freq", ">=1", "must be at least 1 (batches accumulated per update)"),
    ("optimization", "clip_norm", ">=0", "is negative: give a norm to clip to, or 0 for no clipping"),
    ("optimization", "max_update", ">=0", "is negative: give a number of updates, or 0 for no limit"),
    ("optimization", "max_epoch", ">=0", "is negative: give a number of epochs, or 0 for no limit"),
    ("optimization", "stop_time_hours", ">=0", "is negative: give a time in hours, or 0 for no limit"),
    ("optimizer", "weight_decay", ">=0", "is negative: give a weight decay of 0 or more"),
    ("optimizer", "adam_eps", ">0", "must be positive (1e-8 is usual)"),
    ("optimizer", "adamax_eps", ">0", "must be positive (1e-8 is usual)"),
    ("optimizer", "lamb_eps", ">0", "must be positive (1e-8 is usual)"),
    ("optimizer", "adadelta_eps", ">0", "must be positive (1e-6 is usual)"),
    ("optimizer", "adadelta_rho", "[0,1]", "is not a decay rate: give a value in [0, 1] (0.9 is usual)"),
    ("optimizer", "adam_betas", "[0,1)", "holds a beta outside [0, 1): give two values in [0, 1), e.g. '(0.9, 0.98)'"),
    (
        "optimizer",
        "adamax_betas",
        "[0,1)",
        "holds a beta outside [0, 1): give two values in [0, 1), e.g. '(0.9, 0.999)'",
    ),
    ("optimizer", "lamb_betas", "[0,1)", "holds a beta outside [0, 1): give two values in [0, 1), e.g. '(0.9, 0.999)'"),
    ("optimizer", "beta1", "[0,1)", "is not a decay rate: give a value in [0, 1), or leave it unset"),
    ("optimizer", "momentum", "[0,1)", "is not a momentum: give a value in [0, 1) (0.99 is usual; 0 for none)"),
    ("optimizer", "clip_threshold", ">0", "must be positive (1.0 is usual)"),
    ("lr_scheduler", "warmup_updates", ">=0", "is negative: give a number of warmup updates, or 0"),
    ("lr_scheduler", "warmup_init_lr", "-1|>=0", "is negative: give a learning rate of 0 or more (or -1: the default)"),
    ("lr_scheduler", "min_lr", ">=0", "is negative: give a learning rate of 0 or more"),
    ("lr_scheduler", "max_lr", ">=0", "is negative: give a learning rate of 0 or more"),
    ("lr_scheduler", "end_learning_rate", ">=0", "is negative: give a learning rate of 0 or more"),
    ("lr_scheduler", "power", ">0", "must be positive (1 decays linearly)"),
    ("lr_scheduler", "total_num_update", ">=1", "must be at least 1: give --total-num-update (or --max-update) N"),
    ("lr_scheduler", "lr_shrink", "(0,1]", "is not a shrink factor: give a value in (0, 1] (0.1 is usual)"),
    ("lr_scheduler", "lr_decay", "(0,1]", "is not a decay factor: give a value in (0, 1] (0.5 is usual)"),
    ("lr_scheduler", "t_mult", ">0", "must be positive (1 keeps every period equally long)"),
    ("lr_scheduler", "lr_period_updates", "-1|>=1", "must be at least 1 (updates per period), or -1 for the default"),
    ("lr_scheduler", "lr_deacy_period", ">=1", "must be at least 1 (updates between decays)"),
    ("lr_scheduler", "lr_threshold", ">=0", "is negative: give a threshold of 0 or more"),
    ("lr_scheduler", "lr_patience", ">=0", "is negative: give a number of epochs of 0 or more"),
    ("lr_scheduler", "warmup_steps", ">=0", "is negative: give a number of updates of 0 or more"),
    ("lr_scheduler", "hold_steps", ">=0", "is negative: give a number of updates of 0 or more"),
    ("lr_scheduler", "decay_steps", ">=0", "is negative: give a number of updates of 0 or more"),
    ("lr_scheduler", "init_lr_scale", ">0", "must be positive (0.01 is usual)"),
    ("lr_scheduler", "final_lr_scale", ">0", "must be positive (0.01 is usual)"),
    ("dataset", "max_tokens", ">=1", "must be at least 1 (tokens per batch)"),
    ("dataset", "batch_size", ">=1", "must be at least 1 (sentences per batch)"),
    ("dataset", "max_tokens_valid", ">=1", "must be at least 1 (tokens per validation batch)"),
    ("dataset", "batch_size_valid", ">=1", "must be at least 1 (sentences per validation batch)"),
    (
        "dataset",
        "required_batch_size_multiple",
        ">=1",
        "must be at least 1 (batch sizes are rounded to a multiple of it; 1 for none)",
    ),
    (
        "dataset",
        "required_seq_len_multiple",
        ">=1",
        "must be at least 1 (lengths are padded to a multiple of it; 1 for none)",
    ),
    (
        "dataset",
        "validate_interval",
        ">=1",
        "must be at least 1 (epochs between validations; --disable-validation turns it off)",
    ),
    (
        "dataset",
        "validate_interval_updates",
        ">=0",
        "is negative: give a number of updates, or 0 to validate by epoch only",
    ),
    ("dataset", "validate_after_updates", ">=0", "is negative: give a number of updates, or 0"),
    ("dataset", "max_valid_steps", ">=1", "must be at least 1 (batches per validation), or leave it unset"),
    ("dataset", "num_workers", ">=0", "is negative: give a number of data loader workers, or 0"),
    ("dataset", "data_buffer_size", ">=0", "is negative: give a number of batches to prefetch, or 0"),
    ("dataset", "curriculum", ">=0", "is negative: give a number of epochs, or 0"),
    ("dataset", "num_shards", ">=1", "must be at least 1"),
    ("dataset", "shard_id", ">=0", "is negative: give a shard index from 0 to --num-shards - 1"),
    (
        "checkpoint",
        "save_interval",
        ">=1",
        "must be at least 1 (epochs between saves; --no-epoch-checkpoints or --no-save turn saving off)",
    ),
    ("checkpoint", "save_interval_updates", ">=0", "is negative: give a number of updates, or 0 to save by epoch only"),
    (
        "checkpoint",
        "keep_interval_updates",
        "-1|>=0",
        "is negative: give a number of checkpoints to keep, or -1 to keep all",
    ),
    ("checkpoint", "keep_interval_updates_pattern", "-1|>=1", "must be at least 1, or -1 for no pattern"),
    (
        "checkpoint",
        "keep_last_epochs",
        "-1|>=0",
        "is negative: give a number of checkpoints to keep, or -1 to keep all",
    ),
    (
        "checkpoint",
        "keep_best_checkpoints",
        "-1|>=0",
        "is negative: give a number of checkpoints to keep, or -1 to keep all",
    ),
    (
        "checkpoint",
        "patience",
        "-1|>=1",
        "must be at least 1 (validations without improvement), or -1 for no early stop",
    ),
    ("checkpoint", "checkpoint_shard_count", ">=1", "must be at least 1"),
    ("common", "log_interval", ">=1", "must be at least 1 (updates between log lines)"),
    ("common", "fp16_init_scale", ">0", "must be positive (128 is usual)"),
    ("common", "fp16_scale_window", ">=1", "must be at least 1 (updates), or leave it unset"),
    ("common", "fp16_scale_tolerance", "[0,1]", "is not a fraction: give a value in [0, 1]"),
    ("common", "min_loss_scale", ">0", "must be positive (1e-4 is usual)"),
    ("common", "amp_init_scale", ">0", "must be positive (128 is usual)"),
    ("common", "amp_scale_window", ">=1", "must be at least 1 (updates), or leave it unset"),
    ("common", "amp_batch_retries", ">=0", "is negative: give a number of retries of 0 or more"),
    ("common", "empty_cache_freq", ">=0", "is negative: give a number of updates, or 0 for never"),
    ("task", "max_source_positions", ">=1", "must be at least 1 (the longest source, in tokens, the model takes)"),
    ("task", "max_target_positions", ">=1", "must be at least 1 (the longest target, in tokens, the model takes)"),
    ("task", "tokens_per_sample", ">=1", "must be at least 1 (tokens per sample)"),
    ("model", "max_source_positions", ">=1", "must be at least 1 (the longest source, in tokens, the model takes)"),
    ("model", "max_target_positions", ">=1", "must be at least 1 (the longest target, in tokens, the model takes)"),
    ("model", "tokens_per_sample", ">=1", "must be at least 1 (tokens per sample)"),
    ("criterion", "label_smoothing", ">=0", "is negative: give a label smoothing in [0, 1)"),
    ("criterion", "label_smoothing", "<1", "must be below 1 (0.1 is usual)"),
)
# optimizer settings that hold (beta1, beta2)
_BETAS = ("adam_betas", "adamax_betas", "lamb_betas")
# the groups whose every number must be finite
_FINITE_GROUPS = ("optimization", "optimizer", "lr_scheduler", "criterion", "dataset", "checkpoint", "common")
# what an optimizer's parameter group holds (the keys --optimizer-overrides sets), in the ranges above
_PARAM_GROUP_RANGES = {
    "lr": (">=0", "is negative: give a learning rate of 0 or more"),
    "eps": (">0", "must be positive (1e-8 is usual)"),
    "weight_decay": (">=0", "is negative: give a weight decay of 0 or more"),
    "betas": ("[0,1)", "holds a beta outside [0, 1): give two values in [0, 1)"),
    "momentum": ("[0,1)", "is not a momentum: give a value in [0, 1)"),
    "rho": ("[0,1]", "is not a decay rate: give a value in [0, 1]"),
}


def in_range(rule, value):
    """Whether the number ``value`` is in ``rule`` (one of the ranges of _TRAINING_RANGES)."""
    if rule.startswith("-1|"):
        return value == -1 or in_range(rule[3:], value)
    if rule.startswith(">="):
        return value >= float(rule[2:])
    if rule.startswith(">"):
        return value > float(rule[1:])
    if rule.startswith("<"):
        return value < float(rule[1:])
    low, high = (float(x) for x in rule[1:-1].split(","))
    return ((low <= value) if rule[0] == "[" else (low < value)) and (
        (value <= high) if rule[-1] == "]" else (value < high)
    )


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _flag(name):
    return "--" + name.replace("_", "-")


def _values(value):
    """The numbers of a setting: a list or tuple item by item, a string such as "(0.9, 0.98)"
    (an optimizer's betas) parsed as plain data, anything else as itself."""
    if isinstance(value, str) and value.lstrip().startswith(("(", "[")):
        value = parse_config_literal(value)
    if isinstance(value, (list, tuple)) or OmegaConf.is_list(value):
        return list(value)
    return [value]


def check_training_numbers(cfg):
    """Every number of the training groups finite; those that mean something only in a range,
    in it; the precision against the device (fairseq_cli/train.py calls this in cli_main)."""

    def settings(group):  # a group is a DictConfig, or a Namespace for components without a dataclass
        node = cfg.get(group, None)
        if isinstance(node, argparse.Namespace):
            return vars(node)
        return {k: node.get(k, None) for k in node.keys() if k in node} if node is not None else {}

    for group in _FINITE_GROUPS:
        for name, value in settings(group).items():
            if isinstance(value, str) and not value.lstrip().startswith(("(", "[")):
                continue  # a path, a choice, an interpolation: not a number
            for v in _values(value):
                if _number(v) and not math.isfinite(v):
                    raise UserError("{} {} is not a finite number: give a finite value".format(_flag(name), v))
    optimizer = settings("optimizer")
    for name in _BETAS:
        if optimizer.get(name) is not None:
            _check_betas(_flag(name), optimizer[name])
    for group, name, rule, why in _TRAINING_RANGES:
        for v in _values(settings(group).get(name, None)):
            if _number(v) and not in_range(rule, v):
                raise UserError("{} {} {}".format(_flag(name), v, why))
    dataset = settings("dataset")
    if (
        _number(dataset.get("shard_id"))
        and _number(dataset.get("num_shards"))
        and dataset["shard_id"] >= dataset["num_shards"]
    ):
        raise UserError("--shard-id {} is not below --num-shards {}: give a shard index from 0 to {}".format(
            dataset["shard_id"], dataset["num_shards"], dataset["num_shards"] - 1))
    criterion, ddp = cfg.get("criterion", None), cfg.get("distributed_training", None)
    if getattr(criterion, "_name", None) == "adaptive_loss" and getattr(ddp, "ddp_backend", None) in (
        "c10d",
        "pytorch_ddp",
    ):
        raise UserError(
            "--criterion adaptive_loss needs fairseq's own DistributedDataParallel: add --ddp-backend legacy_ddp"
        )
    if getattr(cfg.get("lr_scheduler", None), "_name", None) == "tri_stage":
        check_phase_ratio(cfg.lr_scheduler, settings("optimization").get("max_update"))
    _parse_optimizer_overrides(settings("checkpoint").get("optimizer_overrides"))
    _check_run_seed(
        settings("common").get("seed"), settings("optimization"), dataset, cfg.get("distributed_training", None)
    )
    check_precision_device(cfg)


SEED_MAX = 2 ** 32 - 1  # numpy's np.random.seed takes 0 to 2**32 - 1
# the epochs a run without --max-epoch or --max-update may reach, for its seeds' sake
_UNBOUNDED_EPOCHS = 2 ** 31


def check_seed(seed, offset=0, why=""):
    """``seed`` a whole number numpy takes (0 to 2**32 - 1), and ``seed + offset`` as well,
    ``why`` saying where the run adds ``offset``."""
    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise UserError("--seed {} is not a seed: give a whole number from 0 to {} (2**32 - 1)".format(seed, SEED_MAX))
    if seed + offset > SEED_MAX:
        raise UserError("--seed {} is too large for this run: {}, and numpy takes seeds up to {} (2**32 - 1); give a "
                        "seed of at most {}".format(seed, why, SEED_MAX, SEED_MAX - offset))


def _check_run_seed(seed, optimization, dataset, ddp):
    """fairseq-train shuffles epoch E with --seed + E (fairseq/data/iterators.py; plus the rank
    under --fix-batches-to-gpus): a seed near 2**32 - 1 passed numpy at the start and crashed at
    a later epoch. The last epoch is --max-epoch, else at most --max-update (an epoch makes an
    update at least), else _UNBOUNDED_EPOCHS."""
    max_epoch, max_update = optimization.get("max_epoch") or 0, optimization.get("max_update") or 0
    last = max_epoch if max_epoch > 0 else max_update if max_update > 0 else _UNBOUNDED_EPOCHS
    ranks = (getattr(ddp, "distributed_world_size", 1) or 1) - 1 if dataset.get("fix_batches_to_gpus") else 0
    why = ("it shuffles epoch E with --seed + E{}, up to {}".format(
        " + the rank" if ranks else "", "--max-epoch {}".format(max_epoch) if max_epoch > 0 else
        "--max-update {} epochs".format(max_update) if max_update > 0 else
        "{} epochs without --max-epoch or --max-update".format(last)))
    check_seed(seed, last + max(ranks, 0), why)


def _check_betas(what, value):
    """``value`` (a string such as "(0.9, 0.98)", or a list) holds two numbers; their range is
    _TRAINING_RANGES's."""
    try:
        betas = parse_config_literal(value) if isinstance(value, str) else value
    except UserError:  # not plain data: named below
        betas = None
    if OmegaConf.is_list(betas):
        betas = list(betas)
    if not (isinstance(betas, (list, tuple)) and len(betas) == 2 and all(_number(b) for b in betas)):
        raise UserError("{} {!r} is not two numbers: give two values in [0, 1), e.g. '(0.9, 0.98)'".format(
            what, value if isinstance(value, str) else betas))


def check_phase_ratio(sched, max_update):
    """tri_stage's phases (fairseq/optim/lr_scheduler/tri_stage_lr_scheduler.py): --phase-ratio
    three fractions of --max-update adding up to 1 (within rounding: fairseq compared the sum
    with == and refused 0.1, 0.2, 0.7), or --warmup-steps, --hold-steps and --decay-steps; the
    decay phase at least one update (its rate is divided by its length)."""
    ratio = sched.get("phase_ratio", None) if hasattr(sched, "get") else getattr(sched, "phase_ratio", None)
    if ratio is not None:
        ratio = list(ratio) if OmegaConf.is_list(ratio) or isinstance(ratio, (list, tuple)) else [ratio]
        if len(ratio) != 3 or not all(_number(r) and 0 <= r <= 1 for r in ratio):
            raise UserError("--phase-ratio {} is not three fractions in [0, 1] (warmup, hold, decay): give e.g. "
                            "'(0.1, 0.4, 0.5)'".format(tuple(ratio)))
        if abs(sum(ratio) - 1) > 1e-6:
            raise UserError("--phase-ratio {} adds up to {:g}, not 1: give the warmup, hold and decay shares of "
                            "--max-update, e.g. '(0.1, 0.4, 0.5)'".format(tuple(ratio), sum(ratio)))
        if not (_number(max_update) and max_update > 0):
            raise UserError("--phase-ratio needs --max-update N: its phases are shares of the updates")
        if int(max_update * ratio[2]) < 1:
            raise UserError("--phase-ratio {} leaves no update of --max-update {} to the decay phase: give it a "
                            "larger last share".format(tuple(ratio), max_update))
    elif not (sched.get("decay_steps", 0) or 0) >= 1:
        raise UserError("--lr-scheduler tri_stage needs --phase-ratio (e.g. '(0.1, 0.4, 0.5)' of --max-update), or "
                        "--warmup-steps, --hold-steps and --decay-steps with --decay-steps at least 1")


def _parse_optimizer_overrides(value):
    """--optimizer-overrides as fairseq reads it on a resume (ast.literal_eval in
    checkpoint_utils.load_checkpoint): a dict of names; its values are checked against the
    resumed optimizer (check_optimizer_overrides)."""
    if value is None or not isinstance(value, str):
        return value
    try:
        overrides = ast.literal_eval(value)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as e:
        raise UserError(
            "--optimizer-overrides {!r} is not a dict of settings ({}): give e.g. \"{{'lr': 1e-4}}\"".format(
                value, type(e).__name__
            )
        ) from None
    if not isinstance(overrides, dict) or not all(isinstance(k, str) for k in overrides):
        raise UserError(
            "--optimizer-overrides {!r} is not a dict of settings by name: give e.g. \"{{'lr': 1e-4}}\"".format(value)
        )
    return overrides


def check_world_size(cfg):
    """fairseq's start without torchrun or Slurm (fairseq/distributed/utils.py): one process a
    GPU, so --distributed-world-size above the GPUs here (any, on a machine without one) has
    processes nobody starts; fairseq asserted it. ``cfg`` is the distributed_training group."""
    import torch

    size, gpus = cfg.distributed_world_size, torch.cuda.device_count()
    if size <= gpus:
        return
    tool = os.path.basename(sys.argv[0]) or "fairseq-train"
    if gpus == 0:
        raise UserError(
            "--distributed-world-size {n} needs {n} processes, and this machine has no GPU to start them on: "
            "start them with torchrun (torchrun --nproc_per_node {n} $(which {tool}) ... --cpu), or drop "
            "--distributed-world-size".format(n=size, tool=tool))
    raise UserError(
        "--distributed-world-size {} is more than the {} GPU{} of this machine: lower it to {}, or start the "
        "processes of several machines with torchrun".format(size, gpus, "" if gpus == 1 else "s", gpus))


def check_world_size_positive(cfg):
    """--distributed-world-size below 1 (``cfg`` the distributed_training group): no process
    would run; fairseq sharded the data by it and failed in a ValueError (shard_id) or a
    ZeroDivisionError. fairseq/distributed/utils.py calls this first in infer_init_method."""
    size = cfg.distributed_world_size
    if size is not None and size < 1:
        raise UserError("--distributed-world-size {} must be at least 1 (the number of processes; 1 runs in this "
                        "one)".format(size))


def check_optimizer_overrides(param_group, overrides):
    """``overrides`` (--optimizer-overrides, parsed), checked against a resumed optimizer's
    parameter group as fairseq applies it (fairseq/optim/fairseq_optimizer.py): each key one
    the optimizer has, each value in its range. Returns ``overrides``."""
    if not isinstance(overrides, dict):
        raise UserError(
            "--optimizer-overrides must be a dict of settings, e.g. \"{{'lr': 1e-4}}\"; got {!r}".format(overrides)
        )
    known = sorted(k for k in param_group if k != "params")
    for key, value in overrides.items():
        if key not in param_group or key == "params":
            raise UserError("--optimizer-overrides names {!r}, which this optimizer does not have: "
                            "its settings are {}".format(key, ", ".join(known)))
        if key == "betas":
            _check_betas("--optimizer-overrides: betas", value)
        rule, why = _PARAM_GROUP_RANGES.get(key, (None, None))
        for v in _values(value):
            if _number(v) and not math.isfinite(v):
                raise UserError(
                    "--optimizer-overrides: {} {} is not a finite number: give a finite value".format(key, v)
                )
            if rule is not None and _number(v) and not in_range(rule, v):
                raise UserError("--optimizer-overrides: {} {} {}".format(key, v, why))
    return overrides


def given_or_default(args, name, default, kind=None):
    """The value fairseq's config conversion (fairseq/dataclass/utils.py) takes for the field
    ``name`` (of type ``kind``): the command line's, or the dataclass ``default`` where the
    command line left it unset. fairseq's argparse leaves a setting whose default is an
    interpolation such as "${optimization.max_update}" as None, which became the override null:
    a field that is not Optional refused it (--lr-scheduler polynomial_decay without
    --total-num-update was a ConfigCompositionException traceback). Such a field now follows
    its interpolation; an Optional one keeps None, as before."""
    if not hasattr(args, name):
        return default
    value = getattr(args, name)
    optional = typing.get_origin(kind) is typing.Union and type(None) in typing.get_args(kind)
    if value is None and isinstance(default, str) and default.startswith("${") and not optional:
        return default
    return value
