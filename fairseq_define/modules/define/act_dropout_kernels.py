"""The Triton kernels of act_dropout.py (a layer's activation and dropout, one kernel a
direction): imported only where Triton is (torch's CUDA builds bring it), through
act_dropout.make_kernels. ACT: 0 swish (paper section 3.1), 1 GELU (erf); both read the
layer's input n. A float64 tensor is computed in float64, any other in float32: ``scale`` is
annotated float64 because Triton passes a Python float as float32 (1 / (1 - p) would lose its
low bits, 5e-8 at p = 0.1), and cast to float32 where the tensor is not float64, so that no
float32 kernel computes in float64."""

import triton
import triton.language as tl


@triton.jit
def _at(ptr, offs, B, C, sa, sb, sc):
    # element offs (row-major) of an [A, B, C] view with strides (sa, sb, sc)
    return ptr + (offs // (B * C)) * sa + ((offs // C) % B) * sb + (offs % C) * sc


@triton.jit
def _act(x, ACT: tl.constexpr):
    if ACT == 0:
        y = x * tl.sigmoid(x)
    else:
        y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    return y


@triton.jit
def _act_grad(x, ACT: tl.constexpr):
    if ACT == 0:
        s = tl.sigmoid(x)
        d = s * (1.0 + x * (1.0 - s))
    else:  # Phi(x) + x phi(x)
        d = 0.5 * (1.0 + tl.math.erf(x * 0.7071067811865476)) + x * 0.3989422804014327 * tl.exp(-0.5 * x * x)
    return d


@triton.jit
def forward(n_ptr, out_ptr, mask_ptr, seed_ptr, N, B, C, sa, sb, sc, p, scale: tl.float64,
            ACT: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    """out = where(keep, act(n) * scale, 0) and mask = keep (both contiguous), keep drawn
    from the seed at seed_ptr with probability 1 - p (Philox, by element)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # [BLOCK]
    inside = offs < N
    x = tl.load(_at(n_ptr, offs, B, C, sa, sb, sc), mask=inside, other=0.0)
    if F64:
        x = x.to(tl.float64)
        s = scale
    else:
        x = x.to(tl.float32)
        s = tl.cast(scale, tl.float32)
    keep = tl.rand(tl.load(seed_ptr), offs) >= p
    y = tl.where(keep, _act(x, ACT) * s, 0.0)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=inside)
    tl.store(mask_ptr + offs, keep, mask=inside)


@triton.jit
def backward(g_ptr, n_ptr, mask_ptr, out_ptr, N, B, C, sa, sb, sc, na, nb, nc, scale: tl.float64,
             ACT: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    """out = where(mask, g * act'(n) * scale, 0), contiguous; g and n any [A, B, C] views."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < N
    g = tl.load(_at(g_ptr, offs, B, C, sa, sb, sc), mask=inside, other=0.0)
    x = tl.load(_at(n_ptr, offs, B, C, na, nb, nc), mask=inside, other=0.0)
    keep = tl.load(mask_ptr + offs, mask=inside, other=0) != 0
    if F64:
        g = g.to(tl.float64)
        x = x.to(tl.float64)
        s = scale
    else:
        g = g.to(tl.float32)
        x = x.to(tl.float32)
        s = tl.cast(scale, tl.float32)
    gn = tl.where(keep, g * _act_grad(x, ACT) * s, 0.0)
    tl.store(out_ptr + offs, gn.to(out_ptr.dtype.element_ty), mask=inside)
