"""AWD-LSTM's regularizers (Merity et al. 2018, section 4), used by the LSTM language models
of the paper (section 4.1, Table 1; A.3: "dropout same as Merity et al. (2018a)")."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def locked_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Variational dropout: one mask per sequence, shared by every time step. x [B, T, d]."""
    if not training or p <= 0:
        return x
    mask = x.new_empty(x.size(0), 1, x.size(2)).bernoulli_(1 - p) / (1 - p)  # [B, 1, d]
    return x * mask


def embedding_dropout(tokens: torch.Tensor, x: torch.Tensor, vocab_size: int, p: float, training: bool) -> torch.Tensor:
    """Drop whole word types (every occurrence of a dropped word gets a zero embedding).
    tokens [B, T], x [B, T, m]."""
    if not training or p <= 0:
        return x
    keep = x.new_empty(vocab_size).bernoulli_(1 - p) / (1 - p)  # [V]
    return x * keep[tokens].unsqueeze(-1)


class WeightDropLSTM(nn.LSTM):
    """One batch-first LSTM layer with DropConnect on its hidden-to-hidden weights: a new
    mask on W_hh per forward pass in training (the recurrence itself stays cuDNN's).

    ``centre_input``: in training, the input-weight gradient is taken with the input centred
    on its batch mean, sum_t g_t (x_t - mean x)^T in place of sum_t g_t x_t^T; the mean's
    share, (sum_t g_t)(mean x)^T, is the bias's step amplified by |mean x|^2, which moves
    every gate by one vector when the input has a large shared mean (the authors' DeFINE
    unit ends in LayerNorm and swish; docs/stability.md). The layer computes
    W_ih (x - mean) + (b_ih + W_ih mean), with W_ih detached in the second term: the same
    outputs and the same gradients for x and b_ih, only W_ih's changes."""

    def __init__(self, input_size: int, hidden_size: int, weight_drop: float = 0.0, centre_input: bool = False):
        super().__init__(input_size, hidden_size, batch_first=True)
        self.weight_drop = weight_drop
        self.centre_input = centre_input
        names = self._flat_weights_names
        self._hh_index = names.index("weight_hh_l0")
        self._ih_index, self._bih_index = names.index("weight_ih_l0"), names.index("bias_ih_l0")

    def forward(self, x, hx=None):
        swaps = {}
        if self.training and self.weight_drop > 0:
            swaps[self._hh_index] = F.dropout(self._flat_weights[self._hh_index], self.weight_drop, training=True)
        if self.centre_input and self.training and torch.is_grad_enabled():
            mean = x.detach().reshape(-1, x.size(-1)).mean(0)  # [in]
            w_ih = self._flat_weights[self._ih_index].detach()  # [4H, in]
            swaps[self._bih_index] = self._flat_weights[self._bih_index] + w_ih @ mean  # [4H]
            x = x - mean  # [B, T, in]
        if not swaps:
            return super().forward(x, hx)
        raw = {i: self._flat_weights[i] for i in swaps}
        for i, w in swaps.items():
            self._flat_weights[i] = w
        try:
            return super().forward(x, hx)
        finally:
            for i, w in raw.items():
                self._flat_weights[i] = w
