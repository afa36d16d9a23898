"""How many aten operators a training step of the DeFINE embedding dispatches (issue 40;
benchmarks/op_count.py counts them: every non-view operator of ``emb(tokens).sum().backward()``),
at the units of the paper (benchmark 1's shapes), and that the token path CUDA takes has no
data-dependent operator, whose size would make the host wait for the GPU."""

import pytest
import torch

from fairseq_define.modules import DefineEmbedding
from fairseq_define.modules.define.embedding import set_unit_run

from .helpers import benchmark_module, define_options

OPS = benchmark_module("op_count")
SHAPES = {label: shape for label, *shape in OPS.SHAPES}

# (shape, unit) -> most operators as CUDA dispatches them on the unique-token path and on the
# plain one (CUDA's, `auto`), then as the CPU dispatches them on the two (its unique path is
# `auto`'s; it copies each grouped layer's product once more). The modules with the stability
# hooks dispatched, unique / plain: NMT and TXL paper 110 / 91, authors 130 / 107; LSTM paper
# 209 / 174, authors 243 / 204; projective 14 / 11 (the issue's count, 115 and 145 at NMT, was
# taken some other way)
BOUNDS = {
    ("NMT", "paper"): (49, 45, 56, 52), ("NMT", "authors"): (61, 57, 65, 61), ("NMT", "projective"): (14, 11, 14, 11),
    ("NMT", "paper dropout"): (46, 46, 58, 58), ("NMT", "authors dropout"): (58, 58, 71, 71),
    ("LSTM", "paper"): (93, 89, 102, 98), ("LSTM", "authors"): (105, 101, 115, 111),
    ("LSTM", "projective"): (14, 11, 14, 11),
    ("TXL", "paper"): (49, 45, 56, 52), ("TXL", "authors"): (61, 57, 65, 61), ("TXL", "projective"): (14, 11, 14, 11),
}


@pytest.mark.parametrize("shape,unit", sorted(BOUNDS))
@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_a_training_step_dispatches_few_operators(shape, unit, device):
    """A unit with dropout runs one row a position (the unique-token path is not taken
    while dropout acts): both columns are its plain path's. On the CPU dropout adds two
    operators a layer, its draw and its backward's multiply; as CUDA dispatches them, a
    layer's activation and dropout are one operator a direction (act_dropout.py) and the
    seeds of all of them one more."""
    style, transform = ("paper", "projective") if unit == "projective" else (unit.split()[0], "define")
    tokens = torch.randint(4, 200, (4, 16))
    for i, token_path in enumerate(("unique", "plain")):
        emb = OPS.build(style, transform, token_path, *SHAPES[shape], vocab=200, dropout=0.1 * unit.endswith("dropout"))
        ops = OPS.step_ops(emb, tokens, device)
        assert sum(ops.values()) <= BOUNDS[shape, unit][2 * (device == "cpu") + i], (token_path, ops)


@pytest.mark.parametrize("unit", ["paper", "authors"])
def test_autocast_adds_a_few_operators_not_a_cast_a_parameter(unit):
    """Under autocast (``--amp``) the unit's parameters reach its dtype in one cast: the
    step dispatches at most 6 more operators than in float32 (a cast each: 30 and 42 more)."""
    tokens = torch.randint(4, 200, (4, 16))
    emb = OPS.build(unit, "define", "plain", *SHAPES["NMT"], vocab=200)
    plain = sum(OPS.step_ops(emb, tokens, "cuda").values())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        amp = sum(OPS.step_ops(emb, tokens, "cuda").values())
    assert plain < amp <= plain + 6


def test_the_goal_of_issue_40_at_the_nmt_shape():
    """At most 50 operators for the paper's unit and 60 for the authors' on the path CUDA
    takes (the CPU's unique-token path adds the dedup, its gather and their gradients); issue
    61: at most 45 and 57 without dropout, 50 and 60 with it."""
    assert BOUNDS["NMT", "paper"][1] <= 45 and BOUNDS["NMT", "authors"][1] <= 57
    assert BOUNDS["NMT", "paper dropout"][1] <= 50 and BOUNDS["NMT", "authors dropout"][1] <= 60


def test_the_counter_sees_what_the_modules_dispatch():
    """The count can fail: the modules' autograd graph (the inference path, trained through
    autograd, without even the stability settings) dispatches more operators than the
    training path (61 against 52 on the CPU), the layout copies among them."""
    emb = OPS.build("paper", "define", "plain", *SHAPES["NMT"], vocab=200)
    fused = sum(OPS.step_ops(emb, torch.randint(4, 200, (4, 16)), "cpu").values())
    emb.run_unit = lambda e, counts, positions, scale: emb.unit(e * scale)  # the modules, through autograd
    modules = sum(OPS.step_ops(emb, torch.randint(4, 200, (4, 16)), "cpu").values())
    assert modules >= fused + 8, (modules, fused)


@pytest.mark.parametrize("style", ["paper", "authors"])
@pytest.mark.parametrize("bucket", [0, 16])
def test_the_cuda_token_path_has_no_host_sync(style, bucket):
    """``auto`` (the default) takes the plain path on CUDA; forced here on the CPU, a training
    step dispatches no data-dependent operator, its rows padded (the benchmarks' row buckets,
    benchmarks/unit_run.py) or not. The unique path has one (the counter sees it)."""
    emb = DefineEmbedding(define_options(define_style=style, define_max_groups=None), 40, 1, 32)
    if bucket:
        benchmark_module("unit_run").set_bench_run(emb, row_bucket=bucket)
    assert emb.token_path == "auto"
    assert not emb.unique_tokens(torch.device("cuda")) and emb.unique_tokens(torch.device("cpu"))
    tokens = torch.randint(2, 40, (3, 7))
    emb.token_path = "plain"  # what auto picks on CUDA
    assert OPS.host_syncs(OPS.step_ops(emb, tokens)) == []
    emb.token_path = "unique"
    assert OPS.host_syncs(OPS.step_ops(emb, tokens)) == ["aten::_unique2"]


@pytest.mark.parametrize("style", ["paper", "authors"])
def test_the_cuda_token_path_equals_the_unique_path(style):
    """Same outputs and gradients on the two paths ``auto`` chooses between (float64)."""
    results = {}
    for path in ("unique", "plain"):
        torch.manual_seed(0)
        emb = set_unit_run(DefineEmbedding(define_options(define_style=style, define_max_groups=None), 40, 1, 32),
                           token_path=path).double()
        tokens = torch.randint(2, 40, (3, 7))
        out = emb(tokens)
        (out * torch.linspace(-1, 1, 32, dtype=torch.float64)).sum().backward()
        results[path] = out.detach(), {n: p.grad for n, p in emb.named_parameters()}
    torch.testing.assert_close(results["plain"][0], results["unique"][0], rtol=1e-10, atol=1e-10)
    for name, grad in results["unique"][1].items():
        torch.testing.assert_close(results["plain"][1][name], grad, rtol=1e-9, atol=1e-12, msg=name)
