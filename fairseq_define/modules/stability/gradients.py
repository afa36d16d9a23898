"""The maths of the DeFINE unit's two stability settings (docs/stability.md), called by the
one place that applies them: the backward of the unit's training path (define/fused_unit.py).

``--define-unit-centring batch_mean`` takes a weight's gradient at the layer's input centred
on its batch mean: with x_t the layer's input at row t, g_t its output gradient, c_t the
positions row t stands for (the unique-token path; 1 each otherwise), P their sum and
s = sum_t g_t (the bias gradient),

    sum_t (x_t - mean x) g_t^T  =  sum_t x_t g_t^T - (sum_t c_t x_t) s^T / P
                                =  sum_t x_t (g_t - c_t s / P)^T,

the weight's gradient less a rank-one share. :func:`centre` removes that share from the
output gradient before the weight's matmul reads it (the training path's backward: rows are
tokens, weights c_t, total P), or from the weight's gradient itself (rows are input features,
weights the mean input sum_t c_t x_t / P, total 1: the form tests/test_fused_unit.py applies
to the reference's gradients).

``--define-unit-grad-scale`` multiplies each of the unit's parameter gradients
(:func:`scale`).
"""

from typing import List, Optional

import torch


def centre(grad: torch.Tensor, weights: Optional[torch.Tensor], s: torch.Tensor, total,
           in_place: bool = False) -> torch.Tensor:
    """``grad - weights s^T / total``: ``grad`` [R, C] (or a batch of them, [g, R, C]),
    ``weights`` [R] ([g, R]; None: one each), ``s`` [C] ([g, C]), ``total`` a number;
    ``in_place``: written over ``grad``."""
    if weights is None:
        return grad.sub_(s, alpha=1.0 / total) if in_place else torch.sub(grad, s, alpha=1.0 / total)
    if grad.dim() == 2:
        return (grad.addr_(weights, s, alpha=-1.0 / total) if in_place
                else torch.addr(grad, weights, s, alpha=-1.0 / total))
    share = (weights[..., :, None] * s[..., None, :]).to(grad.dtype)  # [g, R, C]
    if total != 1:
        share = share / total
    return grad.sub_(share) if in_place else grad - share


def scale(grads: List[torch.Tensor], factor: float, in_place: bool = False) -> List[torch.Tensor]:
    """Every gradient of ``grads`` times ``factor`` (one foreach kernel)."""
    if in_place:
        torch._foreach_mul_(grads, factor)
        return grads
    return list(torch._foreach_mul(grads, factor))
