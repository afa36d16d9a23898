"""Mixed precision on CPU: bfloat16 autocast (what ``--bf16``/``--amp`` give on hardware that
has it) through the DeFINE unit and a whole Transformer-XL with DeFINE, forward and backward:
finite, and close to float32. bfloat16 keeps 8 bits of mantissa (relative step 2^-8 = 0.4%),
so outputs are compared by relative norm within 3% and the loss within 1%."""

import torch

from fairseq_define.modules import DefineUnit, build_schedule

from .helpers import tiny_model


def relative_error(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def run(fn, bf16):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        return fn()


def test_define_unit_under_bfloat16_autocast():
    torch.manual_seed(0)
    unit = DefineUnit(build_schedule(32, 128, 3, 64, "define", max_groups=8))
    e = torch.randn(6, 10, 32)
    grads = {}
    for bf16 in (False, True):
        unit.zero_grad()
        out = run(lambda: unit(e), bf16)
        out.float().pow(2).mean().backward()
        grads[bf16] = (out.detach(), {k: p.grad.clone() for k, p in unit.named_parameters()})
    (out32, g32), (out16, g16) = grads[False], grads[True]
    assert torch.isfinite(out16.float()).all()
    assert 0 < relative_error(out16, out32) <= 0.03  # the matmuls ran in bfloat16
    for k in g32:
        assert torch.isfinite(g16[k]).all(), k
        assert relative_error(g16[k], g32[k]) <= 0.05, k


def test_transformer_xl_with_define_under_bfloat16_autocast():
    torch.manual_seed(1)
    model = tiny_model(define_transform="define", define_expand_dim=32, define_depth=2, adaptive_cutoff="20")
    model.train()  # dropout is 0 in tiny_model: deterministic
    tokens = torch.randint(4, 50, (3, 12))
    target = torch.randint(4, 50, (3, 12))

    def loss():
        features = model(tokens)[0]  # [B, T, d]
        return -model.decoder.adaptive_softmax.target_log_prob(features.reshape(-1, features.size(-1)),
                                                               target.reshape(-1)).mean()

    results = {}
    for bf16 in (False, True):
        model.zero_grad()
        value = run(loss, bf16)
        assert value.dtype == torch.float32  # normalised in float32 (at_least_float)
        value.backward()
        results[bf16] = (value.item(), torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    (l32, g32), (l16, g16) = results[False], results[True]
    assert torch.isfinite(g16).all() and 0 < abs(l16 - l32) <= 0.01 * abs(l32)
    assert relative_error(g16, g32) <= 0.1
    assert torch.nn.functional.cosine_similarity(g16, g32, dim=0) >= 0.99
