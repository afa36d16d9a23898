"""Group schedule and widths follow the paper; invalid settings name the value and the fix."""

import math

import pytest

from fairseq_define.modules import DefineConfigError, build_schedule
from fairseq_define.tools.params import unit_parameters


@pytest.mark.parametrize("g_max,depth", [(16, 3), (8, 7), (6, 4), (4, 11), (1, 3)])
def test_groups_halve_per_layer_as_the_paper(g_max, depth):
    s = build_schedule(map_dim=96, expand_dim=960, depth=depth, out_dim=96, transform="hgt", max_groups=g_max)
    assert s.layer_groups == [max(g_max // 2 ** (l - 1), 1) for l in range(1, depth + 1)]


@pytest.mark.parametrize("n,k,depth", [(384, 1024, 7), (128, 1024, 3), (256, 2048, 11), (64, 64, 2)])
def test_widths_are_linearly_spaced_and_rounded_to_the_groups(n, k, depth):
    s = build_schedule(n, k, depth, out_dim=n, transform="define", max_groups=8)
    g = s.layer_groups
    for l, w in enumerate(s.layer_out):
        exact = n + (k - n) * (l + 1) / depth
        q = math.lcm(g[l], g[l + 1] if l + 1 < depth else 1)
        assert w % q == 0 and abs(w - exact) <= q / 2
    assert s.layer_out[-1] == k  # k is a multiple of the last groups here
    # mixer layers read [e; h]
    assert s.layer_in == [n] + [n + w for w in s.layer_out[:-1]]
    assert s.reduce_in == s.layer_out[-1] + n


def test_fixed_groups_and_linear_schedules():
    assert build_schedule(384, 1024, 7, 384, "glt", max_groups=4).layer_groups == [4] * 7
    assert build_schedule(384, 1024, 7, 384, "glt", max_groups=4).reduce_groups == 4
    assert build_schedule(384, 1024, 7, 384, "linear").layer_groups == [1] * 7


def test_residual_variant_fixes_widths_to_half_k():
    s = build_schedule(128, 1024, 4, 256, "define_residual", max_groups=8)
    assert s.layer_out == [512] * 4 and s.layer_in == [128, 512, 512, 512]


def test_table_6a_counts_exactly():
    linear, _ = unit_parameters(map_dim=384, expand_dim=1024, depth=7, out_dim=384,
                                transform="linear", bias=False, norm="none")
    widths = [475, 567, 658, 750, 841, 933, 1024]
    ins = [384] + widths[:-1]
    assert linear == sum(i * o for i, o in zip(ins, widths)) + (1024 + 384) * 384
    assert f"{linear / 1e6:.2f}" == "4.23"
    glt, _ = unit_parameters(map_dim=384, expand_dim=1024, depth=7, out_dim=384,
                             transform="glt", max_groups=4, bias=False, norm="none")
    assert f"{glt / 1e6:.2f}" == "1.06"


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (
            dict(map_dim=128, expand_dim=64, depth=3, out_dim=128),
            "define_expand_dim \\(k\\)=64 is smaller than define_map_dim \\(n\\)=128",
        ),
        (
            dict(map_dim=128, expand_dim=1024, depth=0, out_dim=128),
            "define_depth \\(N\\) must be a positive integer, got 0",
        ),
        (
            dict(map_dim=-8, expand_dim=1024, depth=3, out_dim=128),
            "define_map_dim \\(n\\) must be a positive integer, got -8",
        ),
        (dict(map_dim=128, expand_dim=1024, depth=3, out_dim=0), "define_out_dim \\(m\\) must be a positive integer"),
        (
            dict(map_dim=130, expand_dim=1024, depth=3, out_dim=128, max_groups=4),
            "n\\)=130 is not divisible by the 4 groups of Expand layer 1.*128 or 132",
        ),
        (dict(map_dim=96, expand_dim=1024, depth=3, out_dim=128, max_groups=64), "not divisible by the 64 groups"),
        (
            dict(map_dim=128, expand_dim=1024, depth=3, out_dim=128, groups=[4, 2]),
            "define_groups lists 2 values .* define_depth \\(N\\) is 3",
        ),
        (
            dict(map_dim=128, expand_dim=1024, depth=3, out_dim=128, groups=[4, 0, 1]),
            "each value of define_groups must be a positive integer, got 0",
        ),
        (
            dict(map_dim=128, expand_dim=1024, depth=3, out_dim=128, max_groups=0),
            "define_max_groups \\(g_max\\) must be a positive integer",
        ),
        (
            dict(map_dim=128, expand_dim=1024, depth=3, out_dim=128, transform="dense"),
            "unknown define_transform 'dense'",
        ),
        (
            dict(map_dim=128, expand_dim=1024, depth=3, out_dim=128, transform="projective", reduce=False),
            "cannot be used with --define-no-reduce",
        ),
    ],
)
def test_invalid_settings_name_the_value_and_the_fix(kwargs, message):
    with pytest.raises(DefineConfigError, match=message):
        build_schedule(**kwargs)
