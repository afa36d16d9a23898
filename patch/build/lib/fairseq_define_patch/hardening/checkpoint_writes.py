"""Checkpoint writes are atomic: a fresh temporary file next to the destination, moved over it
in one step; a full disk or an unusable --save-dir gets one line."""

from ..edits import CopiedModule, Edit, FilePatch, insert_after, replace_span

# The writes are runtime/checkpoint_writes.py (copied into fairseq); checkpoint_utils calls
# them where it wrote, copied and checked the folder.
COPIES = (CopiedModule("checkpoint_writes", "atomic checkpoint saves and copies; an unusable --save-dir"),)

_PERSISTENT_SAVE_EDITS = (
    insert_after(
        "from fairseq.file_io import PathManager\n",
        "from fairseq._define_runtime.checkpoint_writes import *  # noqa: F401 F403  (fairseq_define)\n",
    ),
    Edit(
        "            # do atomic save\n"
        '            with PathManager.open(filename + ".tmp", "wb") as f:\n'
        "                _torch_persistent_save(obj, f)\n"
        '            PathManager.rename(filename + ".tmp", filename)\n',
        "            # atomic save through a fresh temporary file (fairseq_define)\n"
        "            _write_atomically(filename, lambda f, _: _torch_persistent_save(obj, f))\n",
    ),
    replace_span(
        "    for i in range(3):\n",
        "                logger.error(traceback.format_exc())\n                raise\n",
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
            replace_span(
                "    if not os.path.exists(save_dir):\n        os.makedirs(save_dir, exist_ok=True)\n",
                "    else:\n        os.remove(temp_file_path)\n",
                "    check_save_dir(save_dir)  # (fairseq_define) one line for an unusable folder\n",
            ),
        ),
    ),
)
