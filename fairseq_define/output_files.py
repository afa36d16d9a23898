"""Writing the tools' output files: all or nothing, never through a planted link, never over
a file the user did not ask to replace.

Every tool that writes a file (``fairseq-define-average-checkpoints``, ``-cache-tables``,
``-compress``, ``-trust-checkpoint``, ``-results``) writes through :func:`atomic_write`:

* the data goes to a fresh temporary file in the destination folder, created exclusively
  (``tempfile.mkstemp``: ``O_CREAT | O_EXCL``, a random name), so a symlink planted at any
  name, ``OUTPUT.tmp`` included, is never opened or written through;
* the temporary file becomes the destination in one step (``os.link`` when the destination
  must not exist, which fails if something appeared there meanwhile; ``os.replace`` when
  replacing it was asked for), so readers see the old file or the new one, never a part;
* a write that fails (disk full, an interrupted save, a bug) removes its temporary file
  and leaves the destination as it was.

fairseq's own checkpoint writes (``checkpoint_utils.torch_persistent_save`` and the copies to
``checkpoint_last.pt``/``checkpoint_best.pt``) follow the same rules through the patch
(``fairseq_define_patch/hardening/checkpoint_writes.py``), since fairseq-train runs without
this package.
"""

import contextlib
import errno
import os
import tempfile
from typing import Callable

from fairseq_define_patch.installed import disk_full

from .errors import UserError


class OutputExistsError(UserError):
    """The destination exists and replacing it was not asked for."""


def _file_mode() -> int:
    """The mode an ordinary ``open(path, "w")`` would give (mkstemp creates 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def check_new_output(path, overwrite: bool = False, flag: str = "--overwrite") -> None:
    """The one rule for every output: an existing destination is refused unless ``overwrite``
    (the user asked with ``flag``); a folder is never a file's destination."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise UserError(f"{path} is a folder; give a file name for the output")
    if os.path.lexists(path) and not overwrite:
        raise OutputExistsError(
            f"{path} exists; choose a new file name, or pass {flag} to replace it"
            if flag else f"{path} exists; choose a new file name (nothing is overwritten)"
        )


def check_output(path, overwrite: bool = False, flag: str = "--overwrite") -> None:
    """Refuse, before any work, a destination that exists (unless ``overwrite``) or whose
    folder is missing or not writable."""
    path = os.fspath(path)
    check_new_output(path, overwrite, flag)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UserError(f"the folder of {path} does not exist; create it first")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"the folder of {path} is not writable; choose another")


def atomic_write(path, write: Callable, *, binary: bool = True, overwrite: bool = False,
                 flag: str = "--overwrite") -> None:
    """Call ``write(f)`` on a fresh temporary file next to ``path``, then move it to ``path``.

    ``overwrite=False`` refuses an existing ``path`` (:class:`OutputExistsError`, naming
    ``flag`` as the way to replace it) and never replaces one that appears meanwhile.
    Errors while writing (``OSError`` such as a full disk) become a :class:`UserError`;
    in every case the temporary file is removed and ``path`` is unchanged.
    """
    path = os.fspath(path)
    check_output(path, overwrite, flag)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        os.fchmod(fd, _file_mode())
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)  # never replaces: fails if anything (even a dangling link) is there
        except FileExistsError:
            raise OutputExistsError(f"{path} appeared while it was written; nothing was overwritten") from None
        except OSError as e:  # a file system without hard links
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            if os.path.lexists(path):
                raise OutputExistsError(f"{path} appeared while it was written; nothing was overwritten") from None
            os.replace(tmp, path)
    except (OSError, RuntimeError) as e:  # torch.save reports a write that failed as a RuntimeError
        raise_write_failure(path, e, "unchanged")
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def raise_write_failure(path, exc, outcome: str):
    """The one line for a write of ``path`` that failed with ``exc`` (an OSError, or the
    RuntimeError torch.save reports a failed write as): a full disk, or another OSError, as a
    UserError saying ``path`` is ``outcome`` ("unchanged", "not made"); anything else is
    raised as it is."""
    if disk_full(exc):
        raise UserError(f"no space left on the device while writing {path}: free some space or write "
                        f"elsewhere ({path} is {outcome})") from None
    if not isinstance(exc, OSError):
        raise exc
    raise UserError(f"cannot write {path}: {exc.strerror or exc} ({path} is {outcome})") from None


def save_checkpoint(state, path, *, overwrite: bool = False, flag: str = "--overwrite") -> None:
    """``torch.save(state)`` to ``path`` through :func:`atomic_write`."""
    import torch

    atomic_write(path, lambda f: torch.save(state, f), overwrite=overwrite, flag=flag)


def write_text(path, text: str, *, overwrite: bool = True) -> None:
    """Text (a report, a result.json) to ``path`` through :func:`atomic_write`."""
    atomic_write(path, lambda f: f.write(text), binary=False, overwrite=overwrite)
