"""Reading a trained checkpoint and writing an inference-only one, for the tools that
rewrite a model's tables (fairseq-define-cache-tables, fairseq-define-compress)."""

from fairseq_define_patch.installed import mark_inference_only

from ..errors import UserError
from ..output_files import check_output, save_checkpoint


def check_fairseq_checkpoint(state, path: str) -> None:
    """A file fairseq-train wrote: a dict with the parameters under "model".
    ``torch.save(model.state_dict())`` is refused in one line (the tools failed on it with
    KeyError 'model' / 'best_loss')."""
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        raise UserError(f"{path} is not a fairseq checkpoint (it has no 'model' entry; a plain state_dict?): "
                        "give a checkpoint written by fairseq-train (checkpoint_best.pt, checkpointN.pt)")


def load_ensemble(path: str, data=None):
    """(model, cfg, task) of a trained checkpoint, loaded by fairseq (on the CPU); fairseq's
    load errors become one clear line."""
    from fairseq import checkpoint_utils, utils

    try:
        overrides = {"data": data} if data else {}
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)
    except (checkpoint_utils.CheckpointLoadError, utils.ConfigLiteralError) as e:
        raise UserError(str(e)) from None
    except FileNotFoundError as e:
        raise UserError(f"{e}; pass --data with the directory holding the model's dict.*.txt") from None
    return models[0], cfg, task


def load_model(path: str, data=None):
    """A trained checkpoint's model (:func:`load_ensemble`)."""
    return load_ensemble(path, data)[0]


def read_for_rewrite(path: str, output: str):
    """The checkpoint as fairseq wrote it, read safely; refuses to overwrite ``output``."""
    from fairseq import checkpoint_utils

    check_output(output, flag=None)  # before the work, which can take minutes (compression)
    try:
        state = checkpoint_utils.safe_torch_load(path, map_location="cpu")
    except checkpoint_utils.CheckpointLoadError as e:
        raise UserError(str(e)) from None
    check_fairseq_checkpoint(state, path)
    return state


def load_model_for_rewrite(path: str, output: str, data=None):
    """(the checkpoint as fairseq wrote it, its model); refuses to overwrite ``output``."""
    return read_for_rewrite(path, output), load_model(path, data)


def mark_cached_tables(state) -> None:
    """The model config says the checkpoint holds cached DeFINE tables, not units."""
    model_cfg = state["cfg"]["model"]  # a Namespace (argparse models) or a dict
    if isinstance(model_cfg, dict):
        model_cfg["define_cached_table"] = True
    else:
        model_cfg.define_cached_table = True


def save_for_inference(state, model, output: str, why: str) -> None:
    """Write ``model``'s weights in ``state`` without what only training needs (the
    optimizer state refers to parameters that may be gone; the data iterator), marked for
    inference only (``why``): fairseq-train refuses to resume or fine-tune from it."""
    state["model"] = model.state_dict()
    state["last_optimizer_state"] = None
    state["extra_state"] = {k: v for k, v in (state.get("extra_state") or {}).items() if k != "train_iterator"}
    mark_inference_only(state, why)
    save_checkpoint(state, output, flag=None)
