"""Make stock fairseq 0.12.2 work on Python 3.11, torch >= 2.6 and numpy 2.

fairseq 0.12.2 is the last fairseq release and cannot be imported on Python 3.11; its
checkpoints do not load on torch >= 2.6 and several data paths call numpy functions that
numpy 2 removed (``../shared/notes/fairseq-0.12.2-on-python-3.11.md`` lists each failure).
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


class CheckpointLoadError(RuntimeError):
    """A checkpoint that cannot be loaded: unsafe, corrupt or truncated."""


def safe_torch_load(f, map_location=None, extra_globals=()):
    """torch.load with the weights-only unpickler and fairseq's allow-list.

    A checkpoint that needs any other class is refused instead of executed; for an old
    checkpoint you trust, see fairseq_define's README ("Loading checkpoints safely")."""
    name = f if isinstance(f, str) else getattr(f, "name", "the checkpoint")
    try:
        with torch.serialization.safe_globals(_fairseq_checkpoint_safe_globals() + list(extra_globals)):
            return torch.load(f, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        # a class or function outside the allow-list: what a crafted checkpoint needs
        reason = [l.strip() for l in str(e).splitlines() if "GLOBAL" in l]
        if reason:
            raise CheckpointLoadError(
                f"refusing to load {name}: it holds objects outside fairseq's allow-list of "
                f"checkpoint classes, and unpickling them could run code ({reason[0]}). If "
                f"you trust this file, convert it once with: "
                f"fairseq-define-trust-checkpoint {name} NEW.pt"
            ) from None
        error = e
    except FileNotFoundError:
        raise CheckpointLoadError(
            f"no such checkpoint: {name}; check --path / --restore-file and --save-dir"
        ) from None
    except (RuntimeError, EOFError, ValueError, OSError) as e:
        error = e
    lines = [l.strip() for l in str(error).splitlines() if l.strip()] or [type(error).__name__]
    detail = next((l for l in lines if "Unpickler error" in l), lines[0])
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
)


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
        "acba99dc46e435287d97817238ffca4888332168c0107348af0d30a7e655475c",
    ),
    "fairseq/distributed/utils.py": (
        "f01e07f7f12c5e81c9b6ea1735e6b1dc45e43ed6e30fac5dc3844af3cd0d6205",
        "a18c3593aecad5907d61eee741b99981afaf32bc36d29ebe45c8bc79046eb827",
    ),
    "fairseq/modules/transformer_layer.py": (
        "593fb4d67ce8843932b4a6ad667403e4904ac77065144186bfb3526c91db0a4d",
        "6987fe19435135fd6673aaf9ab187f2262dbe7134107de25111e6c2090086afe",
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
        "ac0d629d6679ce93870d3e8c1f27b7b955b8f36bd96e0cefccc6590f06e4ddfc",
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
        "f3dce54edc964881e18f8d485c080fe4fd9ec7d785b2be80653a749f752395ef",
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
        "65421329eea23a5a85faf1986b512bc5ca0872909929057c3bfc11368febb445",
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
        "b64f6de16dd283ae934f68065d246eb05a89d962604ab418248990db13e80784",
    ),
    "fairseq_cli/validate.py": (
        "107e323ac622180fc04607049d6c98e4995e67dc85047bb8bb9324a8ce7f1fc8",
        "a97ed30c4973eacc7e7471ecfa66ca0a66ea5a8487c9f1b89868d61c6f4640c7",
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
