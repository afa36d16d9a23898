"""The DeFINE unit: Expand with a hierarchical group transformation and Reduce
(Map-Expand-Reduce, paper sections 3.1-3.3 and appendix A.2). The modules are the unit's
inference path and the readable spec of its equations; its training steps run the fast path
(fused_unit.py, which reads these modules' parameters; nothing here reads it)."""

import torch
import torch.nn as nn
from fairseq.modules import FairseqDropout

from .activations import ACTIVATIONS
from .group_layer_norm import GroupLayerNorm
from .group_linear import GroupLinear
from .schedule import DefineSchedule


def split_and_mix(e: torch.Tensor, h: torch.Tensor, groups: int) -> torch.Tensor:
    """The split layer and mixer of section 3.3: cut the unit input ``e`` and the previous
    layer output ``h`` into ``groups`` chunks each and lay them out as
    [e_1, h_1, e_2, h_2, ...], so group i of the next layer reads chunk i of both."""
    lead = e.shape[:-1]
    e = e.reshape(*lead, groups, e.shape[-1] // groups)  # [*, g, n/g]
    h = h.reshape(*lead, groups, h.shape[-1] // groups)  # [*, g, w/g]
    return torch.cat([e, h], dim=-1).reshape(*lead, -1)  # [*, n + w]


class ExpandLayer(nn.Module):
    """F_G followed by normalization, activation and dropout."""

    def __init__(self, in_dim, out_dim, groups, bias, shuffle, norm, activation, dropout):
        super().__init__()
        self.transform = GroupLinear(in_dim, out_dim, groups, bias=bias, shuffle=shuffle)
        if norm == "layer":
            self.norm = nn.LayerNorm(out_dim)
        elif norm == "group_layer":  # one LayerNorm per group, affine shared by the groups
            self.norm = GroupLayerNorm(out_dim, groups)
        else:
            self.norm = None
        self.activation = activation
        self.dropout = FairseqDropout(dropout, module_name=self.__class__.__name__)

    def forward(self, x):
        x = self.transform(x)
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(ACTIVATIONS[self.activation].forward(x))


class DefineUnit(nn.Module):
    """Expand (N group-linear layers with the configured skip connection) and Reduce.

    Input ``e`` is the map output [*, n]; output [*, m] (or [*, k] without Reduce).
    """

    def __init__(self, schedule: DefineSchedule, activation="swish", norm="layer", bias=True, dropout=0.0):
        super().__init__()
        self.schedule = schedule
        self.skip = schedule.skip
        self.layers = nn.ModuleList(
            ExpandLayer(
                i, o, g, bias,
                # shuffle feeds the next grouped layer; the last layer feeds Reduce
                shuffle=schedule.shuffle and l < len(schedule.layer_out) - 1,
                norm=norm, activation=activation, dropout=dropout,
            )
            for l, (i, o, g) in enumerate(
                zip(schedule.layer_in, schedule.layer_out, schedule.layer_groups)
            )
        )
        self.reduce = (
            GroupLinear(schedule.reduce_in, schedule.out_dim, schedule.reduce_groups, bias=bias)
            if schedule.reduce_in is not None
            else None
        )
        self.input_dim = schedule.map_dim
        self.output_dim = schedule.out_dim

    def forward(self, e):
        """e [*, n] -> [*, m] (or [*, k] without Reduce)."""
        if not self.layers:  # projective: Linear n -> m
            return self.reduce(e)
        h = self.layers[0](e)  # [*, w_1]
        for layer in self.layers[1:]:
            if self.skip == "mix":
                h = layer(split_and_mix(e, h, layer.transform.groups))  # [*, w_l]
            elif self.skip == "concat":
                h = layer(torch.cat([e, h], dim=-1))
            elif self.skip == "residual":
                h = h + layer(h)
            else:
                h = layer(h)
        if self.reduce is None:
            return h  # [*, k]
        return self.reduce(torch.cat([h, e], dim=-1))  # [*, m]
