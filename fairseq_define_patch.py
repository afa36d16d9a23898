"""Make stock fairseq 0.12.2 work on Python 3.11, torch >= 2.6 and numpy 2.

fairseq 0.12.2 is the last fairseq release and cannot be imported on Python 3.11; its
checkpoints do not load on torch >= 2.6 and several data paths call numpy functions that
numpy 2 removed (docs/fairseq_patch.md lists each failure).
The stock command-line tools (``fairseq-train``, ``fairseq-generate``, ...) import fairseq
before any ``--user-dir`` is read, so an import-time workaround in this package cannot reach
them: the installed files themselves are edited, once, by this module.

Every edit is an exact text replacement in a file whose whole content is recognised by its
SHA-256 (the file as shipped, or the file as this module leaves it). Anything else is refused:
a different fairseq/hydra version or a file someone edited by hand is never touched. Writes
are atomic (temporary file + rename), so an interrupted run leaves each file either original
or patched. Running ``--apply`` again is a no-op; ``--check`` exits non-zero unless every file
is patched; ``--revert`` restores the shipped text.

Usage::

    fairseq-define-patch-fairseq --check
    fairseq-define-patch-fairseq --apply
    python -m fairseq_define_patch --revert
"""

import argparse
import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

logger = logging.getLogger(__name__)

APPLY_COMMAND = "fairseq-define-patch-fairseq --apply"
SUPPORTED_VERSIONS = {"fairseq": "0.12.2", "hydra-core": "1.0.7"}


class FairseqPatchError(RuntimeError):
    """fairseq (or hydra) is in a state this module will not touch."""


@dataclass(frozen=True)
class Edit:
    old: str
    new: str

    def __post_init__(self):
        if self.old in self.new or self.new in self.old:
            raise ValueError(f"ambiguous edit: one side contains the other: {self.old[:60]!r}")


@dataclass(frozen=True)
class FilePatch:
    distribution: str  # pip distribution that ships the file
    path: str  # relative to the site-packages directory of that distribution
    why: str
    edits: Tuple[Edit, ...] = field(default_factory=tuple)

    @property
    def original_sha256(self) -> str:
        return SHA256[self.path][0]

    @property
    def patched_sha256(self) -> str:
        return SHA256[self.path][1]


def _default_factory_edits(lines: Sequence[str]) -> Tuple[Edit, ...]:
    """``name: Cls = Cls()`` -> ``name: Cls = field(default_factory=Cls)`` (Python 3.11
    rejects mutable dataclass instances as field defaults)."""
    edits = []
    for line in lines:
        head, _, default = line.rpartition(" = ")
        cls = default.strip()[: -len("()")]
        edits.append(Edit(line, f"{head} = field(default_factory={cls})"))
    return tuple(edits)


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

# fairseq's checkpoint writes, as they ship and as patched: a fresh, exclusively created
# temporary file in the destination folder, moved over the destination in one step, and
# removed when the write fails (the same rules as fairseq_define/output_files.py, which the
# plugin's tools use; fairseq-train runs without the plugin, so the patch holds its own copy).
_PERSISTENT_SAVE_SHIPPED = """def torch_persistent_save(obj, filename, async_write: bool = False):
    if async_write:
        with PathManager.opena(filename, "wb") as f:
            _torch_persistent_save(obj, f)
    else:
        if PathManager.supports_rename(filename):
            # do atomic save
            with PathManager.open(filename + ".tmp", "wb") as f:
                _torch_persistent_save(obj, f)
            PathManager.rename(filename + ".tmp", filename)
        else:
            # fallback to non-atomic save
            with PathManager.open(filename, "wb") as f:
                _torch_persistent_save(obj, f)


def _torch_persistent_save(obj, f):
    if isinstance(f, str):
        with PathManager.open(f, "wb") as h:
            torch_persistent_save(obj, h)
        return
    for i in range(3):
        try:
            return torch.save(obj, f)
        except Exception:
            if i == 2:
                logger.error(traceback.format_exc())
                raise
"""

_PERSISTENT_SAVE_PATCHED = """def _write_atomically(filename, write):
    # (added by fairseq_define) write(f, path) on a fresh temporary file next to filename,
    # f open on it for writing, then os.replace; the temporary file goes if anything fails
    import tempfile

    folder, base = os.path.split(os.path.abspath(filename))
    fd, tmp = tempfile.mkstemp(prefix="." + base + ".", suffix=".tmp", dir=folder)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # as open() would create it, not mkstemp's 0600
        with os.fdopen(fd, "wb") as f:
            write(f, tmp)
        os.replace(tmp, filename)
    except OSError as e:
        if e.errno != 28:  # ENOSPC
            raise
        from fairseq import UserError

        raise UserError(
            "no space left on the device while writing {}: free some space or choose another "
            "--save-dir ({} is unchanged)".format(filename, filename)
        ) from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _copy_atomically(src, dst):
    # (added by fairseq_define) copy src to dst through a fresh temporary file
    import shutil

    def copy(f, tmp):
        f.close()  # shutil.copyfile writes by name (and can use a fast kernel copy)
        shutil.copyfile(src, tmp)

    _write_atomically(dst, copy)


def torch_persistent_save(obj, filename, async_write: bool = False):
    if async_write:
        with PathManager.opena(filename, "wb") as f:
            _torch_persistent_save(obj, f)
    else:
        if PathManager.supports_rename(filename):
            # atomic save through a fresh temporary file (fairseq_define)
            _write_atomically(filename, lambda f, _: _torch_persistent_save(obj, f))
        else:
            # fallback to non-atomic save
            with PathManager.open(filename, "wb") as f:
                _torch_persistent_save(obj, f)


def _torch_persistent_save(obj, f):
    import errno

    if isinstance(f, str):
        with PathManager.open(f, "wb") as h:
            torch_persistent_save(obj, h)
        return
    for i in range(3):
        try:
            if i > 0 and f.seekable():  # start the retry on an empty file
                f.seek(0)
                f.truncate()
            return torch.save(obj, f)
        except OSError as e:
            if i == 2 or e.errno == errno.ENOSPC:  # a full disk stays full
                raise
        except Exception:
            if i == 2:
                raise
"""

# One error for bad input in fairseq's own code, where the plugin (and its excepthook) may
# not be loaded: fairseq.UserError, printed by fairseq's command-line tools as one line.
_FAIRSEQ_USER_ERROR = """__all__ = ["pdb", "UserError"]


class UserError(ValueError):
    # (added by fairseq_define) bad input or settings; the message names the problem and the
    # fix. fairseq's command-line tools print it as one line, PROG: error: MESSAGE, and exit
    # non-zero (FAIRSEQ_DEFINE_TRACEBACK=1 shows the traceback).
    pass


def _print_user_errors(previous):
    def hook(exc_type, exc, tb):
        if issubclass(exc_type, UserError) and not os.environ.get("FAIRSEQ_DEFINE_TRACEBACK"):
            prog = os.path.basename(sys.argv[0]) if sys.argv else "fairseq"
            sys.stderr.write("{}: error: {}\\n".format(prog, exc))
            sys.stderr.flush()
            sys.stdout.flush()
            import multiprocessing

            for child in multiprocessing.active_children():  # the data loader's workers
                child.terminate()
            os._exit(1)  # now: a data loader thread still running made the shutdown abort
        else:
            previous(exc_type, exc, tb)

    return hook


if sys.argv and os.path.basename(sys.argv[0]).startswith("fairseq-"):
    sys.excepthook = _print_user_errors(sys.excepthook)


def is_plugin_name(name):
    # (added by fairseq_define) an architecture or task the fairseq-define plugin registers
    return isinstance(name, str) and (name.startswith("define_") or name == "contiguous_lm")


def unknown_name_error(kind, name, flag):
    # (added by fairseq_define) the error for a model architecture or task nobody registered
    message = "unknown {} {!r}".format(kind, name)
    if is_plugin_name(name):
        import importlib.util

        spec = importlib.util.find_spec("fairseq_define")
        where = os.path.dirname(spec.origin) if spec and spec.origin else "PATH/TO/fairseq_define"
        return UserError(
            message + ": it comes from the fairseq-define plugin, which is not loaded; pass "
            "--user-dir {} (in Python: import fairseq_define)".format(where)
        )
    return UserError(
        message + ": check {}, or pass the --user-dir of the plugin that defines it".format(flag)
    )
"""

_PREPROCESS_CHECK_INPUTS = """def _check_inputs(args):
    # (added by fairseq_define) before anything is written: every input file exists, is
    # UTF-8, and a source file has as many lines as its target file
    separate_tgt = not args.only_source and not args.joined_dictionary
    if not args.trainpref and (not args.srcdict or (separate_tgt and not args.tgtdict)):
        raise UserError(
            "no --trainpref to build the dictionary from: give --trainpref, or existing "
            "dictionaries with --srcdict{}".format(" and --tgtdict" if separate_tgt else "")
        )
    langs = [args.source_lang] + ([] if args.only_source else [args.target_lang])
    prefixes = [args.trainpref] if args.trainpref else []
    for pref in (args.validpref, args.testpref):
        prefixes += pref.split(",") if pref else []
    for prefix in prefixes:
        counts = {}
        for lang in langs:
            path = _file_name(prefix, lang)
            if not os.path.isfile(path):
                raise UserError(
                    "no such input file {}: check --trainpref/--validpref/--testpref and "
                    "--source-lang/--target-lang (files are PREFIX.LANG)".format(path)
                )
            lines = 0
            with open(path, "rb") as f:
                for lines, line in enumerate(f, 1):
                    try:
                        line.decode("utf-8")
                    except UnicodeDecodeError as e:
                        raise UserError(
                            "{} line {} is not UTF-8 ({}): convert the file to UTF-8 (e.g. "
                            "iconv -f latin1 -t utf-8) or remove the line".format(path, lines, e.reason)
                        ) from None
            counts[path] = lines
        if len(set(counts.values())) > 1:
            (src, n_src), (tgt, n_tgt) = counts.items()
            raise UserError(
                "{} has {} lines but {} has {}: source and target files must be line-aligned "
                "(one sentence pair per line); fix or re-extract them".format(src, n_src, tgt, n_tgt)
            )
    dicts = [(args.source_lang, args.srcdict)]
    if not args.only_source:
        dicts.append((args.target_lang, args.tgtdict))
    for lang, given in dicts:
        dict_path = _dict_path(lang, args.destdir)
        if not given and os.path.exists(dict_path):
            raise UserError(
                "{} exists: --destdir already holds binarized data; choose a new --destdir, "
                "or reuse the dictionary with --srcdict/--tgtdict".format(dict_path)
            )


def main(args):
    # setup some basic things
    utils.import_user_module(args)
    _check_inputs(args)

    os.makedirs(args.destdir, exist_ok=True)
"""

# fairseq 0.12.2 runs eval() on config strings (layer lists such as "[(512, 3)] * 20",
# booleans, cutoffs, optimizer betas), and a checkpoint's config is such a string: a file that
# holds only strings passes any weights-only loader and then ran code when its model was built.
# fairseq/utils.py gets a parser that computes what eval gave for plain data and refuses the
# rest; the eval_str_* helpers use it, and every other module that calls eval() on a config
# value (or a data file's line) binds the name ``eval`` to it (one import line, so no call
# site in the module is missed). docs/checkpoints.md lists the sites.
_CONFIG_LITERAL_HELPER = """

from fairseq import UserError as _UserError  # noqa: E402  (fairseq/__init__.py defines it first)


class ConfigLiteralError(_UserError):
    \"\"\"A config value that is not plain data (added by fairseq_define; a ValueError, and a
    UserError that fairseq's command-line tools print as one line).\"\"\"


# What one config string may cost: "[0] * 10**12" or 600 joined copies of "[0] * 1000000"
# would exhaust memory, a long chain of + or - the parser's and the evaluator's recursion
_CONFIG_LITERAL_MAX_ITEMS = 1_000_000  # items (and characters) that its + and * build, together
_CONFIG_LITERAL_MAX_CHARS = 100_000  # length of the string itself
_CONFIG_LITERAL_MAX_DEPTH = 100  # nesting of brackets and operators
_CONFIG_LITERAL_OPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}


def parse_config_literal(value):
    \"\"\"What ``eval(value)`` gives for a config string that is plain data, without running it.

    Accepted: literals (numbers, strings, bytes, None, True, False, tuples, lists, dicts, sets),
    unary + and -, and + - * / between them, which fairseq's own defaults use
    (``"[(512, 10, 5)] + [(512, 3, 2)] * 4"``). Names, calls, attributes, subscripts,
    comprehensions and lambdas raise ConfigLiteralError: running them could run anything; so
    do strings longer than _CONFIG_LITERAL_MAX_CHARS, nested deeper than
    _CONFIG_LITERAL_MAX_DEPTH, or building more than _CONFIG_LITERAL_MAX_ITEMS items in all.
    Like eval, a value that is not a string raises TypeError (callers rely on it).\"\"\"
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if not isinstance(value, str):
        raise TypeError("eval() arg 1 must be a string, bytes or code object")

    def refuse(why):
        shown = value if len(value) <= 120 else value[:117] + "..."
        return ConfigLiteralError(
            f"refusing to evaluate the config value {shown!r}: {why}; a config or checkpoint "
            "may hold only plain values here (numbers, strings, tuples, lists, dicts, and + - * "
            "/ between them), so fix the value or do not use a checkpoint that holds it"
        )

    budget = [_CONFIG_LITERAL_MAX_ITEMS]  # literals are bounded by the string's length

    def spend(items):
        budget[0] -= items
        if budget[0] < 0:
            raise refuse(f"it builds more than {_CONFIG_LITERAL_MAX_ITEMS} items")

    def walk(node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [walk(e) for e in node.elts]
            return {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(node)](items)
        if isinstance(node, ast.Dict) and None not in node.keys:
            return {walk(k): walk(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = walk(node.operand)
            if not isinstance(operand, (int, float, complex)):
                raise refuse("a sign applies only to numbers")
            return -operand if isinstance(node.op, ast.USub) else +operand
        if isinstance(node, ast.BinOp) and type(node.op) in _CONFIG_LITERAL_OPS:
            left, right = walk(node.left), walk(node.right)
            for seq, n in ((left, right), (right, left)):
                if isinstance(node.op, ast.Mult) and isinstance(seq, (str, bytes, tuple, list)):
                    if isinstance(n, int) and len(seq) * n > _CONFIG_LITERAL_MAX_ITEMS:
                        raise refuse(f"it repeats a sequence beyond {_CONFIG_LITERAL_MAX_ITEMS} items")
                    if isinstance(n, int):
                        spend(len(seq) * max(n, 0))
            sequences = (str, bytes, tuple, list)
            if isinstance(node.op, ast.Add) and isinstance(left, sequences) and isinstance(right, sequences):
                spend(len(left) + len(right))
            try:
                return _CONFIG_LITERAL_OPS[type(node.op)](left, right)
            except (TypeError, ZeroDivisionError, OverflowError) as e:
                raise refuse(str(e)) from None
        what = type(node.op if isinstance(node, (ast.BinOp, ast.UnaryOp)) else node).__name__
        raise refuse(f"{what} is not plain data")

    if len(value) > _CONFIG_LITERAL_MAX_CHARS:
        raise refuse(f"it is {len(value)} characters long, more than {_CONFIG_LITERAL_MAX_CHARS}")
    try:
        tree = ast.parse(value.lstrip(" \\t"), mode="eval")
    except (SyntaxError, ValueError) as e:
        raise refuse(f"not a Python literal ({e.__class__.__name__})") from None
    except (RecursionError, MemoryError):  # the parser's own limits: nested far too deep
        raise refuse(f"it is nested deeper than {_CONFIG_LITERAL_MAX_DEPTH} levels") from None
    levels = [(tree.body, 1)]  # measured without recursion, before walk() recurses
    while levels:
        node, depth = levels.pop()
        if depth > _CONFIG_LITERAL_MAX_DEPTH:
            raise refuse(f"it is nested deeper than {_CONFIG_LITERAL_MAX_DEPTH} levels")
        levels.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return walk(tree.body)

"""

_UTILS_EVAL_HELPERS = (
    "def eval_str_list(x, type=float):\n"
    "    if x is None:\n"
    "        return None\n"
    "    if isinstance(x, str):\n"
    "        x = {call}(x)\n"
    "    try:\n"
    "        return list(map(type, x))\n"
    "    except TypeError:\n"
    "        return [type(x)]\n"
    "\n\n"
    "def eval_str_dict(x, type=dict):\n"
    "    if x is None:\n"
    "        return None\n"
    "    if isinstance(x, str):\n"
    "        x = {call}(x)\n"
    "    return x\n"
    "\n\n"
    "def eval_bool(x, default=False):\n"
    "    if x is None:\n"
    "        return default\n"
    "    try:\n"
    "        return bool({call}(x))\n"
    "    except TypeError:\n"
    "        return default\n"
)

# Modules that call eval() on config values (or, codedataset.py, on a manifest's lines), and
# the two consecutive import lines between which ``eval`` is bound to the parser.
_EVAL_SITES = {
    "fairseq/optim/adam.py": ("import logging\n", "import math\n"),
    "fairseq/optim/cpu_adam.py": ("import importlib\n", "from collections.abc import Collection\n"),
    "fairseq/optim/adamax.py": ("import torch\n", "import torch.optim\n"),
    "fairseq/optim/adafactor.py": ("import math\n", "\n"),
    "fairseq/optim/fused_lamb.py": ("from fairseq.optim import LegacyFairseqOptimizer, register_optimizer\n", "\n"),
    "fairseq/criterions/ctc.py": ("import math\n", "from argparse import Namespace\n"),
    "fairseq/models/lightconv_lm.py": ("from fairseq import utils\n", "from fairseq.models import (\n"),
    "fairseq/models/hubert/hubert.py": ("import logging\n", "from dataclasses import dataclass, field\n"),
    "fairseq/models/transformer_lm.py": ("from dataclasses import dataclass, field\n", "from typing import Optional\n"),
    "fairseq/models/fconv_lm.py": ("from fairseq import utils\n", "from fairseq.models import (\n"),
    "fairseq/models/fconv.py": ("import math\n", "\n"),
    "fairseq/models/fconv_self_att.py": ("import logging\n", "import math\n"),
    "fairseq/models/wav2vec/wav2vec2.py": ("import math\n", "from dataclasses import dataclass, field\n"),
    "fairseq/models/wav2vec/wav2vec.py": ("from dataclasses import dataclass, field\n", "import logging\n"),
    "fairseq/models/speech_to_text/s2t_wav_transformer.py": ("import math\n", "\n"),
    "fairseq/data/audio/raw_audio_dataset.py": ("import logging\n", "import os\n"),
    "fairseq/data/codedataset.py": ("import json\n", "import logging\n"),
    "fairseq_cli/validate.py": ("import logging\n", "import os\n"),
    "fairseq_cli/eval_lm.py": ("import logging\n", "import math\n"),
    "fairseq/examples/data2vec/models/data2vec_audio.py": ("import logging\n", "import math\n"),
    "fairseq/examples/speech_recognition/models/w2l_conv_glu_enc.py": ("import math\n", "\n"),
    "fairseq/examples/speech_recognition/models/vggtransformer.py": ("import argparse\n", "import math\n"),
    # example scripts: eval() of a --model-overrides argument or of a data file's lines
    "fairseq/examples/criss/save_encoder.py": ("import numpy as np\n", "import torch\n"),
    "fairseq/examples/discriminative_reranking_nmt/drnmt_rerank.py": ("from collections import namedtuple\n", "import logging\n"),
    "fairseq/examples/textless_nlp/pgslm/data_utils.py": ("import os\n", "import torch\n"),
    "fairseq/examples/textless_nlp/pgslm/quantize_f0.py": ("from collections import defaultdict\n", "from functools import partial\n"),
    "fairseq/examples/textless_nlp/pgslm/sample/sample.py": ("import os\n", "import torch.multiprocessing as mp\n"),
}
_BIND_EVAL = (
    "from fairseq.utils import parse_config_literal as eval  # noqa: A001  config strings are "
    "parsed, never run (fairseq_define)\n"
)


def _config_literal_patches() -> Tuple[FilePatch, ...]:
    utils_patch = FilePatch(
        "fairseq",
        "fairseq/utils.py",
        "config strings are parsed as plain data, never run (eval_str_list/_dict, eval_bool)",
        (
            Edit("import argparse\nimport collections\n", "import argparse\nimport ast\nimport collections\n"),
            Edit(
                'def csv_str_list(x):\n    return x.split(",")\n\n\n' + _UTILS_EVAL_HELPERS.format(call="eval"),
                'def csv_str_list(x):\n    return x.split(",")\n' + _CONFIG_LITERAL_HELPER + "\n"
                + _UTILS_EVAL_HELPERS.format(call="parse_config_literal"),
            ),
        ),
    )
    sites = tuple(
        FilePatch("fairseq", path, "config strings are parsed as plain data, never run (eval)",
                  (Edit(first + second, first + _BIND_EVAL + second),))
        for path, (first, second) in _EVAL_SITES.items()
    )
    return (utils_patch,) + sites


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

# fairseq 0.12.2's encoder layers registered a second copy of their weights as parameters for
# torch's fused inference path (3.15M per Transformer-base layer), filled only when a state
# dict is loaded and never trained: counted in fairseq-train's log, saved in every checkpoint,
# and left DDP waiting for their gradients (--find-unused-parameters). The fast path now reads
# the trained weights themselves (q, k and v concatenated on each call, under 1% of the
# layer's time on a CPU, on a path that runs only in eval); checkpoints that hold the copies
# load with them dropped, strict loading included.
_FASTPATH_COPY_EDITS = (
    Edit(
        "        self.ever_training = False\n"
        "        # For BT, we need continuous mem\n"
        "        self.in_proj_weight = torch.nn.Parameter(\n"
        "            torch.zeros(\n"
        "                self.self_attn.q_proj.weight.shape[0] * 3,\n"
        "                self.self_attn.q_proj.weight.shape[1],\n"
        "            )\n"
        "        )\n"
        "        self.in_proj_bias = torch.nn.Parameter(\n"
        "            torch.zeros(self.self_attn.q_proj.bias.shape[0] * 3)\n"
        "        )\n"
        "        self.out_proj_weight = torch.nn.Parameter(\n"
        "            torch.zeros(self.self_attn.out_proj.weight.shape)\n"
        "        )\n"
        "        self.out_proj_bias = torch.nn.Parameter(\n"
        "            torch.zeros(self.self_attn.out_proj.bias.shape)\n"
        "        )\n"
        "        self.fc1_weight = torch.nn.Parameter(torch.zeros(self.fc1.weight.shape))\n"
        "        self.fc1_bias = torch.nn.Parameter(torch.zeros(self.fc1.bias.shape))\n"
        "        self.fc2_weight = torch.nn.Parameter(torch.zeros(self.fc2.weight.shape))\n"
        "        self.fc2_bias = torch.nn.Parameter(torch.zeros(self.fc2.bias.shape))\n",
        "        self.ever_training = False\n"
        "        # (fairseq_define) the fast path reads the trained weights (forward): no copies\n",
    ),
    Edit(
        "        self.load_to_BT = True\n"
        "\n"
        '        old_name = prefix + "self_attn."\n'
        '        q_proj_weight = state_dict[old_name + "q_proj.weight"]\n'
        '        k_proj_weight = state_dict[old_name + "k_proj.weight"]\n'
        '        v_proj_weight = state_dict[old_name + "v_proj.weight"]\n'
        '        q_proj_bias = state_dict[old_name + "q_proj.bias"]\n'
        '        k_proj_bias = state_dict[old_name + "k_proj.bias"]\n'
        '        v_proj_bias = state_dict[old_name + "v_proj.bias"]\n'
        "\n"
        "        new_name = prefix\n"
        '        state_dict[new_name + "in_proj_weight"] = torch.cat(\n'
        "            (q_proj_weight, k_proj_weight, v_proj_weight), dim=0\n"
        "        )\n"
        '        state_dict[new_name + "in_proj_bias"] = torch.cat(\n'
        "            (q_proj_bias, k_proj_bias, v_proj_bias), dim=0\n"
        "        )\n"
        '        state_dict[new_name + "out_proj_weight"] = state_dict[\n'
        '            old_name + "out_proj.weight"\n'
        "        ]\n"
        '        state_dict[new_name + "out_proj_bias"] = state_dict[old_name + "out_proj.bias"]\n'
        '        state_dict[new_name + "fc1_weight"] = state_dict[prefix + "fc1.weight"]\n'
        '        state_dict[new_name + "fc1_bias"] = state_dict[prefix + "fc1.bias"]\n'
        '        state_dict[new_name + "fc2_weight"] = state_dict[prefix + "fc2.weight"]\n'
        '        state_dict[new_name + "fc2_bias"] = state_dict[prefix + "fc2.bias"]\n',
        "        self.load_to_BT = True\n"
        "        # (fairseq_define) checkpoints saved by fairseq 0.12.2 hold the fast path's copies\n"
        "        for name in (\n"
        '            "in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias",\n'
        '            "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias",\n'
        "        ):\n"
        "            state_dict.pop(prefix + name, None)\n",
    ),
    Edit(
        "                self.in_proj_weight,\n"
        "                self.in_proj_bias,\n"
        "                self.out_proj_weight,\n"
        "                self.out_proj_bias,\n",
        "                torch.cat(  # [3 * embed_dim, embed_dim]: q, k, v stacked\n"
        "                    (\n"
        "                        self.self_attn.q_proj.weight,\n"
        "                        self.self_attn.k_proj.weight,\n"
        "                        self.self_attn.v_proj.weight,\n"
        "                    )\n"
        "                ),\n"
        "                torch.cat(\n"
        "                    (\n"
        "                        self.self_attn.q_proj.bias,\n"
        "                        self.self_attn.k_proj.bias,\n"
        "                        self.self_attn.v_proj.bias,\n"
        "                    )\n"
        "                ),\n"
        "                self.self_attn.out_proj.weight,\n"
        "                self.self_attn.out_proj.bias,\n",
    ),
    Edit(
        "                self.fc1_weight,\n"
        "                self.fc1_bias,\n"
        "                self.fc2_weight,\n"
        "                self.fc2_bias,\n",
        "                self.fc1.weight,\n"
        "                self.fc1.bias,\n"
        "                self.fc2.weight,\n"
        "                self.fc2.bias,\n",
    ),
)


# Resuming from a checkpoint saved before the edits above: its optimizer state also covers the
# copies (Trainer._build_optimizer listed them among the parameters); their entries are cut
# out so that the state fits the parameters as they are now.
_OPTIMIZER_STATE_HELPER = """

def _without_fastpath_copies(optim_state, model, criterion):
    \"\"\"(fairseq_define) An optimizer state saved by fairseq 0.12.2 also covers the eight
    weight copies that each encoder layer registered as parameters for the inference fast
    path (the layer's own parameters, so listed before its submodules'), which are no longer
    parameters: their entries are dropped, per parameter or from a flat fp16 buffer. Any
    other state is returned unchanged.\"\"\"
    from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

    # the optimizer's parameters as fairseq 0.12.2 listed them: (parameter or None for a
    # copy, number of elements)
    old, seen = [], set()
    for m in model.modules():
        if isinstance(m, TransformerEncoderLayerBase):
            q, out = m.self_attn.q_proj, m.self_attn.out_proj
            sizes = (3 * q.weight.numel(), 3 * q.bias.numel(), out.weight.numel(), out.bias.numel(),
                     m.fc1.weight.numel(), m.fc1.bias.numel(), m.fc2.weight.numel(), m.fc2.bias.numel())
            old += [(None, n) for n in sizes]
        for p in m._parameters.values():
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                if p.requires_grad:
                    old.append((p, p.numel()))
    old += [(p, p.numel()) for p in criterion.parameters() if p.requires_grad]
    copies = sum(1 for p, _ in old if p is None)
    groups = optim_state.get("param_groups") if isinstance(optim_state, dict) else None
    if not copies or not groups or len(groups) != 1:
        return optim_state
    saved, state = groups[0]["params"], optim_state.get("state", {})
    keep = [i for i, (p, _) in enumerate(old) if p is not None]
    if len(saved) == len(old):  # one entry per parameter
        new_state = {new: state[saved[i]] for new, i in enumerate(keep) if saved[i] in state}
        new_groups = [dict(groups[0], params=list(range(len(keep))))]
    else:  # --fp16: one flat buffer, the parameters' elements in the same order
        total = sum(n for _, n in old)
        flat = state.get(saved[0], {}) if len(saved) == 1 else {}
        if not any(torch.is_tensor(v) and v.dim() == 1 and v.numel() == total for v in flat.values()):
            return optim_state
        spans, start = [], 0
        for p, n in old:
            if p is not None:
                spans.append((start, start + n))
            start += n

        def cut(v):
            if torch.is_tensor(v) and v.dim() == 1 and v.numel() == total:
                return torch.cat([v[a:b] for a, b in spans])
            return v

        new_state = {saved[0]: {k: cut(v) for k, v in flat.items()}}
        new_groups = groups
    logger.info(
        "optimizer state saved by fairseq 0.12.2: dropped the entries of the encoder "
        "layers' %d fast-path weight copies (no longer parameters)", copies
    )
    return dict(optim_state, state=new_state, param_groups=new_groups)

"""

_OPTIMIZER_STATE_EDITS = (
    Edit(
        "                )\n"
        "\n"
        "            self.optimizer.load_state_dict(last_optim_state, optimizer_overrides)\n",
        "                )\n"
        "\n"
        "            last_optim_state = _without_fastpath_copies(  # (fairseq_define)\n"
        "                last_optim_state, self.model, self.criterion\n"
        "            )\n"
        "            self.optimizer.load_state_dict(last_optim_state, optimizer_overrides)\n",
    ),
    Edit(
        "            return xla_device_to_cpu(data)\n\n\ndef _catalog_shared_params(",
        "            return xla_device_to_cpu(data)\n" + _OPTIMIZER_STATE_HELPER + "\ndef _catalog_shared_params(",
    ),
)


PATCHES: Tuple[FilePatch, ...] = (
    FilePatch(
        "fairseq",
        "fairseq/dataclass/configs.py",
        "Python 3.11: dataclass instances as field defaults",
        _default_factory_edits(
            [
                "    common: CommonConfig = CommonConfig()",
                "    common_eval: CommonEvalConfig = CommonEvalConfig()",
                "    distributed_training: DistributedTrainingConfig = DistributedTrainingConfig()",
                "    dataset: DatasetConfig = DatasetConfig()",
                "    optimization: OptimizationConfig = OptimizationConfig()",
                "    checkpoint: CheckpointConfig = CheckpointConfig()",
                "    bmuf: FairseqBMUFConfig = FairseqBMUFConfig()",
                "    generation: GenerationConfig = GenerationConfig()",
                "    eval_lm: EvalLMConfig = EvalLMConfig()",
                "    interactive: InteractiveConfig = InteractiveConfig()",
                "    ema: EMAConfig = EMAConfig()",
            ]
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/models/transformer/transformer_config.py",
        "Python 3.11: dataclass instances as field defaults",
        _default_factory_edits(
            [
                "    encoder: EncDecBaseConfig = EncDecBaseConfig()",
                "    decoder: DecoderConfig = DecoderConfig()",
            ]
        )
        + (
            Edit(
                "    quant_noise: QuantNoiseConfig = field(default=QuantNoiseConfig())",
                "    quant_noise: QuantNoiseConfig = field(default_factory=QuantNoiseConfig)",
            ),
        ),
    ),
    FilePatch(
        "hydra-core",
        "hydra/conf/__init__.py",
        "Python 3.11: dataclass instances as field defaults",
        _default_factory_edits(
            [
                "        override_dirname: OverrideDirname = OverrideDirname()",
                "    config: JobConfig = JobConfig()",
                "    run: RunDir = RunDir()",
                "    sweep: SweepDir = SweepDir()",
                "    help: HelpConf = HelpConf()",
                "    hydra_help: HydraHelpConf = HydraHelpConf()",
                "    overrides: OverridesConf = OverridesConf()",
                "    job: JobConf = JobConf()",
                "    runtime: RuntimeConf = RuntimeConf()",
            ]
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/dataclass/initialize.py",
        "Python 3.11: read defaults through default_factory",
        (
            Edit(
                "        v = FairseqConfig.__dataclass_fields__[k].default\n",
                "        fld = FairseqConfig.__dataclass_fields__[k]\n"
                "        v = fld.default_factory() if callable(fld.default_factory) else fld.default\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/checkpoint_utils.py",
        "torch >= 2.6: weights-only loading with an allow-list; clear load errors; atomic copies",
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
            # copies (checkpoint_last.pt, _best.pt) were written in place: a kill mid-copy
            # left a truncated checkpoint_last.pt that the next resume could not read. They go
            # through a fresh temporary file (never a fixed name a planted link could redirect).
            Edit(
                "                assert PathManager.copy(\n"
                "                    checkpoints[0], cp, overwrite=True\n"
                '                ), f"Failed to copy {checkpoints[0]} to {cp}"\n',
                "                if PathManager.supports_rename(cp):\n"
                "                    _copy_atomically(checkpoints[0], cp)  # never a half-written cp\n"
                "                else:\n"
                "                    assert PathManager.copy(\n"
                "                        checkpoints[0], cp, overwrite=True\n"
                '                    ), f"Failed to copy {checkpoints[0]} to {cp}"\n',
            ),
            # saves went through the fixed name FILE.tmp (a planted symlink there redirected
            # the write; a failed write left it behind) and retried torch.save on the same
            # half-written file, logging a traceback
            Edit(_PERSISTENT_SAVE_SHIPPED, _PERSISTENT_SAVE_PATCHED),
            # an unusable --save-dir: a clear error instead of a traceback
            Edit(
                "def verify_checkpoint_directory(save_dir: str) -> None:\n"
                "    if not os.path.exists(save_dir):\n"
                "        os.makedirs(save_dir, exist_ok=True)\n"
                '    temp_file_path = os.path.join(save_dir, "dummy")\n'
                "    try:\n"
                '        with open(temp_file_path, "w"):\n'
                "            pass\n"
                "    except OSError as e:\n"
                "        logger.warning(\n"
                '            "Unable to access checkpoint save directory: {}".format(save_dir)\n'
                "        )\n"
                "        raise e\n"
                "    else:\n"
                "        os.remove(temp_file_path)\n",
                "def verify_checkpoint_directory(save_dir: str) -> None:\n"
                "    import tempfile\n\n"
                "    from fairseq import UserError\n\n"
                "    if os.path.exists(save_dir) and not os.path.isdir(save_dir):\n"
                "        raise UserError(\n"
                '            "--save-dir {} is a file, not a folder: choose a folder for the "\n'
                '            "checkpoints".format(save_dir)\n'
                "        )\n"
                "    try:\n"
                "        os.makedirs(save_dir, exist_ok=True)\n"
                "        fd, probe = tempfile.mkstemp(prefix=\".write-test.\", dir=save_dir)\n"
                "        os.close(fd)\n"
                "        os.remove(probe)\n"
                "    except OSError as e:\n"
                "        raise UserError(\n"
                '            "cannot write checkpoints to --save-dir {} ({}): choose a folder you "\n'
                '            "can write to".format(save_dir, e.strerror or e)\n'
                "        ) from None\n",
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
        "fairseq/modules/transformer_layer.py",
        "torch >= 2.x: the encoder fast path needs the mask type",
        (
            Edit(
                "                encoder_padding_mask if encoder_padding_mask is not None else attn_mask,\n"
                "            )\n",
                "                encoder_padding_mask if encoder_padding_mask is not None else attn_mask,\n"
                "                1 if encoder_padding_mask is not None else 0,\n"
                "            )\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/modules/transformer_layer.py",
        "the encoder fast path reads the trained weights: no untrained copies as parameters",
        _FASTPATH_COPY_EDITS,
    ),
    FilePatch(
        "fairseq",
        "fairseq/trainer.py",
        "resuming from an optimizer state that covers the encoder layers' former copies",
        _OPTIMIZER_STATE_EDITS,
    ),
    FilePatch(
        "fairseq",
        "fairseq/models/distributed_fairseq_model.py",
        "DDP on CPU (torchrun + gloo): no device ids",
        (
            Edit(
                "            device_ids=[args.device_id],\n"
                "            output_device=args.device_id,\n"
                "            broadcast_buffers=args.broadcast_buffers,\n"
                "            bucket_cap_mb=args.bucket_cap_mb,\n",
                "            device_ids=None if device.type == \"cpu\" else [args.device_id],\n"
                "            output_device=None if device.type == \"cpu\" else args.device_id,\n"
                "            broadcast_buffers=args.broadcast_buffers,\n"
                "            bucket_cap_mb=args.bucket_cap_mb,\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/data/token_block_dataset.py",
        "numpy 2: np.compat was removed",
        (Edit("len(sizes), dtype=np.compat.long", "len(sizes), dtype=np.int64"),),
    ),
    FilePatch(
        "fairseq",
        "fairseq/data/language_pair_dataset.py",
        "numpy 2: np.compat was removed",
        (Edit("otypes=[np.compat.long]", "otypes=[np.int64]"),),
    ),
    FilePatch(
        "fairseq",
        "fairseq/data/data_utils.py",
        "numpy 2: np.int and percentile(interpolation=) were removed",
        (
            Edit(
                "(e - s if e - s >= length + min_space else 0 for s, e in parts),\n"
                "                    np.int,\n",
                "(e - s if e - s >= length + min_space else 0 for s, e in parts),\n"
                "                    np.int64,\n",
            ),
            Edit('            interpolation="lower",\n', '            method="lower",\n'),
            # token ids beyond the dictionary (a damaged .bin, or data binarized with another
            # dictionary) failed deep inside the model, after training had started
            Edit(
                "        if dataset is None:\n"
                "            break\n"
                '        logger.info("loaded {:,} examples from: {}".format(len(dataset), path_k))\n',
                "        if dataset is None:\n"
                "            break\n"
                "        if dictionary is not None and isinstance(\n"
                "            dataset, indexed_dataset.MMapIndexedDataset\n"
                "        ):  # (fairseq_define) every id must name a dictionary entry\n"
                "            ids = np.frombuffer(dataset._bin_buffer, dtype=dataset._index.dtype)\n"
                "            if ids.size and not 0 <= ids.min() <= ids.max() < len(dictionary):\n"
                "                from fairseq import UserError\n\n"
                "                raise UserError(\n"
                '                    "{}.bin holds token ids outside the dictionary\'s {} entries "\n'
                '                    "(min {}, max {}): the file is damaged or was binarized with another "\n'
                '                    "dictionary; run fairseq-preprocess again".format(\n'
                "                        path_k, len(dictionary), int(ids.min()), int(ids.max())\n"
                "                    )\n"
                "                )\n"
                '        logger.info("loaded {:,} examples from: {}".format(len(dataset), path_k))\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/data/indexed_dataset.py",
        "an empty, truncated or damaged dataset file: a clear error, not a second one in __del__",
        (
            Edit(
                "            elif magic == HuffmanMMapIndex._HDR_MAGIC[:8]:\n"
                '                return "huffman"\n'
                "            else:\n"
                "                return None\n",
                "            elif magic == HuffmanMMapIndex._HDR_MAGIC[:8]:\n"
                '                return "huffman"\n'
                "            else:\n"
                "                from fairseq import UserError\n\n"
                "                raise UserError(\n"
                '                    "{} is not an index written by fairseq-preprocess (it starts with "\n'
                '                    "{!r}): the file is damaged; run fairseq-preprocess again".format(\n'
                "                        index_file_path(path), magic\n"
                "                    )\n"
                "                )\n",
            ),
            Edit(
                "                assert self._HDR_MAGIC == magic_test, (\n"
                '                    "Index file doesn\'t match expected format. "\n'
                '                    "Make sure that --dataset-impl is configured properly."\n'
                "                )\n",
                "                if self._HDR_MAGIC != magic_test:\n"
                "                    from fairseq import UserError\n\n"
                "                    raise UserError(\n"
                '                        "{} is not an index written by fairseq-preprocess "\n'
                '                        "(--dataset-impl mmap): the file is damaged or of another "\n'
                '                        "--dataset-impl; run fairseq-preprocess again".format(path)\n'
                "                    )\n",
            ),
            Edit(
                "        def __del__(self):\n"
                "            self._bin_buffer_mmap._mmap.close()\n"
                "            del self._bin_buffer_mmap\n",
                "        def __del__(self):\n"
                "            if hasattr(self, \"_bin_buffer_mmap\"):  # not set if opening failed\n"
                "                self._bin_buffer_mmap._mmap.close()\n"
                "                del self._bin_buffer_mmap\n",
            ),
            Edit(
                "    def __del__(self):\n"
                "        self._bin_buffer_mmap._mmap.close()\n"
                "        del self._bin_buffer_mmap\n"
                "        del self._index\n",
                "    def __del__(self):\n"
                "        if hasattr(self, \"_bin_buffer_mmap\"):  # not set if opening failed\n"
                "            self._bin_buffer_mmap._mmap.close()\n"
                "            del self._bin_buffer_mmap\n"
                "        if hasattr(self, \"_index\"):\n"
                "            del self._index\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/modules/dynamic_crf_layer.py",
        "numpy 2: np.float was removed",
        (
            Edit(
                'emissions.scatter(2, targets[:, :, None], np.float("inf"))',
                'emissions.scatter(2, targets[:, :, None], float("inf"))',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/score.py",
        "sacrebleu 2: corpus_bleu takes lists of strings",
        (
            Edit(
                "print(sacrebleu.corpus_bleu(fdsys, [fdref]).format())",
                "print(\n"
                "                    sacrebleu.corpus_bleu(\n"
                '                        [line.rstrip("\\n") for line in fdsys],\n'
                '                        [[line.rstrip("\\n") for line in fdref]],\n'
                "                    ).format()\n"
                "                )",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/__init__.py",
        "bad input: fairseq.UserError, one line from the command-line tools",
        (Edit('__all__ = ["pdb"]\n', _FAIRSEQ_USER_ERROR),),
    ),
    FilePatch(
        "fairseq",
        "fairseq/models/__init__.py",
        "an unknown architecture (a plugin not loaded): a clear error, not an IndexError",
        (
            Edit(
                "    assert model is not None, (\n"
                '        f"Could not infer model type from {cfg}. "\n'
                '        "Available models: {}".format(MODEL_DATACLASS_REGISTRY.keys())\n'
                '        + f" Requested model type: {model_type}"\n'
                "    )\n",
                "    if model is None:\n"
                "        from fairseq import unknown_name_error\n\n"
                '        raise unknown_name_error("model architecture", model_type, "--arch")\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/tasks/__init__.py",
        "an unknown task (a plugin not loaded): a clear error, not a KeyError",
        (
            Edit(
                "        # legacy tasks\n        task = TASK_REGISTRY[task_name]\n",
                "        # legacy tasks\n        task = TASK_REGISTRY.get(task_name)  # None: reported below\n",
            ),
            Edit(
                "    assert (\n"
                "        task is not None\n"
                '    ), f"Could not infer task type from {cfg}. Available argparse tasks: '
                '{TASK_REGISTRY.keys()}. Available hydra tasks: {TASK_DATACLASS_REGISTRY.keys()}"\n',
                "    if task is None:\n"
                "        from fairseq import unknown_name_error\n\n"
                '        raise unknown_name_error("task", task_name, "--task")\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/options.py",
        "a plugin's --arch/--task without its --user-dir: say which --user-dir",
        (
            Edit(
                "    usr_args, _ = usr_parser.parse_known_args(input_args)\n"
                "    utils.import_user_module(usr_args)\n",
                "    usr_parser.add_argument(\"--arch\", default=None)\n"
                "    usr_parser.add_argument(\"--task\", default=None)\n"
                "    usr_args, _ = usr_parser.parse_known_args(input_args)\n"
                "    utils.import_user_module(usr_args)  # (fairseq_define) then: a plugin's name\n"
                "    # without the plugin gets an error naming the --user-dir\n"
                "    from fairseq import UserError, is_plugin_name, unknown_name_error\n"
                "    from fairseq.tasks import TASK_REGISTRY\n\n"
                "    for kind, flag, known, name in (\n"
                '        ("model architecture", "--arch", ARCH_MODEL_REGISTRY, usr_args.arch),\n'
                '        ("task", "--task", TASK_REGISTRY, usr_args.task),\n'
                "    ):\n"
                "        if is_plugin_name(name) and name not in known:\n"
                "            raise unknown_name_error(kind, name, flag)\n",
            ),
            # fairseq-validate has no default task: a KeyError on None without --task
            Edit(
                "        from fairseq.tasks import TASK_REGISTRY\n\n"
                "        TASK_REGISTRY[args.task].add_args(parser)\n",
                "        from fairseq.tasks import TASK_REGISTRY\n\n"
                "        if args.task not in TASK_REGISTRY:\n"
                "            raise unknown_name_error(\"task\", args.task, \"--task\") if args.task else UserError(\n"
                "                \"no --task: pass --task translation for a translation checkpoint, \"\n"
                "                \"--task language_modeling (or the plugin's contiguous_lm) for a language model\"\n"
                "            )\n"
                "        TASK_REGISTRY[args.task].add_args(parser)  # (fairseq_define) known\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/utils.py",
        "--user-dir that does not exist or is not a plugin: a clear error",
        (
            Edit(
                "                else:\n"
                "                    raise FileNotFoundError(module_path)\n",
                "                else:\n"
                "                    from fairseq import UserError\n\n"
                "                    raise UserError(\n"
                '                        "--user-dir {} does not exist: point it at the plugin\'s "\n'
                '                        "package folder (for fairseq-define: .../fairseq_define)".format(\n'
                "                            args.user_dir\n"
                "                        )\n"
                "                    )\n"
                "        if os.path.isdir(module_path) and not os.path.isfile(\n"
                '            os.path.join(module_path, "__init__.py")\n'
                "        ):  # (fairseq_define) it would import as an empty namespace package\n"
                "            from fairseq import UserError\n\n"
                '            inner = os.path.join(args.user_dir, "fairseq_define")\n'
                "            raise UserError(\n"
                '                "--user-dir {} is not a plugin (a Python package with an "\n'
                '                "__init__.py): {}".format(\n'
                "                    args.user_dir,\n"
                '                    "did you mean {}?".format(inner)\n'
                '                    if os.path.isfile(os.path.join(inner, "__init__.py"))\n'
                '                    else "point it at the plugin\'s package folder (for fairseq-define: "\n'
                '                    ".../fairseq_define)",\n'
                "                )\n"
                "            )\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/preprocess.py",
        "check the input files (exist, UTF-8, aligned) before anything is written",
        (
            Edit("from fairseq import options, tasks, utils\n", "from fairseq import UserError, options, tasks, utils\n"),
            Edit(
                "def main(args):\n"
                "    # setup some basic things\n"
                "    utils.import_user_module(args)\n"
                "\n"
                "    os.makedirs(args.destdir, exist_ok=True)\n",
                _PREPROCESS_CHECK_INPUTS,
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/tasks/language_modeling.py",
        "translation data given to a language model command: say so",
        (
            Edit(
                '            dictionary = Dictionary.load(os.path.join(paths[0], "dict.txt"))\n',
                '            if not os.path.exists(os.path.join(paths[0], "dict.txt")):\n'
                "                from fairseq import UserError\n\n"
                "                pairs = sorted(\n"
                "                    f for f in os.listdir(paths[0]) if f.startswith(\"dict.\") and f.endswith(\".txt\")\n"
                "                ) if os.path.isdir(paths[0]) else []\n"
                "                raise UserError(\n"
                '                    "{} has no dict.txt{}: a language model (fairseq-eval-lm, --task "\n'
                '                    "language_modeling) reads data binarized with fairseq-preprocess "\n'
                '                    "--only-source; a translation checkpoint goes with fairseq-generate".format(\n'
                "                        paths[0],\n"
                '                        " (it holds translation data: {})".format(", ".join(pairs)) if pairs else "",\n'
                "                    )\n"
                "                )\n"
                '            dictionary = Dictionary.load(os.path.join(paths[0], "dict.txt"))  # noqa\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/tasks/translation.py",
        "language-model data given to a translation command: say so",
        (
            Edit(
                "        if cfg.source_lang is None or cfg.target_lang is None:\n"
                "            raise Exception(\n"
                '                "Could not infer language pair, please provide it explicitly"\n'
                "            )\n",
                "        if cfg.source_lang is None or cfg.target_lang is None:\n"
                "            from fairseq import UserError\n\n"
                '            lm_data = os.path.exists(os.path.join(paths[0], "dict.txt"))\n'
                "            raise UserError(\n"
                '                "cannot tell the language pair of {}: {}".format(\n'
                "                    paths[0],\n"
                '                    "it holds language-model data (dict.txt); a language model "\n'
                '                    "checkpoint goes with fairseq-eval-lm"\n'
                "                    if lm_data\n"
                '                    else "pass --source-lang and --target-lang (the data comes from "\n'
                '                    "fairseq-preprocess -s SRC -t TGT)",\n'
                "                )\n"
                "            )\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/train.py",
        "no batch size: a clear error, not an AssertionError",
        (
            Edit(
                "    assert (\n"
                "        cfg.dataset.max_tokens is not None or cfg.dataset.batch_size is not None\n"
                '    ), "Must specify batch size either with --max-tokens or --batch-size"\n',
                "    if cfg.dataset.max_tokens is None and cfg.dataset.batch_size is None:\n"
                "        from fairseq import UserError\n\n"
                '        raise UserError("no batch size: pass --max-tokens N (tokens per batch) or --batch-size N")\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/validate.py",
        "no batch size: a clear error, not an AssertionError",
        (
            Edit(
                "    assert (\n"
                "        cfg.dataset.max_tokens is not None or cfg.dataset.batch_size is not None\n"
                '    ), "Must specify batch size either with --max-tokens or --batch-size"\n',
                "    if cfg.dataset.max_tokens is None and cfg.dataset.batch_size is None:\n"
                "        from fairseq import UserError\n\n"
                '        raise UserError("no batch size: pass --max-tokens N (tokens per batch) or --batch-size N")\n',
            ),
        ),
    ),
) + _config_literal_patches()


# fairseq's examples (shipped in the package as fairseq/examples, loaded with --user-dir
# .../fairseq/examples/NAME) have the same Python 3.11 dataclass defaults.
_EXAMPLE_DEFAULTS = {
    "fairseq/examples/data2vec/models/data2vec_text.py": [
        "    transformer: TransformerConfig = TransformerConfig()",
    ],
    "fairseq/examples/speech_recognition/new/infer.py": [
        "    decoding: DecodingConfig = DecodingConfig()",
        "    common: CommonConfig = CommonConfig()",
        "    common_eval: CommonEvalConfig = CommonEvalConfig()",
        "    checkpoint: CheckpointConfig = CheckpointConfig()",
        "    distributed_training: DistributedTrainingConfig = DistributedTrainingConfig()",
        "    dataset: DatasetConfig = DatasetConfig()",
    ],
    "fairseq/examples/wav2vec/unsupervised/w2vu_generate.py": ["    fairseq: FairseqConfig = FairseqConfig()"],
    "fairseq/examples/wav2vec/unsupervised/tasks/unpaired_audio_text.py": [
        "    decoding_config: DecodingConfig = DecodingConfig()",
    ],
    "fairseq/examples/wav2vec/unsupervised/models/wav2vec_u.py": [
        "    segmentation: SegmentationConfig = SegmentationConfig()",
    ],
}

_EXAMPLE_IMPORTS = {  # where ``field`` is not imported yet
    "fairseq/examples/wav2vec/unsupervised/models/wav2vec_u.py": (
        Edit("from dataclasses import dataclass\n", "from dataclasses import dataclass, field\n"),
    ),
}

PATCHES += tuple(
    FilePatch("fairseq", path, "Python 3.11: dataclass instances as field defaults (examples)",
              _EXAMPLE_IMPORTS.get(path, ()) + _default_factory_edits(lines))
    for path, lines in _EXAMPLE_DEFAULTS.items()
) + (
    FilePatch(
        "fairseq",
        "fairseq/modules/multihead_attention.py",
        "torch 2: masked_fill takes a bool mask (xFormers masks may be uint8)",
        (
            Edit(
                '        new_mask = new_mask.masked_fill_(mask, -float("inf"))\n',
                '        new_mask = new_mask.masked_fill_(mask.bool(), -float("inf"))\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/data/huffman/huffman_coder.py",
        "bitarray 3 removed util.rindex: the last set bit, found with index on the reversed bits",
        (
            Edit(
                "        remove_cnt = util.rindex(a, 1)\n",
                "        remove_cnt = len(a) - 1 - a[::-1].index(1)\n",
            ),
        ),
    ),
)


# fairseq's hub (from_pretrained with a .tar.gz) extracted every member wherever its name
# pointed (``../`` and absolute names reached site-packages, links anywhere), then replaced
# the user's archive by a folder; a missing path gave None and a TypeError later. A small
# archive could also unpack to any size, and the temporary folder stayed after the process.
_ARCHIVE_MEMBERS_HELPER = """_ARCHIVE_MAX_RATIO = 50  # unpacked bytes per archive byte (weights compress ~1.1x, text ~4x)
_ARCHIVE_MAX_MEMBERS = 100_000


def _safe_archive_members(archive, path):
    # (added by fairseq_define) only regular files and folders, each under the destination:
    # a member with an absolute name or a "..", a link, a device or a fifo is refused; so is
    # an archive that unpacks to more than _ARCHIVE_MAX_RATIO times its size
    from fairseq import UserError

    members = []
    for m in archive:
        members.append(m)
        if len(members) > _ARCHIVE_MAX_MEMBERS:
            raise UserError(
                "refusing to extract {}: it holds more than {} members; a model archive holds a "
                "checkpoint and a few data files".format(path, _ARCHIVE_MAX_MEMBERS)
            )
    unpacked, size = sum(m.size for m in members if m.isfile()), os.path.getsize(path)
    if unpacked > _ARCHIVE_MAX_RATIO * max(size, 1 << 20):
        raise UserError(
            "refusing to extract {}: its {:,} bytes unpack to {:,}, more than {} times its size "
            "(an archive bomb?); unpack it yourself and give the folder".format(path, size, unpacked, _ARCHIVE_MAX_RATIO)
        )
    for m in members:
        if m.issym() or m.islnk():
            why = "a link"
        elif not (m.isfile() or m.isdir()):
            why = "a device, fifo or other special file"
        elif os.path.isabs(m.name) or ".." in m.name.split("/"):
            why = "a path outside the folder it is extracted to"
        else:
            continue
        raise UserError(
            "refusing to extract {}: its member {!r} is {}; a model archive may hold only "
            "files and folders".format(path, m.name, why)
        )
    return members


def _archive_top_dir(members):
    # (added by fairseq_define) the one folder that holds everything, or "" (the archive root)
    names = [m.name for m in members]
    top = os.path.commonpath(names) if names else ""
    return top if any(m.isdir() and m.name == top for m in members) else ""


def load_archive_file(archive_file):
"""

PATCHES += (
    FilePatch(
        "fairseq",
        "fairseq/file_utils.py",
        "hub archives: only files and folders under the destination; the archive is kept",
        (
            Edit(
                "def load_archive_file(archive_file):\n    # redirect to the cache, if necessary\n",
                _ARCHIVE_MEMBERS_HELPER + "    # redirect to the cache, if necessary (fairseq_define: members checked)\n",
            ),
            Edit(
                "                archive_file,\n"
                "                archive_file,\n"
                "            )\n"
                "        )\n"
                "        return None\n",
                "                archive_file,\n"
                "                archive_file,\n"
                "            )\n"
                "        )\n"
                "        from fairseq import UserError  # (fairseq_define) not None: a TypeError later\n\n"
                "        raise UserError(\n"
                '            "{} does not exist: from_pretrained takes a folder that holds the checkpoint "\n'
                '            "(and the data), a .tar.gz or .tar.bz2 of one, or a URL".format(archive_file)\n'
                "        )\n",
            ),
            Edit(
                '        with tarfile.open(resolved_archive_file, "r:" + ext) as archive:\n'
                "            top_dir = os.path.commonprefix(archive.getnames())\n"
                "            archive.extractall(tempdir)\n"
                "        os.remove(resolved_archive_file)\n",
                "        try:\n"
                '            with tarfile.open(resolved_archive_file, "r:" + ext) as archive:\n'
                "                members = _safe_archive_members(archive, resolved_archive_file)\n"
                "                top_dir = _archive_top_dir(members)\n"
                '                archive.extractall(tempdir, members=members, filter="data")\n'
                "        except tarfile.TarError as e:\n"
                "            from fairseq import UserError\n\n"
                "            shutil.rmtree(tempdir, ignore_errors=True)\n"
                "            raise UserError(\n"
                '                "cannot extract {}: {} ({}); give a .tar.gz or .tar.bz2 archive, or the "\n'
                '                "folder itself".format(resolved_archive_file, e, type(e).__name__)\n'
                "            ) from None\n"
                "        except BaseException:  # refused, or interrupted: nothing half-extracted is left\n"
                "            shutil.rmtree(tempdir, ignore_errors=True)\n"
                "            raise\n"
                "        if resolved_archive_file == archive_file:  # the user's own file: kept as it is\n"
                "            import atexit\n\n"
                "            # the model and its data files are read while loading; the copy goes with the process\n"
                "            atexit.register(shutil.rmtree, tempdir, True)\n"
                "            return os.path.join(tempdir, top_dir)\n"
                "        os.remove(resolved_archive_file)\n",
            ),
        ),
    ),
)


PATCHES += (
    FilePatch(
        "fairseq",
        "fairseq/sequence_generator.py",
        "--beam 0 (or negative): one line, not a reshape RuntimeError mid-generation",
        (
            Edit(
                "        self.vocab_size = len(tgt_dict)\n        self.beam_size = beam_size\n",
                "        self.vocab_size = len(tgt_dict)\n"
                "        if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:\n"
                "            from fairseq import UserError  # (fairseq_define)\n\n"
                "            raise UserError(\"--beam {} must be at least 1 (1 is greedy search)\".format(beam_size))\n"
                "        self.beam_size = beam_size\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/interactive.py",
        "--input: a folder, a missing file or text that is not UTF-8 gives one line",
        (
            Edit(
                "    buffer = []\n"
                '    with fileinput.input(files=[input], openhook=fileinput.hook_encoded("utf-8")) as h:\n'
                "        for src_str in h:\n"
                "            buffer.append(src_str.strip())\n"
                "            if len(buffer) >= buffer_size:\n"
                "                yield buffer\n"
                "                buffer = []\n",
                "    from fairseq import UserError  # (fairseq_define) kind and encoding checked\n\n"
                "    buffer = []\n"
                '    if input != "-" and not os.path.isfile(input):\n'
                "        raise UserError(\n"
                '            "--input {} is {}: give a text file, or - for standard input".format(\n'
                '                input, "a folder" if os.path.isdir(input) else "not an existing file"\n'
                "            )\n"
                "        )\n"
                '    with fileinput.input(files=[input], openhook=fileinput.hook_encoded("utf-8")) as h:\n'
                "        try:\n"
                "            for src_str in h:\n"
                "                buffer.append(src_str.strip())\n"
                "                if len(buffer) >= buffer_size:\n"
                "                    yield buffer\n"
                "                    buffer = []\n"
                "        except UnicodeDecodeError as e:\n"
                "            raise UserError(\n"
                '                "--input {} is not UTF-8 text ({}): convert it to UTF-8 (e.g. iconv -f "\n'
                '                "latin1 -t utf-8)".format(input, e.reason)\n'
                "            ) from None\n",
            ),
        ),
    ),
)


# A binarized split is checked whole when it loads, not only its first bytes: the index's
# header against the index's length, and every sentence's offset against the sizes and the
# data file's length (a truncated or mismatched .bin read garbage or failed mid-training).
PATCHES += (
    FilePatch(
        "fairseq",
        "fairseq/data/indexed_dataset.py",
        "the whole index checked against its header and the data file's length",
        (
            Edit(
                '                version = struct.unpack("<Q", stream.read(8))\n'
                "                assert (1,) == version\n"
                "\n"
                '                (dtype_code,) = struct.unpack("<B", stream.read(1))\n'
                "                self._dtype = _code_to_dtype[dtype_code]\n"
                "                self._dtype_size = self._dtype().itemsize\n"
                "\n"
                '                self._len = struct.unpack("<Q", stream.read(8))[0]\n'
                "                offset = stream.tell()\n",
                "                header = stream.read(17)  # (fairseq_define) checked against the file\n"
                "                file_size = os.fstat(stream.fileno()).st_size\n"
                "                if len(header) == 17:\n"
                '                    version = struct.unpack("<Q", header[:8])\n'
                "                    dtype_code = header[8]\n"
                '                    self._len = struct.unpack("<Q", header[9:])[0]\n'
                "                offset = stream.tell()\n"
                "                if (\n"
                "                    len(header) < 17\n"
                "                    or version != (1,)\n"
                "                    or dtype_code not in _code_to_dtype\n"
                "                    or file_size != offset + 12 * self._len\n"
                "                ):\n"
                "                    from fairseq import UserError\n"
                "\n"
                "                    raise UserError(\n"
                '                        "{} is damaged or truncated: its {} bytes do not match its header; "\n'
                '                        "run fairseq-preprocess again".format(path, file_size)\n'
                "                    )\n"
                "                self._dtype = _code_to_dtype[dtype_code]\n"
                "                self._dtype_size = self._dtype().itemsize\n",
            ),
            Edit(
                "        self._bin_buffer_mmap = np.memmap(\n"
                '            data_file_path(self._path), mode="r", order="C"\n'
                "        )\n"
                "        self._bin_buffer = memoryview(self._bin_buffer_mmap)\n",
                "        self._bin_buffer_mmap = np.memmap(\n"
                '            data_file_path(self._path), mode="r", order="C"\n'
                "        )\n"
                "        self._bin_buffer = memoryview(self._bin_buffer_mmap)  # checked whole:\n"
                "        # (fairseq_define) each sentence starts where the one before ends, and the\n"
                "        # data file ends where the last one does\n"
                "        sizes = self._index._sizes.astype(np.int64)\n"
                "        step = self._index._dtype_size\n"
                "        starts = np.concatenate(([0], np.cumsum(sizes[:-1]) * step))[: len(sizes)]\n"
                "        end = int(starts[-1] + sizes[-1] * step) if len(sizes) else 0\n"
                "        if (\n"
                "            (sizes < 0).any()\n"
                "            or not np.array_equal(self._index._pointers, starts)\n"
                "            or end != len(self._bin_buffer)\n"
                "        ):\n"
                "            from fairseq import UserError\n"
                "\n"
                "            raise UserError(\n"
                '                "{} and {} do not match (the index describes {} bytes, the data file "\n'
                '                "holds {}): one of them is truncated or damaged; run fairseq-preprocess "\n'
                '                "again".format(\n'
                "                    index_file_path(self._path),\n"
                "                    data_file_path(self._path),\n"
                "                    end,\n"
                "                    len(self._bin_buffer),\n"
                "                )\n"
                "            )\n",
            ),
            Edit("import shutil\nimport struct\n", "import os\nimport shutil\nimport struct  # os: fairseq_define\n"),
        ),
    ),
)


def _one_patch_per_file(patches: Tuple[FilePatch, ...]) -> Tuple[FilePatch, ...]:
    """Several concerns edit the same file (fairseq/utils.py: config literals and the
    missing-plugin error; fairseq_cli/validate.py: eval and the batch-size error). A file's
    hashes cover all its edits, so they become one FilePatch, in the order listed."""
    merged: Dict[str, FilePatch] = {}
    for fp in patches:
        prev = merged.get(fp.path)
        merged[fp.path] = fp if prev is None else FilePatch(
            prev.distribution, prev.path, f"{prev.why}; {fp.why}", prev.edits + fp.edits
        )
    return tuple(merged.values())


# --model-overrides names settings by their option names; fairseq dropped a name that the
# checkpoint's stored config lacks without a word: a typo, or a model option added after the
# checkpoint was saved (whose override then did nothing). A model option the stored config
# lacks is now set; any other unknown name, or a string that is not a dict, gives one line.
_MODEL_OVERRIDES_HELPER = """

def _model_option_names(model_cfg):
    # (added by fairseq_define) the options of the model a stored config names: its
    # dataclass's fields, or what its add_args declares
    import argparse

    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY

    name = getattr(model_cfg, "_name", None) or getattr(model_cfg, "arch", None)
    cls = ARCH_MODEL_REGISTRY.get(name) or MODEL_REGISTRY.get(name)
    if cls is None:
        return set()
    dc = getattr(cls, "__dataclass", None)
    if dc is not None:
        return set(dc.__dataclass_fields__)
    parser = argparse.ArgumentParser(add_help=False, conflict_handler="resolve")
    try:
        cls.add_args(parser)
    except Exception:  # a model whose add_args needs more than a parser: its stored keys only
        return set()
    return {a.dest for a in parser._actions}


def _config_keys(cfg):
    # the names in a config's groups; a group kept as a Namespace (a model without a
    # dataclass) took every override as an attribute, so its names come from its model
    known = set()
    nodes = [cfg]
    while nodes:
        node = nodes.pop()
        for key in node.keys():
            known.add(key)
            if key in node and isinstance(node[key], DictConfig):
                nodes.append(node[key])
    return known


def _set_missing_model_options(cfg, overrides):
    # (added by fairseq_define) an override of a model option that the stored config lacks
    # (saved before the option existed): set it, where fairseq dropped it
    model_cfg = cfg.get("model", None) if isinstance(cfg, DictConfig) else None
    if not isinstance(model_cfg, DictConfig):
        return
    missing = [k for k in overrides if k not in model_cfg]
    options = _model_option_names(model_cfg) if missing else set()
    with open_dict(model_cfg):
        for key in missing:
            if key in options:
                model_cfg[key] = overrides[key]


def check_model_overrides(overrides, cfg):
    \"\"\"(added by fairseq_define) Refuse --model-overrides names that are no setting of the
    loaded checkpoint's config (model, task, generation, ...), nor an option of its model.\"\"\"
    import difflib

    if not overrides or not isinstance(cfg, DictConfig):
        return
    known = _config_keys(cfg)
    model_cfg = cfg.get("model", None)
    if model_cfg is not None:
        known |= _model_option_names(model_cfg)
    unknown = [k for k in overrides if k not in known]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(str(key), sorted(map(str, known)), n=1)
            hints.append("{!r}{}".format(key, " (did you mean {!r}?)".format(close[0]) if close else ""))
        raise UserError(
            "--model-overrides: {} {} not a setting of this checkpoint's model, task or other "
            "config: use the option's name without -- and with _ for -, e.g. \\"{{'dropout': 0.0}}\\"".format(
                ", ".join(hints), "is" if len(unknown) == 1 else "are"
            )
        )

"""

_CHECK_OVERRIDES_CALL = (
    "    from fairseq.checkpoint_utils import check_model_overrides  # (fairseq_define)\n\n"
    "    check_model_overrides({}, {})\n"
)

PATCHES += (
    FilePatch(
        "fairseq",
        "fairseq/checkpoint_utils.py",
        "--model-overrides: a model option the stored config lacks is set, an unknown name refused",
        (
            Edit(
                '            overwrite_args_by_name(state["cfg"], arg_overrides)\n\n'
                "    state = _upgrade_state_dict(state)\n"
                "    return state\n\n\n",
                '            overwrite_args_by_name(state["cfg"], arg_overrides)\n'
                '            _set_missing_model_options(state["cfg"], arg_overrides)\n\n'
                "    try:  # (fairseq_define) a dict with a 'model' entry but not the rest: KeyError\n"
                "        state = _upgrade_state_dict(state)\n"
                "    except (KeyError, IndexError, TypeError, AttributeError) as e:\n"
                "        raise CheckpointLoadError(\n"
                '            "{} is not a complete fairseq checkpoint ({}: {}): give a checkpoint written by "\n'
                '            "fairseq-train (checkpoint_best.pt, checkpointN.pt)".format(path, type(e).__name__, e)\n'
                "        ) from None\n"
                "    return state\n" + _MODEL_OVERRIDES_HELPER + "\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/generate.py",
        "--model-overrides parsed as plain data (one line for a malformed string) and checked by name",
        (
            Edit("    overrides = ast.literal_eval(cfg.common_eval.model_overrides)\n",
                 "    overrides = utils.parse_config_literal(cfg.common_eval.model_overrides)\n"),
            Edit(
                "        num_shards=cfg.checkpoint.checkpoint_shard_count,\n"
                "    )\n"
                "\n"
                "    # loading the dataset should happen after",
                "        num_shards=cfg.checkpoint.checkpoint_shard_count,\n"
                "    )\n"
                + _CHECK_OVERRIDES_CALL.format("overrides", "saved_cfg")
                + "\n"
                "    # loading the dataset should happen after",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/interactive.py",
        "--model-overrides parsed as plain data (one line for a malformed string) and checked by name",
        (
            Edit("    overrides = ast.literal_eval(cfg.common_eval.model_overrides)\n",
                 "    overrides = utils.parse_config_literal(cfg.common_eval.model_overrides)\n"),
            Edit(
                "        num_shards=cfg.checkpoint.checkpoint_shard_count,\n"
                "    )\n"
                "\n"
                "    # Set dictionaries\n",
                "        num_shards=cfg.checkpoint.checkpoint_shard_count,\n"
                "    )\n"
                + _CHECK_OVERRIDES_CALL.format("overrides", "_model_args")
                + "\n"
                "    # Set dictionaries\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/eval_lm.py",
        "--model-overrides checked by name",
        (
            Edit(
                "    models, model_args, task = checkpoint_utils.load_model_ensemble_and_task(\n"
                "        [cfg.common_eval.path],\n"
                "        arg_overrides=eval(cfg.common_eval.model_overrides),\n",
                "    overrides = eval(cfg.common_eval.model_overrides)\n"
                "    models, model_args, task = checkpoint_utils.load_model_ensemble_and_task(\n"
                "        [cfg.common_eval.path],\n"
                "        arg_overrides=overrides,\n",
            ),
            Edit(
                "        task=task,\n"
                "    )\n"
                "\n"
                "    use_fp16 = cfg.common.fp16\n",
                "        task=task,\n"
                "    )\n"
                + _CHECK_OVERRIDES_CALL.format("overrides", "model_args")
                + "\n"
                "    use_fp16 = cfg.common.fp16\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/validate.py",
        "--model-overrides checked by name",
        (
            Edit(
                "        overrides = vars(override_args)\n"
                '        overrides.update(eval(getattr(override_args, "model_overrides", "{}")))\n'
                "    else:\n"
                "        overrides = None\n",
                "        overrides = vars(override_args)\n"
                '        user_overrides = eval(getattr(override_args, "model_overrides", "{}"))\n'
                "        overrides.update(user_overrides)\n"
                "    else:\n"
                "        overrides = user_overrides = None\n",
            ),
            Edit(
                "        suffix=cfg.checkpoint.checkpoint_suffix,\n"
                "    )\n"
                "    model = models[0]\n",
                "        suffix=cfg.checkpoint.checkpoint_suffix,\n"
                "    )\n"
                + _CHECK_OVERRIDES_CALL.format("user_overrides", "saved_cfg")
                + "    model = models[0]\n",
            ),
        ),
    ),
)


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

PATCHES += (
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


PATCHES = _one_patch_per_file(PATCHES)


# (shipped, patched) SHA-256 of each file. After changing an edit above, regenerate with
# ``python -m fairseq_define_patch --print-hashes`` and review the diff.
SHA256: Dict[str, Tuple[str, str]] = {
    "fairseq/dataclass/configs.py": (
        "3bad79013565db4477ed859ce9778397588c9efaeb7eaaecee1911cc7409dde2",
        "9215fade9365eb5b86d669bd2dce0be950a00fd5d2870c6da1e7f38ab253e788",
    ),
    "fairseq/models/transformer/transformer_config.py": (
        "2a8c6eab00c3ac2d03896970ef13c68bf5b0ce454d756dfa04f7211b22fcb0be",
        "c61dba2f0d04c1b76a37e5d326d8e85fc090667808fed9adc5c0c20d94b385a7",
    ),
    "hydra/conf/__init__.py": (
        "ebb83d718384db8e54bdae9b300e3c3fba6ee0b9462922939c5b7290b7af8907",
        "d78d053b135dd9d96cf7c9b6a13eeadfab034cc6acb492f8cff8b5fa34127b2e",
    ),
    "fairseq/dataclass/initialize.py": (
        "35bb8e50614902ad385e467fba4e251c7c5203fbd34398c1974a416c4ddc72d8",
        "703e8407c3e0df98c734239ecc396518c737f72129c6309b03ab8f980e2bbe6c",
    ),
    "fairseq/checkpoint_utils.py": (
        "fdfbefe5ef9016b1b40e196110e1a87d743cf3a73952711729b6677ea9b58a71",
        "4eae81a7aba1d12aaa128e82c06e92e8e3a60e002853829f897ca0ae8100fde2",
    ),
    "fairseq/distributed/utils.py": (
        "f01e07f7f12c5e81c9b6ea1735e6b1dc45e43ed6e30fac5dc3844af3cd0d6205",
        "a18c3593aecad5907d61eee741b99981afaf32bc36d29ebe45c8bc79046eb827",
    ),
    "fairseq/modules/transformer_layer.py": (
        "593fb4d67ce8843932b4a6ad667403e4904ac77065144186bfb3526c91db0a4d",
        "9d758e673c8dec3f9035b67f2d5e9bd023a9e612b2ea2e5046be0daa0a19f545",
    ),
    "fairseq/trainer.py": (
        "50424d39b8022d15b3454a5b0c7c0e6238ca5ce601ed9acfff029f6746038410",
        "667ee4c528ece77d2f60b996a2735ffad9a7cea5a94eadc52aac16c65dfef4d0",
    ),
    "fairseq/models/distributed_fairseq_model.py": (
        "f2afe1a8de94b95e3451249555e2a40e164d36cafa6bb40b2e1d37c12555ec6e",
        "e79df53c21490e684524ca9ee2a017224d2370e4b1f1c0f3d97386e310d50b5a",
    ),
    "fairseq/data/token_block_dataset.py": (
        "023518dd01e906623ed8d78677ef3b33693d86c5aa22d453a19c096a48cb6a53",
        "a96923cf97527de067f38b1750b4b536c0a5883c974e6caee9ff6c77edd3693b",
    ),
    "fairseq/data/language_pair_dataset.py": (
        "f3c660f952d5d924fb3c8ce4bcf02857f9b0cab1658ea35fe6bd510e12a710b2",
        "0452d3f4d6d3aed5b33bdb94f049c2a7d2b9db0540dd77173dca1c4430a04ff9",
    ),
    "fairseq/data/data_utils.py": (
        "3cff49d5372bba36cd3c7b5ab88bdd99b0172f4790e417022b572aa8695f92b8",
        "bfe0f132dac426103afd9128709fc08f6077ad78715fc77e89b94f14d7e92acd",
    ),
    "fairseq/data/indexed_dataset.py": (
        "82e2ad6a66978e00c07018efe3e56b556f0a11cefcb7d97ff72c4476ece108bc",
        "a6206de271b9d9ad05fbe79febe0e1a5b3ff50cfcfc15c2bc051d85d9fb95024",
    ),
    "fairseq/modules/dynamic_crf_layer.py": (
        "024870d3b488187925e92e664c19052490cbc67171b6bd7ba871483aeee71536",
        "683aecffafc4d6ba11242819be34cbd234e2ef25459c86b8f89fbf9a99bd1c18",
    ),
    "fairseq_cli/score.py": (
        "6db73958873e1d6d1d5a4b60cd6e04412e2cc151521e685046b16f212bbea741",
        "0081cde90e7ea6709749ad8b38b521b6ac3b018da27fa9d2dbcea0fe5c7db0b4",
    ),
    "fairseq/__init__.py": (
        "f542e0f2565e6701a3881a3d24ba277b5c07ba5b2451691c84ad5e8c4da01e04",
        "5b83a6d3a53fdacc5c4d3ae5a8ee18330a4705b6fad0feebd3a863d049859f1d",
    ),
    "fairseq/models/__init__.py": (
        "73c49eedbd9ed4f0938bd5b86ecbca395eda56001d6a8b35a895cde5e8f073cf",
        "cfa9aad778cd747165dd93bfc4eab8f65134dbbb598d6050ca15110dfdfbf2cc",
    ),
    "fairseq/tasks/__init__.py": (
        "91f1c169e6d2468fce34f032a12b341fa4f300ecc59030a50c03403177399348",
        "ba61361785300d84315efe2c687f27dadcfcd630aa147583ea08ec2cec827c77",
    ),
    "fairseq/options.py": (
        "9dab74785d9ec996b670bcaeda8b647766b5db8e3757a17b76bb757a9159df39",
        "c29cbefc32f6f151f1189c4cc9dd505cfc6b44582482876a131c31454ee471e1",
    ),
    "fairseq/utils.py": (
        "43f3ad422fe10996e66c0bb80d8269b9cab0c810f10256143fd8d4979fff663b",
        "ed1f036ef37e5a0046055f2a8f4d1e35f288e3893856748b51326e8555d556a6",
    ),
    "fairseq_cli/preprocess.py": (
        "989aa8fb0d2d426294e09cb43b33efb48607d49751cbb4e8296acad35e5b0c4a",
        "7ce704a523083ddb7e2d71318205220e80ff684a94d6110ff415ae27529c0583",
    ),
    "fairseq/tasks/language_modeling.py": (
        "0abd24777c8224f72b9149e7d0da81f6aa4629b6c6a0d366ac9b9f8ea229f86a",
        "89a026caae8dc48eb9225649a79579f899deb43669d260f7825aa4c882edd7c8",
    ),
    "fairseq/tasks/translation.py": (
        "be1b575d8f33371e1e7ab3dab6ec345cb46db749273f977fe4bb75176249b43d",
        "be9d97517d9d9d9dedd25425160e79c1f5dcfc5ac30af197717f21e67241d2b1",
    ),
    "fairseq_cli/train.py": (
        "a86d6470a265025807fb77f3f712c45cc151b33da5688367a45163c8b835ba7a",
        "ea6e7ec94cc087adfbb6625fb64b8ec4117338c3adee17d3b794b1ef0de9d70a",
    ),
    "fairseq_cli/validate.py": (
        "107e323ac622180fc04607049d6c98e4995e67dc85047bb8bb9324a8ce7f1fc8",
        "26f81fde729c6905b0c84f1cb23bf8914bd64663395e101bcff46cd3178bf480",
    ),
    "fairseq/optim/adam.py": (
        "42496814f276444dfcb534d7ebdf2b0c6098543a70bdfcee898b28cfc4678c90",
        "f32cdc91a4f71e446c59ea7984fd1f2f7bc245fddc84f7b31f2f45917d11537e",
    ),
    "fairseq/optim/cpu_adam.py": (
        "e531d0c18bd09f83cb57f0ea588bc1b4dc076186b082ac6ace4d9478bc0788aa",
        "2e7f4938526153e9788af4b786c9dc69c662bb1ada992b9eba11db1c6389fc03",
    ),
    "fairseq/optim/adamax.py": (
        "80ba89321adc25182a84fc1b3a400636ac20615fca3042b48056a52637f568f5",
        "4d7587e6d718becdfca593d9836fea23443f222bb6c42085b969f7d750e1d692",
    ),
    "fairseq/optim/adafactor.py": (
        "d9afe0094f757782082dc69ce8c93c1e053beb0266101d4de0e61837d8e69b55",
        "59348a8e19f2ed11357051cc90dc6c7b1dffd9b98897ba16720e423fa5084e78",
    ),
    "fairseq/optim/fused_lamb.py": (
        "abd3267516b3fba406218fe578d1f39f9e528e4ca4a1c78ab78313f4025a313e",
        "5183e841f11d13c281873fd3c1de4c6ad17b31f243716870b9224f375b1f4d81",
    ),
    "fairseq/criterions/ctc.py": (
        "8fce1814132d5fb02e416ed56e60a8f44fcc2f0e869b51eb6a2f4bdf7615c050",
        "4a0162d1c90b1a3a76ab41f5e68cd751c3194a617f870eb01cd2c7b5be8df966",
    ),
    "fairseq/models/lightconv_lm.py": (
        "abd4dccda69a568790cf9fe6609e91fde573cff8f9edd4f8a08743f4d69bf04f",
        "ffca653c6ac6f452b19b746f477fb4d4b02d1f8ce6ef8c12b793c0aee54df493",
    ),
    "fairseq/models/hubert/hubert.py": (
        "69e2cec392646e2f8af3647ea7d322ab7b264b695ed32ad23a3d15c57f4927c2",
        "dc34efbfd44cd226409df72831c15c83aa1040d9033fe664f040852673b48cf3",
    ),
    "fairseq/models/transformer_lm.py": (
        "21f2a6296174004c1f5898dd331fa9ecfd522f4f21fa0a45171b2a9a3b258b22",
        "68e8da037d11f87e7f900babdd0ca4c546964842508e1218fd105ee0b0f2c69e",
    ),
    "fairseq/models/fconv_lm.py": (
        "9074aac0e2b908a001d1526b9eb2de168afb1eada5778578169f3e65cb948777",
        "608292b7b8d8797593f82b1b15a07b273c4100111518250a86627a7dd6e6b25d",
    ),
    "fairseq/models/fconv.py": (
        "432597def375aad222b2ba9dcdb5b51b0a46b992e90f8a8e1641b091c8d3eb80",
        "b4cdeb1601d82b88ed65ed0b9481a73e4d84f04d5e9cac8369396fc025a1afff",
    ),
    "fairseq/models/fconv_self_att.py": (
        "83463739f7ba798d73098c7b17a2c6ea13b6fdf8f3083ba577cbca21864d7a36",
        "fe28139d61b28833592088c0179b9dedb55194f6a9182ce0fc0491d75a1afbff",
    ),
    "fairseq/models/wav2vec/wav2vec2.py": (
        "a97951fc1c48fd02f8ed2eb32b7215bfcce14b8f82a31e59382c06f12505b959",
        "da7117c81429fc24cb3dd0f08eca55b55e2b4811fbf62cef33a9d40c9fcfd290",
    ),
    "fairseq/models/wav2vec/wav2vec.py": (
        "d8f8b654ced06cfe871469b27cc722e71a0be4a2b727f6f466ecf9ff823406f4",
        "88d1d81680bdce86bf963fd32f3ec4ec6767fe0b98f2dc5bec25977b9e08ffdf",
    ),
    "fairseq/models/speech_to_text/s2t_wav_transformer.py": (
        "7f9efa809c420611b8caff9d5ca246126e5590f0c974c3e20b601a9662b3a6e7",
        "92224455760e5a8bf635c2be18f62623f97d6262b6adaa7b75c32d0ec38f9dc6",
    ),
    "fairseq/data/audio/raw_audio_dataset.py": (
        "f6ba8f5c51f3afe559d4537269d01b01c3eb621bc42aec37d8a969e017cb669b",
        "4ed666af01d6ab9de27c67f2fd2f2cfc0253b3652493bc825f3599387cd09f97",
    ),
    "fairseq/data/codedataset.py": (
        "c79ca7db7a9eb8326d6bee08373b9e0a85ee3ee9ab1bd0320bd6b392ed2df74e",
        "bd4fa30bba1cfbd15b2c461e08e8d25589f76106870a4f3174886a22982157ec",
    ),
    "fairseq_cli/eval_lm.py": (
        "e7bbe5275c40905ec5b9a442f76bf991795eddebc2fdb205961d5e906ce55377",
        "8ef13a530861ebb20369476c6692ce04b86373f045f7338b69cba83eae1cd309",
    ),
    "fairseq/examples/data2vec/models/data2vec_audio.py": (
        "ea2fff64a7d77888e2c1ebe229f9d040dc229935dfa68dafa979f9f8963bb17d",
        "bb797ffc55934083797ec8449790cacc56f408bea3cd21bad749f04a1fa34801",
    ),
    "fairseq/examples/speech_recognition/models/w2l_conv_glu_enc.py": (
        "7a44090a3a9512f4a319d4ecf9348c3a104c634a48d4be95f2c292f20418caae",
        "a42b702096cdd59c9590dc3217c5bb182adadd36336b06f164d19f498e6d008d",
    ),
    "fairseq/examples/speech_recognition/models/vggtransformer.py": (
        "2c748f4892f427eb073f09555f57f56dd10da0356c4a0f42663e5ef51b859b94",
        "f72816fe7b850a06d2f7a4a625c9088b1b21389aa597e6d3be428580e09bf8e8",
    ),
    "fairseq/examples/criss/save_encoder.py": (
        "3131ca22bff94824c1da448d9d6b53a7d4fee774758c50bb52ce0f6f499c3fa6",
        "14af6e695b50663c4794b1d7022a2e25a65b5db6173e8bc53aec571fd37bae06",
    ),
    "fairseq/examples/discriminative_reranking_nmt/drnmt_rerank.py": (
        "722289d068c1d21d391d7fab604c2d5828f85403e8eaf8ad61a18fc0006c192c",
        "abdb52428a8ba8997e2f5ee6a387fb911a2396de47f791b3e17532578d68ae4d",
    ),
    "fairseq/examples/textless_nlp/pgslm/data_utils.py": (
        "e6f6b95380be8e96b45d026eb6f4a24f380b8da7d35d91607e583cdfca044ec9",
        "cead50a1fe7e2174ea400dba0671aea6b55568f07c35a8ec97d3fb2613388a40",
    ),
    "fairseq/examples/textless_nlp/pgslm/quantize_f0.py": (
        "1231c9f882fc5bd1ad8c3cb4b62efa55aa7adc3bb73094ed8bf2bb23548ced99",
        "aa4b677798c35b9053a5920a8dc39454f438af04f3d07b7a4b0ac2e532261216",
    ),
    "fairseq/examples/textless_nlp/pgslm/sample/sample.py": (
        "c5a1f8c807e521e18e48d742c5a33b0279b702ad9be36738f99608bb1ae53a92",
        "1632cdb32e61d00bb2188de9af2b61e0b4619e7f8f98e014c573f637a1dd4fd1",
    ),
    "fairseq/examples/data2vec/models/data2vec_text.py": (
        "8c8faac6067e09756dbd6786b6742e22fb2615d4d7da8ee672f1496e3ff80980",
        "27688c5d92d97ecb26f2f1c20e3bed1d7ebe13e5977cb14e2f5e171411a4e462",
    ),
    "fairseq/examples/speech_recognition/new/infer.py": (
        "1880e1911e2f7c4c55b5c8328da854e416f8ba6f582e56d22e217acdf903ef41",
        "4646ef0726ce9e9343b4ea0ac570c673ba4be720b307fc6a3105727619f29b9d",
    ),
    "fairseq/examples/wav2vec/unsupervised/w2vu_generate.py": (
        "ac2d32fb2a325186b2f9f69612bbe525a94f8c3a0a17777e2e8704efc0a49863",
        "71d0c6db730c992e21cdabf96092eced91e9f588c0664a44514d835debc1d4e8",
    ),
    "fairseq/examples/wav2vec/unsupervised/tasks/unpaired_audio_text.py": (
        "457f636ad85d3b5c0979f6b8d7bddfbb4bf0b6ae502a09cbc781f746cba5524f",
        "d67377635ba0bfc1d65727d25aeecf0345b366587e8f5d58db1ae190cead4b0d",
    ),
    "fairseq/examples/wav2vec/unsupervised/models/wav2vec_u.py": (
        "abb7a4d0c0927c7cc002fcfbc448bd435dc6e2d4d6ad43b1b90335e60ceecfcf",
        "4528e4d25224e4c577903ed4ce8a108af900d915612378212a3d8abdb00945f6",
    ),
    "fairseq/modules/multihead_attention.py": (
        "80151fab89e2f78940aca9663d51f38f1f26c15037b12734a4839d8a99e7d8a1",
        "973def1d54af2c275ce862aa81c3dcd0475f84ff9a10bd3a2f53b92edccf9583",
    ),
    "fairseq/data/huffman/huffman_coder.py": (
        "e2ef64b75aece5f448b34f8bfd80bcfb83d2c1793a2ff5dcc6256bfaa427d61a",
        "003b50f94a81f89ff177f06a72c183a784b21eeab2c6699bfdfafca1cde9918d",
    ),
    "fairseq/file_utils.py": (
        "8a82153ba8d8d5d8e01855e1d8a1f772ed8145e9f347a78085ca3f4495e61dcb",
        "77e575c2274427f5e245316b41bb9f0310750ea839a8e4f4ba713f602004e2fd",
    ),
    "fairseq/sequence_generator.py": (
        "f1f6827af1e0a54f28fde70b045cb0bcc60f46d496fca057516fffa789c89cf2",
        "ca0eff3e02ea90ca4bd76af452c84a408c0deb5d068b30769a2fb630763e1ffb",
    ),
    "fairseq_cli/interactive.py": (
        "3dc2efaa654c256fd5c0110c991869b131e4ec44edeb9bff4eb6dd4dbf1b0060",
        "e627a67e5a7d65841dbcad3a4d5957f634ef9bdab5609985900c41cf902fcd78",
    ),
    "fairseq_cli/generate.py": (
        "946db64eb1305557a49e2f3ac11ab28fd9ff857bfb16909675dce238ef81c2e7",
        "5157622f097b1b8621b9ded8d2eaf4b4e77c9160dfb81d1b63736904765b6160",
    ),
}


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def apply_edits(text: str, edits: Sequence[Edit], reverse: bool = False) -> str:
    """Replace each edit's old text by its new text (or back, with ``reverse``). Each side
    must occur exactly once, and never inside the other side, so that applying or reverting
    can only succeed on the text it was written for."""
    for edit in edits:
        old, new = (edit.new, edit.old) if reverse else (edit.old, edit.new)
        if text.count(old) != 1:
            raise FairseqPatchError(
                f"expected exactly one occurrence of {old[:60]!r}, found {text.count(old)}"
            )
        text = text.replace(old, new)
    return text


def site_root(distribution: str) -> Path:
    """Directory holding the distribution's packages, found without importing them
    (``import fairseq`` itself fails before the patch)."""
    top = {"fairseq": "fairseq", "hydra-core": "hydra"}[distribution]
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise FairseqPatchError(
            f"{distribution} is not installed in this Python ({sys.executable}); "
            f"install it with: pip install {distribution}=={SUPPORTED_VERSIONS[distribution]}"
        )
    return Path(list(spec.submodule_search_locations)[0]).parent


@dataclass
class FileStatus:
    patch: FilePatch
    path: Path
    state: str  # "patched" | "original" | "unknown" | "missing"


def file_status(patch: FilePatch, root: Optional[Path] = None) -> FileStatus:
    path = (root or site_root(patch.distribution)) / patch.path
    if not path.is_file():
        return FileStatus(patch, path, "missing")
    digest = _sha256(path.read_text(encoding="utf-8"))
    if digest == patch.patched_sha256:
        state = "patched"
    elif digest == patch.original_sha256:
        state = "original"
    else:
        state = "unknown"
    return FileStatus(patch, path, state)


def check_versions() -> None:
    for dist, want in SUPPORTED_VERSIONS.items():
        try:
            have = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            raise FairseqPatchError(
                f"{dist} is not installed; install it with: pip install {dist}=={want}"
            ) from None
        if have != want:
            raise FairseqPatchError(
                f"{dist} {have} is installed, but this patch knows only {dist} {want}; "
                f"install that version (pip install {dist}=={want}) and run {APPLY_COMMAND}"
            )


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def statuses(roots: Optional[Dict[str, Path]] = None) -> List[FileStatus]:
    return [file_status(p, (roots or {}).get(p.distribution)) for p in PATCHES]


def _refuse_unknown(found: List[FileStatus]) -> None:
    bad = [s for s in found if s.state in ("unknown", "missing")]
    if bad:
        lines = "\n".join(f"  {s.path}: {s.state} content" for s in bad)
        raise FairseqPatchError(
            "refusing to patch: these files are neither the fairseq 0.12.2 / hydra-core "
            f"1.0.7 originals nor the patched versions:\n{lines}\n"
            "Reinstall them (pip install --force-reinstall --no-deps fairseq==0.12.2 "
            f"hydra-core==1.0.7) and run {APPLY_COMMAND} again."
        )


def apply(roots: Optional[Dict[str, Path]] = None, reverse: bool = False) -> List[FileStatus]:
    """Patch (or with ``reverse``, restore) every file; all-or-nothing on recognition."""
    found = statuses(roots)
    _refuse_unknown(found)  # check every file before writing any
    target = "original" if reverse else "patched"
    for st in found:
        if st.state == target:
            continue
        text = st.path.read_text(encoding="utf-8")
        new_text = apply_edits(text, st.patch.edits, reverse=reverse)
        want = st.patch.original_sha256 if reverse else st.patch.patched_sha256
        if _sha256(new_text) != want:  # the edit table and the hashes disagree: a bug here
            raise FairseqPatchError(f"{st.path}: edited text does not match the expected hash")
        _write_atomically(st.path, new_text)
        logger.info("%s %s (%s)", "restored" if reverse else "patched", st.path, st.patch.why)
    return statuses(roots)


def is_patched() -> bool:
    try:
        return all(s.state == "patched" for s in statuses())
    except FairseqPatchError:
        return False


def require_patched_fairseq() -> None:
    """Raise one clear ImportError when fairseq is not (yet) usable on this stack."""
    try:
        check_versions()
        found = statuses()
    except FairseqPatchError as e:
        raise ImportError(f"fairseq_define: {e}") from None
    not_patched = [s for s in found if s.state != "patched"]
    if not_patched:
        names = ", ".join(s.patch.path for s in not_patched)
        raise ImportError(
            "fairseq_define: the installed fairseq 0.12.2 is not patched for Python 3.11 / "
            f"torch >= 2.6 / numpy 2 ({names}). Run `{APPLY_COMMAND}` "
            "(or `python -m fairseq_define_patch --apply`) in this environment."
        )


def _print_hashes() -> None:
    """Maintainers: the SHA256 table for the edits as they are now, read from the shipped
    files or from files patched with the same edit table."""
    for p in PATCHES:
        text = (site_root(p.distribution) / p.path).read_text(encoding="utf-8")
        results = []
        for reverse in (False, True):
            try:
                results.append((reverse, apply_edits(text, p.edits, reverse=reverse)))
            except FairseqPatchError:
                pass
        if len(results) != 1:
            raise FairseqPatchError(f"{p.path}: cannot tell shipped from patched text; fix the edits")
        if results[0][0]:
            text = results[0][1]  # the file was patched: the shipped text is the reverted one
        sys.stdout.write(
            f'    "{p.path}": (\n        "{_sha256(text)}",\n'
            f'        "{_sha256(apply_edits(text, p.edits))}",\n    ),\n'
        )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fairseq-define-patch-fairseq",
        description="Patch the installed fairseq 0.12.2 and hydra-core 1.0.7 so that "
        "fairseq works on Python 3.11, torch >= 2.6 and numpy 2.",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="report; exit 1 unless patched")
    mode.add_argument("--apply", action="store_true", help="patch (no-op if already done)")
    mode.add_argument("--revert", action="store_true", help="restore the shipped files")
    mode.add_argument("--print-hashes", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.print_hashes:
        _print_hashes()
        return 0
    try:
        check_versions()
        if args.check:
            found = statuses()
        else:
            found = apply(reverse=args.revert)
    except FairseqPatchError as e:
        logger.error("error: %s", e)
        return 2
    for st in found:
        logger.info("%-9s %s", st.state, st.path)
    if args.check and any(s.state != "patched" for s in found):
        logger.error("fairseq is not patched: run %s", APPLY_COMMAND)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
