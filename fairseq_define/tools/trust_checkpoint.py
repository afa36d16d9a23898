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

import _compat_pickle
import argparse
import enum
import logging
import math
import os
import pickle
import re
import sys
import types

import numpy as np
import torch

from ..errors import cli_error

logger = logging.getLogger("fairseq_define.trust_checkpoint")


class RefusedGlobal(pickle.UnpicklingError):
    """The pickle reaches for something that is not plain data."""


class NotPlainData(ValueError):
    """A numpy value the tool does not convert (object or structured dtypes, odd states)."""


# numpy dtypes the tool rebuilds: bool, integers, floats, complex, fixed-width text. Object,
# structured, datetime and void dtypes are refused: their pickled state describes memory
# layouts (an object field is a pointer) that numpy would trust.
_NUMPY_SPEC = re.compile(r"[biufcUS][0-9]+")


class _PickledDtype:
    """Stands for ``numpy.dtype`` while unpickling: keeps only the type code and byte order
    and builds the dtype itself; numpy never sees the state the file chose."""

    def __init__(self, spec=None, align=False, copy=True):
        self.spec, self.dtype = spec, None

    def __setstate__(self, state):
        if not (isinstance(self.spec, str) and _NUMPY_SPEC.fullmatch(self.spec)):
            raise NotPlainData(f"a numpy dtype {self.spec!r} (only bool, numbers and text are converted)")
        if not (isinstance(state, tuple) and len(state) == 8 and state[0] == 3 and state[1] in ("<", ">", "|", "=")
                and state[2:5] == (None, None, None)):
            raise NotPlainData(f"a numpy dtype {self.spec!r} with fields, a subarray or an unknown state")
        dtype = np.dtype(self.spec)
        if state[1] in "<>":
            dtype = dtype.newbyteorder(state[1])
        if state[5] not in (-1, dtype.itemsize):
            raise NotPlainData(f"a numpy dtype {self.spec!r} whose size {state[5]} is not {dtype.itemsize}")
        self.dtype = dtype


def _real_dtype(stub):
    if not isinstance(stub, _PickledDtype) or stub.dtype is None:
        raise NotPlainData("a numpy value without a complete dtype")
    return stub.dtype


class _PickledArray:
    """Stands for a numpy array while unpickling: the array is built from its bytes, shape
    and a _PickledDtype, and its size checked against them."""

    def __init__(self):
        self.array = None

    def __setstate__(self, state):
        if not (isinstance(state, tuple) and len(state) == 5 and state[0] == 1):
            raise NotPlainData("a numpy array with an unknown state")
        _, shape, stub, fortran, data = state
        dtype = _real_dtype(stub)
        if not (isinstance(shape, tuple) and all(isinstance(n, int) and n >= 0 for n in shape)):
            raise NotPlainData(f"a numpy array of shape {shape!r}")
        if not isinstance(data, (bytes, bytearray)) or len(data) != math.prod(shape) * dtype.itemsize:
            raise NotPlainData(f"a numpy array whose data does not match its shape {shape} and dtype {dtype}")
        self.array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()


def _reconstruct(cls, shape, code):
    if cls is not np.ndarray:
        raise NotPlainData(f"a numpy array of class {cls!r}")
    return _PickledArray()


def _scalar(stub, data=None):
    dtype = _real_dtype(stub)
    if not isinstance(data, bytes) or len(data) != dtype.itemsize:
        raise NotPlainData(f"a numpy {dtype} scalar of {len(data or b'')} bytes")
    return np.frombuffer(data, dtype=dtype)[0]


# the objects the numpy names resolve to in this tool's unpickler
_NUMPY_STAND_INS = {"dtype": _PickledDtype, "_reconstruct": _reconstruct, "scalar": _scalar, "ndarray": np.ndarray}


def _restricted_pickle_module(budget):
    """A ``pickle_module`` for torch.load whose unpickler resolves only the globals that
    fairseq.checkpoint_utils.resolve_checkpoint_global calls safe or plain data: torch's
    constructors bounded by ``budget`` (bounded_constructors), numpy by the stand-ins above."""
    from fairseq.checkpoint_utils import (
        bounded_constructors,
        checkpoint_safe_globals_by_name,
        resolve_checkpoint_global,
    )

    bounded = bounded_constructors(checkpoint_safe_globals_by_name(), budget)

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            # Python 2 names, as pickle's fix_imports and checkpoint_pickle_globals read them
            module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
            module = _compat_pickle.IMPORT_MAPPING.get(module, module)
            qualified = f"{module}.{name}"
            kind, obj = resolve_checkpoint_global(qualified)
            if kind == "code":
                raise RefusedGlobal(qualified)
            if module.startswith("numpy"):
                return _NUMPY_STAND_INS[name]
            return bounded.get(qualified, obj)

    def load(file, **kwargs):
        return Unpickler(file, **kwargs).load()

    return types.SimpleNamespace(Unpickler=Unpickler, load=load, __name__="fairseq_define_restricted_pickle")


def to_plain(obj, memo=None):
    """Replace values outside the allow-list by plain Python values (each object converted
    once: shared references stay shared). check_loaded has bounded the nesting depth."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    memo = {} if memo is None else memo
    if id(obj) in memo:
        return memo[id(obj)][1]
    if isinstance(obj, (DictConfig, ListConfig)):
        out = OmegaConf.to_container(obj, resolve=False, enum_to_str=True)
    elif isinstance(obj, np.generic):  # before float: np.float64 subclasses float
        out = obj.item()
    elif isinstance(obj, enum.Enum):
        out = obj.name
    elif isinstance(obj, _PickledDtype):
        out = str(_real_dtype(obj))
    elif isinstance(obj, _PickledArray):
        if obj.array is None:
            raise NotPlainData("a numpy array without its data")
        try:
            out = torch.from_numpy(obj.array)
        except TypeError:  # text and other types torch has no tensor for: a (nested) list
            out = obj.array.tolist()
    elif (
        any(obj is v for v in _NUMPY_STAND_INS.values())
        or isinstance(obj, type)
        and "_fairseq_define_guards" in vars(obj)
    ):
        raise NotPlainData(f"a bare {obj.__name__} object")
    elif isinstance(obj, frozenset):
        out = set(to_plain(v, memo) for v in obj)
    elif isinstance(obj, argparse.Namespace):
        out = argparse.Namespace(**{k: to_plain(v, memo) for k, v in vars(obj).items()})
    elif isinstance(obj, dict):  # OrderedDict, defaultdict, Counter keep their type
        out = obj.copy()
        out.clear()
        out.update((to_plain(k, memo), to_plain(v, memo)) for k, v in obj.items())
    elif isinstance(obj, (list, tuple, set)):
        out = type(obj)(to_plain(v, memo) for v in obj)
    else:
        out = obj  # tensors, plain scalars, Dictionary and the loader's other allowed classes
    memo[id(obj)] = (obj, out)  # obj kept alive: its id is not reused
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fairseq-define-trust-checkpoint", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="the checkpoint to convert")
    parser.add_argument("dest", help="where to write the converted checkpoint (must not exist)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    prog = parser.prog
    from ..errors import UserError
    from ..output_files import check_new_output, save_checkpoint

    if not os.path.isfile(args.source):
        return cli_error(prog, f"no such checkpoint: {args.source}")
    try:  # before any work: an existing file, a folder, or a link (even a dangling one) at dest
        check_new_output(args.dest, flag=None)
    except UserError as e:
        return cli_error(prog, e)
    # the modules whose enums a checkpoint may hold, imported here by this tool's choice
    # (resolve_checkpoint_global never imports what a file names)
    import fairseq.models  # noqa: F401
    import fairseq.tasks  # noqa: F401
    from fairseq.checkpoint_utils import (
        CheckpointBudget,
        CheckpointLoadError,
        _check_archive,
        check_loaded,
        checkpoint_pickle_globals,
        resolve_checkpoint_global,
        safe_torch_load,
    )

    refused = "nothing was converted, and the file must not be loaded"
    try:
        needed = checkpoint_pickle_globals(args.source)
    except Exception as e:  # genops: a file that is not a pickle stream
        return cli_error(prog, f"cannot read {args.source}: not a PyTorch checkpoint ({type(e).__name__}: {e})")
    kinds = {g: resolve_checkpoint_global(g)[0] for g in needed}
    code = [g for g, k in kinds.items() if k == "code"]
    if code:
        return cli_error(prog, f"{args.source} holds code, not only data: unpickling it would call "
                         f"{', '.join(code)}; {refused}")
    data = [g for g, k in kinds.items() if k == "data"]
    logger.info("globals outside the allow-list (plain data, converted): %s", ", ".join(data) or "none")
    budget = CheckpointBudget(args.source, os.path.getsize(args.source))
    try:
        _check_archive(args.source, budget)
        state = torch.load(args.source, map_location="cpu", weights_only=False,
                           pickle_module=_restricted_pickle_module(budget))
        plain = to_plain(check_loaded(state, budget))
    except RefusedGlobal as e:  # a global the static listing could not see
        return cli_error(prog, f"{args.source} holds code, not only data: unpickling it would call {e}; {refused}")
    except NotPlainData as e:
        return cli_error(prog, f"{args.source} holds {e}; {refused}")
    except CheckpointLoadError as e:
        return cli_error(prog, f"{e}; {refused}")
    except (RecursionError, MemoryError) as e:
        return cli_error(
            prog, f"{args.source} is nested too deeply or too large to convert ({type(e).__name__}); {refused}"
        )
    except Exception as e:  # noqa: BLE001  the restricted unpickler runs no code: bad bytes
        return cli_error(prog, f"cannot convert {args.source}: {type(e).__name__}: {str(e)[:300]}; {refused}")
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
