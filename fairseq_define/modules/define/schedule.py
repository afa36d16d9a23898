"""Layer shapes of the DeFINE unit as the paper describes it (sections 3.1-3.3, ablations of
section 4.4; ``define_style=paper``). The authors' released unit has its own schedule
(define_schedule_authors.py; the two side by side: docs/define_unit.md).

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
    """Validate the settings and compute widths and groups of every layer."""
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
    check_positive("define_map_dim (n)", "--define-map-dim", n)
    check_positive("define_out_dim (m)", "--define-out-dim or the model's embedding dim", m)
    schedule, skip, shuffle = _TRANSFORMS[transform]
    if transform == "projective":
        if not reduce:
            raise DefineConfigError(
                "define_transform=projective is a single Linear n->m: it cannot be used with "
                "--define-no-reduce; drop that flag or pick another transform"
            )
        return DefineSchedule(transform, n, m, None, False, [], [], [], n, 1)
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
        layer_groups = list(groups)
    elif schedule == "one":
        layer_groups = [1] * N
    else:
        if max_groups is None:
            g_max = default_max_groups(n, m)
        else:
            check_positive("define_max_groups (g_max)", "--define-max-groups", max_groups)
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
