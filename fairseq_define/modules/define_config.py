"""Settings of the DeFINE unit and the layer schedule they imply (paper sections 3.1-3.3,
ablations of section 4.4).

Every variant of the paper is a value of ``define_transform``:

============== ===================================== ==============================
transform      layers (Expand)                        paper
============== ===================================== ==============================
none           no unit (language models only)        the map alone, Table 2 rows
projective     none: one Linear n -> m               projective baseline, Table 2
linear         N linear layers, widths n -> k        Table 6a "Linear"
glt            N group linear layers, g fixed        Table 6a "GLT"
glt_shuffle    GLT + feature shuffle                 Table 6a "GLT + Shuffle"
hgt            groups g_l = max(g_max // 2^(l-1), 1) Table 6a/b "HGT", Fig. 2c
define_nomix   HGT + input concatenated (no mixer)   Table 6b, Fig. 5d
define         HGT + split/mix skip to the input     DeFINE, Fig. 3 / 5c
define_residual HGT + residual, widths fixed to k/2  Table 8a, Fig. 5b
============== ===================================== ==============================

Reduce maps the concatenation [e_hat; e] (last Expand output and the map output) to m;
``define_no_reduce`` drops it (Table 8b) and the unit outputs e_hat (width k).

Widths: N values linearly spaced from n to k (excluding n), each rounded half-up to the
nearest multiple of the groups that read or write it (lcm of the layer's groups and the next
layer's groups), as the paper assumes divisible widths (section 3.2).

This is the ``paper`` style; ``define_style=authors`` builds the authors' released unit
instead, with its own schedule (define_schedule_authors.py; docs/define_unit.md).
"""

import math
from dataclasses import dataclass, field
from typing import List, Optional

from fairseq.dataclass import ChoiceEnum, FairseqDataclass

from ..errors import UserError
from .config_bounds import MAX_DEFINE_DEPTH, MAX_DEFINE_WIDTH, check_size

DEFINE_TRANSFORM_CHOICES = ChoiceEnum(
    ["none", "projective", "linear", "glt", "glt_shuffle", "hgt", "define_nomix", "define", "define_residual"]
)
DEFINE_MAP_CHOICES = ChoiceEnum(["standard", "adaptive"])
DEFINE_ACTIVATION_CHOICES = ChoiceEnum(["swish", "gelu", "relu", "tanh", "linear"])
DEFINE_NORM_CHOICES = ChoiceEnum(["layer", "group_layer", "none"])
DEFINE_STYLE_CHOICES = ChoiceEnum(["paper", "authors"])
# The one place the default unit structure is chosen (docs/define_unit.md compares the two).
DEFAULT_DEFINE_STYLE = "paper"
DEFINE_TOKEN_PATH_CHOICES = ChoiceEnum(["unique", "plain"])
DEFINE_UNIT_CENTRING_CHOICES = ChoiceEnum(["batch_mean", "none"])
# --define-unit-grad-scale when not given, by style (docs/stability.md)
DEFAULT_UNIT_GRAD_SCALE = {"paper": 0.01, "authors": 0.1}

# transform -> (group schedule, skip connection to the input, feature shuffle)
_TRANSFORMS = {
    "projective": (None, None, False),
    "linear": ("one", "none", False),
    "glt": ("fixed", "none", False),
    "glt_shuffle": ("fixed", "none", True),
    "hgt": ("halving", "none", False),
    "define_nomix": ("halving", "concat", False),
    "define": ("halving", "mix", False),
    "define_residual": ("halving", "residual", False),
}


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
    define_map: DEFINE_MAP_CHOICES = field(
        default="standard",
        metadata={"help": "map layer: standard embedding table (scaled by sqrt(n)) or "
                  "fairseq's adaptive input (frequency bands of decreasing width)"},
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
    define_adaptive_cutoff: Optional[str] = field(
        default=None,
        metadata={"help": "adaptive map: comma-separated band cutoffs (e.g. 20000,60000)"},
    )
    define_adaptive_factor: float = field(
        default=4.0, metadata={"help": "adaptive map: width divisor between bands"}
    )
    define_unit_grad_scale: Optional[float] = field(
        default=None,
        metadata={
            "help": "multiply the gradients of the unit's parameters (Expand, Reduce, their "
            "norms; not the map, not the projective baseline) by this factor: under SGD a "
            "learning-rate multiplier for the unit, without which AWD-LSTM's SGD at lr 30 "
            "collapses every token's output onto one vector; Adam is invariant to it "
            "(docs/stability.md). Default: 0.01 for the paper's unit, 0.1 for the authors'. "
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
    define_token_path: DEFINE_TOKEN_PATH_CHOICES = field(
        default="unique",
        metadata={
            "help": "unique: run the unit once per distinct token of the batch and gather the "
            "rows (same outputs and gradients, less work; used when the embedding has no "
            "active dropout); plain: once per position"
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


def _positive(name: str, flag: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise DefineConfigError(f"{name} must be a positive integer, got {value!r} ({flag})")


def _round_to(value: float, multiple: int) -> int:
    return max(multiple, int(math.floor(value / multiple + 0.5)) * multiple)


def default_max_groups(n: int, m: int) -> int:
    g = 2 ** max(0, math.ceil(math.log2(max(m, 1) / 32)))
    while n % g:
        g //= 2
    return g


@dataclass
class DefineSchedule:
    """The layer-by-layer shape of a DeFINE unit."""

    transform: str
    map_dim: int  # n
    out_dim: int  # m (or k without Reduce)
    skip: Optional[str]  # none | mix | concat | residual (None: projective)
    shuffle: bool
    layer_in: List[int]
    layer_out: List[int]
    layer_groups: List[int]
    reduce_in: Optional[int]
    reduce_groups: int

    def describe(self) -> str:
        if not self.layer_out:
            return f"{self.transform}: Linear {self.map_dim}->{self.out_dim}"
        layers = " ".join(
            f"{i}->{o}/g{g}" for i, o, g in zip(self.layer_in, self.layer_out, self.layer_groups)
        )
        reduce = (
            f", Reduce {self.reduce_in}->{self.out_dim}/g{self.reduce_groups}"
            if self.reduce_in is not None
            else ", no Reduce"
        )
        return f"{self.transform} (skip={self.skip}): Expand {layers}{reduce}"


def build_schedule(
    map_dim: int,
    expand_dim: int,
    depth: int,
    out_dim: int,
    transform: str = "define",
    max_groups: Optional[int] = None,
    groups: Optional[List[int]] = None,
    reduce: bool = True,
) -> DefineSchedule:
    """Validate the settings and compute widths and groups of every layer."""
    transform = str(transform)
    if transform == "none":
        raise DefineConfigError(
            "define_transform=none means no DeFINE unit, which only the language models "
            "accept; pick a transform (e.g. define), or use fairseq's --arch transformer "
            "for a model without DeFINE"
        )
    if transform not in _TRANSFORMS:
        raise DefineConfigError(
            f"unknown define_transform {transform!r}; choose one of {', '.join(_TRANSFORMS)}"
        )
    n, k, N, m = map_dim, expand_dim, depth, out_dim
    _positive("define_map_dim (n)", "--define-map-dim", n)
    _positive("define_out_dim (m)", "--define-out-dim or the model's embedding dim", m)
    schedule, skip, shuffle = _TRANSFORMS[transform]
    if transform == "projective":
        if not reduce:
            raise DefineConfigError(
                "define_transform=projective is a single Linear n->m: it cannot be used with "
                "--define-no-reduce; drop that flag or pick another transform"
            )
        return DefineSchedule(transform, n, m, None, False, [], [], [], n, 1)
    _positive("define_expand_dim (k)", "--define-expand-dim", k)
    _positive("define_depth (N)", "--define-depth", N)
    check_size("define_depth (N)", "--define-depth", N, MAX_DEFINE_DEPTH)
    for name, flag, value in (("define_map_dim (n)", "--define-map-dim", n), ("define_expand_dim (k)", "--define-expand-dim", k),
                              ("define_out_dim (m)", "--define-out-dim", m)):
        check_size(name, flag, value, MAX_DEFINE_WIDTH)
    if k < n:
        raise DefineConfigError(
            f"define_expand_dim (k)={k} is smaller than define_map_dim (n)={n}: Expand must "
            f"widen the map; set --define-expand-dim to at least {n} (the paper uses k >> n) "
            "or use --define-transform projective"
        )

    if groups is not None:
        if len(groups) != N:
            raise DefineConfigError(
                f"define_groups lists {len(groups)} values ({','.join(map(str, groups))}) but "
                f"define_depth (N) is {N}; give one group count per Expand layer"
            )
        for g in groups:
            _positive("each value of define_groups", "--define-groups", g)
        layer_groups = list(groups)
    elif schedule == "one":
        layer_groups = [1] * N
    else:
        if max_groups is None:
            g_max = default_max_groups(n, m)
        else:
            _positive("define_max_groups (g_max)", "--define-max-groups", max_groups)
            g_max = max_groups
        if schedule == "fixed":
            layer_groups = [g_max] * N
        else:  # the paper's g_l = max(floor(g_max / 2^(l-1)), 1)
            layer_groups = [max(g_max // 2**l, 1) for l in range(N)]
    reduce_groups = layer_groups[0] if schedule == "fixed" and groups is None else 1

    # Every layer that reads the input e must split n evenly into its groups.
    readers = [0] + (list(range(1, N)) if skip in ("mix", "concat") else [])
    need = [(f"the {layer_groups[l]} groups of Expand layer {l + 1}", layer_groups[l]) for l in readers]
    if reduce:
        need.append((f"the {reduce_groups} groups of Reduce", reduce_groups))
    for what, g in need:
        if n % g:
            ok = [v for v in (n - n % g, n - n % g + g) if v > 0]
            raise DefineConfigError(
                f"define_map_dim (n)={n} is not divisible by {what} (groups per layer: "
                f"{','.join(map(str, layer_groups))}); use a multiple of {g} for n (e.g. "
                f"{' or '.join(map(str, ok))}) or lower --define-max-groups / --define-groups"
            )

    if reduce and m % reduce_groups:
        raise DefineConfigError(
            f"define_out_dim (m)={m} is not divisible by the {reduce_groups} groups of Reduce "
            f"(transform {transform} groups Reduce too); use a multiple of {reduce_groups} for m "
            f"or lower --define-max-groups"
        )

    if skip == "residual":
        q = math.lcm(*layer_groups, reduce_groups)
        widths = [_round_to(k / 2, q)] * N
    else:
        widths = []
        for l, w in enumerate(n + (k - n) * (i + 1) / N for i in range(N)):
            nxt = layer_groups[l + 1] if l + 1 < N else (reduce_groups if reduce else 1)
            widths.append(_round_to(w, math.lcm(layer_groups[l], nxt)))

    layer_in = [n]
    for l in range(1, N):
        layer_in.append(widths[l - 1] + (n if skip in ("mix", "concat") else 0))
    return DefineSchedule(
        transform=transform,
        map_dim=n,
        out_dim=m if reduce else widths[-1],
        skip=skip,
        shuffle=shuffle,
        layer_in=layer_in,
        layer_out=widths,
        layer_groups=layer_groups,
        reduce_in=widths[-1] + n if reduce else None,
        reduce_groups=reduce_groups,
    )


def parse_int_list(value: Optional[str], flag: str) -> Optional[List[int]]:
    if value is None or value == "":
        return None
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    try:
        return [int(v) for v in str(value).split(",")]
    except ValueError:
        raise DefineConfigError(
            f"{flag} must be comma-separated integers (e.g. 8,4,2), got {value!r}"
        ) from None


def unit_out_dim(cfg, out_dim: int) -> int:
    """m: ``--define-out-dim`` when set, else the model's embedding dim ``out_dim`` (both
    styles; 0 is refused, not read as unset)."""
    m = getattr(cfg, "define_out_dim", None)
    if m is None:
        return out_dim
    _positive("define_out_dim (m)", "--define-out-dim (or leave it out for the model's embedding dim)", m)
    return m


def schedule_from_config(cfg, out_dim: int, in_dim: Optional[int] = None) -> DefineSchedule:
    """Schedule for a config object with the ``define_*`` fields (argparse or dataclass);
    ``in_dim`` is the unit's input width when it differs from the map dim n (the
    Transformer-XL's unit reads the projected d_model-dim embedding, Table 2)."""
    return build_schedule(
        map_dim=in_dim or cfg.define_map_dim,
        expand_dim=cfg.define_expand_dim,
        depth=cfg.define_depth,
        out_dim=unit_out_dim(cfg, out_dim),
        transform=cfg.define_transform,
        max_groups=cfg.define_max_groups,
        groups=parse_int_list(cfg.define_groups, "--define-groups"),
        reduce=not cfg.define_no_reduce,
    )
