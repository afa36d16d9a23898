"""Make stock fairseq 0.12.2 work on Python 3.11 to 3.13, torch >= 2.6, numpy 2, hydra-core 1.3
and omegaconf 2.3, and harden it.

fairseq 0.12.2 is the last fairseq release and cannot be imported on Python 3.11; its
checkpoints do not load on torch >= 2.6 and several data paths call numpy functions that
numpy 2 removed (README.md lists each failure). The same edits make fairseq's
own tools safe with untrusted files and clear about bad input.
The stock command-line tools (``fairseq-train``, ``fairseq-generate``, ...) import fairseq
before any ``--user-dir`` is read, so an import-time workaround in this package cannot reach
them: the installed files themselves are edited, once, by this module.

Layout: one module per fix, each with its reason and its edits in every file it touches;
the logic a fix adds to fairseq is an ordinary module of ``runtime/``, which ``--apply`` copies
whole into fairseq's tree as ``fairseq/_define_runtime/``, so that the edits of fairseq's own
files shrink to an import and a call:

- ``compat/``: Python 3.11, 3.12 and 3.13, torch 2, numpy 2, hydra-core 1.3 and omegaconf 2.3
  (instead of fairseq's pins, hydra-core 1.0 and omegaconf 2.0), sacrebleu 2, bitarray 3;
- ``fairseq_bugs/``: bugs of fairseq 0.12.2 itself (the encoder fast path's weight copies,
  DDP on CPU, ``--bf16`` only on a TPU, the tensorboardX notice of every command);
- ``hardening/``: one error type (``fairseq.UserError``) and one excepthook, safe and
  bounded checkpoint loading, atomic writes, config strings parsed and never run, checks of
  input files, settings and hub archives.
- ``runtime/``: the code those fixes add to fairseq, one module per concept; it imports only
  the standard library, torch, numpy, omegaconf and fairseq, so that the copies need nothing
  from this project (this package never imports it: fairseq may not import before the patch).

``edits.py`` holds the edit types, ``hashes.py`` the SHA-256 table, this module the
mechanics. Every edit is a text change at an anchor that occurs once in a file whose whole
content is recognised by its SHA-256 (the file as shipped, or the file as this module leaves
it): a replacement, an inserted hook, or a span of fairseq's lines named by its first and last
line (the hash pins the rest; ``--apply`` keeps such a file's shipped text for ``--revert``).
Anything else is refused: a different fairseq version or a file someone edited by hand
is never touched. A copied runtime module is recognised the same way (absent, or the content
hashes.py names); one with other content is ours to repair (a copy left by another version of
this patch): ``--apply`` replaces it. Writes are atomic (temporary file + rename), so an
interrupted run leaves each file either original or patched; the runtime modules are written
before the edits that import them and removed after those are reverted. Running ``--apply``
again is a no-op; ``--check`` exits non-zero unless every file is patched (and restorable);
``--revert`` restores the shipped text and removes ``fairseq/_define_runtime/``.

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
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from . import compat, fairseq_bugs, hardening
from .edits import (
    RUNTIME_PACKAGE,
    SHIPPED_FOLDER,
    CopiedModule,
    Edit,
    FairseqPatchError,
    FilePatch,
    one_patch_per_file,
)
from .hashes import SHA256

__all__ = [
    "APPLY_COMMAND", "COPIES", "CopiedModule", "Edit", "FairseqPatchError", "FilePatch",
    "PATCHES", "SHA256", "apply", "shipped_copy",
    "apply_edits", "is_patched", "main", "require_patched_fairseq", "site_root", "statuses",
]

logger = logging.getLogger(__name__)

__version__ = "0.1.0"  # the distribution's (pyproject.toml reads it)
APPLY_COMMAND = "fairseq-define-patch-fairseq --apply"
# the one distribution whose files the patch edits, each recognised by its SHA-256
SUPPORTED_VERSIONS = {"fairseq": "0.12.2"}
_TOP_PACKAGE = {"fairseq": "fairseq"}
# what a refusal tells the user to reinstall: fairseq alone, since its own requirements pin
# hydra-core 1.0 and omegaconf 2.0, whose metadata pip >= 24.1 refuses
_REINSTALL = " ".join(f"{dist}=={version}" for dist, version in SUPPORTED_VERSIONS.items())
_INSTALL_FAIRSEQ = f"pip install --no-deps {_REINSTALL}"
# the config libraries the patched fairseq runs on, [lowest, first too new) by (major, minor):
# those pip installs today (fairseq's pins, hydra-core 1.0 with omegaconf 2.0, are left behind:
# README.md#hydra-core-13-and-omegaconf-23)
CONFIG_LIBRARIES = {"hydra-core": ((1, 3), (1, 4)), "omegaconf": ((2, 3), (2, 4))}

# every fix's edits, one FilePatch per file (a file's hashes cover all its edits)
PATCHES: Tuple[FilePatch, ...] = one_patch_per_file(
    compat.PATCHES + fairseq_bugs.PATCHES + hardening.PATCHES
)
# the runtime modules the edits import, copied whole (the package's __init__ first)
COPIES: Tuple[CopiedModule, ...] = (
    CopiedModule("__init__", "the package of the code the patch adds to fairseq"),
) + compat.COPIES + fairseq_bugs.COPIES + hardening.COPIES
Entry = Union[FilePatch, CopiedModule]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _once(text: str, what: str) -> int:
    if text.count(what) != 1:
        raise FairseqPatchError(f"expected exactly one occurrence of {what[:60]!r}, found {text.count(what)}")
    return text.index(what)


def _forward(text: str, edit: Edit) -> str:
    at = _once(text, edit.old)
    if edit.mode == "replace":
        return text.replace(edit.old, edit.new)
    if edit.mode == "span":
        end = text.find(edit.through, at + len(edit.old))
        if end < 0:
            raise FairseqPatchError(f"no {edit.through[:60]!r} after {edit.old[:60]!r}")
        return text[:at] + edit.new + text[end + len(edit.through):]
    done = edit.old + edit.new if edit.mode == "after" else edit.new + edit.old
    if done in text:
        raise FairseqPatchError(f"already inserted: {edit.new[:60]!r}")
    return text.replace(edit.old, done)


def _backward(text: str, edit: Edit) -> str:
    if edit.mode == "span":
        raise FairseqPatchError(
            f"the text an edit replaced from {edit.old[:60]!r} is fairseq's: only the shipped copy has it"
        )
    if edit.mode == "replace":
        _once(text, edit.new)
        return text.replace(edit.new, edit.old)
    done = edit.old + edit.new if edit.mode == "after" else edit.new + edit.old
    _once(text, done)
    return text.replace(done, edit.old)


def apply_edits(text: str, edits: Sequence[Edit], reverse: bool = False) -> str:
    """Make each edit (or undo it, with ``reverse``). Each anchor must occur exactly once, and
    never inside the new text, so that applying or reverting can only succeed on the text it
    was written for. A span edit cannot be undone here (``_restore_shipped``)."""
    for edit in reversed(edits) if reverse else edits:
        text = _backward(text, edit) if reverse else _forward(text, edit)
    return text


def site_root(distribution: str) -> Path:
    """Directory holding the distribution's packages, found without importing them
    (``import fairseq`` itself fails before the patch)."""
    top = _TOP_PACKAGE[distribution]
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise FairseqPatchError(
            f"{distribution} is not installed in this Python ({sys.executable}); "
            f"install it with: {_INSTALL_FAIRSEQ}"
        )
    return Path(list(spec.submodule_search_locations)[0]).parent


@dataclass
class FileStatus:
    patch: Entry  # an edited file (FilePatch) or a copied runtime module (CopiedModule)
    path: Path
    # "patched" | "original" | "unknown" | "missing" | "unrestorable" (an edited file: patched,
    # but the shipped copy its span edits need for --revert is gone);
    # "patched" | "original" (absent) | "stale" (other content: repaired) (a copied module)
    state: str


def _has_spans(patch: Entry) -> bool:
    return isinstance(patch, FilePatch) and not all(e.reversible for e in patch.edits)


def shipped_copy(patch: FilePatch, roots: Optional[Dict[str, Path]] = None) -> Path:
    """Where ``--apply`` keeps a file's shipped text when its edits cannot be undone from
    their own text (span edits): inside the runtime folder, which is the patch's own."""
    return _runtime_folder(roots) / SHIPPED_FOLDER / f"{patch.path}.shipped"


def file_status(patch: Entry, root: Optional[Path] = None, roots: Optional[Dict[str, Path]] = None) -> FileStatus:
    path = (root or site_root(patch.distribution)) / patch.path
    if not path.is_file():
        absent = "original" if isinstance(patch, CopiedModule) else "missing"
        return FileStatus(patch, path, absent)
    digest = _sha256(path.read_text(encoding="utf-8"))
    if digest == patch.patched_sha256:
        state = "patched"
        if _has_spans(patch) and _shipped_text(patch, roots) is None:
            state = "unrestorable"  # patched by a version that kept no shipped copy
    elif digest == patch.original_sha256:
        state = "original"
    else:
        state = "stale" if isinstance(patch, CopiedModule) else "unknown"
    return FileStatus(patch, path, state)


def _shipped_text(patch: FilePatch, roots: Optional[Dict[str, Path]]) -> Optional[str]:
    """The kept shipped text, or None when it is missing or not the shipped file."""
    copy = shipped_copy(patch, roots)
    if not copy.is_file():
        return None
    text = copy.read_text(encoding="utf-8")
    return text if _sha256(text) == patch.original_sha256 else None


def _release(version: str) -> Tuple[int, int]:
    """(major, minor) of a version string such as ``1.3.8`` or ``2.3.0.dev2``."""
    parts = (version.split(".") + ["0"])[:2]
    return tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in parts)  # type: ignore[return-value]


def _requirement(dist: str) -> str:
    (lo, hi) = CONFIG_LIBRARIES[dist]
    return f"'{dist}>={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}'"


def check_versions() -> None:
    """fairseq 0.12.2 (the files the hashes name), and hydra-core and omegaconf in the
    range the patched fairseq is tested on; one line naming the install command otherwise."""
    for dist, want in SUPPORTED_VERSIONS.items():
        try:
            have = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            raise FairseqPatchError(f"{dist} is not installed; install it with: {_INSTALL_FAIRSEQ}") from None
        if have != want:
            raise FairseqPatchError(
                f"{dist} {have} is installed, but this patch knows only {dist} {want}; "
                f"install that version ({_INSTALL_FAIRSEQ}) and run {APPLY_COMMAND}"
            )
    wanted = " ".join(_requirement(dist) for dist in CONFIG_LIBRARIES)
    for dist, (lo, hi) in CONFIG_LIBRARIES.items():
        try:
            have = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            raise FairseqPatchError(f"{dist} is not installed; install it with: pip install {wanted}") from None
        if not lo <= _release(have) < hi:
            raise FairseqPatchError(
                f"{dist} {have} is installed, but the patched fairseq runs on {_requirement(dist)[1:-1]}; "
                f"install it with: pip install {wanted}"
            )


def _write_atomically(path: Path, text: str, mode: Optional[int] = None) -> None:
    """Write through a temporary file renamed over ``path``, which keeps its permissions
    (``mode`` for a new file)."""
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def statuses(roots: Optional[Dict[str, Path]] = None) -> List[FileStatus]:
    """The copied runtime modules first, then the edited files: the order of --apply."""
    return [file_status(p, (roots or {}).get(p.distribution), roots) for p in COPIES + PATCHES]


def _refuse_unknown(found: List[FileStatus]) -> None:
    bad = [s for s in found if s.state in ("unknown", "missing", "unrestorable")]
    if bad:
        lines = "\n".join(f"  {s.path}: {_STATE_LINES[s.state]}" for s in bad)
        raise FairseqPatchError(
            "refusing to patch: these files are neither the shipped originals of "
            f"{_REINSTALL.replace(' ', ', ')} nor the patched versions this patch can undo:\n{lines}\n"
            f"Reinstall them (pip install --force-reinstall --no-deps {_REINSTALL}) and run "
            f"{APPLY_COMMAND} again."
        )


_STATE_LINES = {
    "unknown": "unknown content",
    "missing": "missing content",
    "unrestorable": "patched, but its shipped copy (kept for --revert) is missing",
}


def _runtime_folder(roots: Optional[Dict[str, Path]]) -> Path:
    return ((roots or {}).get("fairseq") or site_root("fairseq")) / RUNTIME_PACKAGE


def _copy_module(st: FileStatus, reverse: bool) -> None:
    if reverse:
        st.path.unlink()
        logger.info("removed %s (%s)", st.path, st.patch.why)
        return
    text = st.patch.text()
    if _sha256(text) != st.patch.patched_sha256:  # runtime/ and hashes.py disagree: a bug here
        raise FairseqPatchError(f"{st.patch.source}: its content does not match the expected hash")
    st.path.parent.mkdir(exist_ok=True)
    existed = st.path.exists()
    _write_atomically(st.path, text, mode=0o644)
    logger.info("%s %s (%s)", "replaced a stale" if existed else "copied", st.path, st.patch.why)


def _remove_leftovers(roots: Optional[Dict[str, Path]], reverse: bool) -> None:
    """The runtime folder is the patch's own: on --revert it goes (with its __pycache__);
    on --apply, a module that another version of the patch copied and this one does not."""
    folder = _runtime_folder(roots)
    if not folder.is_dir():
        return
    if reverse:
        shutil.rmtree(folder)
        return
    ours = {Path(c.path).name for c in COPIES}
    kept = {shipped_copy(p, roots) for p in PATCHES if _has_spans(p)}
    leftovers = [f for f in folder.glob("*.py") if f.name not in ours]
    leftovers += [f for f in (folder / SHIPPED_FOLDER).rglob("*.shipped") if f not in kept]
    for leftover in leftovers:
        leftover.unlink()
        logger.info("removed %s (not part of this version of the patch)", leftover)


def _edit_file(st: FileStatus, roots: Optional[Dict[str, Path]], reverse: bool) -> None:
    text = st.path.read_text(encoding="utf-8")
    if not reverse:
        new_text = apply_edits(text, st.patch.edits)
        if _has_spans(st.patch):  # kept before the file changes: --revert's only source
            copy = shipped_copy(st.patch, roots)
            copy.parent.mkdir(parents=True, exist_ok=True)
            _write_atomically(copy, text, mode=0o644)
    elif _has_spans(st.patch):
        new_text = _shipped_text(st.patch, roots)
    else:
        new_text = apply_edits(text, st.patch.edits, reverse=True)
    want = st.patch.original_sha256 if reverse else st.patch.patched_sha256
    if _sha256(new_text) != want:  # the edit table and the hashes disagree: a bug here
        raise FairseqPatchError(f"{st.path}: edited text does not match the expected hash")
    _write_atomically(st.path, new_text)
    logger.info("%s %s (%s)", "restored" if reverse else "patched", st.path, st.patch.why)


def apply(roots: Optional[Dict[str, Path]] = None, reverse: bool = False) -> List[FileStatus]:
    """Patch (or with ``reverse``, restore) every file; all-or-nothing on recognition.

    The runtime modules are copied before the edits that import them, and removed after
    those edits are reverted, so fairseq imports at every step of an interrupted run."""
    found = statuses(roots)
    _refuse_unknown(found)  # check every file before writing any
    target = "original" if reverse else "patched"
    for st in reversed(found) if reverse else found:
        if st.state == target:
            continue
        if isinstance(st.patch, CopiedModule):
            _copy_module(st, reverse)
        else:
            _edit_file(st, roots, reverse)
    _remove_leftovers(roots, reverse)
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
            "fairseq_define: the installed fairseq 0.12.2 is not patched for Python 3.11+ / "
            f"torch >= 2.6 / numpy 2 ({names}). Run `{APPLY_COMMAND}` "
            "(or `python -m fairseq_define_patch --apply`) in this environment."
        )


def _print_hashes() -> None:
    """Maintainers: the SHA256 table for the edits as they are now, read from the shipped
    files (installed, or kept by --apply) and for the runtime modules."""
    for c in COPIES:
        sys.stdout.write(f'    "{c.path}": (\n        None,\n        "{_sha256(c.text())}",\n    ),\n')
    for p in PATCHES:
        text = (site_root(p.distribution) / p.path).read_text(encoding="utf-8")
        try:
            apply_edits(text, p.edits)
        except FairseqPatchError:  # patched: the shipped text is the kept copy or the reverted one
            copy = shipped_copy(p)
            if copy.is_file():
                text = copy.read_text(encoding="utf-8")
            else:
                try:
                    text = apply_edits(text, p.edits, reverse=True)
                except FairseqPatchError:
                    raise FairseqPatchError(f"{p.path}: neither shipped nor patched text; fix the edits") from None
        sys.stdout.write(
            f'    "{p.path}": (\n        "{_sha256(text)}",\n'
            f'        "{_sha256(apply_edits(text, p.edits))}",\n    ),\n'
        )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fairseq-define-patch-fairseq",
        description="Patch the installed fairseq 0.12.2 so that it works on Python 3.11 to 3.13, "
        "torch >= 2.6, numpy 2, hydra-core 1.3 and omegaconf 2.3, and refuses bad input "
        "and unsafe files with one line.",
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
