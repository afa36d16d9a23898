"""Resuming: the optimizer runs with the command's settings (--weight-decay, --adam-betas,
--adam-eps, ...), not the checkpoint's, as fairseq documents and as the next checkpoint stores."""

from ..edits import CopiedModule, Edit, FilePatch

# The settings are restored by runtime/resumed_optimizer.py (copied into fairseq).
COPIES = (CopiedModule("resumed_optimizer", "a resumed optimizer runs with the command's settings"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/optim/fairseq_optimizer.py",
        "a resumed optimizer keeps the command's betas, eps and weight decay (the checkpoint's ran, the new ones were "
        "stored)",
        (
            Edit(
                "        self.optimizer.load_state_dict(state_dict)\n",
                "        from fairseq._define_runtime.resumed_optimizer import load_with_command_settings  # "
                "(fairseq_define)\n\n"
                "        load_with_command_settings(self, state_dict)  # the checkpoint's moments, this command's "
                "settings\n",
            ),
        ),
    ),
)
