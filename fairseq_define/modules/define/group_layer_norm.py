"""LayerNorm per group of a group linear transformation, with one affine shared by the
groups: the normalization of the authors' released DeFINE unit (``--define-norm
group_layer`` in the paper style; always in the authors style)."""

import torch
import torch.nn as nn


class GroupLayerNorm(nn.LayerNorm):
    """Normalise each of ``groups`` consecutive chunks of ``num_features / groups`` features
    on its own; the ``num_features / groups`` affine weights and biases are the same for every
    group. With one group this is ``nn.LayerNorm(num_features)``."""

    def __init__(self, num_features: int, groups: int = 1, eps: float = 1e-5):
        if num_features % groups:
            raise ValueError(
                f"GroupLayerNorm: num_features={num_features} is not divisible by groups={groups}"
            )
        super().__init__(num_features // groups, eps=eps)
        self.groups = groups
        self.num_features = num_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        x = x.reshape(*lead, self.groups, self.num_features // self.groups)  # [*, g, out/g]
        return super().forward(x).reshape(*lead, self.num_features)  # [*, out]

    def extra_repr(self):
        return f"{self.num_features}, groups={self.groups}, eps={self.eps}"
