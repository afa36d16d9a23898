"""Checkpoints load through torch's weights-only unpickler with fairseq's allow-list (torch
>= 2.6 refuses fairseq's checkpoints otherwise, and a pickle could run code), with what one
load may allocate bounded by the file's size; a refused file says whether it can be
converted; a folder, a missing --restore-file or a state_dict that is no checkpoint gets one
line, and so does a resumed checkpoint that does not fit the model: the settings that differ
(docs/checkpoints.md)."""

from ..edits import Edit, FilePatch

# The allow-list below is inserted into fairseq/checkpoint_utils.py: it is what a checkpoint
# written by fairseq 0.12.2 (and by this project) holds besides tensors and plain containers.
# torch's weights_only unpickler refuses everything else, so a crafted checkpoint cannot run
# code when it is loaded.
_SAFE_LOAD_HELPER = '''

def _fairseq_checkpoint_safe_globals():
    """Non-tensor classes that fairseq checkpoints hold (added by fairseq_define)."""
    import argparse
    import omegaconf
    from omegaconf import nodes as omegaconf_nodes

    from fairseq.data import dictionary as fairseq_dictionary

    allowed = [
        argparse.Namespace,
        collections.OrderedDict,
        collections.defaultdict,
        omegaconf.DictConfig,
        omegaconf.ListConfig,
        omegaconf.base.ContainerMetadata,
        omegaconf.base.Metadata,
        omegaconf_nodes.AnyNode,
        omegaconf_nodes.StringNode,
        omegaconf_nodes.IntegerNode,
        omegaconf_nodes.FloatNode,
        omegaconf_nodes.BooleanNode,
        omegaconf_nodes.EnumNode,
        typing.Any,
        # task state of the audio fine-tuning and HuBERT tasks: symbols, counts, indices
        fairseq_dictionary.Dictionary,
        # omegaconf metadata names these types (a config broadcast between ranks)
        dict,
        list,
        int,
        float,
        bool,
        str,
    ]
    return allowed + list(_EXTRA_SAFE_GLOBALS)


_EXTRA_SAFE_GLOBALS = []


def add_checkpoint_safe_globals(classes):
    """Let checkpoints hold more classes (plugins call this for their own config types)."""
    for cls in classes:
        if cls not in _EXTRA_SAFE_GLOBALS:
            _EXTRA_SAFE_GLOBALS.append(cls)


from fairseq import UserError  # noqa: E402  (defined before fairseq imports its submodules)


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
    compressed bomb: torch.save stores entries uncompressed."""
    import zipfile

    if budget.size is None:  # a stream that does not say its size: nothing to hold it to
        return
    here = None if _is_path(f) else f.tell()
    try:
        if not zipfile.is_zipfile(f):
            return
        with zipfile.ZipFile(f) as z:
            unpacked = sum(i.file_size for i in z.infolist())
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return  # torch.load reports the damage
    finally:
        if here is not None:
            f.seek(here)
    if budget.size is not None and unpacked > budget.size:
        raise budget.refuse(
            f"its zip entries unpack to {unpacked:,} bytes, more than the file's {budget.size:,}"
        )


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

_LOAD_LOCK = None


def _bounded_weights_only(budget):
    """torch's weights-only unpickler, for one load, with bounded_constructors in its allow-list."""
    import threading

    from torch import _weights_only_unpickler as wo

    global _LOAD_LOCK
    if _LOAD_LOCK is None:
        _LOAD_LOCK = threading.RLock()

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
    checkpoint you trust, see fairseq_define's README ("Loading checkpoints safely"). What the
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
            f"{name} is a folder, not a checkpoint file: give the file (e.g. {os.path.join(name, 'checkpoint_best.pt')})"
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

'''

# What a refused checkpoint needs, read from its pickle without running it: the safe loader's
# refusal says whether the file can be converted, and fairseq-define-trust-checkpoint
# converts only files whose globals are all plain data (inserted into checkpoint_utils.py).
_PICKLE_INSPECTION_HELPER = '''

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


def checkpoint_safe_globals_by_name():
    """The safe loader's allow-list: qualified name -> object (torch's and fairseq's)."""
    from torch import _weights_only_unpickler

    safe = dict(_weights_only_unpickler._get_allowed_globals())
    for obj in _fairseq_checkpoint_safe_globals():
        name = getattr(obj, "__qualname__", None) or getattr(obj, "_name", "")
        safe[f"{obj.__module__}.{name}"] = obj
    return safe


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

'''


# fairseq-train resuming a checkpoint that does not fit the model it built said only "please
# ensure that the architectures match": the user could not tell which setting (an output
# layer's form, a layer count, the dictionary) made the difference. The trainer now names the
# model settings that differ between the checkpoint's config and this run's, or, where none
# does, what the load itself reported (a missing weight, a size mismatch).
_MISFIT_HELPER = '''

def _checkpoint_misfit(filename, state, model_cfg, error, limit=6):
    """(added by fairseq_define) One line for a checkpoint whose weights do not fit the model
    this run built: the model settings that differ from the checkpoint's, or the load's own
    first complaint, and the fix."""
    saved_cfg = (state.get("cfg") or {}).get("model") if isinstance(state, dict) else None
    if saved_cfg is None and isinstance(state, dict):
        saved_cfg = state.get("args")
    differ = _model_settings_that_differ(saved_cfg, model_cfg)
    if differ:
        more = len(differ) - limit
        why = "its model settings differ from this run's: {}{}".format(
            "; ".join(differ[:limit]), " and {} more".format(more) if more > 0 else ""
        )
    else:
        lines = [l.strip() for l in str(error).splitlines() if l.strip()]
        first = lines[1] if len(lines) > 1 and lines[0].startswith("Error(s) in loading") else (lines or [""])[0]
        why = "the same model settings, but {}".format(first[:300].rstrip(". "))
    return (
        "checkpoint {} does not fit this model: {}; resume with the checkpoint's settings and "
        "data (dict.*.txt), or train from scratch in a new --save-dir".format(filename, why)
    )


def _model_settings_that_differ(saved_cfg, model_cfg):
    """(added by fairseq_define) ["--flag A in the checkpoint, B here", ...] over the model's
    own settings (its add_args), in the order the model declares them."""

    def settings(cfg):
        if isinstance(cfg, Namespace):
            return dict(vars(cfg))
        try:
            return dict(OmegaConf.to_container(cfg, resolve=False)) if cfg is not None else {}
        except Exception:
            return {}

    saved, here = settings(saved_cfg), settings(model_cfg)
    names = sorted(set(saved) | set(here))  # an unknown model: every setting
    model_class = models.ARCH_MODEL_REGISTRY.get(here.get("arch") or here.get("_name"))
    if model_class is not None:
        import argparse

        parser = argparse.ArgumentParser(add_help=False, conflict_handler="resolve")
        try:
            model_class.add_args(parser)
            names = ["arch"] + [a.dest for a in parser._actions if a.dest != "arch"]
        except Exception:  # a model whose options need more than a parser: every setting
            pass
    return [
        "--{} {} in the checkpoint, {} here".format(
            name.replace("_", "-"), saved.get(name, "unset"), here.get(name, "unset")
        )
        for name in names
        if saved.get(name) != here.get(name)
    ]
'''

_MISFIT_EDITS = (
    Edit(
        "            except Exception:\n"
        "                raise Exception(\n"
        '                    "Cannot load model parameters from checkpoint {}; "\n'
        '                    "please ensure that the architectures match.".format(filename)\n'
        "                )\n",
        "            except Exception as e:\n"
        "                # (fairseq_define) one line that names what differs\n"
        "                from fairseq import UserError\n"
        "\n"
        "                if isinstance(e, UserError):\n"
        "                    raise\n"
        "                raise UserError(\n"
        "                    _checkpoint_misfit(filename, state, self.cfg.model, e)\n"
        "                ) from e\n",
    ),
    Edit(
        "    return module\n\n\ndef _set_module_by_path(",
        "    return module\n" + _MISFIT_HELPER + "\n\ndef _set_module_by_path(",
    ),
)


PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/checkpoint_utils.py",
        "weights-only loading with an allow-list (torch >= 2.6), bounded; clear load errors",
        (
            Edit(
                "import re\nimport time\nimport traceback\nfrom collections import OrderedDict\n",
                "import pickle\nimport re\nimport time\nimport traceback\nimport typing\n"
                "from collections import OrderedDict\n",
            ),
            Edit(
                "logger = logging.getLogger(__name__)\n\n\ndef save_checkpoint(",
                "logger = logging.getLogger(__name__)\n" + _SAFE_LOAD_HELPER + "\ndef save_checkpoint(",
            ),
            Edit(
                '        state = torch.load(f, map_location=torch.device("cpu"))\n',
                '        state = safe_torch_load(f, map_location=torch.device("cpu"))\n',
            ),
            # (fairseq_define) a folder given as a checkpoint (IsADirectoryError), and
            # --model-overrides that is not a dict (AttributeError on .items())
            Edit(
                "        local_path = PathManager.get_local_path(path)\n"
                "\n"
                '    with open(local_path, "rb") as f:\n',
                "        local_path = PathManager.get_local_path(path)\n"
                "\n"
                "    if os.path.isdir(local_path):\n"
                "        raise CheckpointLoadError(\n"
                '            "{} is a folder, not a checkpoint file: give the file (e.g. {})".format(\n'
                '                path, os.path.join(path, "checkpoint_best.pt")\n'
                "            )\n"
                "        )\n"
                "    if arg_overrides is not None and not isinstance(arg_overrides, dict):\n"
                "        raise UserError(\n"
                "            \"--model-overrides must be a dict of settings, e.g. \\\"{{'beam': 5}}\\\", got {!r}\".format(\n"
                "                arg_overrides\n"
                "            )\n"
                "        )\n"
                '    with open(local_path, "rb") as f:\n',
            ),
            # (fairseq_define) torch.save(model.state_dict()) is not a checkpoint: KeyError later
            Edit(
                '    if "args" in state and state["args"] is not None and arg_overrides is not None:\n',
                '    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):\n'
                "        raise CheckpointLoadError(\n"
                '            "{} is not a fairseq checkpoint (it has no \'model\' entry; a plain state_dict?): "\n'
                '            "give a checkpoint written by fairseq-train (checkpoint_best.pt, "\n'
                '            "checkpointN.pt)".format(path)\n'
                "        )\n"
                '    if "args" in state and state["args"] is not None and arg_overrides is not None:  # a dict\n',
            ),
            Edit(
                "    else:\n"
                "        checkpoint_path = cfg.restore_file\n"
                "\n"
                '    if cfg.restore_file != "checkpoint_last.pt" and cfg.finetune_from_model:\n',
                "    else:\n"
                "        checkpoint_path = cfg.restore_file\n"
                "\n"
                "    # (fairseq_define) a folder, or a --restore-file that does not exist: training from\n"
                "    # scratch without a word was the result\n"
                "    if os.path.isdir(checkpoint_path) or (\n"
                '        cfg.restore_file != "checkpoint_last.pt"\n'
                "        and not cfg.finetune_from_model\n"
                "        and not PathManager.exists(checkpoint_path)\n"
                "    ):\n"
                "        raise UserError(\n"
                '            "--restore-file {} {}: give a checkpoint file (e.g. {})".format(\n'
                "                checkpoint_path,\n"
                '                "is a folder" if os.path.isdir(checkpoint_path) else "does not exist",\n'
                '                os.path.join(cfg.save_dir, "checkpoint_last.pt"),\n'
                "            )\n"
                "        )\n"
                '    if cfg.restore_file != "checkpoint_last.pt" and cfg.finetune_from_model:\n',
            ),
            Edit(
                "        new_state = torch.load(\n            f,\n",
                "        new_state = safe_torch_load(\n            f,\n",
            ),
            Edit(
                "    return extra_state, epoch_itr\n\n\ndef load_checkpoint_to_cpu(",
                "    return extra_state, epoch_itr\n" + _PICKLE_INSPECTION_HELPER + "\ndef load_checkpoint_to_cpu(",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/distributed/utils.py",
        "torch >= 2.6: a checkpoint broadcast from rank 0 loads with the same allow-list",
        (
            Edit(
                '        obj = torch.load(buffer, map_location="cpu")\n',
                "        from fairseq.checkpoint_utils import safe_torch_load\n\n"
                "        obj = safe_torch_load(\n"
                '            buffer, map_location="cpu", extra_globals=[_TensorPlaceholder]\n'
                "        )\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/trainer.py",
        "a resumed checkpoint that does not fit the model: the settings that differ, in one line",
        _MISFIT_EDITS,
    ),
)
