"""The activations a DeFINE unit applies after each layer (``--define-activation``; paper
section 3.1 uses swish): one table, read by the config's choices (config.py), the modules
(unit.py, unit_authors.py) and the fused path's forward and backward (fused_unit.py)."""

from typing import Callable, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F

aten = torch.ops.aten


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


class Activation(NamedTuple):
    """y = forward(n); the gradient at n is ``backward(grad at y, n or y, *backward_args)``
    (an aten backward operator, which also has an ``out=`` form the fused path writes in
    place), reading the input n or the output y as ``reads`` says (None: the identity)."""

    forward: Callable[[torch.Tensor], torch.Tensor]
    backward: Optional[object]  # an aten OpOverloadPacket
    reads: Optional[str]  # "input" | "output"
    backward_args: Tuple = ()


ACTIVATIONS = {
    "swish": Activation(F.silu, aten.silu_backward, "input"),
    "gelu": Activation(F.gelu, aten.gelu_backward, "input"),
    "relu": Activation(F.relu, aten.threshold_backward, "output", (0,)),
    "tanh": Activation(torch.tanh, aten.tanh_backward, "output"),
    "linear": Activation(_identity, None, None),
}
