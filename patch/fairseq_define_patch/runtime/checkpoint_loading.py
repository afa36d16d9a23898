"""Checkpoints load through torch's weights-only unpickler with fairseq's allow-list, with what
one load may allocate bounded by the file's size; a file that cannot load gets one line.

torch >= 2.6 refuses fairseq's checkpoints under its weights-only default, and fairseq 0.12.2
loaded them with the full unpickler, which runs whatever a pickle names: a checkpoint is an
untrusted file as soon as it is downloaded. ``safe_torch_load`` (what fairseq/checkpoint_utils.py
and fairseq/distributed/utils.py call instead of torch.load) accepts only the classes of
checkpoint_allow_list.py, bounds what the file's numbers may allocate (CheckpointBudget), and
turns every way a file can fail into a CheckpointLoadError: refused (saying whether it can be
converted, checkpoint_inspection.py), truncated or corrupt, missing, a folder
(docs/checkpoints.md). The checks of load_checkpoint_to_cpu and of --restore-file are here too.
"""

import contextlib
import os
import pickle
import threading

import torch
from fairseq import UserError
from fairseq.file_io import PathManager

from . import checkpoint_allow_list, checkpoint_inspection
from .checkpoint_allow_list import (  # noqa: F401  (re-exported: __all__)
    _fairseq_checkpoint_safe_globals,
    add_checkpoint_safe_globals,
    checkpoint_safe_globals_by_name,
)
from .checkpoint_fit import check_overrides_fit
from .checkpoint_inspection import (  # noqa: F401  (re-exported: __all__)
    _ENUM_MODULES,
    CONVERTIBLE_CHECKPOINT_GLOBALS,
    _refusal_message,
    checkpoint_pickle_globals,
    resolve_checkpoint_global,
)

# what fairseq/checkpoint_utils.py imports from here with its one import line: the names the
# patch has always added there (the plugin and fairseq-define-trust-checkpoint use them)
__all__ = checkpoint_allow_list.__all__ + checkpoint_inspection.__all__ + [
    "CHECKPOINT_MAX_DEPTH", "CHECKPOINT_MAX_REFERENCES", "CHECKPOINT_MEMORY_FACTOR",
    "CHECKPOINT_MEMORY_SLACK", "CHECKPOINT_PROPORTIONAL_GLOBALS", "CheckpointBudget",
    "CheckpointLoadError", "bounded_constructors", "check_checkpoint_source", "check_is_checkpoint",
    "check_loaded", "check_restore_file", "safe_torch_load", "upgrade_checked", "_check_archive",
    "_checkpoint_size", "_shape_items",
]


class CheckpointLoadError(UserError, RuntimeError):
    """A checkpoint that cannot be loaded: unsafe, corrupt or truncated (a UserError: fairseq's
    command-line tools print it as one line, with or without the plugin)."""


# What loading one checkpoint may allocate: a multiple of its size on disk plus a little.
# torch.save stores every tensor's bytes in the file, so a genuine checkpoint needs about its
# own size; a crafted one asks bytearray(N), torch.Tensor(N), a storage or a view with stride
# 0 for far more than it holds (added by fairseq_define; docs/checkpoints.md).
CHECKPOINT_MEMORY_FACTOR = 2
CHECKPOINT_MEMORY_SLACK = 64 << 20  # bytes
CHECKPOINT_MAX_DEPTH = 100  # containers nested deeper are refused: every consumer recurses
CHECKPOINT_MAX_REFERENCES = 1_000_000  # plus one per 8 bytes of file: bounds a shared-reference bomb


class CheckpointBudget:
    """The memory one load may use (added by fairseq_define): ``charge`` refuses the file
    once its objects ask for more than CHECKPOINT_MEMORY_FACTOR times its size plus the slack."""

    def __init__(self, name, size):
        self.name, self.size, self.used = name, size, 0
        self.limit = float("inf") if size is None else CHECKPOINT_MEMORY_FACTOR * size + CHECKPOINT_MEMORY_SLACK

    def refuse(self, why):
        return CheckpointLoadError(
            f"refusing to load {self.name}: {why}; the file is crafted or damaged, do not load it"
        )

    def charge(self, nbytes, what):
        self.used += max(int(nbytes), 0)
        if self.used > self.limit:
            raise self.refuse(
                f"it asks for more memory than a checkpoint of {self.size:,} bytes can hold "
                f"({what}; at most {self.limit:,} bytes in all)"
            )


def _is_path(f):
    # a file object is read as one even where it also has __fspath__ (as mocks do)
    return isinstance(f, (str, os.PathLike)) and not hasattr(f, "read")


def _checkpoint_size(f):
    if _is_path(f):
        return os.path.getsize(f)
    try:
        if hasattr(f, "getbuffer"):
            size = f.getbuffer().nbytes
        else:
            here = f.tell()
            size = f.seek(0, os.SEEK_END) - here
            f.seek(here)
    except (AttributeError, OSError, ValueError, TypeError):
        return None  # not seekable: torch.load cannot read a zip from it either
    # a file-like object that does not say its size (a stand-in, as fairseq's own tests pass)
    return size if isinstance(size, int) else None


def _check_archive(f, budget):
    """A zip (torch.save's format) whose entries unpack to more than the file's own size is a
    compressed bomb: torch.save stores entries uncompressed. Every entry's CRC-32 is checked
    too: torch's reader does not, so a flipped byte inside a tensor loaded as other weights."""
    import zipfile

    if budget.size is None:  # a stream that does not say its size: nothing to hold it to
        return
    here = None if _is_path(f) else f.tell()
    try:
        if not zipfile.is_zipfile(f):
            return
        with zipfile.ZipFile(f) as z:
            unpacked = sum(i.file_size for i in z.infolist())
            if unpacked > budget.size:
                raise budget.refuse(
                    f"its zip entries unpack to {unpacked:,} bytes, more than the file's {budget.size:,}"
                )
            damaged = _failed_crc(z)
    except CheckpointLoadError:
        raise
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return  # torch.load reports the damage
    finally:
        if here is not None:
            f.seek(here)
    if damaged is not None:
        raise CheckpointLoadError(
            f"cannot read {budget.name}: the file is damaged (its entry {damaged} fails its CRC-32 "
            "check: bytes changed after it was written); use an intact copy (checkpoint_best.pt, "
            "an earlier checkpointN.pt)"
        )


def _failed_crc(z):
    """The first entry of zip ``z`` whose bytes do not match their CRC-32, or None. Reads the
    entries in pieces (zipfile checks the CRC as an entry is read to its end)."""
    import zipfile

    for info in z.infolist():
        try:
            with z.open(info) as entry:
                while entry.read(1 << 22):
                    pass
        except zipfile.BadZipFile:
            return repr(info.filename)
    return None


def _shape_items(args):
    """Elements a constructor called with ``args`` allocates when they are sizes: the product
    of its integer arguments (or of one tuple of integers); data arguments cost what they hold."""
    if len(args) == 1 and isinstance(args[0], tuple):
        args = args[0]
    sizes = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    if not sizes:
        return 0
    items = 1
    for a in sizes:
        items *= max(a, 0)
    return items


def bounded_constructors(allowed, budget):
    """Replacements for the entries of ``allowed`` (qualified name -> object, torch's weights-
    only allow-list) that allocate memory sized by numbers in the file: each charges ``budget``
    before it allocates. The other entries build views or containers of what the file holds;
    what they build is measured after the load (``check_loaded``). Every entry of torch's list
    is in one of the two groups (tests/test_checkpoint_safety.py checks it)."""
    from torch import _utils as tu

    def sized(cls, item_bytes, qualified):
        def new(_guard, *args):
            budget.charge(_shape_items(args) * item_bytes, f"{qualified}{args!r:.80}")
            result = cls(*args)
            if "sparse" in getattr(cls, "__module__", ""):  # as torch's own loader does
                tu._sparse_tensors_to_validate.append(result)
            return result

        attrs = {"__new__": new, "_fairseq_define_guards": cls}
        if cls is torch.UntypedStorage:
            attrs["dtype"] = torch.uint8  # what torch's zip loader reads for this storage type
        return type(f"Bounded{getattr(cls, '__name__', 'Constructor')}", (), attrs)

    def charged(func, cost):
        def call(*args):
            budget.charge(cost(*args), f"{func.__name__}")
            return func(*args)

        call.__name__ = func.__name__
        return call

    def unwrapped(func):
        def call(f, new_type, args, state):
            return func(f, getattr(new_type, "_fairseq_define_guards", new_type), args, state)

        return call

    sized_classes = {bytearray: 1, torch.Tensor: 8, torch.UntypedStorage: 8, torch.storage.TypedStorage: 8}
    sized_classes.update((cls, 8) for cls in torch._tensor_classes)
    out = {}
    for qualified, obj in allowed.items():
        if obj in sized_classes:
            out[qualified] = sized(obj, sized_classes[obj], qualified)
        elif obj is tu._rebuild_qtensor:  # allocates its size before it takes the storage
            out[qualified] = charged(obj, lambda s, o, size, *rest: _shape_items((tuple(size),)) * 8)
        elif obj is tu._rebuild_device_tensor_from_cpu_tensor:  # converts: a new copy
            out[qualified] = charged(obj, lambda data, dtype, *rest: data.numel() * dtype.itemsize)
        elif obj is tu._rebuild_device_tensor_from_numpy:
            out[qualified] = charged(obj, lambda data, dtype, *rest: data.size * dtype.itemsize)
        elif obj is torch._tensor._rebuild_from_type_v2:  # the class it checks against
            out[qualified] = unwrapped(obj)
    return out


# the entries of torch's allow-list that build only views or containers of what the file
# holds (the others are in bounded_constructors)
CHECKPOINT_PROPORTIONAL_GLOBALS = (
    "collections.OrderedDict", "collections.Counter", "torch.nn.parameter.Parameter",
    "torch.serialization._get_layout", "torch.Size", "torch.device", "_codecs.encode",
    "builtins.set", "builtins.complex", "torch._utils._rebuild_sparse_tensor",
    "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_meta_tensor_no_storage", "torch._utils._rebuild_nested_tensor",
    "torch._utils._rebuild_tensor_v3", "torch._utils._rebuild_parameter_with_state",
    "torch._utils._rebuild_wrapper_subclass", "torch._utils._rebuild_tensor",
)

_LOAD_LOCK = threading.RLock()  # one load at a time swaps torch's allow-list


def _bounded_weights_only(budget):
    """torch's weights-only unpickler, for one load, with bounded_constructors in its allow-list."""
    from torch import _weights_only_unpickler as wo

    @contextlib.contextmanager
    def bounded():
        with _LOAD_LOCK:
            original = wo._get_allowed_globals
            allowed = dict(original())
            allowed.update(bounded_constructors(allowed, budget))
            wo._get_allowed_globals = lambda: allowed
            try:
                yield
            finally:
                wo._get_allowed_globals = original

    return bounded()


def check_loaded(obj, budget):
    """Measure what a load built, without recursion: refuse nesting deeper than
    CHECKPOINT_MAX_DEPTH, more references than CHECKPOINT_MAX_REFERENCES (plus one per 8 bytes
    of file), and tensors (each counted once) larger than the budget."""
    references = CHECKPOINT_MAX_REFERENCES + (budget.size or 0) // 8
    tensors = set()
    plain = (str, bytes, bytearray, int, float, complex, bool, type(None), type)
    stack = [(obj, 0)]
    while stack:
        o, depth = stack.pop()
        references -= 1
        if references < 0:
            raise budget.refuse(f"it holds more than {CHECKPOINT_MAX_REFERENCES:,} references")
        if isinstance(o, torch.Tensor):
            if id(o) not in tensors:
                tensors.add(id(o))
                try:
                    nbytes = o.numel() * o.element_size()
                except (RuntimeError, NotImplementedError):  # layouts without a plain size
                    nbytes = 0
                budget.charge(nbytes, f"a tensor of shape {tuple(o.shape)}")
            continue
        if isinstance(o, plain):
            continue
        if isinstance(o, dict):
            children = [*o.keys(), *o.values()]
        elif isinstance(o, (list, tuple, set, frozenset)):
            children = list(o)
        elif type(o).__module__.split(".")[0] in ("argparse", "omegaconf", "fairseq", "fairseq_define") and hasattr(
            o, "__dict__"
        ):  # Namespace, omegaconf nodes (their _parent points back up), Dictionary
            children = [v for k, v in vars(o).items() if k != "_parent"]
        else:
            continue
        if children and depth >= CHECKPOINT_MAX_DEPTH:
            raise budget.refuse(f"its objects are nested deeper than {CHECKPOINT_MAX_DEPTH} levels")
        stack.extend((c, depth + 1) for c in children)
    return obj


def safe_torch_load(f, map_location=None, extra_globals=()):
    """torch.load with the weights-only unpickler and fairseq's allow-list.

    A checkpoint that needs any other class is refused instead of executed; for an old
    checkpoint you trust, see fairseq_define's docs/checkpoints.md (fairseq-define-trust-checkpoint). What the
    load may allocate is bounded by the file's size (CheckpointBudget)."""
    name = f if isinstance(f, str) else getattr(f, "name", "the checkpoint")
    try:
        budget = CheckpointBudget(name, _checkpoint_size(f))
        _check_archive(f, budget)
        with torch.serialization.safe_globals(_fairseq_checkpoint_safe_globals() + list(extra_globals)):
            with _bounded_weights_only(budget):
                return check_loaded(torch.load(f, map_location=map_location, weights_only=True), budget)
    except CheckpointLoadError:
        raise
    except pickle.UnpicklingError as e:
        # a class or function outside the allow-list: what a crafted checkpoint needs
        reason = [l.strip() for l in str(e).splitlines() if "GLOBAL" in l]
        if reason:
            raise CheckpointLoadError(_refusal_message(f, name, reason[0])) from None
        error = e
    except FileNotFoundError:
        raise CheckpointLoadError(
            f"no such checkpoint: {name}; check --path / --restore-file and --save-dir"
        ) from None
    except IsADirectoryError:
        raise CheckpointLoadError(
            f"{name} is a folder, not a checkpoint file: give the file (e.g. "
            f"{os.path.join(name, 'checkpoint_best.pt')})"
        ) from None
    except (RecursionError, MemoryError) as e:
        raise CheckpointLoadError(
            f"refusing to load {name}: {type(e).__name__} while reading it; the file is crafted or damaged"
        ) from None
    except Exception as e:  # noqa: BLE001  the weights-only unpickler runs no code: anything
        error = e  # it raises on bad bytes (KeyError, IndexError, struct.error...) is a damaged file
    lines = [l.strip() for l in str(error).splitlines() if l.strip()] or [type(error).__name__]
    detail = next((l for l in lines if "Unpickler error" in l), lines[0])
    if not isinstance(error, (RuntimeError, EOFError, ValueError, OSError)):
        detail = f"{type(error).__name__}: {detail}"
    raise CheckpointLoadError(
        f"cannot read {name}: the file is truncated, corrupt or not a PyTorch checkpoint "
        f"({detail}); use an intact copy (checkpoint_best.pt, an earlier checkpointN.pt)"
    ) from None



# The checks below are called by fairseq/checkpoint_utils.py where the file is read: without
# them a folder, a --restore-file that does not exist or a file that is no fairseq checkpoint
# led to a traceback (IsADirectoryError, KeyError) or, for --restore-file, to training from
# scratch without a word.


def check_checkpoint_source(path, local_path, arg_overrides):
    """Before load_checkpoint_to_cpu opens ``path``: a folder (IsADirectoryError), and
    --model-overrides that is not a dict (AttributeError on .items())."""
    if os.path.isdir(local_path):
        raise CheckpointLoadError(
            "{} is a folder, not a checkpoint file: give the file (e.g. {})".format(
                path, os.path.join(path, "checkpoint_best.pt")
            )
        )
    if arg_overrides is not None and not isinstance(arg_overrides, dict):
        raise UserError(
            "--model-overrides must be a dict of settings, e.g. \"{{'beam': 5}}\", got {!r}".format(
                arg_overrides
            )
        )


def check_is_checkpoint(state, path, arg_overrides=None):
    """torch.save(model.state_dict()) is not a checkpoint: a KeyError later. With
    ``arg_overrides`` (--model-overrides, from_pretrained's keyword arguments), before they are
    applied: none may change what the trained weights compute (checkpoint_fit.py)."""
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        raise CheckpointLoadError(
            "{} is not a fairseq checkpoint (it has no 'model' entry; a plain state_dict?): "
            "give a checkpoint written by fairseq-train (checkpoint_best.pt, "
            "checkpointN.pt)".format(path)
        )
    check_overrides_fit(state, arg_overrides, path)


def upgrade_checked(upgrade, state, path):
    """``upgrade(state)`` (fairseq's _upgrade_state_dict) for a dict with a 'model' entry but
    not the rest of a checkpoint, whose KeyError (or worse) becomes one line."""
    try:
        return upgrade(state)
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        raise CheckpointLoadError(
            "{} is not a complete fairseq checkpoint ({}: {}): give a checkpoint written by "
            "fairseq-train (checkpoint_best.pt, checkpointN.pt)".format(path, type(e).__name__, e)
        ) from None


def check_restore_file(cfg, checkpoint_path):
    """A folder, or a --restore-file that does not exist: training from scratch without a word
    was the result (``cfg`` is the checkpoint config)."""
    if os.path.isdir(checkpoint_path) or (
        cfg.restore_file != "checkpoint_last.pt"
        and not cfg.finetune_from_model
        and not PathManager.exists(checkpoint_path)
    ):
        raise UserError(
            "--restore-file {} {}: give a checkpoint file (e.g. {})".format(
                checkpoint_path,
                "is a folder" if os.path.isdir(checkpoint_path) else "does not exist",
                os.path.join(cfg.save_dir, "checkpoint_last.pt"),
            )
        )
