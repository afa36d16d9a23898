"""from_pretrained with an archive: only files and folders under the destination, bounded in
size and count; the user's archive is kept and the temporary copy removed.

fairseq's hub (from_pretrained with a .tar.gz, fairseq/file_utils.py's load_archive_file)
extracted every member wherever its name pointed (``../`` and absolute names reached
site-packages, links anywhere), then replaced the user's archive by a folder; a missing path
gave None and a TypeError later. A small archive could also unpack to any size, and the
temporary folder stayed after the process. load_archive_file now calls the functions below.
Its headers are read once before tarfile reads them (``_scan_headers``): tarfile holds a GNU
long name or a pax record in memory whole, so a 199 KB archive could ask for gigabytes; the
metadata counts in the size bound, and a record longer than any path is refused. Every
compression tarfile opens (none, gzip, bzip2, xz) is scanned: the scan has an opener for each
of tarfile's own (``_ARCHIVE_OPENERS``), and an archive tarfile could open but the scan could
not read is refused, never extracted unscanned.
"""

import bz2
import gzip
import lzma
import os
import shutil
import tarfile
import zlib

from fairseq import UserError

__all__ = ["archive_not_found", "extract_checked", "temporary_folder"]

_ARCHIVE_MAX_RATIO = 50  # unpacked bytes per archive byte (weights compress ~1.1x, text ~4x)
_ARCHIVE_MAX_MEMBERS = 100_000
# a GNU long name or link, or a pax header: a path or a few key=value records; far above any
# path a file system takes (PATH_MAX is 4096), far below what would strain memory
_ARCHIVE_MAX_METADATA = 1 << 20  # bytes per metadata record
_METADATA_TYPES = (b"L", b"K", b"x", b"g", b"X")  # GNU long name/link, pax, Solaris pax
# a stream of the tar inside, for each compression of tarfile.TarFile.OPEN_METH ("tar": none)
_ARCHIVE_OPENERS = {"tar": open, "gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}


def _header_number(field):
    # a tar header's number: octal text, or GNU base-256 (first byte 0x80 or 0xff); None for
    # a field tarfile would not read either
    if field[:1] in (b"\x80", b"\xff"):
        n = int.from_bytes(field[1:], "big")
        return -((1 << (8 * len(field) - 8)) - n) if field[:1] == b"\xff" else n
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text or b"0", 8)
    except ValueError:
        return None


def _scan_headers(path, ext, limit):
    """Read the archive's headers as a stream, before tarfile does: refuse a metadata record
    (long name, pax) over _ARCHIVE_MAX_METADATA bytes, and an archive whose members and
    metadata unpack to more than ``limit`` bytes; stops where tarfile would (a header whose
    checksum fails, the end marker). Reads through the archive without holding it. ``ext``:
    the compression tarfile is asked for (``"r:" + ext``)."""
    compression = ext or "tar"
    if compression not in tarfile.TarFile.OPEN_METH:
        return  # tarfile refuses it ("unknown compression type") before reading a byte
    opener = _ARCHIVE_OPENERS.get(compression)
    if opener is None:  # a compression this Python's tarfile added: not extracted unscanned
        raise UserError(
            "cannot extract {}: its headers cannot be checked before extracting ({} archives); "
            "give a .tar.gz, .tar.bz2 or .tar.xz archive, or the folder itself".format(path, compression)
        )
    total = 0
    try:
        with opener(path, "rb") as f:
            while True:
                header = f.read(512)
                if len(header) < 512 or header == bytes(512):
                    return
                checksum = _header_number(header[148:156])
                unsigned = 256 + sum(header[:148]) + sum(header[156:])
                signed = 256 + sum(b - 256 if b > 127 else b for b in header[:148] + header[156:])
                size = _header_number(header[124:136])
                if checksum not in (unsigned, signed) or size is None or size < 0:
                    return  # not a header: tarfile stops (or refuses) here too
                kind = header[156:157]
                if kind in _METADATA_TYPES and size > _ARCHIVE_MAX_METADATA:
                    raise UserError(
                        "refusing to extract {}: it holds a {:,}-byte {} record (a name or pax header "
                        "longer than any path); the archive is crafted or damaged".format(
                            path, size, "long-name" if kind in (b"L", b"K") else "pax"
                        )
                    )
                blocks = 0 if kind in (b"1", b"2", b"3", b"4", b"5", b"6") else -(-size // 512) * 512
                total += 512 + blocks
                if total > limit:
                    raise UserError(
                        "refusing to extract {}: its {:,} bytes unpack to more than {:,} (members "
                        "and their metadata), more than {} times its size (an archive bomb?); "
                        "unpack it yourself and give the folder".format(
                            path, os.path.getsize(path), limit, _ARCHIVE_MAX_RATIO
                        )
                    )
                while blocks:  # skipped in pieces: the stream is not held
                    piece = f.read(min(blocks, 1 << 20))
                    if not piece:
                        return
                    blocks -= len(piece)
    except UserError:
        raise
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
        return  # not of its compression, or damaged: tarfile says so in its own line


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
            "(an archive bomb?); unpack it yourself and give the folder".format(
                path, size, unpacked, _ARCHIVE_MAX_RATIO
            )
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


def _archive_top_dir(members, tempdir):
    # (added by fairseq_define) the one folder that holds everything, or "" (the archive
    # root); as stock fairseq found it, whether the names start with "./" (tar czf m.tgz
    # ./model) and whether the archive has a member for the folder itself or not
    names = [os.path.normpath(m.name) for m in members]
    top = os.path.commonpath(names) if names else ""
    while top not in ("", ".") and not os.path.isdir(os.path.join(tempdir, top)):
        top = os.path.dirname(top)  # one file: the folder that holds it
    return "" if top == "." else top


def archive_not_found(archive_file):
    """The error for a path that is neither a folder, an archive nor a URL (fairseq returned
    None, and from_pretrained failed later with a TypeError)."""
    return UserError(
        "{} does not exist: from_pretrained takes a folder that holds the checkpoint "
        "(and the data), a .tar.gz, .tar.bz2 or .tar.xz of one, or a URL".format(archive_file)
    )


def extract_checked(resolved_archive_file, tempdir, ext):
    """Extract the checked members into ``tempdir``; the folder that holds them all ("" for
    the archive's root). Whatever fails, nothing half-extracted is left."""
    try:
        limit = _ARCHIVE_MAX_RATIO * max(os.path.getsize(resolved_archive_file), 1 << 20)
        _scan_headers(resolved_archive_file, ext, limit)
        with tarfile.open(resolved_archive_file, "r:" + ext) as archive:
            members = _safe_archive_members(archive, resolved_archive_file)
            archive.extractall(tempdir, members=members, filter="data")
        top_dir = _archive_top_dir(members, tempdir)
    except tarfile.TarError as e:
        shutil.rmtree(tempdir, ignore_errors=True)
        raise UserError(
            "cannot extract {}: {} ({}); give a .tar.gz, .tar.bz2 or .tar.xz archive, or the "
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
