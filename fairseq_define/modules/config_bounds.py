"""Ranges of the settings that fairseq would accept silently, or only fail on after minutes
of work: numbers that are not finite, dropout probabilities, factors and scales that must be
positive, sizes that must be at least 1 or are far beyond any model this plugin builds, and
the declared type and choices of every setting (an override or a stored config bypasses
argparse's own checks).

The bounds are documented in docs/errors.md; their values are rows of the patch's one table
(fairseq_define_patch/runtime/size_bounds.py), read here through fairseq_define_patch.installed.
"""

import dataclasses
import enum
import math
import typing
from argparse import Namespace

from fairseq_define_patch.installed import add_neutral_model_settings, size_bound

from ..errors import UserError

# The bounds are rows of the one table of size bounds (fairseq_define_patch/runtime/size_bounds.py),
# which the model budget reads too; each row says why its value.
MAX_DEFINE_DEPTH = size_bound("define_depth")  # N
MAX_DEFINE_WIDTH = size_bound("define_width")  # n, k, m
MAX_VOCAB_SIZE = size_bound("vocabulary")  # fairseq-define-params --vocab-size
MAX_POSITIONS = size_bound("positions")  # lengths in tokens: Transformer-XL's mem_len, tgt_len, clamp_len

class ConfigRangeError(UserError, ValueError):
    """A setting outside its range; the message names the value and the range."""


def _settings(cfg):
    if isinstance(cfg, Namespace):
        return vars(cfg).items()
    if dataclasses.is_dataclass(cfg):
        return ((f.name, getattr(cfg, f.name, None)) for f in dataclasses.fields(cfg))
    if hasattr(cfg, "keys"):  # omegaconf DictConfig
        return ((k, cfg.get(k)) for k in cfg.keys())
    return ()


def check_dropouts(cfg) -> None:
    """Every ``*dropout*`` probability of a model config in [0, 1): fairseq's dropout modules
    treat a negative one as 0 and a 1 as "drop everything" without a word."""
    for name, value in _settings(cfg):
        if "dropout" not in name or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not 0 <= value < 1:
            raise ConfigRangeError(
                f"{name}={value} is not a dropout probability: use a value in [0, 1) "
                f"(--{name.replace('_', '-')} 0 turns it off)"
            )


# settings that must be positive: a zero or negative factor, divisor or scale builds a broken
# model without a word (fairseq's adaptive input/softmax settings included)
POSITIVE_SETTINGS = ("define_unit_grad_scale", "div_val", "adaptive_input_factor", "adaptive_softmax_factor")
# integer settings with these endings are sizes: at least 1 (the --define-* sizes have their
# own messages, define_config.check_positive)
SIZE_SUFFIXES = ("_dim", "_layers", "_heads")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _declared(config_types) -> dict:
    """name -> (kind, choices) for the fields of the dataclasses; kind is bool, int, float or
    str, choices a tuple for a ChoiceEnum field (Optional[...] unwrapped)."""
    out = {}
    for cls in config_types:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            kind = hints.get(f.name, f.type)
            args = [a for a in typing.get_args(kind) if a is not type(None)]
            if typing.get_origin(kind) is typing.Union and len(args) == 1:
                kind = args[0]
            if isinstance(kind, type) and issubclass(kind, enum.Enum):
                out[f.name] = (str, tuple(str(e.value) for e in kind))
            elif kind in (bool, int, float, str):
                out[f.name] = (kind, None)
    return out


def check_settings(cfg, *config_types) -> None:
    """Every setting of a model config, before the model is built: numbers finite, dropouts in
    [0, 1), POSITIVE_SETTINGS above 0, sizes at least 1, and each field of ``config_types``
    (the model's own dataclasses) of its declared type and among its choices."""
    check_dropouts(cfg)
    declared = _declared(config_types)
    for name, value in _settings(cfg):
        if value is None or name.startswith("_") or isinstance(value, str) and value.startswith("${"):
            continue  # unset, private, or an omegaconf interpolation resolved later
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if number and not math.isfinite(value):
            raise ConfigRangeError(f"{name}={value} is not a finite number: give {_flag(name)} a finite value")
        if number and name in POSITIVE_SETTINGS and not value > 0:
            raise ConfigRangeError(f"{name}={value} must be positive ({_flag(name)})")
        if isinstance(value, int) and not isinstance(value, bool) and name.endswith(SIZE_SUFFIXES) and value < 1 \
                and not name.startswith("define_"):
            raise ConfigRangeError(f"{name}={value} is a size and must be at least 1 ({_flag(name)})")
        if name not in declared:
            continue
        kind, choices = declared[name]
        if choices is not None:
            if str(value) not in choices:
                raise ConfigRangeError(f"{name}={value!r} is not one of {', '.join(choices)} ({_flag(name)})")
        elif kind is bool and not isinstance(value, bool):
            raise ConfigRangeError(f"{name}={value!r} must be True or False ({_flag(name)})")
        elif kind is int and not (isinstance(value, int) and not isinstance(value, bool)):
            raise ConfigRangeError(f"{name}={value!r} must be an integer ({_flag(name)})")
        elif kind is float and not number:
            raise ConfigRangeError(f"{name}={value!r} must be a number ({_flag(name)})")
        elif kind is str and not isinstance(value, str):
            raise ConfigRangeError(f"{name}={value!r} must be a string ({_flag(name)})")


def check_size(name: str, flag: str, value: int, bound: int) -> None:
    """A size the model would take minutes to build (or could never hold) is refused at once."""
    if isinstance(value, int) and value > bound:
        raise ConfigRangeError(
            f"{name}={value} is larger than this plugin supports ({bound}); lower {flag} "
            "(the bounds are listed in docs/errors.md)"
        )


# Settings of the plugin's models that do not change what trained weights compute: gradient
# treatments, initialisation and regularisers of training, how the unit is run, and the
# lengths a language model is evaluated at (docs/language_models.md overrides them). The
# patch's checkpoint checks (fairseq/_define_runtime/checkpoint_fit.py) never blame them;
# every other setting that differs from a checkpoint's is refused before its weights load.
NEUTRAL_MODEL_SETTINGS = (
    "define_unit_grad_scale", "define_unit_centring", "lstm_input_centring", "define_token_path",
    "define_compile", "define_compile_mode", "define_row_bucket", "define_cache_on_load",
    "init_std", "weight_drop", "alpha", "beta", "nonmono", "weight_decay",
    "mem_len", "tgt_len", "clamp_len", "same_length", "eval_context",
)


def register_neutral_model_settings() -> None:
    """Tell the patch's checkpoint checks which of the plugin's settings are neutral."""
    add_neutral_model_settings(*NEUTRAL_MODEL_SETTINGS)
