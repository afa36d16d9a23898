"""The structures of the DeFINE unit (``--define-style``), side by side in one table: what
each style checks, the schedule it computes, the unit class it builds and how it reads the
map (docs/define_unit.md compares them). :class:`DefineEmbedding` and the options take
everything style-specific from here.

- ``paper``: the paper's text (sections 3.1-3.3; schedule.py, unit.py), every
  transform of section 4.4's ablations; the map output scaled by the model's factor.
- ``authors``: the authors' released DeFINE mode (schedule_authors.py,
  unit_authors.py) for ``define``; ``projective`` and ``none`` build no DeFINE unit,
  so they are built in the paper style. Its map scales each adaptive band by sqrt(its width)
  and drops one mask per sequence.
"""

from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import torch
from fairseq.modules import AdaptiveInput

from ..lm.adaptive_io import band_scaled_forward
from ..lm.awd_regularization import locked_dropout
from .config import DefineConfigError
from .schedule import build_schedule
from .schedule_authors import build_authors_schedule
from .unit import DefineUnit
from .unit_authors import AuthorsDefineUnit


@dataclass(frozen=True)
class Style:
    """What one value of ``--define-style`` builds."""

    transforms: Optional[Tuple[str, ...]]  # the transforms it builds a unit for (None: every one)
    check: Optional[Callable]  # (DefineConfig) -> None: refuse the settings it cannot build, one line each
    schedule: Callable  # (DefineOptions, in_dim n, out_dim m) -> the layer shapes of its unit
    unit: type  # unit(schedule, activation=, norm=, bias=, dropout=): e [*, n] -> [*, m]
    read_map: Callable  # (DefineEmbedding, tokens [*]) -> the unit's input e [*, n]
    # (DefineEmbedding, tokens [*]) -> (e [*, n], factor), the unit's input being factor * e, or
    # None: read_map's result with the factor apart, which the unit's fused path folds into a matmul
    factored_map: Optional[Callable] = None


def _paper_schedule(options, n: int, m: int):
    return build_schedule(n, options.expand_dim, options.depth, m, transform=options.transform,
                          max_groups=options.max_groups, groups=options.groups, reduce=options.reduce)


def _authors_schedule(options, n: int, m: int):
    return build_authors_schedule(n, options.expand_dim, options.depth, m, max_groups=options.max_groups)


def _paper_map(emb, tokens: torch.Tensor) -> torch.Tensor:
    return emb.map_dropout(emb.map(tokens) * emb.map_scale)  # [*, n]


def _authors_map(emb, tokens: torch.Tensor) -> torch.Tensor:
    if isinstance(emb.map, AdaptiveInput):
        e = band_scaled_forward(emb.map, tokens)  # [*, n]: each band scaled instead of the whole map
    else:
        e = emb.map(tokens) * emb.map_scale  # [*, n]
    if e.dim() == 3:  # their map dropout: one mask per sequence
        return locked_dropout(e, emb.map_dropout.p, emb.training)
    return emb.map_dropout(e)


def _factored_table(emb, tokens: torch.Tensor):
    """Both styles read a standard map as its table's rows times the map's scale, then
    dropout: without dropout, the rows and the scale."""
    if emb.map_kind == "standard" and emb.map_dropout.p == 0:
        return emb.map(tokens), emb.map_scale  # [*, n]
    return None


# the transforms with no DeFINE unit, which every style builds as the paper does
NO_UNIT_TRANSFORMS = ("projective", "none")


def _check_authors(settings) -> None:
    """Refuse the settings that only the paper style builds (one line each, with the fix)."""
    transform = str(settings.define_transform)
    if transform != "define" and transform not in NO_UNIT_TRANSFORMS:
        raise DefineConfigError(
            f"define_transform={transform} is an ablation of the paper's unit (Tables 6 and 8) "
            "with no counterpart in the authors' code; use --define-style paper with it, or "
            "--define-transform define"
        )
    if transform != "define":
        return
    if settings.define_no_reduce:
        raise DefineConfigError(
            "--define-no-reduce: the authors' unit always ends with its output layer; drop "
            "the flag or use --define-style paper"
        )
    if settings.define_groups:
        raise DefineConfigError(
            f"--define-groups {settings.define_groups}: the authors' schedule derives the groups "
            "from g_max; set --define-max-groups instead, or use --define-style paper"
        )


# one row per choice of --define-style (DEFINE_STYLE_CHOICES)
STYLES = {
    "paper": Style(None, None, _paper_schedule, DefineUnit, _paper_map, _factored_table),
    "authors": Style(("define",), _check_authors, _authors_schedule, AuthorsDefineUnit, _authors_map, _factored_table),
}

# every module class that is a DeFINE unit (the parameter report counts them as DeFINE)
UNIT_TYPES = tuple(style.unit for style in STYLES.values())


def resolve_style(style: str, transform: str, settings) -> str:
    """The style a unit of ``transform`` is built in under ``--define-style style``, after the
    style's check of ``settings`` (a DefineConfig)."""
    if style not in STYLES:
        raise DefineConfigError(f"define_style={style!r} is not one of {', '.join(STYLES)} (--define-style)")
    row = STYLES[style]
    if row.check is not None:
        row.check(settings)
    return style if row.transforms is None or transform in row.transforms else "paper"
