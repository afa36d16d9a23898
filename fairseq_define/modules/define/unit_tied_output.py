"""An output layer tied to the DeFINE unit's outputs: logits = h [U(e_1); ...; U(e_V)]^T.

The paper ties the output to the n-dim map (Tables 1-2) or, for NMT (Table 3), keeps a
d-wide untied output layer. This third form scores the decoder state against the unit's
m-dim output for every vocabulary entry: full width like the untied layer, and no parameters
of its own like the map-tied one. It costs one pass of the unit over the vocabulary per
forward in training; at inference the table is computed once and reused until a parameter
changes (or is read from a cached table, section 3.4).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def _same_values(snapshot, params) -> bool:
    return len(snapshot) == len(params) and all(
        s.shape == p.shape and s.dtype == p.dtype and s.device == p.device and torch.equal(s, p)
        for s, p in zip(snapshot, params)
    )


class UnitTiedOutputProjection(nn.Module):
    """``decoder.output_projection`` for ``--define-output-layer tied_unit``."""

    def __init__(self, embedding: nn.Module):
        super().__init__()
        # held outside the module tree: its parameters belong to the decoder's embed_tokens,
        # and registering it twice would store them twice in every checkpoint
        self._embedding = (embedding,)
        self._table = None  # (key, [V, m]) at inference

    @property
    def embedding(self):
        return self._embedding[0]

    @property
    def weight(self) -> torch.Tensor:
        """The [V, m] table the logits are scored against."""
        emb = self.embedding
        if torch.is_grad_enabled() or emb.cached_table is not None:
            self._table = None
            return emb.vocabulary_table()
        # reused while every parameter holds the values it was computed from: compared whole,
        # since an edit through .data changes neither data_ptr nor the version counter (and
        # reading the unit's parameters costs less than the [V, m] table each step reads)
        params = list(emb.parameters())
        if self._table is None or not _same_values(self._table[0], params):
            self._table = ([p.detach().clone() for p in params], emb.vocabulary_table())
        return self._table[1]

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return F.linear(features, self.weight)  # [B, T, m] x [V, m]^T -> [B, T, V]

    def extra_repr(self) -> str:
        emb = self.embedding
        return f"in_features={emb.embedding_dim}, out_features={emb.num_embeddings}, tied to the DeFINE unit's outputs"
