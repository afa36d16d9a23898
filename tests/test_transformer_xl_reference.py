"""Transformer-XL's ``clamp_len``, ``same_length`` and memories shorter than a segment,
against a reference that writes the relative positions and the attention span itself
(Dai et al. 2019, section 3.3 and the reference code's ``clamp_len``/``same_length``):
segments with memory equal one pass over the stream where query p attends to key q iff

    start of p's segment - mem_len <= q <= p                (segment recurrence)
    and, with same_length, q > p - mem_len                  (every query the same span)

and the distance p - q is embedded as sinusoid(min(p - q, clamp_len))."""

import pytest
import torch

from .helpers import sinusoid, tiny_model


def positions_ref(L: int, dim: int, clamp_len: int) -> torch.Tensor:
    """The layers' position input for one pass of L tokens: row j embeds distance L-1-j."""
    rows = []
    for j in range(L):
        dist = L - 1 - j
        rows.append(sinusoid(min(dist, clamp_len) if clamp_len > 0 else dist, dim))
    return torch.stack(rows)  # [L, d]


def mask_ref(L: int, T: int, mem_len: int, same_length: bool) -> torch.Tensor:
    """[L, L], True where query p may not attend to key q (see the module docstring)."""
    mask = torch.ones(L, L, dtype=torch.bool)
    for p in range(L):
        lo = (p // T) * T - mem_len
        if same_length:
            lo = max(lo, p - mem_len + 1)
        for q in range(max(lo, 0), p + 1):
            mask[p, q] = False
    return mask


def one_pass_ref(model, tokens, T, mem_len, clamp_len, same_length):
    dec = model.decoder
    L = tokens.size(1)
    x = dec.embed_tokens(tokens) * dec.embed_scale
    pos = positions_ref(L, x.size(-1), clamp_len).to(x.dtype)
    mask = mask_ref(L, T, mem_len, same_length)
    for layer in dec.layers:
        x = layer(x, pos, dec.content_bias, dec.position_bias, mask, None)
    return x


def segments(model, tokens, T):
    parts = []
    for s in range(tokens.size(1) // T):
        out, _ = model.decoder(tokens[:, s * T:(s + 1) * T], stream="valid", segment=s)
        parts.append(out)
    return torch.cat(parts, 1)


# mem_len 2 and 3 are memories shorter than the segment (T = 4)
@pytest.mark.parametrize("mem_len", [2, 3, 4, 6])
@pytest.mark.parametrize("clamp_len", [-1, 2, 5])
@pytest.mark.parametrize("same_length", [False, True])
def test_segments_with_memory_equal_the_reference_pass(mem_len, clamp_len, same_length):
    torch.manual_seed(1)
    T, S, B = 4, 4, 2
    model = tiny_model(mem_len=mem_len, clamp_len=clamp_len, same_length=same_length).double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)  # sharp attention: every key's position shows
        tokens = torch.randint(4, 50, (B, T * S))
        got = segments(model, tokens, T)
        want = one_pass_ref(model, tokens, T, mem_len, clamp_len, same_length)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)  # positions are float32


def test_clamp_and_same_length_change_the_output():
    """The settings above are ones where the clamp and the span restriction matter."""
    torch.manual_seed(1)
    T, mem_len = 4, 6
    model = tiny_model(mem_len=mem_len).double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
        tokens = torch.randint(4, 50, (2, 16))
        base = one_pass_ref(model, tokens, T, mem_len, -1, False)
        assert not torch.allclose(one_pass_ref(model, tokens, T, mem_len, 2, False), base, atol=1e-6)
        assert not torch.allclose(one_pass_ref(model, tokens, T, mem_len, -1, True), base, atol=1e-6)
