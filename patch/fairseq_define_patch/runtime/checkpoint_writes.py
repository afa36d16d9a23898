"""Checkpoint writes are atomic: a fresh temporary file next to the destination, moved over it
in one step; a full disk or an unusable --save-dir gets one line.

fairseq's checkpoint writes went through the fixed name FILE.tmp (a planted symlink there
redirected the write; a failed write left it behind) and retried torch.save on the same
half-written file, logging a traceback; checkpoint_last.pt and _best.pt were copied in place,
so a kill mid-copy left a truncated checkpoint_last.pt that the next resume could not read.
Now: a fresh, exclusively created temporary file in the destination folder, moved over the
destination in one step, and removed when the write fails (the same rules as
fairseq_define/output_files.py, which the plugin's tools use; fairseq-train runs without the
plugin, so fairseq holds its own copy). fairseq/checkpoint_utils.py calls these.
"""

import errno
import os

import torch
from fairseq import UserError
from fairseq.file_io import PathManager

__all__ = ["check_save_dir", "copy_checkpoint", "disk_full", "save_with_retries", "_copy_atomically",
           "_write_atomically"]


def disk_full(exc):
    """Whether ``exc`` is a full disk: an OSError ENOSPC, or the RuntimeError torch.save's zip
    writer raises once a write of its failed ("unexpected pos ..."), whose context holds the
    OSError (a full disk mid-checkpoint was a traceback)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError):
            return exc.errno == errno.ENOSPC
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _write_atomically(filename, write):
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
    except (OSError, RuntimeError) as e:
        if not disk_full(e):
            raise
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


def copy_checkpoint(src, dst):
    """checkpoint_last.pt, _best.pt, ... as copies of the checkpoint just written: through a
    fresh temporary file where the storage can rename (never a half-written ``dst``)."""
    if PathManager.supports_rename(dst):
        _copy_atomically(src, dst)
    else:
        assert PathManager.copy(src, dst, overwrite=True), f"Failed to copy {src} to {dst}"


def save_with_retries(obj, f):
    """torch.save, tried three times as fairseq does, each retry on an empty file; a full
    disk stays full, so ENOSPC is not retried."""
    for i in range(3):
        try:
            if i > 0 and f.seekable():  # start the retry on an empty file
                f.seek(0)
                f.truncate()
            return torch.save(obj, f)
        except Exception as e:
            if i == 2 or disk_full(e):  # a full disk stays full
                raise


def check_save_dir(save_dir):
    """An unusable --save-dir: one line instead of a traceback (a file, or not writable)."""
    import tempfile

    if os.path.exists(save_dir) and not os.path.isdir(save_dir):
        raise UserError(
            "--save-dir {} is a file, not a folder: choose a folder for the "
            "checkpoints".format(save_dir)
        )
    try:
        os.makedirs(save_dir, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-test.", dir=save_dir)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise UserError(
            "cannot write checkpoints to --save-dir {} ({}): choose a folder you "
            "can write to".format(save_dir, e.strerror or e)
        ) from None
