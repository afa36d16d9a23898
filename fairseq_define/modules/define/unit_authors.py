"""The DeFINE unit as the authors' released code builds it (``define_style=authors``; DeFINE
mode of the DExTra unit in github sacmehta/delight). Shapes: schedule_authors.py;
the two styles side by side: docs/define_unit.md."""

import math

import torch
import torch.nn as nn
from fairseq.modules import FairseqDropout

from .activations import ACTIVATIONS
from .group_layer_norm import GroupLayerNorm
from .group_linear import GroupLinear
from .schedule_authors import AuthorsSchedule
from .unit import split_and_mix


class AuthorsLayer(nn.Module):
    """One of their weight layers: a group linear map (a plain Linear with one group), then
    LayerNorm per group (one affine shared by the groups), activation and dropout."""

    def __init__(self, in_dim, out_dim, groups, bias, norm, activation, dropout):
        super().__init__()
        self.transform = GroupLinear(in_dim, out_dim, groups, bias=bias)
        self.norm = GroupLayerNorm(out_dim, groups) if norm != "none" else None
        self.activation = activation
        self.dropout = FairseqDropout(dropout, module_name=self.__class__.__name__)
        self.reset_parameters()

    def reset_parameters(self):
        # their init: xavier_uniform_ on the weight as they store it, [out, in] for a Linear
        # and [g, in/g, out/g] for more groups (torch then reads fan_in = (in/g)(out/g),
        # fan_out = out: a much narrower range than per-group Xavier); zero biases
        w = self.transform.weight  # [g, in/g, out/g]
        if self.transform.groups == 1:
            bound = math.sqrt(6.0 / (w.shape[1] + w.shape[2]))
            nn.init.uniform_(w, -bound, bound)
        else:
            nn.init.xavier_uniform_(w)
        if self.transform.bias is not None:
            nn.init.zeros_(self.transform.bias)

    def forward(self, x):
        x = self.transform(x)  # [*, out]
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(ACTIVATIONS[self.activation].forward(x))


class AuthorsDefineUnit(nn.Module):
    """Input projection x = In(e) [*, m/2]; N layers, each reading the mix of x and the
    previous output (the first reads x); output layer over [x; h_N] -> m.

    Input ``e`` [*, n]; output [*, m]. ``bias=False`` drops the biases of the N layers only
    (their input and output layers always have one)."""

    def __init__(self, schedule: AuthorsSchedule, activation="swish", norm="layer", bias=True, dropout=0.0):
        super().__init__()
        self.schedule = schedule
        self.skip = schedule.skip
        s = schedule
        self.input_layer = AuthorsLayer(s.map_dim, s.proj_dim, 1, True, norm, activation, dropout)
        self.layers = nn.ModuleList(
            AuthorsLayer(i, o, g, bias, norm, activation, dropout)
            for i, o, g in zip(s.layer_in, s.layer_out, s.layer_groups)
        )
        self.output_layer = AuthorsLayer(s.reduce_in, s.out_dim, 1, True, norm, activation, dropout)
        # the groups each layer's output is mixed into: the next layer's, then Out's one
        self.mix_groups = list(s.layer_groups[1:]) + [1]
        self.input_dim = s.map_dim
        self.output_dim = s.out_dim

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        """e [*, n] -> [*, m]."""
        x = self.input_layer(e)  # [*, m/2]
        h = x
        for layer, groups in zip(self.layers, self.mix_groups):
            h = split_and_mix(x, layer(h), groups)  # [*, w_l + m/2]: x chunk first
        return self.output_layer(h)  # [*, m]
