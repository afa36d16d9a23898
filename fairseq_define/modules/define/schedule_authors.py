"""Layer shapes of the DeFINE unit as the authors' released code builds it (DeFINE mode
``--define-iclr`` of the DExTra unit in github sacmehta/delight; ``define_style=authors``).

Read from that code, for map width n, expansion width k, depth N and output width m:

- an input Linear n -> m/2 (bias, norm, activation, dropout); its output x is what every
  later layer mixes in (not the map output e);
- N layers: the first reads x (m/2 wide); layer l+1 reads the mix of x and layer l's output,
  so its input is (output of l) + m/2 wide. The outputs of the first N-1 layers are
  ``int(linspace(m/2, k, N))[1:]`` (numpy, truncated), each rounded up to a multiple of
  max(g_l, g_{l+1}, 8); the N-th layer outputs m;
- groups: a counter 1, 2, 4, ... that restarts at 1 after exceeding g_max, listed in reverse
  (N=7, g_max=16: 2, 1, 16, 8, 4, 2, 1); a layer with one group is a plain Linear;
- an output Linear [x; h_N] -> m (m/2 + m inputs; bias, norm, activation, dropout);
- g_max = 2^ceil(log2(m // 32)) (their ``MIN_ELEMENTS_PER_GROUP = 32``).

Their code refuses N < 2, an odd n and an n not divisible by g_max, and it needs m/2 to
split into every layer's groups (the mixer cuts x into them). An explicit g_max is refused
in those cases; the default g_max is halved until it divides n and m/2 (their code has no
model at those shapes: e.g. m = 400 gives g_max 16 there, 8 here), and m < 32 takes
g_max = 1 (their formula is undefined there).
"""

import math
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from .config import DefineConfigError, check_positive, check_unit_sizes

# smallest group their code aims for: g_max = 2^ceil(log2(m // 32))
MIN_FEATURES_PER_GROUP = 32


@dataclass
class AuthorsSchedule:
    """The layer-by-layer shape of the authors' DeFINE unit."""

    map_dim: int  # n: the unit's input width
    proj_dim: int  # m/2: the input projection x mixed into every layer
    out_dim: int  # m
    max_groups: int  # g_max
    layer_in: List[int]
    layer_out: List[int]
    layer_groups: List[int]
    transform: str = "define"
    skip: str = "mix"

    @property
    def reduce_in(self) -> int:
        return self.proj_dim + self.out_dim

    def describe(self) -> str:
        layers = " ".join(
            f"{i}->{o}/g{g}" for i, o, g in zip(self.layer_in, self.layer_out, self.layer_groups)
        )
        return (
            f"define (authors, g_max={self.max_groups}): In {self.map_dim}->{self.proj_dim}, "
            f"Expand {layers}, Out {self.reduce_in}->{self.out_dim}"
        )


def authors_max_groups(m: int) -> int:
    """Their g_max: 2^ceil(log2(m // 32)), 1 where m < 64."""
    return 2 ** max(0, math.ceil(math.log2(max(m // MIN_FEATURES_PER_GROUP, 1))))


def authors_groups(depth: int, max_groups: int) -> List[int]:
    """A counter 1, 2, 4, ... restarting after g_max, reversed."""
    groups, counter = [], 0
    for _ in range(depth):
        g = 2**counter
        if g <= max_groups:
            counter += 1
        else:
            g, counter = 1, 1
        groups.append(g)
    return groups[::-1]


def build_authors_schedule(
    map_dim: int, expand_dim: int, depth: int, out_dim: int, max_groups: Optional[int] = None
) -> AuthorsSchedule:
    n, k, N, m = map_dim, expand_dim, depth, out_dim
    check_unit_sizes(n, k, N, m)  # the bounds of the paper style's too
    if N < 2:
        raise DefineConfigError(
            f"define_depth (N)={N}: the authors' unit needs at least 2 layers; set "
            "--define-depth 2 or more, or use --define-style paper"
        )
    if n % 2:
        raise DefineConfigError(
            f"define_map_dim (n)={n} is odd, which the authors' unit refuses; use an even n "
            f"(e.g. {n + 1}) or --define-style paper"
        )
    if m < 2:
        raise DefineConfigError(f"define_out_dim (m)={m}: the authors' unit projects to m/2, so m must be at least 2")
    half = m // 2
    if max_groups is None:
        g_max = authors_max_groups(m)
        while n % g_max or half % g_max:
            g_max //= 2
    else:
        check_positive("define_max_groups (g_max)", "--define-max-groups", max_groups)
        g_max = max_groups
        if n % g_max:
            raise DefineConfigError(
                f"define_map_dim (n)={n} is not divisible by define_max_groups (g_max)={g_max}, "
                "which the authors' unit refuses; use a g_max dividing n (or leave it unset)"
            )
    groups = authors_groups(N, g_max)
    for g in groups:  # the mixer cuts x (m/2 wide) into the groups of every layer
        if half % g:
            raise DefineConfigError(
                f"m/2={half} is not divisible by the {g} groups of the authors' schedule "
                f"({','.join(map(str, groups))}); use a smaller --define-max-groups (or leave "
                "it unset) or an m/2 divisible by it"
            )
    # numpy's linspace, truncated, as their code computes the widths
    widths = np.linspace(half, k, N).astype(np.int64).tolist()[1:]
    layer_in, layer_out = [half], []
    for l in range(N - 1):
        q = max(groups[l], groups[l + 1], 8)
        w = int(math.ceil(widths[l] / q)) * q
        layer_out.append(w)
        layer_in.append(w + half)
    layer_out.append(m)
    if m % groups[-1]:
        raise DefineConfigError(f"define_out_dim (m)={m} is not divisible by the last layer's {groups[-1]} groups")
    return AuthorsSchedule(n, half, m, g_max, layer_in, layer_out, groups)
