"""What a refused checkpoint needs, read from its pickle without running it.

The safe loader (checkpoint_loading.py) refuses any class outside its allow-list; its refusal
says whether the file holds only plain data (numpy values, enums: ``fairseq-define-trust-
checkpoint`` converts it) or code (do not load it). fairseq-define-trust-checkpoint resolves
globals with the same functions, so the two always agree.
"""

import os

from .checkpoint_allow_list import checkpoint_safe_globals_by_name

__all__ = [
    "CONVERTIBLE_CHECKPOINT_GLOBALS", "checkpoint_pickle_globals", "resolve_checkpoint_global",
    "_ENUM_MODULES", "_refusal_message",
]

# Globals outside the safe loader's allow-list that build plain data (numpy values), each
# with the already-imported module and attribute it names (numpy 1 and 2 spell the module
# differently); enums of fairseq, fairseq_define and omegaconf count as plain data too
# (added by fairseq_define).
CONVERTIBLE_CHECKPOINT_GLOBALS = {
    "numpy.core.multiarray.scalar": ("numpy._core.multiarray", "numpy.core.multiarray", "scalar"),
    "numpy._core.multiarray.scalar": ("numpy._core.multiarray", "numpy.core.multiarray", "scalar"),
    "numpy.core.multiarray._reconstruct": ("numpy._core.multiarray", "numpy.core.multiarray", "_reconstruct"),
    "numpy._core.multiarray._reconstruct": ("numpy._core.multiarray", "numpy.core.multiarray", "_reconstruct"),
    "numpy.ndarray": ("numpy", "numpy", "ndarray"),
    "numpy.dtype": ("numpy", "numpy", "dtype"),
    "builtins.frozenset": ("builtins", "builtins", "frozenset"),
}
_ENUM_MODULES = ("fairseq.", "fairseq_define.", "omegaconf.")


def resolve_checkpoint_global(qualified):
    """(kind, object) for a pickle global ``module.name``: "safe" (the safe loader accepts
    it), "data" (plain data that fairseq-define-trust-checkpoint converts) or "code" (object
    None). Only names on these lists resolve, and only from modules that are already imported:
    nothing is ever imported because a file names it (importing a module can run code)."""
    import enum
    import sys

    safe = checkpoint_safe_globals_by_name()
    if qualified in safe:
        return "safe", safe[qualified]
    if qualified in CONVERTIBLE_CHECKPOINT_GLOBALS:
        *modules, attr = CONVERTIBLE_CHECKPOINT_GLOBALS[qualified]
        for module in modules:
            if module in sys.modules and attr in vars(sys.modules[module]):
                return "data", vars(sys.modules[module])[attr]
        return "code", None
    module, _, name = qualified.rpartition(".")
    if not qualified.startswith(_ENUM_MODULES) or module not in sys.modules:
        return "code", None
    obj = vars(sys.modules[module]).get(name)  # no getattr: a module __getattr__ could run code
    if isinstance(obj, type) and issubclass(obj, enum.Enum) and (obj.__module__, obj.__qualname__) == (module, name):
        return "data", obj
    return "code", None


def checkpoint_pickle_globals(path):
    """The globals (``module.name``) that a torch.save file's pickles refer to, read with
    pickletools.genops: nothing is unpickled. Handles the zip format and the legacy stream;
    a global whose name the pickle computes is reported as "<computed>"."""
    import _compat_pickle
    import pickletools
    import zipfile

    def scan(stream, found):
        memo, strings = {}, []
        for op, arg, _pos in pickletools.genops(stream):
            if op.name in ("GLOBAL", "INST"):  # Python 2 names, as pickle's fix_imports reads them
                mod, name = arg.split(" ", 1)
                mod, name = _compat_pickle.NAME_MAPPING.get((mod, name), (mod, name))
                found.append(f"{_compat_pickle.IMPORT_MAPPING.get(mod, mod)}.{name}")
            elif op.name == "STACK_GLOBAL":
                mod, name = strings[-2:] if len(strings) >= 2 else (None, None)
                ok = isinstance(mod, str) and isinstance(name, str)
                found.append(f"{mod}.{name}" if ok else "<computed>")
            elif op.name in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
                memo[len(memo) if op.name == "MEMOIZE" else arg] = strings[-1] if strings else None
                continue
            elif op.name in ("GET", "BINGET", "LONG_BINGET"):
                strings.append(memo.get(arg))
                continue
            strings.append(arg if isinstance(arg, str) and ("UNICODE" in op.name or "STRING" in op.name) else None)

    found = []
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            for entry in z.namelist():
                if entry == "data.pkl" or entry.endswith("/data.pkl"):
                    with z.open(entry) as f:
                        scan(f, found)
    else:
        with open(path, "rb") as f:  # legacy: magic, protocol, sys info, object, storage keys
            for _ in range(5):
                scan(f, found)
    return list(dict.fromkeys(found))


def _refusal_message(f, name, reason):
    kinds = {}
    if isinstance(f, (str, os.PathLike)):
        try:
            kinds = {g: resolve_checkpoint_global(g)[0] for g in checkpoint_pickle_globals(f)}
        except Exception:  # a pickle genops cannot read: torch's reason is all there is
            kinds = {}
    code = [g for g, k in kinds.items() if k == "code"]
    data = [g for g, k in kinds.items() if k == "data"]
    if data and not code:
        return (
            f"refusing to load {name}: it holds objects outside fairseq's allow-list of "
            f"checkpoint classes ({', '.join(data)}); they are plain data, so if you trust "
            f"this file, convert it once with: fairseq-define-trust-checkpoint {name} NEW.pt"
        )
    return (
        f"refusing to load {name}: it holds code, not only data (unpickling it would call "
        f"{', '.join(code) if code else reason}); do not load or convert this file"
    )
