"""fairseq-define-trust-checkpoint: convert a checkpoint that the safe loader refuses only
because it holds plain data outside fairseq's allow-list (numpy values, enums) into one it
accepts. Nothing in the file is ever run.

fairseq (as patched here) loads checkpoints with torch's weights-only unpickler and an
allow-list of the classes fairseq stores, so a crafted checkpoint cannot run code. A
checkpoint written by older software may hold other plain data: numpy scalars, arrays and
dtypes, enums of fairseq or omegaconf. This tool first lists the globals the file's pickle
needs, read without unpickling (``checkpoint_pickle_globals``); if any of them is not plain
data (a function such as ``posix.system``, ``builtins.eval``, ``subprocess.Popen``, any class
outside the lists) it refuses, naming it. Otherwise it unpickles the file with an unpickler
that can reach only the listed globals, turns them into plain Python values, writes a new
file and checks that the safe loader reads it. Both ``torch.save`` formats (zip and the
legacy stream) are read.

    fairseq-define-trust-checkpoint old/checkpoint_best.pt converted/checkpoint_best.pt
"""

import argparse
import enum
import logging
import os
import pickle
import sys
import types

import numpy as np
import torch

from ..errors import cli_error

logger = logging.getLogger("fairseq_define.trust_checkpoint")


class RefusedGlobal(pickle.UnpicklingError):
    """The pickle reaches for something that is not plain data."""


def _restricted_pickle_module():
    """A ``pickle_module`` for torch.load whose unpickler resolves only the globals that
    fairseq.checkpoint_utils.resolve_checkpoint_global calls safe or plain data."""
    from fairseq.checkpoint_utils import resolve_checkpoint_global

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            kind, obj = resolve_checkpoint_global(f"{module}.{name}")
            if kind == "code":
                raise RefusedGlobal(f"{module}.{name}")
            return obj

    def load(file, **kwargs):
        return Unpickler(file, **kwargs).load()

    return types.SimpleNamespace(Unpickler=Unpickler, load=load, __name__="fairseq_define_restricted_pickle")


def to_plain(obj):
    """Recursively replace values outside the allow-list by plain Python values."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(obj, (DictConfig, ListConfig)):
        return OmegaConf.to_container(obj, resolve=False, enum_to_str=True)
    if isinstance(obj, np.generic):  # before float: np.float64 subclasses float
        return obj.item()
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, np.dtype):
        return str(obj)
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(obj)
    if isinstance(obj, frozenset):
        return set(to_plain(v) for v in obj)
    if isinstance(obj, argparse.Namespace):
        return argparse.Namespace(**{k: to_plain(v) for k, v in vars(obj).items()})
    if isinstance(obj, dict):  # OrderedDict, defaultdict, Counter keep their type
        out = obj.copy()
        out.clear()
        out.update((to_plain(k), to_plain(v)) for k, v in obj.items())
        return out
    if isinstance(obj, (list, tuple, set)):
        return type(obj)(to_plain(v) for v in obj)
    return obj  # tensors, plain scalars, Dictionary and the loader's other allowed classes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fairseq-define-trust-checkpoint", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="the checkpoint to convert")
    parser.add_argument("dest", help="where to write the converted checkpoint (must not exist)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    prog = parser.prog
    if not os.path.isfile(args.source):
        return cli_error(prog, f"no such checkpoint: {args.source}")
    if os.path.exists(args.dest):
        return cli_error(prog, f"{args.dest} exists; choose a new file name (nothing is overwritten)")
    from fairseq.checkpoint_utils import (
        CheckpointLoadError,
        checkpoint_pickle_globals,
        resolve_checkpoint_global,
        safe_torch_load,
    )

    from ..errors import UserError
    from ..output_files import save_checkpoint

    try:
        needed = checkpoint_pickle_globals(args.source)
    except Exception as e:  # genops: a file that is not a pickle stream
        return cli_error(prog, f"cannot read {args.source}: not a PyTorch checkpoint ({type(e).__name__}: {e})")
    kinds = {g: resolve_checkpoint_global(g)[0] for g in needed}
    code = [g for g, k in kinds.items() if k == "code"]
    if code:
        return cli_error(
            prog,
            f"{args.source} holds code, not only data: unpickling it would call {', '.join(code)}; "
            "nothing was converted, and the file must not be loaded",
        )
    data = [g for g, k in kinds.items() if k == "data"]
    logger.info("globals outside the allow-list (plain data, converted): %s", ", ".join(data) or "none")
    try:
        state = torch.load(args.source, map_location="cpu", weights_only=False,
                           pickle_module=_restricted_pickle_module())
    except RefusedGlobal as e:  # a global the static listing could not see
        return cli_error(prog, f"{args.source} holds code, not only data: unpickling it would call {e}; "
                         "nothing was converted, and the file must not be loaded")
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, TypeError) as e:
        return cli_error(prog, f"cannot convert {args.source}: {type(e).__name__}: {e}")
    plain = to_plain(state)
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
