"""fairseq-define-trust-checkpoint: convert a checkpoint you trust, which the safe loader
refuses, into one it accepts.

fairseq (as patched here) loads checkpoints with torch's weights-only unpickler and an
allow-list of the classes fairseq stores, so a crafted checkpoint cannot run code. A
checkpoint written by older software may hold other objects (numpy scalars, omegaconf
containers, enums). This tool unpickles such a file *fully* -- only do this for a file you
trust -- converts those objects to plain Python values, writes a new file and checks that
the safe loader reads it.

    fairseq-define-trust-checkpoint old/checkpoint_best.pt converted/checkpoint_best.pt
"""

import argparse
import collections
import enum
import logging
import os
import sys
from argparse import Namespace

import numpy as np
import torch

from ..errors import cli_error

logger = logging.getLogger("fairseq_define.trust_checkpoint")


def to_plain(obj):
    """Recursively replace objects outside the allow-list by plain Python values."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(obj, (DictConfig, ListConfig)):
        return OmegaConf.to_container(obj, resolve=True, enum_to_str=True)
    if isinstance(obj, np.generic):  # before float: np.float64 subclasses float
        return obj.item()
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, torch.Tensor) or obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        return obj
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(obj)
    if isinstance(obj, Namespace):
        return Namespace(**{k: to_plain(v) for k, v in vars(obj).items()})
    if isinstance(obj, collections.OrderedDict):
        return collections.OrderedDict((k, to_plain(v)) for k, v in obj.items())
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_plain(v) for v in obj)
    raise TypeError(f"cannot convert an object of type {type(obj).__module__}.{type(obj).__qualname__}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fairseq-define-trust-checkpoint", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="the checkpoint you trust")
    parser.add_argument("dest", help="where to write the converted checkpoint (must not exist)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    prog = parser.prog
    if not os.path.isfile(args.source):
        return cli_error(prog, f"no such checkpoint: {args.source}")
    if os.path.exists(args.dest):
        return cli_error(prog, f"{args.dest} exists; choose a new file name (nothing is overwritten)")
    from fairseq.checkpoint_utils import CheckpointLoadError, safe_torch_load

    from ..errors import UserError
    from ..output_files import save_checkpoint

    unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(args.source)
    logger.info("classes outside the allow-list: %s", ", ".join(unsafe) or "none")
    try:
        state = torch.load(args.source, map_location="cpu", weights_only=False)  # trusted by the user
        plain = to_plain(state)
    except (TypeError, RuntimeError, EOFError) as e:
        return cli_error(prog, f"cannot convert {args.source}: {e}")
    os.makedirs(os.path.dirname(os.path.abspath(args.dest)), exist_ok=True)
    try:
        save_checkpoint(plain, args.dest, flag=None)
    except UserError as e:
        return cli_error(prog, e)
    try:
        safe_torch_load(args.dest, map_location="cpu")
    except CheckpointLoadError as e:
        os.unlink(args.dest)
        return cli_error(prog, f"the converted file still does not load safely: {e}")
    logger.info("wrote %s (loads with the safe loader)", args.dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
