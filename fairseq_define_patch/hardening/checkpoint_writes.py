"""Checkpoint writes are atomic: a fresh temporary file next to the destination, moved over it
in one step; a full disk or an unusable --save-dir gets one line."""

from ..edits import Edit, FilePatch

# fairseq's checkpoint writes went through the fixed name FILE.tmp (a planted symlink there
# redirected the write; a failed write left it behind) and retried torch.save on the same
# half-written file, logging a traceback. Now: a fresh, exclusively created temporary file in
# the destination folder, moved over the destination in one step, and removed when the write
# fails (the same rules as fairseq_define/output_files.py, which the plugin's tools use;
# fairseq-train runs without the plugin, so the patch holds its own copy).
_ATOMIC_WRITE_HELPERS = """def _write_atomically(filename, write):
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


"""

_PERSISTENT_SAVE_EDITS = (
    Edit(
        "        return [os.path.join(path, x[1]) for x in sorted(entries, reverse=True)]\n\n\n"
        "def torch_persistent_save(",
        "        return [os.path.join(path, x[1]) for x in sorted(entries, reverse=True)]\n\n\n"
        + _ATOMIC_WRITE_HELPERS
        + "def torch_persistent_save(",
    ),
    Edit(
        "            # do atomic save\n"
        '            with PathManager.open(filename + ".tmp", "wb") as f:\n'
        "                _torch_persistent_save(obj, f)\n"
        '            PathManager.rename(filename + ".tmp", filename)\n',
        "            # atomic save through a fresh temporary file (fairseq_define)\n"
        "            _write_atomically(filename, lambda f, _: _torch_persistent_save(obj, f))\n",
    ),
    Edit(
        "def _torch_persistent_save(obj, f):\n    if isinstance(f, str):\n",
        "def _torch_persistent_save(obj, f):\n    import errno\n\n    if isinstance(f, str):\n",
    ),
    Edit(
        "        try:\n"
        "            return torch.save(obj, f)\n"
        "        except Exception:\n"
        "            if i == 2:\n"
        "                logger.error(traceback.format_exc())\n"
        "                raise\n",
        "        try:\n"
        "            if i > 0 and f.seekable():  # start the retry on an empty file\n"
        "                f.seek(0)\n"
        "                f.truncate()\n"
        "            return torch.save(obj, f)\n"
        "        except OSError as e:\n"
        "            if i == 2 or e.errno == errno.ENOSPC:  # a full disk stays full\n"
        "                raise\n"
        "        except Exception:\n"
        "            if i == 2:\n"
        "                raise\n",
    ),
)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/checkpoint_utils.py",
        "atomic checkpoint saves and copies; an unusable --save-dir gives one line",
        (
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
        )
        + _PERSISTENT_SAVE_EDITS
        + (
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
)
