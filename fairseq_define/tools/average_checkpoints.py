"""fairseq-define-average-checkpoints: average the parameters of several checkpoints.

fairseq's ``scripts/average_checkpoints.py`` is not in the pip package and does not load
checkpoints on torch >= 2.6; this one loads each file with fairseq's safe loader and writes
the result atomically.

    fairseq-define-average-checkpoints --inputs checkpoints --num-epoch-checkpoints 5 --output avg.pt
    fairseq-define-average-checkpoints --inputs a.pt b.pt c.pt --output avg.pt
"""

import argparse
import collections
import os
import re
import sys

import torch

from fairseq_define_patch.installed import check_state_dict, function_settings_that_differ, stored_model_settings

from ..errors import UserError, cli_error
from ..output_files import check_output, save_checkpoint
from .inference_checkpoint import check_fairseq_checkpoint


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive count of checkpoints")
    return value


def last_checkpoints(directory, n, update_based=False):
    pattern = re.compile(r"checkpoint_\d+_(\d+)\.pt$" if update_based else r"checkpoint(\d+)\.pt$")
    found = sorted(
        ((int(m.group(1)), f) for f in os.listdir(directory) if (m := pattern.fullmatch(f))), reverse=True
    )
    if len(found) < n:
        raise ValueError(f"found {len(found)} matching checkpoints in {directory}, need {n}")
    return [os.path.join(directory, f) for _, f in found[:n]]


def _inference_only(state, path):
    """Why a checkpoint cannot be averaged, or None: compressed codes are integers whose mean
    is no code, and a cached DeFINE table is the unit's output, whose mean is not the output
    of the mean unit (section 3.4)."""
    if any(k.endswith(".codes") for k in state["model"]):
        return f"{path} is compressed (fairseq-define-compress)"
    if stored_model_settings(state).get("define_cached_table"):
        return f"{path} holds cached DeFINE tables (fairseq-define-cache-tables)"
    return None


def _check_same_model(state, path, first, first_path):
    """The inputs must be one model: the same class and the same settings that change what
    the weights compute (dropout may differ); else the mean mixes two models."""
    saved, here = stored_model_settings(first), stored_model_settings(state)
    names = [s.get("_name") or s.get("arch") for s in (saved, here)]
    differ = [("arch", *names)] if names[0] != names[1] else []
    differ += function_settings_that_differ(saved, here)
    if differ:
        raise UserError(
            f"{path} is another model than {first_path}: "
            + "; ".join(f"--{n.replace('_', '-')} {a} in one, {b} in the other" for n, a, b in differ[:4])
            + ": average checkpoints of one run"
        )


def average(paths):
    """The mean of the checkpoints' parameters (float tensors; integer ones must be equal),
    in the last checkpoint's state. Each input is checked before it is added: one run's
    checkpoints, with the same names and shapes as the first and finite values."""
    from fairseq.checkpoint_utils import safe_torch_load

    total, state, first = collections.OrderedDict(), None, None
    for path in paths:
        state = safe_torch_load(path, map_location="cpu")
        check_fairseq_checkpoint(state, path)
        why = _inference_only(state, path)
        if why:
            raise UserError(f"{why}, for inference only, and cannot be averaged: average the trained "
                            "checkpoints, then cache or compress the result")
        if first is None:
            first = state
        else:
            _check_same_model(state, path, first, paths[0])
        params = state["model"]
        check_state_dict(first["model"], params, what=path, model=paths[0])  # names, shapes, finite values
        for k, v in params.items():
            if k not in total:
                total[k] = v.float().clone() if v.is_floating_point() else v.clone()
            elif v.is_floating_point():
                total[k] = total[k] + v.float()
            elif not torch.equal(total[k], v):  # counters, indices: a mean of them means nothing
                raise UserError(f"{path} holds other values than {paths[0]} in the integer tensor {k}, "
                                "which cannot be averaged: average checkpoints of one run")
    for k, v in total.items():
        if v.is_floating_point():
            total[k] = v / len(paths)
    state["model"] = total
    return state


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fairseq-define-average-checkpoints", description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", nargs="+", required=True, help="checkpoint files, or one directory")
    parser.add_argument(
        "--output", required=True, help="averaged checkpoint to write (must not exist, unless --overwrite)"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace --output if it exists (never one of the inputs)"
    )
    parser.add_argument(
        "--num-epoch-checkpoints", type=positive_int, help="with a directory: the last N checkpointN.pt"
    )
    parser.add_argument(
        "--num-update-checkpoints", type=positive_int, help="with a directory: the last N checkpoint_E_U.pt"
    )
    args = parser.parse_args(argv)
    from fairseq.checkpoint_utils import CheckpointLoadError

    try:
        paths = args.inputs
        if len(paths) == 1 and os.path.isdir(paths[0]):
            n = args.num_epoch_checkpoints or args.num_update_checkpoints
            if not n:
                raise ValueError("with a directory, give --num-epoch-checkpoints or --num-update-checkpoints")
            paths = last_checkpoints(paths[0], n, update_based=bool(args.num_update_checkpoints))
        for p in paths:
            if not os.path.isfile(p):
                raise ValueError(f"no such checkpoint: {p}")
        if os.path.abspath(args.output) in map(os.path.abspath, paths):
            raise ValueError(f"--output {args.output} is one of the inputs; write to a new file")
        check_output(args.output, args.overwrite)  # before the work
        state = average(paths)
        save_checkpoint(state, args.output, overwrite=args.overwrite)
    except (ValueError, UserError, CheckpointLoadError) as e:
        return cli_error(parser.prog, e)
    print(f"averaged {len(paths)} checkpoints into {args.output}: {', '.join(paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
