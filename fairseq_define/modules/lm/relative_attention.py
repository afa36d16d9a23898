"""Transformer-XL layers (Dai et al. 2019, section 3.3): relative multi-head attention with
global content and position biases, sinusoidal relative positions, and the relative shift.
The Transformer-XL of the DeFINE paper (section 4.1, Table 2) is built from these."""

from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.modules import FairseqDropout

from .adaptive_io import at_least_float


def rel_shift(x: torch.Tensor) -> torch.Tensor:
    """Turn scores against relative-position rows into scores against key positions.

    ``x[..., i, j]`` scores query i against position row j, where row j encodes the distance
    K-1-j. The result's ``[..., i, j]`` scores query i against key j, i.e. against distance
    (M + i) - j with M = K - T memory positions: ``out[..., i, j] = x[..., i, T-1-i+j]``
    for every unmasked key (j <= M + i). Done with one pad and two reshapes instead of a
    gather (Dai et al. 2019, appendix B).
    """
    *lead, T, K = x.shape
    x = F.pad(x, (1, 0))  # [*, T, K+1]
    x = x.reshape(*lead, K + 1, T)[..., 1:, :]  # [*, K, T]
    return x.reshape(*lead, T, K)


def relative_positions(length: int, dim: int, clamp_len: int, device, dtype) -> torch.Tensor:
    """Sinusoidal embeddings of the distances length-1 ... 0 (clamped at clamp_len > 0): [K, d]."""
    distance = torch.arange(length - 1, -1, -1.0, device=device)  # [K]
    if clamp_len > 0:
        distance = distance.clamp(max=clamp_len)
    inv_freq = 1.0 / (10000 ** (torch.arange(0.0, dim, 2.0, device=device) / dim))  # [d/2]
    angles = distance[:, None] * inv_freq[None, :]  # [K, d/2]
    return torch.cat([angles.sin(), angles.cos()], dim=-1).to(dtype)  # [K, d]


def attention_mask(T: int, M: int, same_length: bool, mem_len: int, device) -> torch.Tensor:
    """[T, M+T] bool, True where a query may not attend: future keys and, with
    ``same_length``, keys beyond the span every query of the segment can have."""
    ones = torch.ones(T, M + T, dtype=torch.bool, device=device)
    mask = ones.triu(1 + M)
    if same_length:
        span = M + T - mem_len
        shift = T - span if span > 0 else T
        mask = mask | ones.tril(-shift)
    return mask


class RelativeMultiheadAttention(nn.Module):
    """Multi-head attention over [memory; segment] with relative positions:
    score(i, j) = (q_i + u) k_j + (q_i + v) W_r r_{i-j} (Dai et al. 2019, eq. 4 with the
    global biases u, v shared by the layers)."""

    def __init__(self, d_model, n_heads, d_head, dropout, attention_dropout, normalize_before):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_head
        self.qkv = nn.Linear(d_model, 3 * n_heads * d_head, bias=False)
        self.pos_proj = nn.Linear(d_model, n_heads * d_head, bias=False)
        self.out_proj = nn.Linear(n_heads * d_head, d_model, bias=False)
        self.layer_norm = nn.LayerNorm(d_model)
        self.normalize_before = normalize_before
        self.scale = d_head**-0.5
        self.dropout = FairseqDropout(dropout, module_name=self.__class__.__name__)
        self.attention_dropout = FairseqDropout(attention_dropout, module_name=self.__class__.__name__)

    def forward(self, x, pos, content_bias, position_bias, mask, memory: Optional[torch.Tensor] = None):
        # x [B, T, d], memory [B, M, d], pos [K, d] with K = M + T, mask [T, K]
        B, T, _ = x.shape
        H, D = self.n_heads, self.d_head
        keys_in = x if memory is None else torch.cat([memory, x], dim=1)  # [B, K, d]
        K = keys_in.size(1)
        if self.normalize_before:
            keys_in = self.layer_norm(keys_in)
        q, k, v = self.qkv(keys_in).chunk(3, dim=-1)  # [B, K, H*D] each
        q = q[:, -T:].view(B, T, H, D)
        k = k.view(B, K, H, D)
        v = v.view(B, K, H, D)
        r = self.pos_proj(pos).view(K, H, D)
        content = torch.einsum("bihd,bjhd->bhij", q + content_bias, k)  # [B, H, T, K]
        position = rel_shift(torch.einsum("bihd,jhd->bhij", q + position_bias, r))  # [B, H, T, K]
        scores = (content + position) * self.scale
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        prob = self.attention_dropout(F.softmax(at_least_float(scores), dim=-1).type_as(scores))
        out = torch.einsum("bhij,bjhd->bihd", prob, v).reshape(B, T, H * D)  # [B, T, H*D]
        out = self.dropout(self.out_proj(out))  # [B, T, d]
        return x + out if self.normalize_before else self.layer_norm(x + out)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_inner, dropout, normalize_before):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_inner)
        self.fc2 = nn.Linear(d_inner, d_model)
        self.layer_norm = nn.LayerNorm(d_model)
        self.normalize_before = normalize_before
        self.dropout = FairseqDropout(dropout, module_name=self.__class__.__name__)

    def forward(self, x):
        h = self.layer_norm(x) if self.normalize_before else x
        h = self.dropout(self.fc2(self.dropout(F.relu(self.fc1(h)))))
        return x + h if self.normalize_before else self.layer_norm(x + h)


class TransformerXLLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_head, d_inner, dropout, attention_dropout, normalize_before):
        super().__init__()
        self.attention = RelativeMultiheadAttention(
            d_model, n_heads, d_head, dropout, attention_dropout, normalize_before
        )
        self.feed_forward = PositionwiseFeedForward(d_model, d_inner, dropout, normalize_before)

    def forward(self, x, pos, content_bias, position_bias, mask, memory=None):
        return self.feed_forward(self.attention(x, pos, content_bias, position_bias, mask, memory))


def init_transformer_xl_weights(module: nn.Module, std: float = 0.02) -> None:
    """Normal(0, std) weights and zero biases for the linear layers, as the reference code."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)

