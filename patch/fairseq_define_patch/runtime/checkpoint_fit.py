"""A checkpoint's weights go only into a model of the form they were trained in.

fairseq loads a state dict into whatever model the current settings build, and only shapes
are compared: where two forms have equal shapes (an untied output layer and one tied to the
embedding when both are n x V), a checkpoint of one loaded into the other without a word
(two of its tables landed in one tied tensor) and every translation changed. Three checks,
each one line naming what differs:

- ``check_checkpoint_form`` (the trainer, before it loads a checkpoint to resume or fine-tune):
  an inference-only checkpoint (extra_state's INFERENCE_ONLY), the model class, and the stored
  model settings that change what the model computes (sizes, output form, style, activation,
  normalisation, layers), against this run's; settings that do not (dropout, memory lengths
  read at evaluation) are never blamed;
- ``check_overrides_fit`` (load_checkpoint_to_cpu, before --model-overrides or a hub call's
  keyword arguments are applied to the stored config): an override of such a setting to
  another value than the checkpoint's is refused, and so blamed on the override (a size
  mismatch after it was blamed on the dictionary);
- ``check_tied_values`` (checkpoint_weights.py, every model's load_state_dict, after the
  weights are found intact): the keys that name one tied tensor of this model must hold equal
  values; they do in any checkpoint of the same form, and do not when its tables were trained
  apart, which is this module's CheckpointFormError.
"""

from argparse import Namespace

from fairseq import UserError

__all__ = ["CheckpointFormError", "INFERENCE_ONLY", "NEUTRAL_MODEL_SETTINGS", "add_neutral_model_settings",
           "check_checkpoint_form", "check_overrides_fit",
           "function_settings_that_differ", "is_neutral_setting", "stored_model_settings"]


class CheckpointFormError(UserError):
    """A checkpoint whose stored model differs from the one it would be loaded into."""


# the key of a checkpoint's extra_state that says it is for inference only, and why (a tool
# that rewrites a model's tables into a form training cannot continue sets it)
INFERENCE_ONLY = "inference_only"


# Settings of a model config that do not change the function its weights compute: training
# regularisers and memory savers, and lengths a model is evaluated at. Any name holding one of
# NEUTRAL_PARTS counts too. A plugin adds its own with add_neutral_model_settings.
NEUTRAL_PARTS = ("dropout", "layerdrop")
NEUTRAL_MODEL_SETTINGS = {
    "checkpoint_activations", "offload_activations", "min_params_to_wrap", "tpu",
    "max_source_positions", "max_target_positions", "tokens_per_sample",
    "encoder_layers_to_keep", "decoder_layers_to_keep",  # pruning a LayerDrop model on purpose
    "quant_noise_pq", "quant_noise_pq_block_size", "quant_noise_scalar",
    "print_alignment", "data", "arch", "_name", "batch_size", "batch_size_valid",
    "max_model_parameters",  # the model budget's limit (model_budget.py): a legacy model's args keep it
}


def add_neutral_model_settings(*names):
    """(for plugins) settings of their models that do not change what trained weights compute."""
    NEUTRAL_MODEL_SETTINGS.update(names)


def is_neutral_setting(name):
    return name in NEUTRAL_MODEL_SETTINGS or any(part in name for part in NEUTRAL_PARTS)


def config_values(cfg):
    """name -> value of a config (argparse Namespace, dict or omegaconf DictConfig; None: {});
    a value that does not resolve (an interpolation without its parent) is left out."""
    if cfg is None:
        return {}
    if isinstance(cfg, Namespace):
        return dict(vars(cfg))
    if isinstance(cfg, dict):
        return dict(cfg)
    out = {}
    try:
        keys = list(cfg.keys())
    except Exception:
        return out
    for key in keys:
        try:
            out[str(key)] = cfg.get(key)
        except Exception:  # an interpolation that does not resolve here
            continue
    return out


def stored_model_settings(state):
    """The model settings a checkpoint was saved with (its cfg.model, or the args of an old
    one), as a dict; {} when it has none."""
    if not isinstance(state, dict):
        return {}
    cfg = state.get("cfg")
    model = None
    if cfg is not None:
        try:
            model = cfg.get("model") if hasattr(cfg, "get") else getattr(cfg, "model", None)
        except Exception:
            model = None
    if model is None:
        model = state.get("args")
    return _model_options(model)


def _model_options(cfg):
    """A model config's settings; an argparse Namespace (an old checkpoint's args, or the
    cfg.model of a model without a dataclass) holds every setting, the task's too: only its
    model's options are kept."""
    settings = config_values(cfg)
    if not isinstance(cfg, Namespace):
        return settings
    from .model_overrides import _model_option_names

    options = _model_option_names(Namespace(**{k: v for k, v in settings.items() if k in ("arch", "_name")}))
    return {k: v for k, v in settings.items() if k in options or k in ("arch", "_name")}


def _model_name(settings):
    return settings.get("_name") or settings.get("arch")


def _model_class(name):
    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY

    return ARCH_MODEL_REGISTRY.get(name) or MODEL_REGISTRY.get(name)


def _same(a, b):
    if any(isinstance(v, str) and v.startswith("${") for v in (a, b)):
        return True  # an interpolation (omegaconf) not resolved here: nothing to compare
    if a in (None, "") and b in (None, ""):
        return True  # both unset
    if (
        isinstance(a, (int, float))
        and isinstance(b, (int, float))
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        return float(a) == float(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b or str(a) == str(b) and type(a) is type(b)


def function_settings_that_differ(saved, here):
    """[(name, saved value, value here)] of the settings both configs hold that change what
    the model computes, in ``here``'s order; a setting only one of them has (an option added
    after the checkpoint was saved) is not compared."""
    return [
        (name, saved[name], value)
        for name, value in here.items()
        if name in saved and not name.startswith("_") and not is_neutral_setting(name)
        and not _same(saved[name], value)
    ]


def _listed(differ, limit=4):
    parts = ["--{} {} in the checkpoint, {} here".format(n.replace("_", "-"), a, b) for n, a, b in differ[:limit]]
    more = len(differ) - limit
    return "; ".join(parts) + (" and {} more".format(more) if more > 0 else "")


def check_checkpoint_form(filename, state, model_cfg):
    """Before the trainer loads ``state`` (resume, --finetune-from-model): refuse a checkpoint
    of another model class, or whose settings that change the function differ from
    ``model_cfg`` (this run's)."""
    extra = state.get("extra_state") if isinstance(state, dict) else None
    why = extra.get(INFERENCE_ONLY) if isinstance(extra, dict) else None
    if why:
        raise CheckpointFormError(
            "checkpoint {} is for inference only ({}): train or fine-tune from the checkpoint "
            "it was made from".format(filename, why)
        )
    saved, here = stored_model_settings(state), _model_options(model_cfg)
    if not saved or not here:
        return
    a, b = _model_name(saved), _model_name(here)
    if a and b and a != b and _model_class(a) is not _model_class(b):
        raise CheckpointFormError(
            "checkpoint {} does not fit this model: --arch {} in the checkpoint, {} here (a {}, "
            "not a {}); resume or fine-tune with --arch {}, or train from scratch in a new "
            "--save-dir".format(
                filename, a, b, getattr(_model_class(a), "__name__", a), getattr(_model_class(b), "__name__", b), a
            )
        )
    differ = function_settings_that_differ(saved, here)
    if differ and a and b and a != b:  # another architecture of the same model: name it first
        raise CheckpointFormError(
            "checkpoint {} does not fit this model: --arch {} in the checkpoint, {} here, whose "
            "settings differ: {}; resume or fine-tune with --arch {}, or train from scratch in a "
            "new --save-dir".format(filename, a, b, _listed(differ), a)
        )
    if differ:
        raise CheckpointFormError(
            "checkpoint {} does not fit this model: its model settings differ from this run's: {}; "
            "these change what its weights compute: resume or fine-tune with the checkpoint's "
            "values (dropout and the like may differ), or train from scratch in a new "
            "--save-dir".format(filename, _listed(differ))
        )


def check_overrides_fit(state, overrides, path):
    """Before --model-overrides (or from_pretrained's keyword arguments) are written into the
    config stored in ``state``: an override that gives a setting changing the function
    another value than the checkpoint was trained with is refused."""
    if not overrides or not isinstance(overrides, dict):
        return
    saved = stored_model_settings(state)
    differ = [
        (name, saved[name], value)
        for name, value in overrides.items()
        if isinstance(name, str) and name in saved and not name.startswith("_")
        and not is_neutral_setting(name) and not _same(saved[name], value)
    ]
    if differ:
        raise CheckpointFormError(
            "--model-overrides {} for {}: {} changes what the trained weights compute, so it "
            "cannot be overridden at load time; drop it (settings such as dropout or the "
            "positions may be overridden)".format(
                ", ".join("{}={!r} (trained with {!r})".format(n, b, a) for n, a, b in differ),
                path, "it" if len(differ) == 1 else "each",
            )
        )
