"""Property-based tests over DeFINE settings: every valid setting builds, runs forward and
backward with finite values and has the documented parameter count; every invalid one is
rejected with the documented message."""

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fairseq_define.modules import DefineConfigError, DefineUnit, build_schedule

TRANSFORMS = ["projective", "linear", "glt", "glt_shuffle", "hgt", "define_nomix", "define", "define_residual"]


def documented_groups(transform, depth, max_groups, n, m):
    """docs/define_unit.md: halving for hgt/define*, fixed g_max for glt*, 1 for linear."""
    if transform == "linear":
        return [1] * depth, 1
    g_max = max_groups
    if g_max is None:
        g_max = 2 ** max(0, math.ceil(math.log2(m / 32)))
        while n % g_max:
            g_max //= 2
    if transform.startswith("glt"):
        return [g_max] * depth, g_max
    return [max(g_max // 2**l, 1) for l in range(depth)], 1


def expected_error(n, k, depth, m, transform, max_groups, reduce):
    """The documented rejection for these settings, or None if they are valid."""
    if n < 1:
        return "define_map_dim (n) must be a positive integer"
    if m < 1:
        return "define_out_dim (m) must be a positive integer"
    if transform == "projective":
        return None if reduce else "cannot be used with --define-no-reduce"
    if k < 1:
        return "define_expand_dim (k) must be a positive integer"
    if depth < 1:
        return "define_depth (N) must be a positive integer"
    if k < n:
        return "is smaller than define_map_dim (n)"
    if max_groups is not None and max_groups < 1 and transform != "linear":
        return "define_max_groups (g_max) must be a positive integer"
    groups, reduce_groups = documented_groups(transform, depth, max_groups, n, m)
    readers = [groups[0]] + (groups[1:] if transform in ("define", "define_nomix") else [])
    if reduce:
        readers.append(reduce_groups)
    if any(n % g for g in readers):
        return "is not divisible by the"
    if reduce and m % reduce_groups:
        return "define_out_dim (m)={} is not divisible by the {} groups of Reduce".format(m, reduce_groups)
    return None


def parameter_formula(s, bias, norm):
    total = sum(i * o // g + bias * o + norm * 2 * o for i, o, g in zip(s.layer_in, s.layer_out, s.layer_groups))
    if s.reduce_in is not None:
        total += s.reduce_in * s.out_dim // s.reduce_groups + bias * s.out_dim
    return total


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(-2, 40), k=st.integers(-2, 96), depth=st.integers(-1, 5), m=st.integers(-1, 40),
    transform=st.sampled_from(TRANSFORMS), max_groups=st.sampled_from([None, 0, 1, 2, 3, 4, 8]),
    reduce=st.booleans(), bias=st.booleans(), norm=st.sampled_from(["layer", "none"]),
)
def test_every_setting_builds_or_is_rejected_as_documented(n, k, depth, m, transform, max_groups, reduce, bias, norm):
    expected = expected_error(n, k, depth, m, transform, max_groups, reduce)
    try:
        s = build_schedule(n, k, depth, m, transform, max_groups=max_groups, reduce=reduce)
    except DefineConfigError as e:
        assert expected is not None, f"rejected a valid setting: {e}"
        assert expected in str(e), (expected, str(e))
        return
    assert expected is None, f"accepted an invalid setting, expected: {expected}"
    unit = DefineUnit(s, norm=norm, bias=bias)
    x = torch.randn(2, 3, n, requires_grad=True)
    y = unit(x)
    assert y.shape == (2, 3, s.out_dim) and torch.isfinite(y).all()
    y.square().sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in unit.parameters())
    assert sum(p.numel() for p in unit.parameters()) == parameter_formula(s, bias, norm == "layer")
    for w, g in zip(s.layer_out, s.layer_groups):
        assert w % g == 0
