"""An edit is an exact text replacement; a FilePatch is the edits of one fix in one file."""

from dataclasses import dataclass, field
from typing import Dict, Tuple

from .hashes import SHA256


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
