"""from_pretrained with an archive: only files and folders under the destination, bounded in
size and count; the user's archive is kept and the temporary copy removed."""

from ..edits import Edit, FilePatch

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

PATCHES = (
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
