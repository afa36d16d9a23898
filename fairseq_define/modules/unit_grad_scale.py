"""A gradient multiplier for the DeFINE unit's parameters (``--define-unit-grad-scale``),
which keeps the unit from collapsing under AWD-LSTM's optimizer (docs/stability.md).

Plain SGD gives every parameter a step of the same scale (AWD-LSTM: lr 30 after clipping
the whole gradient to norm 0.25). A step on the unit moves its output far more than the
same step on a projective map: Reduce reads features of norm ~sqrt(k) (LayerNorm'd and
activated, with a large mean shared by all tokens), not an input of norm ~1, and its biases
and the LayerNorm affine add one vector to every token. Within 20 updates every token's
output is that shared vector (mean pairwise cosine 0.99). Multiplying the unit's gradients
by a small factor is, under SGD, a learning-rate multiplier for the unit alone; it also
lowers the unit's share of ``--clip-norm``. Adam's steps do not depend on the gradient's
scale, so there it changes almost nothing (only the epsilon term). The forward pass and the
parameters are untouched, so it applies to any unit structure and to stored checkpoints.
"""

import logging

import torch
import torch.nn as nn

logger = logging.getLogger(__name__)


class _GradScale:
    """A tensor hook (a class, not a lambda, so models holding it deep-copy and pickle)."""

    def __init__(self, scale: float):
        self.scale = scale

    def __call__(self, grad: torch.Tensor) -> torch.Tensor:
        return grad * self.scale


def scale_unit_gradients(unit: nn.Module, scale: float) -> int:
    """Multiply the gradient of every parameter of ``unit`` by ``scale`` as it is computed
    (before fairseq's gradient clipping, data-parallel reduction and the optimizer step).
    ``scale`` > 0 (:class:`DefineOptions` refuses other values of the flag). Returns the
    number of parameters hooked (0 when ``scale`` is 1)."""
    if scale == 1.0:
        return 0
    params = [p for p in unit.parameters() if p.requires_grad]
    for p in params:
        p.register_hook(_GradScale(float(scale)))
    logger.info(
        "DeFINE unit: gradients of its %d parameters (%.3fM) scaled by %g "
        "(--define-unit-grad-scale)", len(params), sum(p.numel() for p in params) / 1e6, scale,
    )
    return len(params)
