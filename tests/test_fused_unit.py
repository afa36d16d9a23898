"""The DeFINE unit's one training path (define/fused_unit.py): every unit with layers, both
styles, every transform, each norm and activation, dropout, trains through one autograd
Function, held to the functional reference (``unit_reference``, the paper's equations read off
the unit's parameters) in float64 in each matmul layout, and in bfloat16/float16 within a small
multiple of the reference's own error; the stability settings in its backward are the maths
of stability/gradients.py applied to the reference's autograd gradients."""

import copy

import pytest
import torch

from fairseq_define.modules import DefineEmbedding
from fairseq_define.modules.define import fused_unit
from fairseq_define.modules.define.act_dropout import KERNEL_ACTIVATIONS
from fairseq_define.modules.define.embedding import set_unit_run
from fairseq_define.modules.stability.gradients import centre
from fairseq_define.modules.stability.gradients import scale as scale_gradients

from .helpers import define_options

AUTHORS = dict(define_style="authors", define_max_groups=None)
CASES = [
    dict(define_transform="define"),
    dict(define_transform="define_nomix"),
    dict(define_transform="define_residual"),
    dict(define_transform="hgt"),
    dict(define_transform="glt"),  # Reduce grouped too
    dict(define_transform="glt_shuffle"),
    dict(define_transform="linear"),
    dict(define_transform="define", define_dropout=0.2),
    dict(define_transform="define_residual", define_dropout=0.2),
    dict(define_transform="glt_shuffle", define_dropout=0.2, define_activation="relu"),
    dict(define_transform="define", define_no_reduce=True),
    dict(define_transform="hgt", define_no_reduce=True),  # only the first layer reads e: the map's scale folds
    dict(define_transform="hgt", define_no_reduce=True, define_no_bias=True),
    dict(define_transform="linear", define_no_reduce=True, define_no_bias=True),  # a bias-free mm: no fold
    dict(define_transform="glt_shuffle", define_no_bias=True),
    dict(define_transform="define", define_no_bias=True),
    dict(define_transform="define", define_norm="group_layer", define_activation="gelu"),
    dict(define_transform="define", define_norm="none", define_activation="relu"),
    dict(define_transform="define_residual", define_norm="none", define_activation="linear"),
    dict(define_transform="define", define_activation="tanh"),
    dict(define_transform="define", define_activation="linear"),
    AUTHORS,
    dict(AUTHORS, define_dropout=0.2),
    dict(AUTHORS, define_norm="none", define_activation="gelu"),
]
IDS = ["-".join(f"{k.replace('define_', '')}={v}" for k, v in c.items()) for c in CASES]
LAYOUTS = ["cpu", "cuda", "per-group"]


def use_layout(monkeypatch, layout: str):
    """cpu: batched matmuls into contiguous buffers and a copy; cuda: the matmuls write
    strided views and a layer's activation and dropout run as one operator a direction, as on
    CUDA (fused_unit.writes_strided, fuses_dropout: the operators' CPU kernels); per-group:
    the CPU's path at many rows, one matmul a group into its columns (fused_unit.PER_GROUP_ROWS)."""
    monkeypatch.setattr(fused_unit, "writes_strided", lambda device: layout == "cuda")
    monkeypatch.setattr(fused_unit, "fuses_dropout",
                        lambda device, activation: layout == "cuda" and activation in KERNEL_ACTIVATIONS)
    monkeypatch.setattr(fused_unit, "PER_GROUP_ROWS", 1 if layout == "per-group" else 1 << 60)


def tiny_embedding(case, dtype=torch.float64, **more):
    torch.manual_seed(0)
    emb = DefineEmbedding(define_options(define_out_dim=32, **case, **more), 40, 1, 32).to(dtype)
    with torch.no_grad():
        for name, p in emb.named_parameters():  # non-trivial norms and biases
            if "norm" in name or "bias" in name:
                p.normal_(0, 0.5)
    return emb


def draw_masks(program, rows: int, generator):
    """One Bernoulli mask [rows, out] a step with dropout (None elsewhere), kept with 1 - p."""
    return [torch.rand(rows, s.out, generator=generator) >= s.dropout if s.dropout > 0 else None for s in program]


def ref_and_fast(emb, dtype, e_scale=3.0, counts=None, stability=(False, 1.0), record=None):
    """(output, the map output's gradient, every parameter's gradient) of the unit of ``emb``
    on one batch with the same dropout masks, through autograd on the reference and through
    the Function, each on its own copy of the unit in ``dtype``; ``record``: a list the
    reference's layers' (input, linear output) go to."""
    g = torch.Generator().manual_seed(1)
    unit, program = emb.unit, emb.program
    e = torch.randn(4, 9, unit.input_dim, generator=g, dtype=torch.float64)  # [B, T, n]
    weight = torch.randn(4, 9, unit.output_dim, generator=g, dtype=torch.float64)
    masks = draw_masks(program, 36, g)
    results = {}
    for name in ("ref", "fast"):
        twin = copy.deepcopy(unit).to(dtype).train()
        x = e.to(dtype).requires_grad_()
        if name == "ref":
            out = fused_unit.unit_reference(twin, x * e_scale, [None if m is None else m.view(4, 9, -1) for m in masks])
        else:
            positions = int(counts.sum()) if counts is not None else None
            out = fused_unit.fused_unit(
                program, fused_unit.unit_layers(twin), x, *stability, counts, positions, e_scale, True, masks
            )
        (out.double() * weight).sum().backward()
        results[name] = [out.detach().double(), x.grad.double()] + [
            p.grad.double()
            for layer in fused_unit.unit_layers(twin)
            for p in fused_unit.params_of(layer)
            if p is not None
        ]
    return results["ref"], results["fast"]


@pytest.mark.parametrize("case", CASES + [dict(define_transform="projective")], ids=IDS + ["projective"])
def test_every_unit_with_layers_trains_through_the_function(case):
    """A training call's autograd graph: one FusedUnitFunction for every unit with layers
    (dropout, shuffle and residual included), the modules' graph for the projective map."""
    emb = DefineEmbedding(define_options(**case), 40, 1, 24).train()
    out = emb(torch.randint(2, 40, (2, 5)))
    seen, stack = set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack += [next_node for next_node, _ in node.next_functions]
    names = {type(node).__name__ for node in seen}
    assert ("FusedUnitFunctionBackward" in names) == (case.get("define_transform") != "projective"), names
    if case.get("define_transform") != "projective":
        assert not names & {"BmmBackward0", "BaddbmmBackward0", "NativeLayerNormBackward0"}, names


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda v: f"{v}-layout")
def test_the_function_equals_the_reference_in_float64(case, layout, monkeypatch):
    """Outputs, the map output's gradient and every parameter's gradient of the Function
    against autograd through the reference (dropout through the same masks), in each matmul
    layout, with the map's scale folded into a matmul or not."""
    use_layout(monkeypatch, layout)
    ref, fast = ref_and_fast(tiny_embedding(case), torch.float64)
    assert len(ref) == len(fast)
    for i, (a, b) in enumerate(zip(fast, ref)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-11, msg=f"tensor {i}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_the_function_in_half_precision_errs_as_the_reference_does(case, dtype):
    """In bfloat16 (and float16), the Function's output and gradients are as far from the
    reference in float32 as the reference in the same dtype is: within a small multiple (3)
    of the reference's own error, as flash-attention's kernels are held to theirs (relative
    error over each tensor; a reference error below half the dtype's epsilon counts as that
    half: a tensor the reference happens to round almost exactly, as one of 22 in the authors'
    unit with dropout in bfloat16, 0.0027, is no yardstick)."""
    emb = tiny_embedding(case, torch.float32)
    ref32, _ = ref_and_fast(emb, torch.float32)
    ref_low, fast_low = ref_and_fast(emb, dtype)
    for i, (f, r, exact) in enumerate(zip(fast_low, ref_low, ref32)):
        err_fast, err_ref = (((t - exact).norm() / exact.norm()).item() for t in (f, r))
        assert err_fast <= 3 * max(err_ref, torch.finfo(dtype).eps / 2), (i, err_fast, err_ref)


@pytest.mark.parametrize("case", [c for c in CASES if not c.get("define_no_bias")],
                         ids=[i for c, i in zip(CASES, IDS) if not c.get("define_no_bias")])
@pytest.mark.parametrize("counted", [False, True], ids=["one-row-a-position", "counted-rows"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda v: f"{v}-layout")
def test_the_stability_settings_are_the_maths_applied_to_the_reference_gradients(case, counted, layout, monkeypatch):
    """The Function's backward with ``--define-unit-centring batch_mean`` and a gradient scale
    equals stability/gradients.py applied to the reference's autograd gradients: each weight's
    gradient less its layer's mean input (over positions: rows weighted by the positions they
    stand for) times its bias gradient, then every parameter gradient of the unit scaled; the
    map output's gradient as without them."""
    use_layout(monkeypatch, layout)
    emb = tiny_embedding(case)
    counts = torch.randint(1, 4, (36,)) if counted else None  # [rows]
    record = []
    original = fused_unit.group_linear_ref

    def recording(x, w, b, shuffle=False):
        y = original(x, w, b, shuffle)
        if torch.is_grad_enabled():
            y.retain_grad()
            record.append((x.detach().reshape(-1, x.shape[-1]), y, w.shape[0], shuffle))
        return y

    monkeypatch.setattr(fused_unit, "group_linear_ref", recording)
    ref, _ = ref_and_fast(emb, torch.float64)
    monkeypatch.setattr(fused_unit, "group_linear_ref", original)
    _, fast = ref_and_fast(emb, torch.float64, counts=counts, stability=(True, 0.25))
    expected = list(ref)
    params = [p for layer in fused_unit.unit_layers(emb.unit) for p in fused_unit.params_of(layer) if p is not None]
    index = {id(p): 2 + i for i, p in enumerate(params)}
    weights = counts.double() if counted else torch.ones(36, dtype=torch.float64)
    for layer, (x, y, groups, shuffle) in zip(fused_unit.unit_layers(emb.unit), record):
        w = getattr(layer, "transform", layer).weight
        s = y.grad.reshape(-1, y.shape[-1]).sum(0)  # [out]: the bias gradient, in the layer's layout
        s = s.view(-1, groups).t() if shuffle else s.view(groups, -1)  # [g, out/g]
        mean = (weights @ x / weights.sum()).view(groups, -1)  # [g, in/g]
        expected[index[id(w)]] = centre(expected[index[id(w)]], mean, s, 1)
    expected[2:] = scale_gradients(expected[2:], 0.25)
    for i, (a, b) in enumerate(zip(fast, expected)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11, msg=f"tensor {i}")
    assert len(record) == len(fused_unit.unit_layers(emb.unit))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_modules_compute_the_reference(case):
    """The inference path (the modules, under no_grad or in eval) computes the reference's
    function, so the training path and inference agree."""
    emb = tiny_embedding(case).eval()
    e = torch.randn(3, 5, emb.unit.input_dim, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(emb.unit(e), fused_unit.unit_reference(emb.unit, e), rtol=1e-10, atol=1e-11)


@pytest.mark.parametrize("case", [dict(define_dropout=0.25), dict(AUTHORS, define_dropout=0.25),
                                  dict(define_transform="define_residual", define_dropout=0.25)],
                         ids=["paper", "authors", "residual"])
def test_dropout_draws_its_masks_and_keeps_them_for_the_backward(case):
    """In training the Function draws one mask a layer (about 1 - p kept), and its output is
    the reference's with the masks it drew; in eval no dropout acts, with or without a
    gradient."""
    emb = tiny_embedding(case)
    program, layers = emb.program, fused_unit.unit_layers(emb.unit)
    params = [p for layer in layers for p in fused_unit.params_of(layer)]
    e = torch.randn(64, emb.unit.input_dim, dtype=torch.float64)
    out, saved = fused_unit.run_forward(program, e, params, 1.0, keep=True, training=True)
    masks = [s[5] for s in saved]
    drawn = [m for m in masks if m is not None]
    assert len(drawn) == sum(s.dropout > 0 for s in program) > 0
    kept = torch.cat([m.reshape(-1) for m in drawn]).double().mean().item()
    assert abs(kept - 0.75) < 0.05, kept
    with torch.no_grad():
        torch.testing.assert_close(out, fused_unit.unit_reference(emb.unit.train(), e, masks), rtol=1e-10, atol=1e-11)
        emb.eval()
        torch.testing.assert_close(emb.unit(e), fused_unit.unit_reference(emb.unit, e), rtol=1e-10, atol=1e-11)
    e.requires_grad_()
    evaluated = fused_unit.unit_forward(emb.unit, program, e)  # eval with a gradient: the Function, no dropout
    assert type(evaluated.grad_fn).__name__ == "FusedUnitFunctionBackward"
    with torch.no_grad():
        torch.testing.assert_close(evaluated, emb.unit(e), rtol=1e-10, atol=1e-11)


@pytest.mark.parametrize("case", [dict(define_dropout=0.25), dict(AUTHORS, define_dropout=0.25),
                                  dict(define_transform="define_residual", define_dropout=0.25,
                                       define_activation="gelu")],
                         ids=["paper", "authors", "residual-gelu"])
def test_the_fused_activation_and_dropout_train_as_the_reference(case, monkeypatch):
    """As on CUDA (use_layout's cuda), each layer's activation and dropout run as one operator
    a direction (act_dropout.py), the forward drawing its masks: the Function's output and
    every gradient equal autograd through the reference with the masks it drew, in float64."""
    use_layout(monkeypatch, "cuda")
    drawn, fast, ref = through_drawn_masks(tiny_embedding(case), monkeypatch, torch.device("cpu"))
    kept = torch.cat([m.reshape(-1) for m in drawn]).double().mean().item()
    assert 0.6 < kept < 0.9, kept
    for i, (a, b) in enumerate(zip(fast, ref)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-11, msg=f"tensor {i}")


def through_drawn_masks(emb, monkeypatch, device, shape=(6, 5), e_scale=2.0):
    """(the masks fused_unit.act_dropout drew, [output, the map output's gradient, every
    parameter's gradient] of the Function on ``device``, the same of autograd through the
    reference with those masks), each on its own copy of the unit of ``emb`` (in training)."""
    drawn, original = [], fused_unit.act_dropout

    def recording(n, seed, activation, p):
        out, mask = original(n, seed, activation, p)
        drawn.append(mask)
        return out, mask

    monkeypatch.setattr(fused_unit, "act_dropout", recording)
    program, unit = emb.program, emb.unit
    dtype = next(unit.parameters()).dtype
    e = torch.randn(*shape, unit.input_dim, dtype=dtype, device=device)
    weight = torch.randn(*shape, unit.output_dim, dtype=dtype, device=device)
    results = []
    for name in ("fast", "ref"):
        twin = copy.deepcopy(unit).to(device).train()
        x = e.clone().requires_grad_()
        if name == "fast":
            out = fused_unit.fused_unit(program, fused_unit.unit_layers(twin), x, False, 1.0, e_scale=e_scale)
            assert len(drawn) == sum(s.dropout > 0 for s in program) > 0
            masks = iter(drawn)
            full = [next(masks).view(*shape, -1) if s.dropout > 0 else None for s in program]
        else:
            out = fused_unit.unit_reference(twin, x * e_scale, full)
        (out * weight).sum().backward()
        results.append([out.detach(), x.grad] + [p.grad for layer in fused_unit.unit_layers(twin)
                                                 for p in fused_unit.params_of(layer) if p is not None])
    return drawn, *results


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda v: f"{v}-layout")
def test_the_backward_leaves_the_incoming_gradient_as_it_was(case, layout, monkeypatch):
    """The backward writes activation, dropout and centring gradients over its own buffers,
    never over the gradient autograd hands it (a unit without Reduce ends in a norm and an
    activation: its gradient arrives there)."""
    use_layout(monkeypatch, layout)
    emb = set_unit_run(tiny_embedding(case), token_path="plain")
    out = emb(torch.randint(2, 40, (4, 9)))
    grad = torch.randn_like(out)
    kept = grad.clone()
    out.backward(grad)
    assert torch.equal(grad, kept)


def test_no_gradient_runs_the_modules():
    """Inference (and the centred init, which reads Reduce's input through a hook) runs the
    modules: the Function is for a call that wants gradients."""
    emb = DefineEmbedding(define_options(), 40, 1, 24)
    seen = []
    emb.unit.reduce.register_forward_hook(lambda *a: seen.append(1))
    with torch.no_grad():
        emb(torch.randint(2, 40, (2, 5)))
    assert seen == [1]
    emb(torch.randint(2, 40, (2, 5))).sum().backward()
    assert seen == [1]


@pytest.mark.parametrize("case,said", [
    (dict(), "training steps (every call that wants a gradient) run the fast path (fused_unit.py)"),
    (dict(define_dropout=0.1, define_transform="glt_shuffle"), "training steps (every call that wants a gradient)"),
    (dict(define_transform="projective"), "a projective map (one Linear n -> m): its module runs every step"),
])
def test_the_path_is_logged(case, said, caplog):
    with caplog.at_level("INFO", logger="fairseq_define.modules.define.embedding"):
        DefineEmbedding(define_options(**case), 40, 1, 24)
    assert f"DeFINE unit: {said}" in caplog.text


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


@pytest.mark.parametrize("case", [dict(), dict(define_no_bias=True), dict(define_norm="none"), AUTHORS],
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


def test_the_modules_import_nothing_of_the_fast_path():
    """The modules are the inference path and the spec; the fast path reads them, not back."""
    import ast
    from pathlib import Path

    folder = Path(fused_unit.__file__).parent
    for name in ("unit.py", "unit_authors.py", "group_linear.py", "group_layer_norm.py"):
        tree = ast.parse((folder / name).read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not any(m and "fused_unit" in m for m in imported), name
