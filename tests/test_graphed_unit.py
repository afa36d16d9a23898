"""The graphed unit (define/graphed_unit.py) against the eager fast path (``fused_unit``): the
same output and every gradient (float64, 1e-10) for both styles, with and without the
stability settings and the unique-token counts, across bucket switches, parameter
replacement, dtype changes and two calls before their backwards; its padded rows change
nothing, it captures exactly when it must, frees its slots, and syncs with the host nowhere
in the captured region. The eager replay backend runs everywhere; the cuda one where there
is a GPU."""

import copy
import pickle

import pytest
import torch

from fairseq_define.modules import DefineEmbedding
from fairseq_define.modules.define import fused_unit
from fairseq_define.modules.define.graphed_unit import GraphedUnit, bucket

from .helpers import define_options

BACKENDS = ["eager", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                   reason="needs a CUDA GPU"))]
DEVICE = {"eager": "cpu", "cuda": "cuda"}
STYLES = {"paper": dict(), "authors": dict(define_style="authors", define_max_groups=None)}


def unit_of(style, device="cpu", dtype=torch.float64):
    """A small unit of ``style`` with non-trivial norms and biases."""
    torch.manual_seed(0)
    emb = DefineEmbedding(define_options(define_out_dim=32, **STYLES[style]), 40, 1, 32).to(device, dtype)
    with torch.no_grad():
        for name, p in emb.named_parameters():
            if "norm" in name or "bias" in name:
                p.normal_(0, 0.5)
    return emb.unit


def params_of(unit):
    return [p for layer in fused_unit.unit_layers(unit) for p in fused_unit.params_of(layer)]


def eager(unit, centring=True, grad_scale=0.7, counts=None, positions=None, e_scale=3.0):
    return lambda e: fused_unit.fused_unit(fused_unit.program_of(unit), fused_unit.unit_layers(unit), e, centring,
                                           grad_scale, counts, positions, e_scale)


def graphed(runner, unit, centring=True, grad_scale=0.7, counts=None, positions=None, e_scale=3.0):
    return lambda e: runner(fused_unit.program_of(unit), params_of(unit), e, centring, grad_scale, counts, positions,
                            e_scale)


def batch(unit, rows, counted, seed=0):
    """(e [rows, n] or [1, rows, n], the output's weight, {counts, positions} of the unique-token path or {})."""
    g = torch.Generator().manual_seed(seed)
    shape = (rows,) if counted else (1, rows)
    weight = fused_unit.unit_layers(unit)[0].transform.weight
    device, dtype = weight.device, weight.dtype
    e = torch.randn(*shape, unit.input_dim, generator=g, dtype=torch.float64).to(device, dtype)
    weight = torch.randn(*shape, unit.output_dim, generator=g, dtype=torch.float64).to(device, dtype)
    counts = torch.randint(1, 5, (rows,), generator=g).to(device)
    return e, weight, (dict(counts=counts, positions=int(counts.sum()) + 3) if counted else {})


def step(call, unit, e, weight):
    """[output, e's gradient, every parameter's gradient] of one call and its backward."""
    params = [p for p in params_of(unit) if p is not None]
    for p in params:
        p.grad = None
    e = e.detach().requires_grad_()
    out = call(e)
    (out * weight).sum().backward()
    return [out.detach(), e.grad] + [p.grad for p in params]


def assert_same(got, expected, tol=1e-10):
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(got, expected)):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol, msg=f"tensor {i}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("centring", [True, False], ids=["centring", "no-centring"])
@pytest.mark.parametrize("grad_scale", [1.0, 0.7])
@pytest.mark.parametrize("counted", [True, False], ids=["counts", "no-counts"])
def test_output_and_every_gradient_equal_the_eager_path(backend, style, centring, grad_scale, counted):
    """Successive calls cross bucket edges (8, 16, 32) and come back; each bucket is captured
    once, and the padded rows of a bucket's earlier, larger call are not read."""
    unit = unit_of(style, DEVICE[backend])
    runner = GraphedUnit(backend, smallest=8)
    for seed, rows in enumerate((5, 12, 9, 16, 17, 3)):
        e, weight, extra = batch(unit, rows, counted, seed)
        settings = dict(centring=centring, grad_scale=grad_scale, **extra)
        assert_same(
            step(graphed(runner, unit, **settings), unit, e, weight), step(eager(unit, **settings), unit, e, weight)
        )
    assert runner.captures == 3 and len(runner.slots) == 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("style", STYLES)
def test_replaced_parameters_are_captured_afresh(backend, style):
    """float32 to float64 (``.to``: new tensors), then ``load_state_dict(assign=True)`` (new
    parameters): each a capture, each equal to the eager path; an in-place load none."""
    unit = unit_of(style, DEVICE[backend], torch.float32)
    runner = GraphedUnit(backend, smallest=8)
    e, weight, extra = batch(unit, 6, True)
    assert_same(
        step(graphed(runner, unit, **extra), unit, e, weight), step(eager(unit, **extra), unit, e, weight), 1e-4
    )
    unit.to(torch.float64)
    e, weight, extra = batch(unit, 6, True)
    assert_same(step(graphed(runner, unit, **extra), unit, e, weight), step(eager(unit, **extra), unit, e, weight))
    assert runner.captures == 2
    for assign, captures in ((True, 3), (False, 3)):
        unit.load_state_dict({k: torch.randn_like(v) for k, v in unit.state_dict().items()}, assign=assign)
        assert_same(step(graphed(runner, unit, **extra), unit, e, weight), step(eager(unit, **extra), unit, e, weight))
        assert runner.captures == captures


@pytest.mark.parametrize("style", STYLES)
def test_autocast_runs_in_its_dtype_with_graphs_of_its_own(style):
    """Under autocast the graphs compute in its dtype (the parameters' cast in the graph) and
    return float32 gradients as the eager path does; float32 calls keep their own graphs."""
    unit = unit_of(style, dtype=torch.float32)
    runner = GraphedUnit("eager", smallest=8)
    e, weight, extra = batch(unit, 6, True)
    for autocast, captures in ((False, 1), (True, 2), (False, 2)):
        results = []
        for call in (graphed(runner, unit, **extra), eager(unit, **extra)):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                results.append(step(call, unit, e, weight))
        got, expected = results
        assert got[0].dtype == (torch.bfloat16 if autocast else torch.float32)
        assert all(g.dtype == torch.float32 for g in got[1:])
        assert_same([t.float() for t in got], [t.float() for t in expected], 0.05 if autocast else 1e-5)
        assert runner.captures == captures


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("together", [True, False], ids=["one-backward", "backwards-reversed"])
def test_two_calls_before_their_backwards_keep_their_own_buffers(backend, style, together):
    """An NMT model's source and target through one embedding: two calls in one bucket, then
    one backward through both, or the second call's backward first."""
    unit = unit_of(style, DEVICE[backend])
    runner = GraphedUnit(backend, smallest=8)
    (e1, w1, x1), (e2, w2, x2) = batch(unit, 7, True, 1), batch(unit, 6, False, 2)
    results = []
    for make in (lambda **kw: graphed(runner, unit, **kw), lambda **kw: eager(unit, **kw)):
        params = [p for p in params_of(unit) if p is not None]
        for p in params:
            p.grad = None
        a, b = e1.detach().requires_grad_(), e2.detach().requires_grad_()
        out1, out2 = make(**x1)(a), make(**x2)(b)
        if together:
            ((out1 * w1).sum() + (out2 * w2).sum()).backward()
        else:
            (out2 * w2).sum().backward()
            (out1 * w1).sum().backward()
        results.append([out1.detach(), out2.detach(), a.grad, b.grad] + [p.grad for p in params])
    assert_same(*results)
    assert len(runner.slots) == 2 and runner.captures == 2
    assert all(slot.free() for slot in runner.slots)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("centring", [True, False], ids=["centring", "no-centring"])
def test_a_padded_row_changes_nothing(backend, centring):
    """9 rows after 12 in the bucket of 16: rows 9-11 of the static input, weights and
    gradient hold the earlier call's values unless zeroed; with them the parameters'
    gradients would take the earlier call's share. The same rows with no padding agree."""
    unit = unit_of("paper", DEVICE[backend])
    padded = GraphedUnit(backend, smallest=16)
    exact = GraphedUnit(backend, smallest=1)
    for seed, rows in enumerate((12, 9)):
        e, weight, extra = batch(unit, rows, True, seed)
        expected = step(eager(unit, centring=centring, **extra), unit, e, weight)
        assert_same(step(graphed(padded, unit, centring=centring, **extra), unit, e, weight), expected)
    e, weight, extra = batch(unit, 8, True)
    assert_same(step(graphed(padded, unit, centring=centring, **extra), unit, e, weight),
                step(graphed(exact, unit, centring=centring, **extra), unit, e, weight))
    assert bucket(8, 16) == 16 and bucket(8, 1) == 8


@pytest.mark.parametrize("backend", BACKENDS)
def test_captures_happen_exactly_when_they_must(backend):
    unit = unit_of("paper", DEVICE[backend])
    runner = GraphedUnit(backend, smallest=8)

    def call(rows, **settings):
        e, weight, extra = batch(unit, rows, True)
        return step(graphed(runner, unit, **{**extra, **settings}), unit, e, weight)

    expected = [(5, 1), (8, 1), (9, 2), (3, 2), (300, 3), (7, 3)]
    for rows, captures in expected:  # a new bucket, or one seen before
        call(rows)
        assert runner.captures == captures, rows
    unit.load_state_dict({k: v + 1 for k, v in unit.state_dict().items()})  # in place: the graphs read it
    call(6)
    assert runner.captures == 3
    for settings, captures in ((dict(grad_scale=0.5), 4), (dict(grad_scale=0.5), 4), (dict(e_scale=1.0), 5),
                               (dict(centring=False), 6)):
        call(6, **settings)
        assert runner.captures == captures, settings
    fused_unit.unit_layers(unit)[0].transform.weight.data = fused_unit.unit_layers(unit)[
        0
    ].transform.weight.data.clone()
    call(6)
    assert runner.captures == 7


def test_slots_are_freed_by_the_backward_or_when_the_graph_goes():
    """A slot a call holds until its backward; a call without gradients, or whose output is
    dropped, frees its own; a second backward after the slot was taken again is refused."""
    unit = unit_of("paper")
    runner = GraphedUnit("eager", smallest=8)
    call = graphed(runner, unit)
    e, other = batch(unit, 6, False)[0], batch(unit, 6, False, seed=1)[0]
    with torch.no_grad():
        first, expected = call(e), call(e).clone()
        call(other)
    assert len(runner.slots) == 1 and torch.equal(first, expected)  # a copy: the replay rewrote the static buffer
    out = call(e)
    assert not runner.slots[0].free()
    del out
    assert runner.slots[0].free()
    out = call(e)
    out.sum().backward(retain_graph=True)
    assert runner.slots[0].free()
    out.sum().backward(retain_graph=True)  # its buffers untouched: allowed
    call(e)
    with pytest.raises(RuntimeError, match="after a later call took its buffers"):
        out.sum().backward()


def test_an_output_changed_in_place_is_refused_at_the_backward():
    """The output is a view of the slot's static buffer and the backward reads it (as the
    eager path's saved output): autograd's version check guards it."""
    unit = unit_of("paper")
    out = graphed(GraphedUnit("eager", smallest=8), unit)(batch(unit, 6, False)[0].requires_grad_())
    out.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


@pytest.mark.parametrize("style", STYLES)
def test_the_captured_region_reads_no_value_on_the_host(style):
    """The whole call on the meta device, where any read of a value (``.item()``, a
    data-dependent shape such as ``nonzero``'s) raises: nothing in the graphs syncs."""
    unit = unit_of(style).to("meta")
    runner = GraphedUnit("eager", smallest=8)
    e = torch.empty(6, unit.input_dim, device="meta", dtype=torch.float64, requires_grad=True)
    counts = torch.ones(6, dtype=torch.long, device="meta")
    out = runner(fused_unit.program_of(unit), params_of(unit), e, True, 0.7, counts, 9, 3.0)
    out.sum().backward()
    assert out.shape == (6, unit.output_dim) and e.grad.shape == e.shape


def test_a_copy_starts_empty_and_bad_backends_are_refused():
    runner = GraphedUnit("eager", smallest=8)
    unit = unit_of("paper")
    step(graphed(runner, unit), unit, *batch(unit, 6, False)[:2])
    for twin in (copy.deepcopy(runner), pickle.loads(pickle.dumps(runner))):
        assert (twin.backend, twin.smallest, twin.captures, twin.slots) == ("eager", 8, 0, [])
    with pytest.raises(ValueError, match="backend must be one of cuda, eager, got 'tpu'"):
        GraphedUnit("tpu")
    with pytest.raises(ValueError, match="cuda backend runs on a CUDA device, not cpu"):
        graphed(GraphedUnit("cuda"), unit)(batch(unit, 6, False)[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_accumulate_across_calls(backend):
    """Three calls and backwards without zeroing (gradient accumulation): the gradients handed
    to autograd are copies, never the slot's buffers that the next replay rewrites."""
    unit = unit_of("paper", DEVICE[backend])
    runner = GraphedUnit(backend, smallest=8)
    results = []
    for make in (lambda: graphed(runner, unit), lambda: eager(unit)):
        params = [p for p in params_of(unit) if p is not None]
        for p in params:
            p.grad = None
        for seed in range(3):
            e, weight, _ = batch(unit, 6, False, seed)
            (make()(e) * weight).sum().backward()
        results.append([p.grad.clone() for p in params])
    assert_same(*results)


# -- through the embedding (set_unit_run's graphs) ------------------------------------------------


@pytest.mark.parametrize(
    "case",
    [dict(), STYLES["authors"], dict(define_transform="glt_shuffle"), dict(define_transform="define_residual")],
    ids=["paper", "authors", "shuffle", "residual"],
)
@pytest.mark.parametrize("token_path", ["unique", "plain"])
def test_an_embedding_with_graphs_trains_as_without(case, token_path):
    """``set_unit_run(graphs="eager")``: an embedding's training steps over batches of several
    sizes give the outputs and gradients the ungraphed embedding gives (float64), through one
    runner; calls without a gradient run the modules."""
    from fairseq_define.modules.define.embedding import set_unit_run

    twins = []
    for graphs in ("eager", "off"):
        torch.manual_seed(0)
        twins.append(set_unit_run(DefineEmbedding(define_options(define_out_dim=32, **case), 40, 1, 32).double(),
                                  token_path=token_path, graphs=graphs))
    graphed_emb, plain_emb = twins
    assert isinstance(graphed_emb.graphs, GraphedUnit) and plain_emb.graphs is None
    for i, (B, T) in enumerate([(4, 9), (2, 3), (6, 50), (4, 9)]):
        g = torch.Generator().manual_seed(i)
        tokens = torch.randint(2, 40, (B, T), generator=g)
        weight = torch.randn(B, T, 32, generator=g, dtype=torch.float64)
        results = []
        for emb in twins:
            emb.zero_grad(set_to_none=True)
            out = emb(tokens)
            (out * weight).sum().backward()
            results.append((out.detach(), {n: p.grad for n, p in emb.named_parameters()}))
        torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-10, atol=1e-11)
        for name, grad in results[1][1].items():
            torch.testing.assert_close(results[0][1][name], grad, rtol=1e-9, atol=1e-11, msg=name)
    captures = 2 if token_path == "plain" else 1  # 256 and 512 rows (300 positions); at most 38 tokens
    assert graphed_emb.graphs.captures == captures
    with torch.no_grad():
        torch.testing.assert_close(graphed_emb(tokens), plain_emb(tokens), rtol=1e-10, atol=1e-11)
    assert graphed_emb.graphs.captures == captures


def test_a_graphed_unit_with_dropout_draws_anew_each_step():
    from fairseq_define.modules.define.embedding import set_unit_run

    torch.manual_seed(0)
    emb = set_unit_run(DefineEmbedding(define_options(define_out_dim=32, define_dropout=0.3), 40, 1, 32),
                       graphs="eager").train()
    tokens = torch.randint(2, 40, (2, 7))
    first, second = emb(tokens), emb(tokens)
    (first.sum() + second.sum()).backward()
    assert torch.isfinite(first).all() and not torch.equal(first, second)
    assert all(torch.isfinite(p.grad).all() for p in emb.parameters())
    emb.eval()
    with torch.no_grad():
        assert torch.equal(emb(tokens), emb(tokens))


def test_an_unknown_graphs_setting_is_refused():
    from fairseq_define.modules.define.config import DefineConfigError
    from fairseq_define.modules.define.embedding import set_unit_run

    emb = DefineEmbedding(define_options(), 40, 1, 32)
    with pytest.raises(DefineConfigError, match="graphs must be one of off, cuda, eager, got 'on'"):
        set_unit_run(emb, graphs="on")
    assert emb.graphs is None
    assert set_unit_run(DefineEmbedding(define_options(define_transform="projective"), 40, 1, 32),
                        graphs="eager").graphs is None  # nothing to graph: the projective map's module
