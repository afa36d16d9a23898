"""The fused path of the DeFINE unit (define/fused_unit.py) against the layers' modules with
the stability hooks (stability/unit_grad_scale.py): the same outputs and gradients, for every
transform and style it runs, each norm and activation, with and without the stability
settings, on the unique-token and the plain path (float64)."""

import pytest
import torch

from fairseq_define.modules import DefineEmbedding
from fairseq_define.modules.define import fused_unit
from fairseq_define.modules.define.embedding import set_unit_run
from fairseq_define.modules.stability.unit_grad_scale import centre_unit_gradients, scale_unit_gradients

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


def module_path(emb: DefineEmbedding, options) -> DefineEmbedding:
    """``emb`` running its layers' modules, the stability settings as hooks."""
    emb.unit.program = None
    if options.unit_centring == "batch_mean":
        emb.grad_centring = centre_unit_gradients(emb.unit)
    scale_unit_gradients(emb.unit, options.unit_grad_scale)
    return emb


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
