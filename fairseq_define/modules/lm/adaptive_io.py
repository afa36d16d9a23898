"""Adaptive input with per-band projections and the projected adaptive softmax tied to it
(Baevski & Auli 2019; Dai et al. 2019): the input-output layers of the Transformer-XL rows
of Table 2 (paper section 4.1).

With ``div_val`` = 1 every band is an n-dim table; when n differs from d_model each band has
its own n -> d_model projection, shared by the input and the output layer. That is the
"projective" input-output layer of Table 2: at the WikiText-103 vocabulary it counts
V*n + 4*n*d_model + V (one output bias per word) + the cluster logits, which reproduces the
paper's 110.04 / 103.08 / 69.20 / 34.73 / 17.50M.
"""

import math
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.modules import AdaptiveInput

from fairseq_define_patch.installed import band_cutoffs, band_width

from ...errors import UserError


def at_least_float(x: torch.Tensor) -> torch.Tensor:
    """Normalise in fp32 when the model runs in half precision (and keep fp64 as is)."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def check_cutoff(
    cutoff: Optional[List[int]], vocab_size: int, flag: str, padding_idx: Optional[int] = None
) -> List[int]:
    """Band boundaries, validated against the vocabulary (and, with ``padding_idx``, the
    first band holding the padding symbol: the patch's band_cutoffs); [] means one band."""
    cutoff = list(cutoff or [])
    if any(b <= a for a, b in zip([0] + cutoff, cutoff)):
        raise UserError(f"{flag} must be increasing positive integers, got {','.join(map(str, cutoff))}")
    if cutoff and cutoff[-1] >= vocab_size:
        raise UserError(
            f"{flag} {','.join(map(str, cutoff))} reaches the vocabulary size {vocab_size}; every "
            f"cutoff must be below {vocab_size} (drop the last value, or use cutoffs that fit "
            "this dictionary, e.g. about 10% and 40% of it)"
        )
    if cutoff and padding_idx is not None:
        band_cutoffs(cutoff, vocab_size, flag, padding_idx)
    return cutoff


class ProjectedAdaptiveInput(AdaptiveInput):
    """fairseq's adaptive input, except that a band whose width already equals the output
    width has no projection (the "standard" rows of Table 2 have none)."""

    def __init__(self, vocab_size, padding_idx, initial_dim, factor, output_dim, cutoff,
                 flags=("--adaptive-cutoff", "--div-val")):
        """``flags``: the model's names for the cutoffs and the factor, for error messages."""
        cutoff_flag, factor_flag = flags
        cutoff = check_cutoff(cutoff, vocab_size, cutoff_flag, padding_idx)
        if band_width(initial_dim, factor, len(cutoff)) < 1:  # as AdaptiveInput sizes band i
            raise UserError(
                f"the map width {initial_dim} divided by {factor_flag} {factor:g} for each of the "
                f"{len(cutoff)} cutoffs leaves a band 0 dims wide; use a larger map "
                f"(at least {factor:g}**{len(cutoff)}), a smaller {factor_flag} or fewer cutoffs"
            )
        super().__init__(vocab_size, padding_idx, initial_dim, factor, output_dim, cutoff + [vocab_size])
        for band in self.embeddings:
            if band[0].embedding_dim == output_dim:
                band[1] = nn.Identity()
        self.band_dims = [band[0].embedding_dim for band in self.embeddings]

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """fairseq's adaptive input, with each band's vectors cast to the result's dtype: under
        autocast the projected bands come out in the autocast dtype (and unprojected ones in
        the table's), which the float32 result would refuse."""
        result = self._float_tensor.new(input.shape + (self.embedding_dim,))  # [*, d]
        lower = 0
        for band, upper in enumerate(self.cutoff):
            mask = input.ge(lower) & input.lt(upper)
            if mask.any():
                result[mask] = self.embeddings[band](input[mask] - lower).to(result.dtype)
            lower = upper
        return result

    def weights_for_band(self, band: int):
        """(table [size, n_i], projection [d_model, n_i] or None)."""
        proj = self.embeddings[band][1]
        return self.embeddings[band][0].weight, getattr(proj, "weight", None)


class ProjectedAdaptiveSoftmax(nn.Module):
    """Adaptive softmax whose band i scores a hidden state h [*, d] as (h P_i) E_i^T + b_i,
    with E_i and P_i the table and projection of band i of the tied input layer.

    The head scores the first band and one logit per tail cluster; a tail token's
    log-probability is its cluster's head log-probability plus its log-softmax in the tail.
    Only the biases and the cluster logits are parameters of this module.
    """

    def __init__(self, tied_input: ProjectedAdaptiveInput, bias: bool = True):
        super().__init__()
        # a plain reference: the tied weights are registered (and counted) in the input layer
        object.__setattr__(self, "tied_input", tied_input)
        self.cutoff = list(tied_input.cutoff)  # [c_0, ..., V]
        self.n_clusters = len(self.cutoff) - 1
        # one bias per word (Transformer-XL); the adaptive LSTM rows of Table 1a have none
        self.bias = nn.Parameter(torch.zeros(self.cutoff[-1])) if bias else None
        if self.n_clusters:
            self.cluster_weight = nn.Parameter(torch.zeros(self.n_clusters, tied_input.band_dims[0]))
            self.cluster_bias = nn.Parameter(torch.zeros(self.n_clusters)) if bias else None

    def band_range(self, band: int):
        return (self.cutoff[band - 1] if band else 0), self.cutoff[band]

    def band_logits(self, h: torch.Tensor, band: int) -> torch.Tensor:
        """[N, d] -> [N, size of band] (the head band also gets the cluster logits)."""
        table, proj = self.tied_input.weights_for_band(band)
        z = h if proj is None else h @ proj  # [N, n_i]
        lo, hi = self.band_range(band)
        bias = None if self.bias is None else self.bias[lo:hi]
        if band == 0 and self.n_clusters:
            table = torch.cat([table, self.cluster_weight])
            if bias is not None:
                bias = torch.cat([bias, self.cluster_bias])
        return F.linear(z, table, bias)

    def target_log_prob(self, h: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """log p(target | h) for h [N, d], target [N]: [N], scoring only the needed bands."""
        head = F.log_softmax(at_least_float(self.band_logits(h, 0)), dim=-1)  # [N, c_0 + clusters]
        in_head = target < self.cutoff[0]
        out = torch.zeros_like(target, dtype=head.dtype)
        out[in_head] = head[in_head, target[in_head]]
        for band in range(1, self.n_clusters + 1):
            lo, hi = self.band_range(band)
            rows = ((target >= lo) & (target < hi)).nonzero().squeeze(1)  # [N_band]
            if rows.numel() == 0:
                continue
            tail = F.log_softmax(at_least_float(self.band_logits(h[rows], band)), dim=-1)  # [N_band, size]
            cluster = head[rows, self.cutoff[0] + band - 1]
            out[rows] = cluster + tail.gather(1, (target[rows] - lo).unsqueeze(1)).squeeze(1)
        return out

    def get_log_prob(self, h: torch.Tensor, target: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Log-probabilities of the whole vocabulary: [*, d] -> [*, V] (fairseq's
        ``get_normalized_probs`` calls this, e.g. in fairseq-eval-lm and generation)."""
        lead = h.shape[:-1]
        h = h.reshape(-1, h.size(-1))  # [N, d]
        head = F.log_softmax(at_least_float(self.band_logits(h, 0)), dim=-1)  # [N, c_0 + clusters]
        parts = [head[:, : self.cutoff[0]]]
        for band in range(1, self.n_clusters + 1):
            tail = F.log_softmax(at_least_float(self.band_logits(h, band)), dim=-1)  # [N, size]
            parts.append(head[:, self.cutoff[0] + band - 1 : self.cutoff[0] + band] + tail)
        return torch.cat(parts, dim=-1).view(*lead, -1)  # [*, V]

    def forward(self, *args, **kwargs):
        raise UserError(
            "the projected adaptive softmax (Transformer-XL, LSTM LMs) is scored by "
            "--criterion projected_adaptive_loss (or cross_entropy); fairseq's adaptive_loss "
            "expects fairseq's own AdaptiveSoftmax"
        )


def band_scaled_forward(adaptive: AdaptiveInput, tokens: torch.Tensor) -> torch.Tensor:
    """fairseq's adaptive input with each band's table output scaled by sqrt(its width)
    before the band's projection, as the authors' adaptive input does (the map of the
    ``authors`` DeFINE style). tokens [*] -> [*, output dim]."""
    result = None
    for i, (band, hi) in enumerate(zip(adaptive.embeddings, adaptive.cutoff)):
        lo = adaptive.cutoff[i - 1] if i else 0
        mask = (tokens >= lo) & (tokens < hi)  # [*]
        table, proj = band[0], band[1]
        rows = proj(table(tokens[mask] - lo) * math.sqrt(table.embedding_dim))  # [N_band, d]
        if result is None:
            result = rows.new_zeros(tokens.shape + (rows.shape[-1],))
        result = result.index_put((mask,), rows)  # out of place: autograd through every band
    return result
