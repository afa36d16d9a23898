"""An edit is an exact text replacement; a FilePatch is the edits of one fix in one file; a
CopiedModule is one module of ``fairseq_define_patch/runtime/`` copied whole into fairseq."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional, Tuple

from .hashes import SHA256


class FairseqPatchError(RuntimeError):
    """fairseq (or hydra-core/omegaconf) is in a state this module will not touch."""


@dataclass(frozen=True)
class Edit:
    """One change to a file whose text occurs once in it (``old``, the anchor).

    ``mode`` says what ``new`` does there: "replace" the anchor; insert right "after" or
    "before" it (a hook: an import, a call); or, for "span", replace the text from the
    anchor to the end of the first ``through`` after it: a run of fairseq's own lines that
    this project need not hold, because the file's SHA-256 pins its whole text. A span
    cannot be undone from its own text: ``--apply`` keeps the shipped file in
    ``fairseq/_define_runtime/shipped/`` and ``--revert`` restores that copy."""

    old: str
    new: str
    mode: str = "replace"
    through: str = ""

    def __post_init__(self):
        if self.mode not in ("replace", "after", "before", "span"):
            raise ValueError(f"unknown edit mode {self.mode!r}")
        if (self.mode == "span") != bool(self.through):
            raise ValueError("a span edit, and only a span edit, names where it ends (through)")
        if self.old in self.new or self.new in self.old:
            raise ValueError(f"ambiguous edit: one side contains the other: {self.old[:60]!r}")
        if self.through and self.through in self.new:
            raise ValueError(f"ambiguous edit: its new text holds its end: {self.through[:60]!r}")

    @property
    def reversible(self) -> bool:
        """Whether the shipped text can be rebuilt from the patched text and this edit."""
        return self.mode != "span"


def insert_after(anchor: str, text: str) -> Edit:
    """Add ``text`` right after ``anchor``."""
    return Edit(anchor, text, mode="after")


def insert_before(anchor: str, text: str) -> Edit:
    """Add ``text`` right before ``anchor``."""
    return Edit(anchor, text, mode="before")


def replace_span(first: str, through: str, new: str) -> Edit:
    """Replace fairseq's text from ``first`` to the end of the first ``through`` after it."""
    return Edit(first, new, mode="span", through=through)


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


# where the runtime modules go: a package of fairseq's own, so that a patched fairseq needs
# nothing from this project at run time (uninstalling the plugin leaves it working)
RUNTIME_PACKAGE = "fairseq/_define_runtime"
RUNTIME_SOURCE = Path(__file__).resolve().parent / "runtime"
# under the runtime folder: the shipped text of each file whose edits include a span, kept by
# --apply for --revert (the project does not hold fairseq's replaced lines)
SHIPPED_FOLDER = "shipped"


@dataclass(frozen=True)
class CopiedModule:
    """``fairseq_define_patch/runtime/NAME.py``, copied whole to ``fairseq/_define_runtime/``.

    The fix's logic lives there as an ordinary module (importable, linted, unit-tested); the
    edits of fairseq's own files only import and call it. Its "original" state is absence,
    its "patched" state the content whose hash hashes.py holds; any other content is a copy
    left by another version of this patch (or a hand edit) and is "stale": the file is ours,
    so ``--apply`` replaces it and ``--revert`` removes it."""

    name: str  # module name under runtime/, e.g. "safe_load"
    why: str
    distribution: str = "fairseq"

    @property
    def path(self) -> str:
        return f"{RUNTIME_PACKAGE}/{self.name}.py"

    @property
    def source(self) -> Path:
        return RUNTIME_SOURCE / f"{self.name}.py"

    def text(self) -> str:
        return self.source.read_text(encoding="utf-8")

    @property
    def original_sha256(self) -> Optional[str]:
        return None  # absent

    @property
    def patched_sha256(self) -> str:
        return SHA256[self.path][1]


def one_patch_per_file(patches: Tuple[FilePatch, ...]) -> Tuple[FilePatch, ...]:
    """Several fixes edit the same file (fairseq/utils.py: config literals and the
    missing-plugin error; fairseq_cli/validate.py: eval and the batch-size error). A file's
    hashes cover all its edits, so they become one FilePatch, in the order listed."""
    merged: Dict[str, FilePatch] = {}
    for fp in patches:
        prev = merged.get(fp.path)
        merged[fp.path] = fp if prev is None else FilePatch(
            prev.distribution, prev.path, f"{prev.why}; {fp.why}", prev.edits + fp.edits
        )
    return tuple(merged.values())
