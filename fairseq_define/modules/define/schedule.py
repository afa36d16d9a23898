"""Layer shapes of the DeFINE unit as the paper describes it (sections 3.1-3.3, ablations of
section 4.4; ``define_style=paper``). The authors' released unit has its own schedule
(schedule_authors.py; the two side by side: docs/define_unit.md).

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
"""

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence

from .config import DefineConfigError, check_positive, check_unit_sizes

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
    groups: Optional[Sequence[int]] = None,
    reduce: bool = True,
) -> DefineSchedule:
    """The widths and groups of every layer of a unit (section 3.2), after checking the
    settings (:func:`check_settings`, then :func:`check_groups_divide` on the groups)."""
    n, k, N, m = map_dim, expand_dim, depth, out_dim
    check_settings(n, k, N, m, transform, max_groups, groups, reduce)
    if transform == "projective":
        return DefineSchedule(transform, n, m, None, False, [], [], [], n, 1)
    kind, skip, shuffle = _TRANSFORMS[transform]
    layer_groups = _layer_groups(kind, N, default_max_groups(n, m) if max_groups is None else max_groups, groups)
    reduce_groups = layer_groups[0] if kind == "fixed" and groups is None else 1
    check_groups_divide(n, m, transform, skip, layer_groups, reduce_groups, reduce)
    widths = _widths(n, k, skip, layer_groups, reduce_groups, reduce)
    reads_e = n if skip in ("mix", "concat") else 0  # the skip puts e beside each later layer's input
    return DefineSchedule(
        transform=transform,
        map_dim=n,
        out_dim=m if reduce else widths[-1],
        skip=skip,
        shuffle=shuffle,
        layer_in=[n] + [w + reads_e for w in widths[:-1]],
        layer_out=widths,
        layer_groups=layer_groups,
        reduce_in=widths[-1] + n if reduce else None,
        reduce_groups=reduce_groups,
    )


def _layer_groups(kind: str, N: int, g_max: int, groups: Optional[Sequence[int]]) -> List[int]:
    """The groups of each Expand layer: the explicit list, one, g_max fixed, or the paper's
    hierarchy g_l = max(floor(g_max / 2^(l-1)), 1)."""
    if groups is not None:
        return list(groups)
    if kind == "one":
        return [1] * N
    if kind == "fixed":
        return [g_max] * N
    return [max(g_max // 2**l, 1) for l in range(N)]


def _widths(n: int, k: int, skip: str, layer_groups: List[int], reduce_groups: int, reduce: bool) -> List[int]:
    """The Expand layers' output widths: linearly spaced from n to k (k/2 each for the
    residual variant), rounded to the groups that write and read them."""
    N = len(layer_groups)
    if skip == "residual":
        return [_round_to(k / 2, math.lcm(*layer_groups, reduce_groups))] * N
    widths = []
    for l, w in enumerate(n + (k - n) * (i + 1) / N for i in range(N)):
        nxt = layer_groups[l + 1] if l + 1 < N else (reduce_groups if reduce else 1)
        widths.append(_round_to(w, math.lcm(layer_groups[l], nxt)))
    return widths


def check_settings(n: int, k: int, N: int, m: int, transform: str, max_groups: Optional[int],
                   groups: Optional[Sequence[int]], reduce: bool) -> None:
    """Refuse the settings no schedule can be built from (one line each, naming the fix)."""
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
    if transform == "projective":  # one Linear n -> m: k and N are not read
        check_positive("define_map_dim (n)", "--define-map-dim", n)
        check_positive("define_out_dim (m)", "--define-out-dim or the model's embedding dim", m)
        if not reduce:
            raise DefineConfigError(
                "define_transform=projective is a single Linear n->m: it cannot be used with "
                "--define-no-reduce; drop that flag or pick another transform"
            )
        return
    check_unit_sizes(n, k, N, m)
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
            check_positive("each value of define_groups", "--define-groups", g)
    elif max_groups is not None and _TRANSFORMS[transform][0] != "one":  # linear reads no g_max
        check_positive("define_max_groups (g_max)", "--define-max-groups", max_groups)


def check_groups_divide(n: int, m: int, transform: str, skip: str, layer_groups: List[int], reduce_groups: int,
                        reduce: bool) -> None:
    """Every layer that reads the input e splits n evenly into its groups, and Reduce's
    groups split m (the paper assumes divisible widths, section 3.2)."""
    readers = [0] + (list(range(1, len(layer_groups))) if skip in ("mix", "concat") else [])
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
