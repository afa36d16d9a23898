"""Settings of the DeFINE unit (paper sections 3.1-3.4, ablations of section 4.4): the
``--define-*`` flags every DeFINE model shares.

Every variant of the paper is a value of ``define_transform``; the layers each one builds are
listed in schedule.py (``define_style=paper``) and schedule_authors.py
(``define_style=authors``, the authors' released unit; docs/define_unit.md). A model resolves
these flags once into typed options (options.py) that the modules take.

The map layer is the model's: an n-dim table here, or the language models' own adaptive input
(``--adaptive-cutoff``/``--div-val``, ``--adaptive-input``), which the unit reads.
"""

from dataclasses import dataclass, field
from typing import List, Optional

from fairseq.dataclass import ChoiceEnum, FairseqDataclass

from ...errors import UserError
from ..config_bounds import MAX_DEFINE_DEPTH, MAX_DEFINE_WIDTH, check_size
from .activations import ACTIVATIONS

DEFINE_TRANSFORM_CHOICES = ChoiceEnum(
    ["none", "projective", "linear", "glt", "glt_shuffle", "hgt", "define_nomix", "define", "define_residual"]
)
DEFINE_ACTIVATION_CHOICES = ChoiceEnum(list(ACTIVATIONS))
DEFINE_NORM_CHOICES = ChoiceEnum(["layer", "group_layer", "none"])
DEFINE_STYLE_CHOICES = ChoiceEnum(["paper", "authors"])
# The one place the default unit structure is chosen (docs/define_unit.md compares the two).
DEFAULT_DEFINE_STYLE = "paper"
DEFINE_UNIT_CENTRING_CHOICES = ChoiceEnum(["batch_mean", "none"])
# --define-unit-grad-scale when not given, for both styles (docs/stability.md)
DEFAULT_UNIT_GRAD_SCALE = 0.01


# settings that older code declared: an adaptive map of DeFINE's own, which every model refused
# (the language models have theirs), and how the unit runs (--define-token-path,
# --define-compile, --define-compile-mode, --define-row-bucket), which no recipe used and which
# the benchmarks now set on a built model (embedding.set_unit_run). A stored config that holds
# them loads, ignoring them; none of them changed what trained weights compute
REMOVED_SETTINGS = ("define_map", "define_adaptive_cutoff", "define_adaptive_factor",
                    "define_token_path", "define_compile", "define_compile_mode", "define_row_bucket")


class DefineConfigError(UserError, ValueError):
    """An invalid DeFINE setting; the message names the value and what would work."""


@dataclass
class DefineConfig(FairseqDataclass):
    define_style: DEFINE_STYLE_CHOICES = field(
        default=DEFAULT_DEFINE_STYLE,
        metadata={
            "help": "structure of the define unit: paper (the paper's text: Expand from n to "
            "k with g_max halved per layer, mixing in the map output, Reduce [e_hat; e] -> m) "
            "or authors (the authors' released DeFINE mode: input Linear n -> m/2, N layers "
            "from m/2 towards k and back to m with groups 1,2,4,..,g_max reversed, per-group "
            "LayerNorm, output Linear; per-band sqrt(dim) map scaling). See docs/define_unit.md"
        },
    )
    define_transform: DEFINE_TRANSFORM_CHOICES = field(
        default="define",
        metadata={
            "help": "token transformation after the map layer: define (HGT + split/mix skip, "
            "the paper's unit), define_nomix, define_residual, hgt, glt, glt_shuffle, linear "
            "(ablations of Tables 6 and 8), projective (one linear n->m, the baseline), or "
            "none (no unit: the map alone; language models only)"
        },
    )
    define_map_dim: int = field(
        default=128, metadata={"help": "n: dimension of the map layer e_i (and of the tied output)"}
    )
    define_expand_dim: int = field(
        default=1024, metadata={"help": "k: width of the last Expand layer e_hat_i"}
    )
    define_depth: int = field(default=3, metadata={"help": "N: number of Expand layers"})
    define_out_dim: Optional[int] = field(
        default=None,
        metadata={"help": "m: output dimension of the unit (default: the model's embedding dim)"},
    )
    define_max_groups: Optional[int] = field(
        default=None,
        metadata={
            "help": "g_max: groups of the first Expand layer (halved per layer for hgt/define, "
            "fixed for glt). Default: 2^ceil(log2(m/32)) as in the authors' code, capped to "
            "the largest power of two dividing n"
        },
    )
    define_groups: Optional[str] = field(
        default=None,
        metadata={"help": "comma-separated groups per Expand layer, overriding the schedule "
                  "(e.g. 8,4,2)"},
    )
    define_activation: DEFINE_ACTIVATION_CHOICES = field(
        default="swish", metadata={"help": "activation after each Expand layer"}
    )
    define_norm: DEFINE_NORM_CHOICES = field(
        default="layer",
        metadata={
            "help": "normalization after each Expand layer: layer (LayerNorm over the layer's "
            "width), group_layer (LayerNorm over each group's out/g features, one affine shared "
            "by the groups), or none. Authors style: layer and group_layer both build their "
            "per-group LayerNorm"
        },
    )
    define_no_bias: bool = field(
        default=False,
        metadata={"help": "no bias in the Expand and Reduce layers (F_G of eq. 1 has none)"},
    )
    define_dropout: float = field(
        default=0.0, metadata={"help": "dropout after each Expand layer"}
    )
    define_map_dropout: float = field(
        default=0.0, metadata={"help": "dropout on the map output e_i before the unit"}
    )
    define_no_reduce: bool = field(
        default=False,
        metadata={"help": "skip Reduce (Table 8b): the unit outputs e_hat of width k"},
    )
    define_unit_grad_scale: Optional[float] = field(
        default=None,
        metadata={
            "help": "multiply the gradients of the unit's parameters (Expand, Reduce, their "
            "norms; not the map, not the projective baseline) by this factor: under SGD a "
            "learning-rate multiplier for the unit, without which AWD-LSTM's SGD at lr 30 "
            "collapses every token's output onto one vector; Adam is invariant to it "
            "(docs/stability.md). Default: 0.01 (either style). "
            "1: no scaling"
        },
    )
    define_unit_centring: DEFINE_UNIT_CENTRING_CHOICES = field(
        default="batch_mean",
        metadata={
            "help": "batch_mean: take the gradient of each of the unit's weights with the "
            "layer's input centred on its batch mean (the mean's share goes to the bias), and "
            "start Reduce's bias where the mean feature maps to 0 (paper style), so that "
            "neither the init nor an SGD step gives every token's output one shared vector "
            "(docs/stability.md); the forward function is unchanged. none: neither"
        },
    )
    define_cache_on_load: bool = field(
        default=False,
        metadata={"help": "inference: after loading a checkpoint, replace each DeFINE unit by "
                  "a table of its outputs for the whole vocabulary (section 3.4)"},
    )
    define_cached_table: bool = field(
        default=False,
        metadata={"help": "the checkpoint holds cached DeFINE tables instead of the units "
                  "(set by fairseq-define-cache-tables; not for training)"},
    )


def check_positive(name: str, flag: str, value) -> None:
    """``value`` is a positive int (not a bool); ``flag`` names where it is set."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise DefineConfigError(f"{name} must be a positive integer, got {value!r} ({flag})")


def check_unit_sizes(n: int, k: int, depth: int, m: int) -> None:
    """The sizes of a unit with Expand layers, in either style: n, m, k and N positive integers
    and within the plugin's bounds (config_bounds.py)."""
    check_positive("define_map_dim (n)", "--define-map-dim", n)
    check_positive("define_out_dim (m)", "--define-out-dim or the model's embedding dim", m)
    check_positive("define_expand_dim (k)", "--define-expand-dim", k)
    check_positive("define_depth (N)", "--define-depth", depth)
    check_size("define_depth (N)", "--define-depth", depth, MAX_DEFINE_DEPTH)
    for name, flag, value in (
        ("define_map_dim (n)", "--define-map-dim", n),
        ("define_expand_dim (k)", "--define-expand-dim", k),
        ("define_out_dim (m)", "--define-out-dim", m),
    ):
        check_size(name, flag, value, MAX_DEFINE_WIDTH)


def _whole(v) -> int:
    """int(v) for a whole number (an int, a float such as 4.0, or its text); ValueError for
    10.5, which int() truncated to 10."""
    if isinstance(v, bool) or isinstance(v, float) and not v.is_integer():
        raise ValueError(v)
    return int(v)


def parse_int_list(value: Optional[str], flag: str) -> Optional[List[int]]:
    if value is None or value == "":
        return None
    if isinstance(value, (list, tuple)) or hasattr(value, "__iter__") and not isinstance(value, str):
        items = list(value)  # a list, or an omegaconf ListConfig (a stored config)
    else:
        items = str(value).strip("()[] ").split(",")  # fairseq also reads "(20000, 60000)"
    try:
        return [_whole(v) for v in items]
    except ValueError:
        raise DefineConfigError(
            f"{flag} must be comma-separated integers (e.g. 8,4,2), got {value!r}"
        ) from None
