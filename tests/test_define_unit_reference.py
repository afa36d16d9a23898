"""The DeFINE unit against an independent computation written with explicit per-group loops
(paper section 3.2-3.3, appendix A.1), at settings where the layers after the first have more
than one group: there the split/mix skip differs from a plain concatenation of the input, and
the shuffled GLT differs from the unshuffled one."""

import pytest
import torch

from fairseq_define.modules import DefineUnit, build_schedule


def group_linear_ref(x, weight, bias, groups, shuffle):
    """x [T, in]; weight [g, in/g, out/g] (the layer's parameter); group i reads input
    features [i*in/g, (i+1)*in/g). Without shuffle group i writes outputs [i*out/g, ...);
    with it, output feature j of group i lands at j*g + i (the groups interleaved)."""
    T, n_in = x.shape
    gi, go = n_in // groups, weight.shape[2]
    y = torch.zeros(T, go * groups, dtype=x.dtype)
    for i in range(groups):
        out_i = x[:, i * gi:(i + 1) * gi] @ weight[i]  # [T, out/g]
        for j in range(go):
            y[:, j * groups + i if shuffle else i * go + j] = out_i[:, j]
    return y if bias is None else y + bias


def layer_norm_ref(x, norm):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def mix_ref(e, h, groups):
    """Section 3.3's split and mix: [e_1, h_1, e_2, h_2, ...], chunks taken one by one."""
    ce, ch = e.shape[1] // groups, h.shape[1] // groups
    parts = []
    for i in range(groups):
        parts += [e[:, i * ce:(i + 1) * ce], h[:, i * ch:(i + 1) * ch]]
    return torch.cat(parts, 1)


# transform -> how layer l > 1 reads the input e and the previous output h (the paper's
# variants, written here independently of the schedule's own ``skip`` field)
SKIPS = {"linear": "none", "glt": "none", "glt_shuffle": "none", "hgt": "none",
         "define_nomix": "concat", "define": "mix", "define_residual": "residual"}


def unit_ref(unit, e, transform):
    shuffle = transform == "glt_shuffle"
    h = None
    n_layers = len(unit.layers)
    for l, layer in enumerate(unit.layers):
        t = layer.transform
        if l == 0 or SKIPS[transform] in ("none", "residual"):
            x = e if l == 0 else h
        elif SKIPS[transform] == "mix":
            x = mix_ref(e, h, t.groups)
        else:
            x = torch.cat([e, h], 1)
        # the last Expand layer feeds Reduce, which reads it whole: no shuffle there
        y = group_linear_ref(x, t.weight, t.bias, t.groups, shuffle and l < n_layers - 1)
        y = layer_norm_ref(y, layer.norm)
        y = y * torch.sigmoid(y)  # swish
        h = h + y if (SKIPS[transform] == "residual" and l > 0) else y
    r = unit.reduce
    return group_linear_ref(torch.cat([h, e], 1), r.weight, r.bias, r.groups, False)


@pytest.mark.parametrize("transform", list(SKIPS))
def test_unit_equals_per_group_reference(transform):
    torch.manual_seed(0)
    s = build_schedule(16, 64, 3, 24, transform, max_groups=8)
    if transform in ("glt", "glt_shuffle", "hgt", "define_nomix", "define", "define_residual"):
        assert all(g > 1 for g in s.layer_groups), s.layer_groups  # groups matter in every layer
    unit = DefineUnit(s).double().eval()
    with torch.no_grad():
        for name, p in unit.named_parameters():
            if "norm" in name or "bias" in name:
                p.normal_(0, 0.5)  # non-trivial LayerNorm affine and biases
    e = torch.randn(5, 16, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(unit(e), unit_ref(unit, e, transform), atol=1e-10, rtol=1e-10)


def test_mix_and_concat_and_shuffle_change_the_output_at_these_settings():
    """The reference distinguishes the variants it pins: mixing differs from concatenating
    and shuffling from not shuffling, with the same weights."""
    torch.manual_seed(1)
    e = torch.randn(5, 16, dtype=torch.float64)
    unit = DefineUnit(build_schedule(16, 64, 3, 24, "define", max_groups=8)).double()
    assert not torch.allclose(unit_ref(unit, e, "define"), unit_ref(unit, e, "define_nomix"))
    unit = DefineUnit(build_schedule(16, 64, 3, 24, "glt_shuffle", max_groups=8)).double()
    assert not torch.allclose(unit_ref(unit, e, "glt_shuffle"), unit_ref(unit, e, "glt"))
