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
    mask on W_hh per forward pass in training (the recurrence itself stays cuDNN's)."""

    def __init__(self, input_size: int, hidden_size: int, weight_drop: float = 0.0):
        super().__init__(input_size, hidden_size, batch_first=True)
        self.weight_drop = weight_drop
        self._hh_index = self._flat_weights_names.index("weight_hh_l0")

    def forward(self, x, hx=None):
        if not (self.training and self.weight_drop > 0):
            return super().forward(x, hx)
        raw = self._flat_weights[self._hh_index]
        self._flat_weights[self._hh_index] = F.dropout(raw, self.weight_drop, training=True)
        try:
            return super().forward(x, hx)
        finally:
            self._flat_weights[self._hh_index] = raw
