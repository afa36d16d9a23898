"""from_pretrained with an archive: only files and folders under the destination, bounded in
size and count; the user's archive is kept and the temporary copy removed.

fairseq's hub (from_pretrained with a .tar.gz, fairseq/file_utils.py's load_archive_file)
extracted every member wherever its name pointed (``../`` and absolute names reached
site-packages, links anywhere), then replaced the user's archive by a folder; a missing path
gave None and a TypeError later. A small archive could also unpack to any size, and the
temporary folder stayed after the process. load_archive_file now calls the functions below.
"""

import os
import shutil
import tarfile

from fairseq import UserError

__all__ = ["archive_not_found", "extract_checked", "temporary_folder"]

_ARCHIVE_MAX_RATIO = 50  # unpacked bytes per archive byte (weights compress ~1.1x, text ~4x)
_ARCHIVE_MAX_MEMBERS = 100_000


def _safe_archive_members(archive, path):
    # (added by fairseq_define) only regular files and folders, each under the destination:
    # a member with an absolute name or a "..", a link, a device or a fifo is refused; so is
    # an archive that unpacks to more than _ARCHIVE_MAX_RATIO times its size
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


def archive_not_found(archive_file):
    """The error for a path that is neither a folder, an archive nor a URL (fairseq returned
    None, and from_pretrained failed later with a TypeError)."""
    return UserError(
        "{} does not exist: from_pretrained takes a folder that holds the checkpoint "
        "(and the data), a .tar.gz or .tar.bz2 of one, or a URL".format(archive_file)
    )


def extract_checked(resolved_archive_file, tempdir, ext):
    """Extract the checked members into ``tempdir``; the folder that holds them all ("" for
    the archive's root). Whatever fails, nothing half-extracted is left."""
    try:
        with tarfile.open(resolved_archive_file, "r:" + ext) as archive:
            members = _safe_archive_members(archive, resolved_archive_file)
            top_dir = _archive_top_dir(members)
            archive.extractall(tempdir, members=members, filter="data")
    except tarfile.TarError as e:
        shutil.rmtree(tempdir, ignore_errors=True)
        raise UserError(
            "cannot extract {}: {} ({}); give a .tar.gz or .tar.bz2 archive, or the "
            "folder itself".format(resolved_archive_file, e, type(e).__name__)
        ) from None
    except BaseException:  # refused, or interrupted: nothing half-extracted is left
        shutil.rmtree(tempdir, ignore_errors=True)
        raise
    return top_dir


def temporary_folder(tempdir, top_dir):
    """The extracted copy of the user's own archive (which is kept as it is): the model and
    its data files are read while loading, so the copy goes when the process ends."""
    import atexit

    atexit.register(shutil.rmtree, tempdir, True)
    return os.path.join(tempdir, top_dir)
