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
checkpoint computes what it did (its saved Reduce bias replaces the centred init).
"""

import logging
from typing import Optional

import torch
import torch.nn as nn

from ..define.group_linear import GroupLinear
from .gradients import centre, scale

logger = logging.getLogger(__name__)


class _GradScale:
    """A tensor hook (a class, not a lambda, so models holding it deep-copy and pickle)."""

    def __init__(self, scale: float):
        self.scale = scale

    def __call__(self, grad: torch.Tensor) -> torch.Tensor:
        return scale([grad], self.scale)[0]


def log_stability(unit: nn.Module, centring: bool, scale: float) -> None:
    """Say what the fused path's backward (define/fused_unit.py) applies, as the hooks say it."""
    params = [p for p in unit.parameters() if p.requires_grad]
    if centring:
        logger.info("DeFINE unit: weight gradients of its %d linear layers centred on the batch mean input "
                    "(--define-unit-centring batch_mean)", len(unit.program))
    if scale != 1.0:
        logger.info("DeFINE unit: gradients of its %d parameters (%.3fM) scaled by %g (--define-unit-grad-scale)",
                    len(params), sum(p.numel() for p in params) / 1e6, scale)


def scale_unit_gradients(unit: nn.Module, scale: float, handles: Optional[list] = None) -> int:
    """Multiply the gradient of every parameter of ``unit`` by ``scale`` as it is computed
    (before fairseq's gradient clipping, data-parallel reduction and the optimizer step).
    ``scale`` > 0 (:class:`DefineOptions` refuses other values of the flag); ``handles``: a
    list that takes the hooks' handles (to remove them). Returns the number of parameters
    hooked (0 when ``scale`` is 1)."""
    if scale == 1.0:
        return 0
    params = [p for p in unit.parameters() if p.requires_grad]
    for p in params:
        handle = p.register_hook(_GradScale(float(scale)))
        if handles is not None:
            handles.append(handle)
    logger.info(
        "DeFINE unit: gradients of its %d parameters (%.3fM) scaled by %g "
        "(--define-unit-grad-scale)", len(params), sum(p.numel() for p in params) / 1e6, scale,
    )
    return len(params)


class _CentredWeightGrad:
    """Centres one GroupLinear's weight gradient on its batch-mean input.

    The weight's gradient sum_i x_i g_i^T becomes sum_i (x_i - mean_x) g_i^T, i.e. it is
    reduced by mean_x (sum_i g_i)^T, the outer product of the layer's mean input and its
    bias gradient (gradients.centre). A forward hook records mean_x and puts a hook on the
    output that records sum_i g_i during backward; the weight's own hook (which runs after
    it) removes the share. The forward pass is untouched."""

    def __init__(self, counts: "UnitGradCentring"):
        self.counts = counts
        self.pending = []  # (mean_x [g, in/g], sum_i g_i [g, out/g]) of each forward this backward reaches

    def forward_hook(self, layer, inputs, y):
        if not (layer.training and torch.is_grad_enabled() and y.requires_grad):
            return
        g = layer.groups
        x = inputs[0].detach().reshape(-1, layer.in_features)  # [T, in]
        w = self.counts.token_counts  # the unique-token path: each row stands for w positions
        if w is not None and w.numel() == x.shape[0]:
            mean = (w.to(x.dtype) @ x) / w.sum()  # [in]: as the plain path's mean over positions
        else:
            mean = x.mean(0)
        mean = mean.view(g, -1)  # [g, in/g]

        def output_grad(grad):
            s = grad.detach().reshape(-1, layer.out_features).sum(0)  # [out]
            # the weight's layout: output feature j of group i is at i*(out/g)+j, or at
            # j*g+i when the layer shuffles
            s = s.view(-1, g).t() if layer.shuffle else s.view(g, -1)  # [g, out/g]
            self.pending.append((mean, s))

        y.register_hook(output_grad)

    def __call__(self, grad: torch.Tensor) -> torch.Tensor:
        for mean, s in self.pending:
            grad = centre(grad, mean, s, 1)  # [g, in/g, out/g]
        self.pending = []
        return grad


class UnitGradCentring:
    """What the embedding tells the hooks: when it runs the unit once per distinct token,
    how many positions each row stands for, so the mean is the batch's mean over positions
    (the unique-token path then gives the plain path's gradients)."""

    def __init__(self):
        self.token_counts = None  # [U] while the unit runs on distinct tokens


def centre_unit_gradients(unit: nn.Module, handles: Optional[list] = None) -> UnitGradCentring:
    """Centre the weight gradient of every linear layer of ``unit`` on the layer's batch-mean
    input (``--define-unit-centring``). Register before :func:`scale_unit_gradients`
    (a weight's hooks run in order: centre, then scale); ``handles``: as there."""
    counts = UnitGradCentring()
    layers = [m for m in unit.modules() if isinstance(m, GroupLinear) and m.weight.requires_grad]
    for layer in layers:
        hook = _CentredWeightGrad(counts)
        added = [layer.register_forward_hook(hook.forward_hook), layer.weight.register_hook(hook)]
        if handles is not None:
            handles.extend(added)
    logger.info("DeFINE unit: weight gradients of its %d linear layers centred on the batch "
                "mean input (--define-unit-centring batch_mean)", len(layers))
    return counts


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
