"""Ranges of the settings that fairseq would accept silently, or only fail on after minutes
of work: dropout probabilities, and sizes far beyond any model this plugin builds.

The bounds are documented in docs/errors.md; this module is their one home.
"""

import dataclasses
from argparse import Namespace

from ..errors import UserError

# N: the paper's deepest unit has N = 11 (Table 1a); a unit of more Expand layers than this
# is a typo (e.g. --define-depth 100000 would build for minutes before running out of memory).
MAX_DEFINE_DEPTH = 64
# n, k, m: the paper's widest layer is k = 1024; 65,536 is 64 times that.
MAX_DEFINE_WIDTH = 65536
# The largest vocabulary fairseq-define-params counts (WikiText-103 has 267,735 types).
MAX_VOCAB_SIZE = 10_000_000


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


def check_size(name: str, flag: str, value: int, bound: int) -> None:
    """A size the model would take minutes to build (or could never hold) is refused at once."""
    if isinstance(value, int) and value > bound:
        raise ConfigRangeError(
            f"{name}={value} is larger than this plugin supports ({bound}); lower {flag} "
            "(the bounds are listed in docs/errors.md)"
        )
