"""The DeFINE unit and embedding, for every transform of the paper (tiny sizes)."""

import pytest
import torch

from fairseq_define.modules import DefineEmbedding, DefineUnit, build_schedule, split_and_mix

from .helpers import define_options, model_map

TRANSFORMS = ["projective", "linear", "glt", "glt_shuffle", "hgt", "define_nomix", "define", "define_residual"]


def expected_parameters(s, bias=True, norm=True):
    """Closed form: F_G weights in*out/g, biases, LayerNorm (2 per feature), Reduce."""
    total = 0
    for i, o, g in zip(s.layer_in, s.layer_out, s.layer_groups):
        total += i * o // g + bias * o + norm * 2 * o
    if s.reduce_in is not None:
        total += s.reduce_in * s.out_dim // s.reduce_groups + bias * s.out_dim
    return total


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("bias,norm", [(True, "layer"), (False, "none")])
def test_shapes_and_parameter_formula(transform, bias, norm):
    s = build_schedule(16, 64, 3, 24, transform, max_groups=4)
    unit = DefineUnit(s, norm=norm, bias=bias)
    out = unit(torch.randn(2, 5, 16))
    assert out.shape == (2, 5, 24)
    assert sum(p.numel() for p in unit.parameters()) == expected_parameters(s, bias, norm == "layer")


def test_projective_is_one_linear_map():
    s = build_schedule(16, 64, 3, 24, "projective")
    assert s.layer_out == [] and s.reduce_in == 16
    assert sum(p.numel() for p in DefineUnit(s).parameters()) == 16 * 24 + 24


def test_without_reduce_the_unit_outputs_k():
    s = build_schedule(16, 64, 3, 24, "define", max_groups=4, reduce=False)
    unit = DefineUnit(s)
    assert unit.reduce is None and unit(torch.randn(3, 16)).shape == (3, 64)


def test_split_and_mix_pairs_chunk_i_of_input_with_chunk_i_of_previous_output():
    e = torch.arange(8.0).view(1, 8)  # chunks [0,1] [2,3] [4,5] [6,7]
    h = 100 + torch.arange(12.0).view(1, 12)  # chunks [100..102] [103..105] ...
    mixed = split_and_mix(e, h, 4)
    expected = torch.cat([torch.cat([e[:, 2 * i: 2 * i + 2], h[:, 3 * i: 3 * i + 3]], -1) for i in range(4)], -1)
    assert torch.equal(mixed, expected)


def test_group_i_of_a_mixing_layer_reads_only_chunk_i_of_input_and_previous_output():
    """Through the unit's own layer: the gradient of group i's output reaches only chunk i
    of e and chunk i of h (a concat without mixing would feed group 0 from e alone)."""
    s = build_schedule(16, 64, 2, 16, "define", max_groups=8)  # groups 8, 4
    unit = DefineUnit(s, norm="none", activation="linear")
    layer2 = unit.layers[1]
    g = layer2.transform.groups
    e = torch.randn(1, 16, requires_grad=True)
    h = torch.randn(1, s.layer_out[0], requires_grad=True)
    out = layer2.transform(split_and_mix(e, h, g))
    width = out.shape[-1] // g
    for i in range(g):
        e.grad = h.grad = None
        out[0, i * width:(i + 1) * width].sum().backward(retain_graph=True)
        e_hit = e.grad.view(g, -1).abs().sum(-1) > 0
        h_hit = h.grad.view(g, -1).abs().sum(-1) > 0
        assert e_hit.tolist() == [j == i for j in range(g)]
        assert h_hit.tolist() == [j == i for j in range(g)]


def test_define_forward_matches_a_hand_written_unit():
    torch.manual_seed(0)
    s = build_schedule(8, 32, 2, 8, "define", max_groups=4)
    assert s.layer_groups == [4, 2]  # the second layer is grouped: mixing differs from concat
    unit = DefineUnit(s, norm="none", activation="relu")
    e = torch.randn(4, 8)
    l1, l2 = unit.layers[0].transform, unit.layers[1].transform

    def glt(layer, x):
        return torch.cat([c @ layer.weight[i] for i, c in enumerate(x.chunk(layer.groups, -1))], -1) + layer.bias

    h1 = torch.relu(glt(l1, e))
    e_chunks, h_chunks = e.chunk(l2.groups, -1), h1.chunk(l2.groups, -1)
    mixed = torch.cat([t for pair in zip(e_chunks, h_chunks) for t in pair], -1)
    h2 = torch.relu(glt(l2, mixed))
    ref = torch.cat([h2, e], -1) @ unit.reduce.weight[0] + unit.reduce.bias
    torch.testing.assert_close(unit(e), ref)


def test_residual_variant_adds_the_previous_output():
    s = build_schedule(8, 32, 3, 8, "define_residual", max_groups=2)
    unit = DefineUnit(s, norm="none", activation="linear")
    for layer in unit.layers[1:]:
        torch.nn.init.zeros_(layer.transform.weight)  # residual layers become identity
        torch.nn.init.zeros_(layer.transform.bias)
    e = torch.randn(3, 8)
    h1 = unit.layers[0](e)
    torch.testing.assert_close(unit(e), unit.reduce(torch.cat([h1, e], -1)))


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("map_kind", ["standard", "adaptive"])
def test_embedding_gradients_reach_the_map_table(transform, map_kind):
    torch.manual_seed(0)
    options = define_options(define_transform=transform)
    emb = DefineEmbedding(options, num_embeddings=60, padding_idx=1, out_dim=24,
                          map_layer=model_map(map_kind, vocab=60, cutoff=(20, 40)))
    tokens = torch.tensor([[5, 25, 45, 1]])
    out = emb(tokens)
    assert out.shape == (1, 4, 24) and emb.embedding_dim == 24
    out.sum().backward()
    tables = [emb.map.weight] if map_kind == "standard" else [m[0].weight for m in emb.map.embeddings]
    grads = [t.grad for t in tables]
    if map_kind == "standard":
        rows = grads[0].abs().sum(-1)
        assert rows[5] > 0 and rows[25] > 0 and rows[45] > 0
        assert rows[1] == 0  # padding row stays fixed
        assert rows[6] == 0  # unused tokens get no gradient
    else:
        # bands [0, 20), [20, 40), [40, 60): tokens 5, 25 and 45 are row 5 of each band's table,
        # and only that row moves (the padding token 1 leaves band 0's row 1 fixed)
        for g in grads:
            rows = g.abs().sum(-1)
            assert rows[5] > 0 and rows.nonzero().flatten().tolist() == [5]


def test_standard_map_is_scaled_by_sqrt_n_and_exposes_its_table():
    emb = DefineEmbedding(define_options(), 30, 1, 24)
    assert emb.weight is emb.map.weight and emb.weight.shape == (30, 16)
    tokens = torch.tensor([[3, 4]])
    torch.testing.assert_close(emb.map_tokens(tokens), emb.map.weight[tokens] * 4.0)


