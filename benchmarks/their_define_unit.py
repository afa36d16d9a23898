"""The authors' DeFINE embedding as their released code computes it (github sacmehta/delight:
``DExTraEmb`` with ``DExTraUnit(is_iclr_version=True)``, ``GroupLinear`` and ``Linear`` of
``fairseq/delight_modules``), for benchmark 1's speed comparison only.

Written here from reading that code, not copied from it, and not part of the package: the
package's ``--define-style authors`` unit (fairseq_define/modules/define/unit_authors.py) has
the same layers and the same outputs (``TheirDefineEmbedding.from_ours`` copies its weights;
the benchmark and tests/test_benchmarks.py check the outputs agree). What is kept from
their code is the order of the work, which is what the benchmark times:

- every token runs through the map and the unit (no unique-token path);
- a one-group layer is ``F.linear`` on an [out, in] weight, then LayerNorm over its output;
- a grouped layer views [B*T, g, in/g], transposes to [g, B*T, in/g], ``bmm`` with
  [g, in/g, out/g], adds a [g, 1, out/g] bias, transposes back, then LayerNorm over each
  group's out/g features (one affine shared by the groups);
- activation, then dropout (the benchmark runs without dropout);
- the mixer views the projection x and the layer output as [B, T, g, *] and concatenates
  them per group (``torch.cat`` when the next layer has one group).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

_ACTIVATIONS = {"swish": F.silu, "gelu": F.gelu, "relu": F.relu}


class TheirLayer(nn.Module):
    """Their ``Linear`` (groups == 1) or ``GroupLinear``, each with norm and activation."""

    def __init__(self, in_dim: int, out_dim: int, groups: int, activation: str):
        super().__init__()
        self.groups = groups
        if groups == 1:
            self.weight = nn.Parameter(torch.empty(out_dim, in_dim))  # [out, in]
            self.bias = nn.Parameter(torch.zeros(out_dim))
        else:
            self.weight = nn.Parameter(torch.empty(groups, in_dim // groups, out_dim // groups))  # [g, in/g, out/g]
            self.bias = nn.Parameter(torch.zeros(groups, 1, out_dim // groups))  # [g, 1, out/g]
        nn.init.xavier_uniform_(self.weight)
        self.norm = nn.LayerNorm(out_dim // groups if groups > 1 else out_dim)
        self.act = _ACTIVATIONS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.groups == 1:
            return self.act(self.norm(F.linear(x, self.weight, self.bias)))  # [B, T, out]
        B, T, _ = x.shape
        y = x.contiguous().view(B * T, self.groups, -1).transpose(0, 1)  # [g, BT, in/g]
        y = torch.bmm(y, self.weight) + self.bias  # [g, BT, out/g]
        y = self.norm(y.transpose(0, 1))  # [BT, g, out/g]
        return self.act(y).contiguous().view(B, T, -1)  # [B, T, out]


class TheirDefineEmbedding(nn.Module):
    """Map (an n-dim table scaled by sqrt(n)), input layer n -> m/2, N layers mixed with the
    input layer's output, output layer (m/2 + m) -> m."""

    def __init__(self, vocab: int, padding_idx: int, schedule, activation: str = "swish"):
        super().__init__()
        s = schedule
        self.map = nn.Embedding(vocab, s.map_dim, padding_idx)
        self.scale = math.sqrt(s.map_dim)
        self.input_layer = TheirLayer(s.map_dim, s.proj_dim, 1, activation)
        self.layers = nn.ModuleList(
            TheirLayer(i, o, g, activation) for i, o, g in zip(s.layer_in, s.layer_out, s.layer_groups)
        )
        self.output_layer = TheirLayer(s.reduce_in, s.out_dim, 1, activation)
        self.next_groups = list(s.layer_groups[1:]) + [1]

    @classmethod
    def from_ours(cls, ours) -> "TheirDefineEmbedding":
        """The same weights as ``ours``: a DefineEmbedding with an authors-style unit and a
        standard map."""
        unit = ours.unit
        theirs = cls(ours.num_embeddings, ours.padding_idx, unit.schedule, unit.input_layer.activation)
        with torch.no_grad():
            theirs.map.weight.copy_(ours.map.weight)
            for mine, their in zip([unit.input_layer, *unit.layers, unit.output_layer],
                                   [theirs.input_layer, *theirs.layers, theirs.output_layer]):
                w = mine.transform.weight  # [g, in/g, out/g]
                their.weight.copy_(w[0].t() if their.groups == 1 else w)
                their.bias.copy_(mine.transform.bias.view_as(their.bias))
                their.norm.weight.copy_(mine.norm.weight)
                their.norm.bias.copy_(mine.norm.bias)
        return theirs

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        e = self.map(tokens) * self.scale  # [B, T, n]
        x = self.input_layer(e)  # [B, T, m/2]
        B, T, _ = x.shape
        out = x
        for layer, g in zip(self.layers, self.next_groups):
            out = layer(out)  # [B, T, w]
            if g == 1:
                out = torch.cat([x, out], dim=-1)  # [B, T, m/2 + w]
            else:
                out = torch.cat([x.contiguous().view(B, T, g, -1), out.contiguous().view(B, T, g, -1)], dim=-1)
                out = out.contiguous().view(B, T, -1)  # [B, T, m/2 + w], group by group
        return self.output_layer(out)  # [B, T, m]
