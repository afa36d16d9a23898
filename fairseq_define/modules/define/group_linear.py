"""Group linear transformation F_G (paper appendix A.1)."""

import math

import torch
import torch.nn as nn


class GroupLinear(nn.Module):
    """Split the input into ``groups`` chunks and transform each with its own weight.

    One batched matmul for all groups (no Python loop over groups). With ``groups=1`` this
    is a plain linear layer. ``shuffle`` interleaves the output features of the groups
    (the "GLT + shuffle" ablation, Table 6a) so the next grouped layer sees every group.
    """

    def __init__(self, in_features, out_features, groups=1, bias=True, shuffle=False):
        super().__init__()
        for name, value in (("in_features", in_features), ("out_features", out_features)):
            if value % groups != 0:
                raise ValueError(
                    f"GroupLinear: {name}={value} is not divisible by groups={groups}; "
                    f"use a multiple of {groups}"
                )
        self.in_features = in_features
        self.out_features = out_features
        self.groups = groups
        self.shuffle = shuffle and groups > 1
        self.weight = nn.Parameter(torch.empty(groups, in_features // groups, out_features // groups))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        # Xavier per group: each group is an independent (in/g -> out/g) linear map.
        fan_in, fan_out = self.weight.shape[1], self.weight.shape[2]
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x):
        # the bias rides in the matmul (addmm / baddbmm): a separate add is one more pass
        # over the output, as slow as a grouped layer's whole matmul at the unit's widths
        lead = x.shape[:-1]
        if self.groups == 1:
            x = x.reshape(-1, self.in_features)  # [T, in]
            if self.bias is None:
                y = torch.mm(x, self.weight[0])  # [T, out]
            else:
                y = torch.addmm(self.bias, x, self.weight[0])  # [T, out]
            return y.reshape(*lead, self.out_features)
        g = self.groups
        x = x.reshape(-1, g, self.in_features // g).transpose(0, 1)  # [g, T, in/g]
        if self.bias is None:
            y = torch.bmm(x, self.weight)  # [g, T, out/g]
        elif self.shuffle:  # output feature j*g + i is feature j of group i
            y = torch.baddbmm(self.bias.view(-1, g).t().unsqueeze(1), x, self.weight)  # [g, T, out/g]
        else:
            y = torch.baddbmm(self.bias.view(g, 1, -1), x, self.weight)  # [g, T, out/g]
        if self.shuffle:
            y = y.permute(1, 2, 0)  # [T, out/g, g]: feature j of every group side by side
        else:
            y = y.transpose(0, 1)  # [T, g, out/g]
        return y.reshape(*lead, self.out_features)

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"groups={self.groups}, bias={self.bias is not None}, shuffle={self.shuffle}"
        )
