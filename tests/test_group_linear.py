import pytest
import torch

from fairseq_define.modules import GroupLinear


def per_group_reference(layer, x):
    g = layer.groups
    chunks = x.chunk(g, dim=-1)
    out = torch.cat([c @ layer.weight[i] for i, c in enumerate(chunks)], dim=-1)
    return out + (layer.bias if layer.bias is not None else 0)


@pytest.mark.parametrize("in_f,out_f,groups", [(8, 12, 1), (8, 12, 2), (8, 12, 4), (16, 8, 8), (6, 9, 3)])
@pytest.mark.parametrize("bias", [True, False])
def test_equals_per_group_reference(in_f, out_f, groups, bias):
    torch.manual_seed(0)
    layer = GroupLinear(in_f, out_f, groups, bias=bias)
    if bias:
        torch.nn.init.normal_(layer.bias)
    x = torch.randn(3, 5, in_f)
    torch.testing.assert_close(layer(x), per_group_reference(layer, x))
    assert sum(p.numel() for p in layer.parameters()) == in_f * out_f // groups + bias * out_f


def test_shuffle_interleaves_group_outputs():
    torch.manual_seed(0)
    plain = GroupLinear(8, 12, 4, bias=False)
    shuffled = GroupLinear(8, 12, 4, bias=False, shuffle=True)
    shuffled.load_state_dict(plain.state_dict())
    x = torch.randn(7, 8)
    y = plain(x).view(7, 4, 3)  # [T, g, out/g]
    torch.testing.assert_close(shuffled(x), y.transpose(1, 2).reshape(7, 12))


def test_group_output_depends_only_on_its_input_chunk():
    layer = GroupLinear(8, 8, 4)
    x = torch.randn(1, 8, requires_grad=True)
    layer(x)[0, 2:4].sum().backward()  # output group 1
    assert x.grad[0, 2:4].abs().sum() > 0
    assert x.grad[0, :2].abs().sum() == 0 and x.grad[0, 4:].abs().sum() == 0


@pytest.mark.parametrize("in_f,out_f,groups,bad", [(10, 8, 4, "in_features=10"), (8, 10, 4, "out_features=10")])
def test_indivisible_widths_are_rejected(in_f, out_f, groups, bad):
    with pytest.raises(ValueError, match=bad):
        GroupLinear(in_f, out_f, groups)
