"""No "Please install tensorboardX" line from every fairseq command.

fairseq/tasks/text_to_speech.py is imported with every task (fairseq imports all of its
tasks at start-up) and logged ``Please install tensorboardX: pip install tensorboardX`` at
INFO level when tensorboardX is missing, so every ``fairseq-*`` command printed it, for a
package that only the text-to-speech task's ``--tensorboard-logdir`` uses. The line is now
logged at DEBUG level; training with ``--tensorboard-logdir`` still warns about the missing
package where it needs it (fairseq/logging/progress_bar.py).
"""

from ..edits import Edit, FilePatch

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/tasks/text_to_speech.py",
        "no tensorboardX notice at every import",
        (
            Edit(
                '    logger.info("Please install tensorboardX: pip install tensorboardX")\n',
                "    # (fairseq_define) debug: printed by every command, for an optional package\n"
                '    logger.debug("Please install tensorboardX: pip install tensorboardX")\n',
            ),
        ),
    ),
)
