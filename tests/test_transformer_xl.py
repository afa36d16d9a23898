"""Transformer-XL: relative attention against a naive computation, memory against one pass
over the concatenated context, incremental decoding, the adaptive input-output layers and
the stream layouts of the contiguous_lm task."""

import pytest
import torch

from fairseq_define.modules.lm.adaptive_io import ProjectedAdaptiveInput, ProjectedAdaptiveSoftmax
from fairseq_define.modules.lm.relative_attention import (
    RelativeMultiheadAttention,
    attention_mask,
    rel_shift,
    relative_positions,
)
from fairseq_define.tasks.contiguous_lm import evaluation_rows, training_rows

from .helpers import sinusoid, tiny_model


@pytest.mark.parametrize("T,M", [(1, 0), (4, 0), (3, 5), (5, 2)])
def test_rel_shift_matches_index_formula(T, M):
    K = T + M
    x = torch.randn(2, 3, T, K)
    out = rel_shift(x)
    for i in range(T):
        for j in range(M + i + 1):  # unmasked keys
            assert torch.equal(out[..., i, j], x[..., i, T - 1 - i + j])


@pytest.mark.parametrize("M,clamp", [(0, -1), (3, -1), (5, 2)])
def test_relative_attention_matches_naive(M, clamp):
    torch.manual_seed(0)
    d, H, D, T, B = 12, 3, 4, 4, 2
    attn = RelativeMultiheadAttention(d, H, D, 0.0, 0.0, normalize_before=False).eval()
    u, v = torch.randn(H, D), torch.randn(H, D)
    x, mem = torch.randn(B, T, d), torch.randn(B, M, d)
    K = M + T
    pos = relative_positions(K, d, clamp, x.device, x.dtype)
    mask = attention_mask(T, M, False, M, x.device)
    out = attn(x, pos, u, v, mask, mem if M else None)

    # naive: for each query i and key j, the embedding of the distance (M + i) - j

    keys = torch.cat([mem, x], 1)
    q, k, val = attn.qkv(keys).chunk(3, -1)
    q, k, val = q[:, -T:].view(B, T, H, D), k.view(B, K, H, D), val.view(B, K, H, D)
    expected = torch.zeros(B, T, H * D)
    for i in range(T):
        scores = torch.full((B, H, K), -float("inf"))
        for j in range(M + i + 1):
            dist = M + i - j
            r = sinusoid(min(dist, clamp) if clamp > 0 else dist, d).to(x.dtype)  # written independently
            r = attn.pos_proj(r).view(H, D)
            scores[:, :, j] = ((q[:, i] + u) * k[:, j]).sum(-1) + ((q[:, i] + v) * r).sum(-1)
        p = torch.softmax(scores * D**-0.5, -1)  # [B, H, K]
        expected[:, i] = torch.einsum("bhj,bjhd->bhd", p, val).reshape(B, H * D)
    expected = attn.layer_norm(x + attn.out_proj(expected))
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_same_length_mask_gives_every_query_the_same_span():
    T, M, mem_len = 4, 4, 4
    mask = attention_mask(T, M, True, mem_len, "cpu")
    # with a full memory, every query sees the mem_len most recent positions, itself included
    assert (~mask).sum(1).tolist() == [mem_len] * T
    for i in range(T):
        assert not mask[i, M + i] and mask[i, M + i - mem_len + 1:M + i + 1].logical_not().all()
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    assert mask[:, M:][future].all()


def banded_mask(L, T, mem_len):
    """One pass over L tokens with the span the segments give: query p attends to keys in
    [start of p's segment - mem_len, p]."""
    p = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return (j > p) | (j < (p // T) * T - mem_len)


def one_pass_features(model, tokens, mask):
    dec = model.decoder
    x = dec.embed_tokens(tokens) * dec.embed_scale
    pos = relative_positions(tokens.size(1), x.size(-1), dec.cfg.clamp_len, x.device, x.dtype)
    for layer in dec.layers:
        x = layer(x, pos, dec.content_bias, dec.position_bias, mask, None)
    return x


@pytest.mark.parametrize("mem_len", [2, 4, 6, 12])  # 2: a memory shorter than the segment
@pytest.mark.parametrize("define", [False, True])
def test_segments_with_memory_equal_one_pass(mem_len, define):
    torch.manual_seed(1)
    extra = dict(define_transform="define", define_expand_dim=32, define_depth=2) if define else {}
    model = tiny_model(mem_len=mem_len, **extra)
    T, S, B = 4, 4, 3
    tokens = torch.randint(4, 50, (B, T * S))
    with torch.no_grad():
        full = one_pass_features(model, tokens, banded_mask(T * S, T, mem_len))
        parts = []
        for s in range(S):
            out, _ = model.decoder(tokens[:, s * T:(s + 1) * T], stream="valid", segment=s)
            parts.append(out)
            for m in model.decoder._stream_memory["valid"][1]:
                assert m.size(1) == min(mem_len, (s + 1) * T)  # never more than mem_len
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=1e-5)
    lp_seg = model.get_normalized_probs((torch.cat(parts, 1), None), log_probs=True)
    lp_full = model.get_normalized_probs((full, None), log_probs=True)
    torch.testing.assert_close(lp_seg, lp_full, atol=1e-5, rtol=1e-5)


def test_memory_restarts_at_segment_zero_and_is_kept_per_stream():
    torch.manual_seed(2)
    model = tiny_model()
    a, b = torch.randint(4, 50, (2, 2, 4))
    with torch.no_grad():
        first, _ = model.decoder(a, stream="train", segment=0)
        model.decoder(b, stream="train", segment=1)
        model.decoder(b, stream="valid", segment=0)  # another stream leaves train's alone
        assert model.decoder._stream_memory["train"][0] == 2
        again, _ = model.decoder(a, stream="train", segment=0)  # a new epoch: no memory
        with_mem, _ = model.decoder(a, stream="train", segment=1)
    torch.testing.assert_close(again, first)
    assert not torch.allclose(with_mem, first)


def test_incremental_decoding_equals_full_pass():
    torch.manual_seed(3)
    model = tiny_model(mem_len=16)
    tokens = torch.randint(4, 50, (2, 9))
    with torch.no_grad():
        full, _ = model.decoder(tokens)
        state = {}
        steps = [model.decoder(tokens[:, : t + 1], incremental_state=state)[0][:, -1] for t in range(9)]
        for m in model.decoder.get_incremental_state(state, "mems"):
            assert m.size(1) <= 16
    torch.testing.assert_close(torch.stack(steps, 1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("n,cutoff,div_val", [(16, [], 1.0), (8, [10, 30], 1.0), (16, [10, 30], 2.0), (8, [20], 1.0)])
def test_projected_adaptive_softmax_normalises_and_scores_targets(n, cutoff, div_val):
    torch.manual_seed(4)
    d, V = 16, 50
    inp = ProjectedAdaptiveInput(V, 1, n, div_val, d, cutoff)
    sm = ProjectedAdaptiveSoftmax(inp)
    with torch.no_grad():
        sm.bias.normal_()
    h = torch.randn(7, d)
    lp = sm.get_log_prob(h)  # [7, V]
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(7), atol=1e-5, rtol=1e-5)
    target = torch.tensor([0, 5, 9, 10, 29, 30, 49])
    torch.testing.assert_close(sm.target_log_prob(h, target), lp.gather(1, target[:, None]).squeeze(1))
    # projections only where a band is narrower than d_model
    widths = [int(n // div_val**i) for i in range(len(cutoff) + 1)]
    assert [inp.weights_for_band(i)[1] is not None for i in range(len(widths))] == [w != d for w in widths]


def test_adaptive_cutoff_beyond_vocabulary_is_a_clear_error():
    with pytest.raises(Exception, match="every cutoff must be below 50"):
        ProjectedAdaptiveInput(50, 1, 8, 1.0, 16, [20, 50])


@pytest.mark.parametrize("n_tokens,rows,T", [(101, 1, 8), (101, 3, 8), (1000, 7, 16), (30, 4, 8), (9, 2, 8)])
@pytest.mark.parametrize("context", [0, 16, 1000])
def test_evaluation_rows_score_every_token_once_on_segment_boundaries(n_tokens, rows, T, context):
    scored = []
    for start, warm, length in evaluation_rows(n_tokens, rows, 0, rows, T, context):
        first = start + warm
        assert first % T == 0 and warm % T == 0 and warm <= max(context, 0) + T
        scored += range(first, start + length)
    assert sorted(scored) == list(range(n_tokens - 1))


def test_training_rows_split_evenly_for_each_shard():
    all_rows = [r for shard in range(2) for r in training_rows(103, 6, shard, 3)]
    assert all_rows == [(i * 17, 0, 17) for i in range(6)]


def test_cached_define_table_gives_the_live_units_outputs():
    from fairseq_define.modules.define.embedding import cache_define_tables

    torch.manual_seed(5)
    model = tiny_model(define_transform="define", define_expand_dim=32, define_depth=2, adaptive_cutoff="20")
    tokens = torch.randint(4, 50, (2, 7))
    with torch.no_grad():
        live, _ = model.decoder(tokens)
        assert cache_define_tables(model) > 0 and model.decoder.embed_tokens.unit is None
        cached, _ = model.decoder(tokens)
    torch.testing.assert_close(cached, live, atol=1e-6, rtol=1e-6)
