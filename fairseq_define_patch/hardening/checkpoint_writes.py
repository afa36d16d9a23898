"""Checkpoint writes are atomic: a fresh temporary file next to the destination, moved over it
in one step; a full disk or an unusable --save-dir gets one line."""

from ..edits import CopiedModule, Edit, FilePatch

# The writes are runtime/checkpoint_writes.py (copied into fairseq); checkpoint_utils calls
# them where it wrote, copied and checked the folder.
COPIES = (CopiedModule("checkpoint_writes", "atomic checkpoint saves and copies; an unusable --save-dir"),)

_PERSISTENT_SAVE_EDITS = (
    Edit(
        "from fairseq.file_io import PathManager\nfrom fairseq.models import",
        "from fairseq.file_io import PathManager\n"
        "from fairseq._define_runtime.checkpoint_writes import *  # noqa: F401 F403  (fairseq_define)\n"
        "from fairseq.models import",
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
        "    for i in range(3):\n"
        "        try:\n"
        "            return torch.save(obj, f)\n"
        "        except Exception:\n"
        "            if i == 2:\n"
        "                logger.error(traceback.format_exc())\n"
        "                raise\n",
        "    return save_with_retries(obj, f)  # (fairseq_define) each retry on an empty file\n",
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
                "                copy_checkpoint(checkpoints[0], cp)  # (fairseq_define) never a half-written cp\n",
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
                "    check_save_dir(save_dir)  # (fairseq_define) one line for an unusable folder\n",
            ),
        ),
    ),
)
