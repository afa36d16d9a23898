"""A DeFINE layer's activation and its dropout as one operator a direction (issue 61, item 6):
``--define-dropout`` acts on each layer's activated output (paper section 3.1's swish, or
GELU), and on CUDA the pair costs two kernels a layer in the forward (the activation, the
dropout's draw) and two in the backward (the mask's multiply, the activation's backward),
each ~55 us of host time. Written as flash-attention's Triton layer norm is:

1. :func:`act_dropout_reference`: the function, with a given mask, in plain torch;
2. the Triton kernels (act_dropout_kernels.py, :func:`make_kernels`): the forward draws the
   mask from a seed (Philox, ``tl.rand``) and writes the dropped activation and the mask; the
   backward multiplies the incoming gradient by the mask, the scale and the activation's
   derivative, reading any strided [A, B, C] view (a mixing layer's input gradient arrives
   as one);
3. the operators the fast path calls (:func:`act_dropout`, :func:`act_dropout_backward`):
   torch custom operators whose CUDA kernel is (2) where Triton is installed (it ships with
   torch's CUDA builds) and whose kernel elsewhere is the aten pair they replace
   (``native_dropout`` after the activation; ``native_dropout_backward``, then the
   activation's backward), so that every device computes the same function.

fused_unit.py takes them where :func:`fuses_dropout` says so (a CUDA tensor, Triton at hand,
an activation the kernels know); the tests hold (3) on the CPU and (2) in Triton's
interpreter (``TRITON_INTERPRET=1``, where Triton is installed) to (1). The seeds: one
``randint`` a call for all of a unit's layers (CUDA graph-safe: the generator's offset
advances at each replay)."""

import contextlib
import functools
import logging
from typing import List, Tuple

import torch

from .activations import ACTIVATIONS

aten = torch.ops.aten
logger = logging.getLogger(__name__)

# the activations the kernels compute, by the constant they take (both read the layer's input n)
KERNEL_ACTIVATIONS = {"swish": 0, "gelu": 1}
BLOCK = 1024  # elements a program


def act_dropout_reference(n: torch.Tensor, activation: str, p: float, mask: torch.Tensor) -> torch.Tensor:
    """dropout(act(n)) with the kept entries ``mask`` (bool, n's shape), scaled by 1 / (1 - p)."""
    return ACTIVATIONS[activation].forward(n) * mask / (1.0 - p)


# -- the Triton kernels ------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def make_kernels():
    """(forward, backward): the Triton kernels of act_dropout_kernels.py (Triton's interpreter's
    where TRITON_INTERPRET=1 was set before Triton was imported: tests/act_dropout_interpreter.py)."""
    from . import act_dropout_kernels

    return act_dropout_kernels.forward, act_dropout_kernels.backward


@functools.lru_cache(maxsize=None)
def cuda_kernels():
    return make_kernels()


def _as3d(t: torch.Tensor) -> torch.Tensor:
    """A [T, w] or [T, g, w/g] tensor as an [A, B, C] view (a [T, w] one with B = 1)."""
    if t.dim() not in (2, 3):
        raise ValueError(f"act_dropout's kernels take 2-D or 3-D tensors, not {t.dim()}-D")
    return t if t.dim() == 3 else t.unsqueeze(1)


INT32_SPAN = 2**31  # the kernels index in int32: every element and every view's extent below it


def kernels_take(p: float, *tensors: torch.Tensor) -> bool:
    """Whether the kernels compute this call: a dropout that keeps something (p = 1 is the aten
    pair's all-zero output) on tensors whose elements and memory the kernels' int32 offsets
    reach (a DeFINE layer's [T, w] is far below 2**31 elements; a larger one takes the aten pair)."""
    return 0.0 <= p < 1.0 and all(
        t.numel() < INT32_SPAN and sum((d - 1) * abs(st) for d, st in zip(t.shape, t.stride()) if d) < INT32_SPAN
        for t in tensors)


def launch_forward(kernels, n: torch.Tensor, seed: torch.Tensor, activation: str, p: float):
    """(dropped activation [n's shape, contiguous], bool mask) through ``kernels``' forward, on
    n's device (Triton launches on the current one; a custom operator sets none)."""
    forward, _ = kernels
    v = _as3d(n)
    out = torch.empty(n.shape, dtype=n.dtype, device=n.device)
    mask = torch.empty(n.shape, dtype=torch.bool, device=n.device)
    N = n.numel()
    if N == 0:
        return out, mask
    with _on(n.device):
        forward[(-(-N // BLOCK),)](v, out, mask, seed, N, v.shape[1], v.shape[2], *v.stride(), float(p),
                                   1.0 / (1.0 - p), ACT=KERNEL_ACTIVATIONS[activation],
                                   F64=n.dtype == torch.float64, BLOCK=BLOCK)
    return out, mask


def launch_backward(kernels, grad: torch.Tensor, n: torch.Tensor, mask: torch.Tensor, activation: str, p: float):
    """The gradient at n [grad's shape, contiguous] through ``kernels``' backward."""
    _, backward = kernels
    g, x = _as3d(grad), _as3d(n.view(grad.shape) if n.is_contiguous() else n.reshape(grad.shape))
    out = torch.empty(grad.shape, dtype=grad.dtype, device=grad.device)
    N = grad.numel()
    if N == 0:
        return out
    with _on(grad.device):
        backward[(-(-N // BLOCK),)](g, x, mask.reshape(-1), out, N, g.shape[1], g.shape[2], *g.stride(), *x.stride(),
                                    1.0 / (1.0 - p), ACT=KERNEL_ACTIVATIONS[activation],
                                    F64=grad.dtype == torch.float64, BLOCK=BLOCK)
    return out


def _on(device: torch.device):
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


# -- the operators -------------------------------------------------------------------------


@torch.library.custom_op("fairseq_define::act_dropout", mutates_args=())
def act_dropout(n: torch.Tensor, seed: torch.Tensor, activation: str, p: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """(dropout(act(n)), its bool mask); ``seed`` (a one-element int64 tensor) seeds the CUDA
    kernel's draw; elsewhere the aten pair draws from torch's generator."""
    return _aten_forward(n, activation, p)


def _aten_forward(n, activation, p):
    # contiguous as the kernel's (and the fake's) outputs, whatever n's layout
    out, mask = aten.native_dropout(ACTIVATIONS[activation].forward(n), p, True)
    return out.contiguous(), mask.contiguous()


# why the Triton kernels failed on this machine (None: they have not): from then on the aten
# pair runs, so a kernel no GPU had compiled before cannot stop a training run
FAILED: List[str] = []


def _kernel_failed(err: Exception) -> None:
    if not FAILED:
        logger.warning("the fused activation-dropout kernel failed (%s: %s); the aten pair (the activation, "
                       "native_dropout) runs instead", type(err).__name__, err)
    FAILED.append(f"{type(err).__name__}: {err}")


@act_dropout.register_kernel("cuda")
def _act_dropout_cuda(n, seed, activation, p):
    if not FAILED and kernels_take(p, n):
        try:
            return launch_forward(cuda_kernels(), n, seed, activation, p)
        except torch.OutOfMemoryError:  # the step's, not the kernel's: fairseq's handling takes it
            raise
        except Exception as err:  # noqa: BLE001 - Triton's compile errors have no common base
            _kernel_failed(err)
    return _aten_forward(n, activation, p)


@act_dropout.register_fake
def _act_dropout_fake(n, seed, activation, p):
    return torch.empty_like(n, memory_format=torch.contiguous_format), torch.empty(n.shape, dtype=torch.bool,
                                                                                   device=n.device)


@torch.library.custom_op("fairseq_define::act_dropout_backward", mutates_args=())
def act_dropout_backward(grad: torch.Tensor, n: torch.Tensor, mask: torch.Tensor, activation: str,
                         p: float) -> torch.Tensor:
    """The gradient at n of dropout(act(n)) with ``mask`` (all three shaped as ``grad``)."""
    return _aten_backward(grad, n, mask, activation, p)


def _aten_backward(grad, n, mask, activation, p):
    act = ACTIVATIONS[activation]
    g = aten.native_dropout_backward(grad.contiguous(), mask.reshape(grad.shape), 1.0 / (1.0 - p))
    return act.backward.grad_input(g, n.reshape(grad.shape), *act.backward_args, grad_input=g)


@act_dropout_backward.register_kernel("cuda")
def _act_dropout_backward_cuda(grad, n, mask, activation, p):
    if not FAILED and kernels_take(p, grad, n):
        try:
            return launch_backward(cuda_kernels(), grad, n, mask, activation, p)
        except torch.OutOfMemoryError:
            raise
        except Exception as err:  # noqa: BLE001
            _kernel_failed(err)
    return _aten_backward(grad, n, mask, activation, p)


@act_dropout_backward.register_fake
def _act_dropout_backward_fake(grad, n, mask, activation, p):
    return torch.empty(grad.shape, dtype=grad.dtype, device=grad.device)


def fuses_dropout(device: torch.device, activation: str) -> bool:
    """Whether a layer's activation and dropout run as the operators above: on CUDA with
    Triton at hand, for the activations the kernels compute (elsewhere the aten pair runs as
    it is, one operator fewer to dispatch for nothing)."""
    return device.type == "cuda" and activation in KERNEL_ACTIVATIONS and triton_available() and not FAILED


def draw_seeds(program, device: torch.device) -> torch.Tensor:
    """One seed a step of ``program`` (int64 [steps], on ``device``), drawn in one operator: all
    64 bits of Philox's key, so that two draws of a long run share a mask as rarely as can be."""
    return torch.randint(-2**63, 2**63 - 1, (len(program),), device=device, dtype=torch.int64)
