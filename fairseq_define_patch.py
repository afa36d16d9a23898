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
            # left a truncated checkpoint_last.pt that the next resume could not read
            Edit(
                "                assert PathManager.copy(\n"
                "                    checkpoints[0], cp, overwrite=True\n"
                '                ), f"Failed to copy {checkpoints[0]} to {cp}"\n',
                "                tmp = cp + \".tmp\" if PathManager.supports_rename(cp) else cp\n"
                "                assert PathManager.copy(\n"
                "                    checkpoints[0], tmp, overwrite=True\n"
                '                ), f"Failed to copy {checkpoints[0]} to {tmp}"\n'
                "                if tmp != cp:\n"
                "                    PathManager.rename(tmp, cp)  # atomic: never a half-written cp\n",
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
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/data/indexed_dataset.py",
        "an empty or truncated dataset file: a clear error, not a second one in __del__",
        (
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
        "492f5cc59ad67815cb5616681f505fae69958227c9e76a4dc5ceaf2cba326aab",
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
        "7b2e27bb830e9afb271f37a558a448ec47f2a94ff83cfff301dcb5fc1f1ec64d",
    ),
    "fairseq/data/indexed_dataset.py": (
        "82e2ad6a66978e00c07018efe3e56b556f0a11cefcb7d97ff72c4476ece108bc",
        "2904a369f8e64bf52145ad5a899ea9408b76cc5b142e2b04f464861c01524ebb",
    ),
    "fairseq/modules/dynamic_crf_layer.py": (
        "024870d3b488187925e92e664c19052490cbc67171b6bd7ba871483aeee71536",
        "683aecffafc4d6ba11242819be34cbd234e2ef25459c86b8f89fbf9a99bd1c18",
    ),
    "fairseq_cli/score.py": (
        "6db73958873e1d6d1d5a4b60cd6e04412e2cc151521e685046b16f212bbea741",
        "0081cde90e7ea6709749ad8b38b521b6ac3b018da27fa9d2dbcea0fe5c7db0b4",
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
