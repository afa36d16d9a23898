"""A layer's activation and dropout as one operator a direction (define/act_dropout.py): the
operators' CPU kernels (the aten pair) and the Triton kernels CUDA runs, each held to the
plain reference, the Triton ones in Triton's interpreter on CPU tensors where Triton is
installed (it comes with torch's CUDA builds: CI's Python 3.12 venv has it; the CPU wheel's
venv does not, and these skip there), and compiled for a Hopper GPU by Triton's own compiler
(no GPU needed). On a GPU, tests/test_gpu.py holds the compiled kernels to the same reference."""

import json
import os
import subprocess
import sys

import pytest
import torch

from fairseq_define.modules.define import act_dropout as ad

from .act_dropout_interpreter import reference_grads
from .helpers import ROOT

ACTIVATIONS = sorted(ad.KERNEL_ACTIVATIONS)


def strided_grad(shape, dtype, groups=4):
    """A [T, g, w/g] gradient that is a strided view, as a mixing layer's input gradient
    hands a layer its share ([T, g, e/g + w/g], the last w/g columns of each group)."""
    T, w = shape
    whole = torch.randn(T, groups, 3 + w // groups, dtype=dtype)
    return whole[..., 3:]


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("strided", [False, True], ids=["contiguous-grad", "strided-grad"])
def test_the_cpu_operators_compute_the_reference(activation, strided):
    torch.manual_seed(0)
    n = torch.randn(400, 64, dtype=torch.float64)  # [T, w]
    out, mask = ad.act_dropout(n, torch.tensor([7]), activation, 0.25)
    assert mask.dtype == torch.bool and mask.shape == n.shape
    assert 0.7 < mask.double().mean().item() < 0.8
    grad = strided_grad(n.shape, n.dtype) if strided else torch.randn_like(n)
    want_out, want_grad = reference_grads(n, mask, activation, 0.25, grad.reshape(n.shape))
    torch.testing.assert_close(out, want_out, rtol=1e-12, atol=1e-13)
    got = ad.act_dropout_backward(grad, n, mask, activation, 0.25)
    torch.testing.assert_close(got.reshape(n.shape), want_grad, rtol=1e-12, atol=1e-13)
    assert not got.data_ptr() == grad.data_ptr()


def test_a_kernel_that_fails_leaves_the_aten_pair_running(monkeypatch, caplog):
    """A Triton kernel no GPU had compiled before must not stop a run: its CUDA wrapper logs
    the failure once, computes with the aten pair, and the unit stops taking the operators."""
    def broken():
        raise RuntimeError("no such intrinsic")

    monkeypatch.setattr(ad, "cuda_kernels", broken)
    monkeypatch.setattr(ad, "FAILED", [])
    monkeypatch.setattr(ad, "triton_available", lambda: True)
    assert ad.fuses_dropout(torch.device("cuda"), "swish")
    n = torch.randn(50, 16, dtype=torch.float64)
    out, mask = ad._act_dropout_cuda(n, torch.tensor([1]), "swish", 0.3)
    torch.testing.assert_close(out, ad.act_dropout_reference(n, "swish", 0.3, mask))
    grad = torch.randn_like(n)
    got = ad._act_dropout_backward_cuda(grad, n, mask, "swish", 0.3)
    torch.testing.assert_close(got, reference_grads(n, mask, "swish", 0.3, grad)[1])
    assert len(ad.FAILED) == 1 and "no such intrinsic" in caplog.text
    assert not ad.fuses_dropout(torch.device("cuda"), "swish")


@pytest.mark.parametrize("oom", [False, True], ids=["p=1", "out-of-memory"])
def test_what_is_no_kernel_failure_leaves_the_kernels_on(monkeypatch, oom):
    """p = 1 takes the aten pair's all-zero output (the kernels would scale by 1 / 0); running
    out of memory is the step's, raised for fairseq's handling, not a kernel's failure."""
    def out_of_memory(*args):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(ad, "FAILED", [])
    monkeypatch.setattr(ad, "cuda_kernels", lambda: None)
    monkeypatch.setattr(ad, "launch_forward", out_of_memory)
    monkeypatch.setattr(ad, "launch_backward", out_of_memory)
    n = torch.randn(50, 16, dtype=torch.float64)
    if oom:
        with pytest.raises(torch.OutOfMemoryError):
            ad._act_dropout_cuda(n, torch.tensor([1]), "swish", 0.3)
        with pytest.raises(torch.OutOfMemoryError):
            ad._act_dropout_backward_cuda(n, n, n > 0, "swish", 0.3)
    else:
        out, mask = ad._act_dropout_cuda(n, torch.tensor([1]), "swish", 1.0)
        assert not out.any() and not mask.any()
    assert ad.FAILED == []


def test_the_kernels_take_what_their_int32_offsets_reach():
    n = torch.empty(300, 64)
    assert ad.kernels_take(0.1, n, n[:, 8:40]) and ad.kernels_take(0.0, n)
    assert not ad.kernels_take(1.0, n)
    big = torch.empty_strided((2, 64), (2**31, 1), device="meta")  # two rows 2**31 elements apart, no memory
    assert not ad.kernels_take(0.1, big) and ad.kernels_take(0.1, big[:1])


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_the_operators_return_the_layout_their_fake_kernels_promise(activation):
    """torch.compile plans with the fake kernels' contiguous outputs: the real ones (the aten
    pair wherever the Triton kernels do not run) return them contiguous for any input layout;
    torch.library.opcheck holds the schema, the fake kernels and the autograd registration."""
    n = torch.randn(16, 40, dtype=torch.float64).t()  # [40, 16], transposed
    out, mask = ad.act_dropout(n, torch.tensor([3]), activation, 0.25)
    assert out.is_contiguous() and mask.is_contiguous()
    grad = torch.randn(16, 40, dtype=torch.float64).t()
    assert ad.act_dropout_backward(grad, n, mask, activation, 0.25).is_contiguous()
    torch.library.opcheck(ad.act_dropout, (n, torch.tensor([3]), activation, 0.25),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))
    torch.library.opcheck(ad.act_dropout_backward, (grad, n, mask, activation, 0.25))


def test_only_cuda_with_triton_fuses():
    cpu = torch.device("cpu")
    assert not any(ad.fuses_dropout(cpu, a) for a in ("swish", "gelu", "relu", "tanh", "linear"))
    cuda = torch.device("cuda")
    assert not ad.fuses_dropout(cuda, "relu") and not ad.fuses_dropout(cuda, "tanh")  # they read their output
    assert ad.fuses_dropout(cuda, "swish") == ad.triton_available()


INTERPRETED = [f"{a} {d}" for a in ACTIVATIONS for d in ("float64", "float32", "bfloat16")] + ["partial block"]


@pytest.fixture(scope="module")
def interpreted():
    """Each case of tests/act_dropout_interpreter.py, run in one process with TRITON_INTERPRET=1
    from its start (Triton's own jit functions, tl.rand among them, are interpreted only when
    the variable is set before Triton is imported): {case: None, or what failed}."""
    pytest.importorskip("triton", reason="Triton is not installed (torch's CUDA builds bring it)")
    pytest.importorskip("numpy")
    proc = subprocess.run([sys.executable, "-m", "tests.act_dropout_interpreter"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("case", INTERPRETED)
def test_the_triton_kernels_compute_the_reference(interpreted, case):
    assert interpreted[case] is None, interpreted[case]


KERNEL_DTYPES = {"float32": "fp32", "float64": "fp64", "bfloat16": "bf16"}


def kernel_signature(kernel, dtype):
    """Triton's signature of ``kernel`` for tensors of ``dtype`` (fp32, ...), as its launcher
    would derive it from act_dropout.launch_*'s arguments (int strides, a float p)."""
    pointers = {"mask_ptr": "*u1", "seed_ptr": "*i64"}
    sig = {}
    for param in kernel.params:
        if param.is_constexpr:
            sig[param.name] = "constexpr"
        elif param.annotation_type:
            sig[param.name] = param.annotation_type
        elif param.name.endswith("_ptr"):
            sig[param.name] = pointers.get(param.name, f"*{dtype}")
        else:
            sig[param.name] = "fp32" if param.name == "p" else "i32"
    return sig


@pytest.mark.parametrize("dtype", sorted(KERNEL_DTYPES))
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_the_kernels_compile_for_a_hopper_gpu(activation, dtype):
    """Both kernels through Triton's whole compiler to an sm_90 cubin (its own ptxas; no GPU
    needed): what the interpreter cannot show. A float32 or bfloat16 kernel computes nothing
    in float64 (the float64 scale is cast once); a float64 kernel takes its scale as float64."""
    triton = pytest.importorskip("triton", reason="Triton is not installed (torch's CUDA builds bring it)")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from fairseq_define.modules.define import act_dropout_kernels as kernels

    for kernel in (kernels.forward, kernels.backward):
        sig = kernel_signature(kernel, KERNEL_DTYPES[dtype])
        assert sig["scale"] == "fp64"
        constants = {"ACT": ad.KERNEL_ACTIVATIONS[activation], "F64": dtype == "float64", "BLOCK": ad.BLOCK}
        compiled = triton.compile(ASTSource(kernel, sig, constants), target=GPUTarget("cuda", 90, 32))
        assert compiled.asm["cubin"], kernel.__name__
        body = [line for line in compiled.asm["ttgir"].splitlines() if "tt.func" not in line and "f64" in line]
        if dtype == "float64":
            assert body, "the float64 kernel computes nothing in float64"
        else:
            assert len(body) == 1 and "arith.truncf %scale" in body[0], body
