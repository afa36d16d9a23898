"""The public way for a plugin (fairseq_define) into the code the patch adds to fairseq.

The runtime modules run as ``fairseq._define_runtime.*``, the copies ``--apply`` installs; their
tables and registries (the size bounds, the model budget's counters, the neutral settings of
the checkpoint checks) are those copies' state, so a plugin must reach those copies and not
import ``fairseq_define_patch.runtime`` (a second, unused set). Each function imports its
module when called: fairseq may not be importable before the patch is applied.
"""

import importlib

from .edits import RUNTIME_PACKAGE

__all__ = ["add_neutral_model_settings", "add_parameter_limit", "band_cutoffs", "band_width", "check_model_overrides",
           "check_state_dict", "disk_full", "float32_checked", "function_settings_that_differ", "mark_inference_only",
           "parameter_limit_lifted",
           "register_parameter_counter", "size_bound", "stored_model_settings"]


def _runtime(name):
    return importlib.import_module(f"{RUNTIME_PACKAGE.replace('/', '.')}.{name}")


def size_bound(kind):
    """The largest value of a size of ``kind`` (runtime/size_bounds.py: the one table)."""
    return _runtime("size_bounds").size_bound(kind)


def register_parameter_counter(model_class, counter):
    """Count the parameters of ``model_class``'s models with ``counter(settings, task)`` in the
    model budget (runtime/model_budget.py), instead of building them on the meta device."""
    _runtime("model_budget").register_parameter_counter(model_class, counter)


def parameter_limit_lifted():
    """A block whose model builds allocate nothing (the meta device): no parameter limit, the
    size bounds kept (runtime/model_budget.py)."""
    return _runtime("model_budget").parameter_limit_lifted()


def add_parameter_limit(parser, argv):
    """--max-model-parameters on a tool's own parser (runtime/model_budget.py)."""
    _runtime("model_budget").add_parameter_limit(parser, argv)


def add_neutral_model_settings(*names):
    """Settings the checkpoint checks never blame (runtime/checkpoint_fit.py)."""
    _runtime("checkpoint_fit").add_neutral_model_settings(*names)


def stored_model_settings(state):
    """The model settings a checkpoint's ``state`` was saved with, as a dict; {} when it has
    none (runtime/checkpoint_fit.py)."""
    return _runtime("checkpoint_fit").stored_model_settings(state)


def function_settings_that_differ(saved, here):
    """[(name, saved value, value here)] of the settings both hold that change what the model
    computes (runtime/checkpoint_fit.py)."""
    return _runtime("checkpoint_fit").function_settings_that_differ(saved, here)


def mark_inference_only(state, why):
    """Mark a checkpoint's ``state`` for inference only (``why``): fairseq-train refuses to
    resume or fine-tune from it (runtime/checkpoint_fit.py)."""
    state.setdefault("extra_state", {})[_runtime("checkpoint_fit").INFERENCE_ONLY] = why


def check_model_overrides(overrides, cfg, source):
    """Refuse ``overrides`` (settings by name, from ``source``) that name no setting of the
    loaded config ``cfg`` nor an option of its model, with the closest name
    (runtime/model_overrides.py: the check the inference CLIs make of --model-overrides)."""
    _runtime("model_overrides").check_model_overrides(overrides, cfg, source=source)


def check_state_dict(expected, state_dict, **kwargs):
    """Check a checkpoint's weights against ``expected`` (names, shapes, finite values), one
    line naming the tensor (runtime/checkpoint_weights.py)."""
    _runtime("checkpoint_weights").check_state_dict(expected, state_dict, **kwargs)


def float32_checked(model, what="the model"):
    """``model``'s weights checked finite, and a float32 copy of a half-precision model, for an
    exact computation such as the export's probe (runtime/checkpoint_weights.py)."""
    return _runtime("checkpoint_weights").float32_checked(model, what)


def disk_full(exc):
    """Whether ``exc`` is a full disk, as torch.save reports it too (runtime/checkpoint_writes.py)."""
    return _runtime("checkpoint_writes").disk_full(exc)


def band_cutoffs(cutoff, vocab_size, flag, padding_idx=None):
    """``cutoff`` checked as fairseq's adaptive bands use it, the vocabulary size appended
    (runtime/adaptive_bands.py)."""
    return _runtime("adaptive_bands").band_cutoffs(cutoff, vocab_size, flag, padding_idx)


def band_width(width, factor, band):
    """The width fairseq gives adaptive band ``band`` (runtime/adaptive_bands.py)."""
    return _runtime("adaptive_bands").band_width(width, factor, band)
