"""The Triton kernels of define/act_dropout_kernels.py in Triton's interpreter, on CPU tensors,
against the plain reference: run by tests/test_act_dropout.py as ``python -m
tests.act_dropout_interpreter`` with TRITON_INTERPRET=1 from the process's start. Prints one
JSON line, {case: None, or what failed}."""

import json
import os
import traceback

import torch

from fairseq_define.modules.define import act_dropout as ad

# dtype -> (rtol, atol): float64 as exact as the reference; lower precisions computed in float32
TOLERANCES = {"float64": (1e-12, 1e-13), "float32": (1e-5, 1e-6), "bfloat16": (2e-2, 2e-2)}


def reference_grads(n, mask, activation, p, grad):
    """(output, gradient at n) of the reference through autograd (tests/test_act_dropout.py too)."""
    x = n.detach().clone().requires_grad_()
    out = ad.act_dropout_reference(x, activation, p, mask)
    out.backward(grad)
    return out.detach(), x.grad


# the dropout probability: the interpreter types a float argument float32 whatever its annotation
# (compiled Triton honours the kernels' float64 scale), so it runs where 1 / (1 - p) is exact in
# float32; the GPU test takes 0.1, where a float32 scale would be 5e-8 off in float64
P_INTERPRETED, P_COMPILED = 0.2, 0.1


def check_kernels(kernels, activation: str, dtype_name: str, device: str = "cpu", p: float = P_INTERPRETED) -> None:
    """Forward on a strided view (rows strided by 80): the reference with the mask it drew,
    about 1 - p kept, one mask a seed, two blocks two masks; backward on a [T, g, w/g] strided
    gradient (a mixing layer's share): the reference's gradient. ``device``, ``p``: the
    interpreter's CPU tensors here, CUDA's compiled kernels in tests/test_gpu.py."""
    dtype = getattr(torch, dtype_name)
    rtol, atol = TOLERANCES[dtype_name]
    torch.manual_seed(1)
    n = torch.randn(300, 80, dtype=dtype)[:, 8:72].to(device)  # [T, w], rows strided by 80 on the CPU
    seeds = torch.tensor([0, 1234, 1235], dtype=torch.int64, device=device)
    seed = seeds[1:2]  # a view 8 bytes in, as a unit's seeds[i:i + 1] is
    out, mask = ad.launch_forward(kernels, n, seed, activation, p)
    assert out.is_contiguous() and out.dtype == dtype and mask.dtype == torch.bool and out.device == n.device
    assert abs(mask.double().mean().item() - (1 - p)) < 0.05, mask.double().mean().item()
    flat = mask.reshape(-1)
    assert not torch.equal(flat[:ad.BLOCK], flat[ad.BLOCK:2 * ad.BLOCK]), "two blocks drew one mask"
    again, same = ad.launch_forward(kernels, n.contiguous(), seed, activation, p)
    assert torch.equal(same, mask) and torch.equal(again, out), "a seed gave two masks"
    _, other = ad.launch_forward(kernels, n, seeds[2:3], activation, p)
    assert not torch.equal(other, mask), "two seeds gave one mask"
    grad = torch.randn(300, 4, 3 + 16, dtype=dtype)[..., 3:].to(device)  # [T, g, w/g], strided
    want_out, want_grad = reference_grads(n.double(), mask, activation, p, grad.reshape(n.shape).double())
    torch.testing.assert_close(out.double(), want_out, rtol=rtol, atol=atol)
    got = ad.launch_backward(kernels, grad, n.contiguous(), mask, activation, p)
    assert got.shape == grad.shape and got.is_contiguous()
    torch.testing.assert_close(got.reshape(n.shape).double(), want_grad, rtol=rtol, atol=atol)


def check_partial_block(kernels, device: str = "cpu") -> None:
    """A size that is not a multiple of the block: every element written, none past the end."""
    n = torch.randn(ad.BLOCK + 37, 1, dtype=torch.float64, device=device)
    out, mask = ad.launch_forward(kernels, n, torch.tensor([5], device=device), "swish", 0.5)
    want, _ = reference_grads(n, mask, "swish", 0.5, torch.ones_like(n))
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-13)


def main() -> None:
    assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"
    kernels = ad.make_kernels()
    cases = {f"{a} {d}": (check_kernels, kernels, a, d) for a in sorted(ad.KERNEL_ACTIVATIONS) for d in TOLERANCES}
    cases["partial block"] = (check_partial_block, kernels)
    results = {}
    for name, (check, *args) in cases.items():
        try:
            check(*args)
            results[name] = None
        except Exception:  # noqa: BLE001 - each case's failure is reported by its test
            results[name] = traceback.format_exc(limit=3)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
