"""Checkpoints load through torch's weights-only unpickler with fairseq's allow-list (torch
>= 2.6 refuses fairseq's checkpoints otherwise, and a pickle could run code), with what one
load may allocate bounded by the file's size; a refused file says whether it can be
converted; a folder, a missing --restore-file or a state_dict that is no checkpoint gets one
line, and so does a resumed checkpoint that does not fit the model: the settings that differ;
every model's weights are checked as they load: a missing, extra, misshapen or non-finite
weight is named (docs/checkpoints.md)."""

from ..edits import CopiedModule, Edit, FilePatch, insert_after, insert_before, replace_span

# The code is in runtime/ (copied into fairseq as fairseq/_define_runtime/): the allow-list,
# the bounded loader and its checks, the inspection behind a refusal, the trainer's line for a
# checkpoint that does not fit. fairseq's files import it; each call replaces the line it
# fixes, so the edits stay at the places fairseq reads a checkpoint.
COPIES = (
    CopiedModule("checkpoint_allow_list", "the classes a checkpoint may hold (weights-only loading)"),
    CopiedModule("checkpoint_inspection", "what a refused checkpoint needs, read without running it"),
    CopiedModule("checkpoint_loading", "weights-only loading with an allow-list (torch >= 2.6), bounded"),
    CopiedModule("checkpoint_misfit", "a resumed checkpoint that does not fit: the settings that differ"),
    CopiedModule("checkpoint_fit", "a checkpoint loads only into a model of the form it was trained in"),
    CopiedModule("checkpoint_weights", "damaged weights named: missing, extra, of another shape, not finite"),
)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/checkpoint_utils.py",
        "weights-only loading with an allow-list (torch >= 2.6), bounded; clear load errors",
        (
            # after fairseq's own imports; the names the patch adds to checkpoint_utils
            # (safe_torch_load, CheckpointLoadError, ...: checkpoint_loading.__all__)
            Edit(
                "logger = logging.getLogger(__name__)\n\n\ndef save_checkpoint(",
                "logger = logging.getLogger(__name__)\n"
                "from fairseq._define_runtime.checkpoint_loading import *  # noqa: E402 F401 F403  (fairseq_define)\n"
                "\n\ndef save_checkpoint(",
            ),
            Edit(
                '        state = torch.load(f, map_location=torch.device("cpu"))\n',
                '        state = safe_torch_load(f, map_location=torch.device("cpu"))\n',
            ),
            # a folder given as a checkpoint, --model-overrides that is not a dict
            Edit(
                '        local_path = PathManager.get_local_path(path)\n\n    with open(local_path, "rb") as f:\n',
                "        local_path = PathManager.get_local_path(path)\n\n"
                "    check_checkpoint_source(path, local_path, arg_overrides)  # (fairseq_define)\n"
                '    with open(local_path, "rb") as f:\n',
            ),
            # torch.save(model.state_dict()) is not a checkpoint: KeyError later
            Edit(
                '\n\n    if "args" in state and state["args"] is not None and arg_overrides is not None:\n',
                "\n\n    check_is_checkpoint(state, path, arg_overrides)  # (fairseq_define)\n"
                '    if "args" in state and state["args"] is not None and arg_overrides is not None:\n',
            ),
            # a dict with a 'model' entry but not the rest: KeyError
            Edit(
                "    state = _upgrade_state_dict(state)\n    return state\n",
                "    state = upgrade_checked(_upgrade_state_dict, state, path)  # (fairseq_define)\n    return state\n",
            ),
            # a folder, or a --restore-file that does not exist: trained from scratch silently
            Edit(
                "        checkpoint_path = cfg.restore_file\n\n"
                '    if cfg.restore_file != "checkpoint_last.pt" and cfg.finetune_from_model:\n',
                "        checkpoint_path = cfg.restore_file\n\n"
                "    check_restore_file(cfg, checkpoint_path)  # (fairseq_define)\n"
                '    if cfg.restore_file != "checkpoint_last.pt" and cfg.finetune_from_model:\n',
            ),
            Edit(
                "        new_state = torch.load(\n            f,\n",
                "        new_state = safe_torch_load(\n            f,\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/distributed/utils.py",
        "torch >= 2.6: a checkpoint broadcast from rank 0 loads with the same allow-list",
        (
            Edit(
                '        obj = torch.load(buffer, map_location="cpu")\n',
                "        from fairseq.checkpoint_utils import safe_torch_load  # (fairseq_define)\n"
                '        obj = safe_torch_load(buffer, map_location="cpu", extra_globals=[_TensorPlaceholder])\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/models/fairseq_model.py",
        "a state dict's weights checked before they load (names, shapes, finite values; tied keys equal)",
        (
            Edit(
                "        return super().load_state_dict(new_state_dict, strict)\n\n    def upgrade_state_dict(",
                "        from fairseq._define_runtime.checkpoint_weights import load_checked  # (fairseq_define)\n"
                "        return load_checked(self, new_state_dict, strict, super().load_state_dict)\n\n"
                "    def upgrade_state_dict(",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/trainer.py",
        "a resumed checkpoint that does not fit the model: the settings that differ, in one line",
        (
            insert_after(
                "from fairseq.optim import lr_scheduler\n",
                "from fairseq._define_runtime.checkpoint_misfit import check_checkpoint_form, checkpoint_misfit  # "
                "(fairseq_define)\n",
            ),
            # before loading (resume, --finetune-from-model): another model class, or settings
            # that change what the weights compute (equal shapes loaded silently)
            insert_before(
                "                self.model.load_state_dict(\n                    state[\"model\"], strict=True, "
                "model_cfg=self.cfg.model\n",
                "                check_checkpoint_form(filename, state, self.cfg.model)  # (fairseq_define)\n",
            ),
            replace_span(  # one line that names what differs
                '                raise Exception(\n                    "Cannot load model parameters from checkpoint '
                '{}; "\n',
                '.format(filename)\n                )\n',
                "                raise checkpoint_misfit(filename, state, self.cfg.model, sys.exc_info()[1])  # "
                "(fairseq_define)\n",
            ),
        ),
    ),
)
