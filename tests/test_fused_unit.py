"""The fused path of the DeFINE unit (define/fused_unit.py) against the layers' modules with
the stability hooks (stability/unit_grad_scale.py): the same outputs and gradients, for every
transform and style it runs, each norm and activation, with and without the stability
settings, on the unique-token and the plain path (float64)."""

import pytest
import torch

from fairseq_define.modules import DefineEmbedding
from fairseq_define.modules.define import fused_unit
from fairseq_define.modules.define.embedding import set_unit_run

from .helpers import define_options

CASES = [
    dict(define_transform="define"),
    dict(define_transform="define_nomix"),
    dict(define_transform="hgt"),
    dict(define_transform="glt"),  # Reduce grouped too
    dict(define_transform="linear"),
    dict(define_transform="define", define_no_reduce=True),
    dict(define_transform="hgt", define_no_reduce=True),  # only the first layer reads e: the map's scale folds
    dict(define_transform="hgt", define_no_reduce=True, define_no_bias=True),
    dict(define_transform="linear", define_no_reduce=True, define_no_bias=True),  # a bias-free mm: no fold
    dict(define_transform="define", define_no_bias=True),
    dict(define_transform="define", define_norm="group_layer", define_activation="gelu"),
    dict(define_transform="define", define_norm="none", define_activation="relu"),
    dict(define_transform="define", define_activation="tanh"),
    dict(define_transform="define", define_activation="linear"),
    dict(define_style="authors", define_max_groups=None),
    dict(define_style="authors", define_max_groups=None, define_norm="none", define_activation="gelu"),
]


def module_path(emb: DefineEmbedding, options=None) -> DefineEmbedding:
    """``emb`` running its layers' modules, the stability settings as hooks (path reference)."""
    return set_unit_run(emb, path="reference")


def out_and_grads(emb, tokens, weight):
    out = emb(tokens)
    (out * weight).sum().backward()
    return out.detach(), {name: p.grad for name, p in emb.named_parameters()}


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c.values()))
@pytest.mark.parametrize("stability", [dict(), dict(define_unit_centring="none", define_unit_grad_scale=1.0)],
                         ids=["default-stability", "no-stability"])
@pytest.mark.parametrize("token_path", ["unique", "plain"])
@pytest.mark.parametrize("layout", ["cpu", "cuda", "per-group"], ids=lambda v: f"{v}-layout")
def test_fused_path_equals_the_modules(case, stability, token_path, layout, monkeypatch):
    """``layout``: cpu, batched matmuls into contiguous buffers and a copy; cuda, the matmuls
    write strided views as on CUDA (fused_unit.writes_strided); per-group, the CPU's path at
    many rows, one matmul a group into its columns (fused_unit.PER_GROUP_ROWS)."""
    monkeypatch.setattr(fused_unit, "writes_strided", lambda device: layout == "cuda")
    monkeypatch.setattr(fused_unit, "PER_GROUP_ROWS", 1 if layout == "per-group" else 1 << 60)
    options = define_options(define_out_dim=32, **case, **stability)
    torch.manual_seed(0)
    fused = set_unit_run(DefineEmbedding(options, 40, 1, 32).double(), token_path=token_path)
    assert fused.unit.program is not None
    reference = module_path(set_unit_run(DefineEmbedding(options, 40, 1, 32).double(), token_path=token_path), options)
    reference.load_state_dict(fused.state_dict())
    with torch.no_grad():
        for name, p in fused.named_parameters():  # non-trivial norms and biases
            if "norm" in name or "bias" in name:
                p.normal_(0, 0.5)
    reference.load_state_dict(fused.state_dict())
    tokens = torch.randint(2, 40, (4, 9))  # repeats: the unique-token path counts them
    weight = torch.randn(4, 9, fused.embedding_dim, dtype=torch.float64)
    out_f, grads_f = out_and_grads(fused, tokens, weight)
    out_r, grads_r = out_and_grads(reference, tokens, weight)
    torch.testing.assert_close(out_f, out_r, rtol=1e-10, atol=1e-10)
    assert grads_f.keys() == grads_r.keys()
    for name in grads_r:
        torch.testing.assert_close(grads_f[name], grads_r[name], rtol=1e-9, atol=1e-12, msg=name)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c.values()))
@pytest.mark.parametrize("layout", ["cpu", "per-group"], ids=lambda v: f"{v}-layout")
def test_the_backward_leaves_the_incoming_gradient_as_it_was(case, layout, monkeypatch):
    """The backward writes activation and centring gradients over its own buffers, never
    over the gradient autograd hands it (a unit without Reduce ends in a norm and an
    activation: its gradient arrives there)."""
    monkeypatch.setattr(fused_unit, "PER_GROUP_ROWS", 1 if layout == "per-group" else 1 << 60)
    torch.manual_seed(0)
    emb = set_unit_run(DefineEmbedding(define_options(define_out_dim=32, **case), 40, 1, 32).double(), token_path="plain")
    out = emb(torch.randint(2, 40, (4, 9)))
    grad = torch.randn_like(out)
    kept = grad.clone()
    out.backward(grad)
    assert torch.equal(grad, kept)


@pytest.mark.parametrize("case", [dict(define_transform="define_residual"), dict(define_transform="glt_shuffle"),
                                  dict(define_transform="projective"), dict(define_dropout=0.1)],
                         ids=lambda c: "-".join(str(v) for v in c.values()))
def test_units_the_fused_path_does_not_run_keep_the_hooks(case):
    emb = DefineEmbedding(define_options(**case), 40, 1, 24)
    assert emb.unit.program is None
    if case.get("define_transform") != "projective":  # the projective baseline has no stability settings
        assert emb.grad_centring is not None and emb.unit.grad_scale == 1.0


def test_no_gradient_runs_the_modules():
    """Inference (and the centred init, which reads Reduce's input through a hook) runs the
    modules: the fused path is for a step that wants gradients."""
    emb = DefineEmbedding(define_options(), 40, 1, 24)
    seen = []
    emb.unit.reduce.register_forward_hook(lambda *a: seen.append(1))
    with torch.no_grad():
        emb(torch.randint(2, 40, (2, 5)))
    assert seen == [1]
    emb(torch.randint(2, 40, (2, 5))).sum().backward()
    assert seen == [1]


def test_fused_path_under_autocast_computes_in_its_dtype():
    """Under autocast the whole unit runs in autocast's dtype (its matmuls, as autocast would
    run them, and its norms), and the parameters get float32 gradients."""
    torch.manual_seed(0)
    emb = DefineEmbedding(define_options(define_out_dim=32), 40, 1, 32)
    tokens = torch.randint(2, 40, (2, 5))
    plain = emb(tokens)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = emb(tokens)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), plain, rtol=0.05, atol=0.05)
    out.float().sum().backward()
    assert all(p.grad.dtype == torch.float32 for p in emb.parameters())


@pytest.mark.parametrize("case", [dict(), dict(define_no_bias=True), dict(define_norm="none"),
                                  dict(define_style="authors", define_max_groups=None)],
                         ids=["define", "no-bias", "no-norm", "authors"])
def test_one_cast_of_all_parameters_equals_a_cast_each(case, monkeypatch):
    """Under autocast the parameters reach the unit's dtype through one cat and one cast
    (``in_dtype``): outputs and float32 gradients identical to casting each parameter."""
    torch.manual_seed(0)
    emb = DefineEmbedding(define_options(define_out_dim=32, **case), 40, 1, 32)
    tokens = torch.randint(2, 40, (3, 7))
    results = []
    for cast in (fused_unit.in_dtype, lambda params, dtype: [p if p is None else p.to(dtype) for p in params]):
        monkeypatch.setattr(fused_unit, "in_dtype", cast)
        emb.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = emb(tokens)
        (out.float() * torch.linspace(-1, 1, out.numel()).view(out.shape)).sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in emb.parameters()]))
    (out, grads), (ref_out, ref_grads) = results
    assert out.dtype == torch.bfloat16 and torch.equal(out, ref_out)
    assert all(g.dtype == torch.float32 and torch.equal(g, r) for g, r in zip(grads, ref_grads))


def test_parameters_already_in_the_dtype_are_not_copied():
    params = [torch.ones(2, 3, dtype=torch.bfloat16), None, torch.zeros(4, dtype=torch.bfloat16)]
    assert fused_unit.in_dtype(params, torch.bfloat16) is params


@pytest.mark.parametrize("case", [dict(), dict(define_style="authors", define_max_groups=None)], ids=["paper", "authors"])
def test_the_path_setting_moves_the_stability_settings_with_it(case, caplog):
    """``path``: reference runs the modules with the stability settings as hooks, auto the
    fast path with them in its backward; switched back and forth, the gradients stay the
    same (the hooks go when the fast path takes over: no setting applied twice), and each
    choice is logged with its reason."""
    torch.manual_seed(0)
    tokens, weight = torch.randint(2, 40, (4, 9)), torch.randn(4, 9, 32, dtype=torch.float64)
    with caplog.at_level("INFO", logger="fairseq_define.modules.define.embedding"):
        emb = DefineEmbedding(define_options(define_out_dim=32, **case), 40, 1, 32).double()
    assert "training steps run the fast path (fused_unit.py; path auto)" in caplog.text
    results = []
    for path in ("auto", "reference", "auto"):
        caplog.clear()
        with caplog.at_level("INFO", logger="fairseq_define.modules.define.embedding"):
            set_unit_run(emb, path=path)
        assert f"path {path}" in caplog.text
        ran = []
        hook = emb.unit.program_layers()[-1].register_forward_hook(lambda *a: ran.append(1))
        emb.zero_grad(set_to_none=True)
        results.append(out_and_grads(emb, tokens, weight))
        hook.remove()
        assert bool(ran) == (path == "reference")  # the modules ran, or the fast path
        assert (emb.grad_centring is not None) == (path == "reference")
    for out, grads in results[1:]:
        torch.testing.assert_close(out, results[0][0], rtol=1e-10, atol=1e-10)
        for name, grad in results[0][1].items():
            torch.testing.assert_close(grads[name], grad, rtol=1e-9, atol=1e-12, msg=name)


@pytest.mark.parametrize("case,reason", [
    (dict(define_transform="define_residual"), "the residual skip connection (define_residual)"),
    (dict(define_transform="glt_shuffle"), "a feature shuffle (glt_shuffle)"),
    (dict(define_dropout=0.1), "dropout inside the unit (--define-dropout)"),
    (dict(define_style="authors", define_max_groups=None, define_dropout=0.1), "dropout inside the unit"),
    (dict(define_transform="projective"), "a projective map"),
])
def test_a_unit_the_fast_path_does_not_take_says_why(case, reason, caplog):
    with caplog.at_level("INFO", logger="fairseq_define.modules.define.embedding"):
        DefineEmbedding(define_options(**case), 40, 1, 24)
    assert f"the modules run every step (path auto: the fast path does not take {reason}" in caplog.text


def test_an_unknown_path_is_refused():
    from fairseq_define.modules.define.config import DefineConfigError

    with pytest.raises(DefineConfigError, match="path must be one of auto, reference, got 'fast'"):
        set_unit_run(DefineEmbedding(define_options(), 40, 1, 24), path="fast")


# -- the fast path against the functional reference (fused_unit.unit_ref) ---------------------


def ref_and_fast(emb, dtype, e_scale=3.0, layout=None, monkeypatch=None):
    """(output, input gradient, parameter gradients) of the unit of ``emb`` on one batch,
    through the reference and through the fast path, in ``dtype`` (float64 inputs cast)."""
    unit = emb.unit
    layers = unit.program_layers()
    g = torch.Generator().manual_seed(1)
    e = torch.randn(4, 9, unit.input_dim, generator=g, dtype=torch.float64)  # [B, T, n]
    weight = torch.randn(4, 9, unit.output_dim, generator=g, dtype=torch.float64)
    results = {}
    for name in ("ref", "fast"):
        params = [None if p is None else p.detach().to(dtype).requires_grad_()
                  for layer in layers for p in fused_unit.params_of(layer)]
        x = e.to(dtype).requires_grad_()
        if name == "ref":
            out = fused_unit.unit_ref(unit.program, params, x, e_scale)
        else:
            out = fused_unit.FusedUnitFunction.apply(unit.program, False, None, x.numel() // x.shape[-1], 1.0, e_scale,
                                                     x, *params)
        (out.double() * weight).sum().backward()
        results[name] = [out.detach().double(), x.grad.double()] + [p.grad.double() for p in params if p is not None]
    return results["ref"], results["fast"]


def tiny_unit(case, dtype=torch.float64):
    torch.manual_seed(0)
    emb = DefineEmbedding(define_options(define_out_dim=32, **case), 40, 1, 32).to(dtype)
    with torch.no_grad():
        for name, p in emb.named_parameters():  # non-trivial norms and biases
            if "norm" in name or "bias" in name:
                p.normal_(0, 0.5)
    return emb


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c.values()))
@pytest.mark.parametrize("layout", ["cpu", "cuda", "per-group"], ids=lambda v: f"{v}-layout")
def test_the_fast_path_equals_the_reference_in_float64(case, layout, monkeypatch):
    """Outputs, the map output's gradient and every parameter's gradient of the fast path
    against autograd through the reference (the stability settings off: they are the
    modules' test above), in each matmul layout, with the map's scale folded or not."""
    monkeypatch.setattr(fused_unit, "writes_strided", lambda device: layout == "cuda")
    monkeypatch.setattr(fused_unit, "PER_GROUP_ROWS", 1 if layout == "per-group" else 1 << 60)
    ref, fast = ref_and_fast(tiny_unit(case), torch.float64)
    assert len(ref) == len(fast)
    for i, (a, b) in enumerate(zip(fast, ref)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-11, msg=f"tensor {i}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c.values()))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_the_fast_path_in_half_precision_errs_as_the_reference_does(case, dtype):
    """In bfloat16 (and float16), the fast path's output and gradients are as far from the
    reference in float32 as the reference in the same dtype is: within a small multiple (3)
    of the reference's own error, as flash-attention's kernels are held to theirs (relative
    error over each tensor; the worst case here is about 2)."""
    emb = tiny_unit(case, torch.float32)
    ref32, _ = ref_and_fast(emb, torch.float32)
    ref_low, fast_low = ref_and_fast(emb, dtype)
    for i, (f, r, exact) in enumerate(zip(fast_low, ref_low, ref32)):
        err_fast, err_ref = (((t - exact).norm() / exact.norm()).item() for t in (f, r))
        assert err_fast <= 3 * err_ref + 1e-6, (i, err_fast, err_ref)
