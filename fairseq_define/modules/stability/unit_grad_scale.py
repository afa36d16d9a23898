"""Two corrections that keep the DeFINE unit's outputs token-specific under AWD-LSTM's
optimizer (SGD at lr 30 after clipping the whole gradient to 0.25; docs/stability.md).

``--define-unit-grad-scale``: a gradient multiplier for the unit's parameters. Under SGD it
is a learning-rate multiplier for the unit alone (and lowers its share of ``--clip-norm``);
Adam's steps do not depend on the gradient's scale (only through epsilon).

``--define-unit-centring batch_mean``: each Expand layer reads swish(LayerNorm(.)) features
(through the mixer) whose mean is shared by every token, so an SGD step on a weight,
sum_i x_i g_i^T, moves every token's pre-activation by nearly the same vector, which the
next LayerNorm and Reduce turn into one output direction shared by all tokens (mean
pairwise cosine 0.43 after a single step at 0.1 times lr 30). Centring the input in the
weight's gradient leaves the shared shift to the bias. At init, Reduce's bias cancels what
Reduce maps the mean feature to (cosine 0.42 -> 0 for N=7).

Neither changes the forward function, so both apply to any unit structure, and a stored
checkpoint computes what it did (its saved Reduce bias replaces the centred init). Both act in
one place: the backward of the unit's training path (define/fused_unit.py), through the maths
of gradients.py; here, what is said of them and the centred init.
"""

import logging

import torch
import torch.nn as nn

logger = logging.getLogger(__name__)


def log_stability(layers, centring: bool, scale: float) -> None:
    """Say what the training path's backward (define/fused_unit.py) applies to a unit of
    these weight ``layers``."""
    params = [p for layer in layers for p in layer.parameters() if p.requires_grad]
    if centring:
        logger.info("DeFINE unit: weight gradients of its %d linear layers centred on the batch mean input "
                    "(--define-unit-centring batch_mean)", len(layers))
    if scale != 1.0:
        logger.info("DeFINE unit: gradients of its %d parameters (%.3fM) scaled by %g (--define-unit-grad-scale)",
                    len(params), sum(p.numel() for p in params) / 1e6, scale)


@torch.no_grad()
def centre_reduce_bias(unit: nn.Module, e: torch.Tensor) -> None:
    """Start Reduce's bias at minus what Reduce maps the unit's mean feature over the map
    outputs ``e`` [S, n] to, so the outputs start without a component shared by every
    token (``--define-unit-centring``; docs/stability.md).

    The last Expand layer's swish(LayerNorm(.)) features have a positive mean that Reduce
    maps to one vector for every token (mean pairwise cosine 0.42 at init for N=7)."""
    reduce = getattr(unit, "reduce", None)
    if reduce is None or reduce.bias is None or not unit.layers:
        return
    seen = {}
    hook = reduce.register_forward_hook(lambda m, i, o: seen.__setitem__("x", i[0]))
    was_training = unit.training
    unit.eval()  # no dropout
    try:
        unit(e)
    finally:
        hook.remove()
        unit.train(was_training)
    mean = seen["x"].mean(0, keepdim=True)  # [1, k + n]
    reduce.bias.sub_(reduce(mean)[0] - reduce.bias)  # [m]
