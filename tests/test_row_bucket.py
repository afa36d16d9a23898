"""The benchmarks' row buckets (benchmarks/unit_run.py, ``set_bench_run(row_bucket=...)``): the unit
runs on its rows padded with zero rows to a multiple of the bucket (static shapes for a
compiled unit's CUDA graphs), and computes what it computes unpadded: the same outputs and the
same gradient of every parameter, on both token paths, with and without the gradient centring,
on the training path (both matmul layouts; dropout, residual and the projective map included)
in float64. Compiled, the unit sees only the buckets' row counts, in one graph, and computes
what the eager unit does."""

import pytest
import torch

from fairseq_define.modules import DefineEmbedding
from fairseq_define.modules.define import fused_unit
from fairseq_define.modules.define.embedding import set_unit_run

from .helpers import assert_one_compiled_graph, benchmark_module, define_options

RUN = benchmark_module("unit_run")

CASES = [
    dict(),  # the paper's unit: the fused path
    dict(define_style="authors", define_max_groups=None),
    dict(define_transform="define_residual"),
    dict(define_transform="projective"),  # no training path of its own: its module
]
# row counts below, at and above a bucket of 8 (4 x 9 = 36 positions; the unique path: fewer)
BATCHES = [(4, 9), (2, 4), (1, 7), (3, 8)]


def build(bucket, case, token_path, centring, dtype=torch.float64):
    options = define_options(define_out_dim=32, define_unit_centring=centring, **case)
    torch.manual_seed(0)
    emb = set_unit_run(DefineEmbedding(options, 40, 1, 32).to(dtype), token_path=token_path)
    if bucket:  # the twin without a bucket runs as the package runs it
        RUN.set_bench_run(emb, row_bucket=bucket)
    with torch.no_grad():
        for name, p in emb.named_parameters():  # non-trivial norms and biases
            if "norm" in name or "bias" in name:
                p.normal_(0, 0.5)
    return emb


def step(emb, tokens, weight):
    emb.zero_grad(set_to_none=True)
    out = emb(tokens)
    (out * weight).sum().backward()
    return out.detach(), {name: p.grad for name, p in emb.named_parameters()}


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c.values()) or "paper")
@pytest.mark.parametrize("token_path", ["unique", "plain"])
@pytest.mark.parametrize("centring", ["batch_mean", "none"])
@pytest.mark.parametrize("strided", [False, True], ids=["cpu-layout", "cuda-layout"])
def test_padded_rows_change_no_output_and_no_gradient(case, token_path, centring, strided, monkeypatch):
    monkeypatch.setattr(fused_unit, "writes_strided", lambda device: strided)
    padded, plain = build(8, case, token_path, centring), build(0, case, token_path, centring)
    plain.load_state_dict(padded.state_dict())
    seen = []
    unit_forward = RUN.unit_forward
    monkeypatch.setattr(RUN, "unit_forward", lambda unit, program, e, *a: seen.append(e.shape[0]) or unit_forward(
        unit, program, e, *a))
    for i, (B, T) in enumerate(BATCHES):
        g = torch.Generator().manual_seed(i)
        tokens = torch.randint(2, 40, (B, T), generator=g)  # repeats: the unique path counts them
        weight = torch.randn(B, T, 32, generator=g, dtype=torch.float64)
        out_p, grads_p = step(padded, tokens, weight)
        out_r, grads_r = step(plain, tokens, weight)
        assert out_p.shape == (B, T, 32)
        torch.testing.assert_close(out_p, out_r, rtol=1e-10, atol=1e-12)
        assert grads_p.keys() == grads_r.keys()
        for name in grads_r:
            torch.testing.assert_close(grads_p[name], grads_r[name], rtol=1e-9, atol=1e-12, msg=name)
    assert seen and all(rows % 8 == 0 for rows in seen)


def test_a_batch_of_whole_buckets_is_not_padded_further():
    emb = build(8, {}, "plain", "batch_mean")
    e = torch.randn(16, 16, dtype=torch.float64)
    padded, counts, positions = RUN.pad_rows(e, None, None, 8)
    assert padded.shape == (16, 16) and positions == 1
    torch.testing.assert_close(counts, torch.full((16,), 1 / 16, dtype=torch.float64))
    padded, counts, positions = RUN.pad_rows(e[:13], torch.arange(1, 14), 91, 8)
    assert padded.shape == (16, 16) and bool((padded[13:] == 0).all())
    torch.testing.assert_close(counts[:13], torch.arange(1, 14, dtype=torch.float64) / 91)
    assert bool((counts[13:] == 0).all())
    assert emb(torch.randint(2, 40, (2, 8))).shape == (2, 8, 32)


@pytest.mark.parametrize("settings,message", [
    (dict(row_bucket=-4), "row_bucket must be 0 (no padding) or a number of rows up to 1048576, got -4"),
    (dict(row_bucket=True), "row_bucket must be 0 (no padding) or a number of rows up to 1048576, got True"),
    (dict(row_bucket=2 ** 21), "row_bucket must be 0 (no padding) or a number of rows up to 1048576, got 2097152"),
    (dict(compile_mode="fast"), "compile_mode must be one of default, reduce-overhead"),
])
def test_a_bench_setting_out_of_range_is_refused_and_nothing_is_set(settings, message):
    emb = DefineEmbedding(define_options(), 40, 1, 32)
    with pytest.raises(ValueError) as caught:
        RUN.set_bench_run(emb, **{"row_bucket": 8, **settings})
    assert str(caught.value).startswith(message)
    assert not hasattr(emb, "bench_row_bucket")


def test_an_unknown_token_path_is_refused_and_nothing_is_set():
    from fairseq_define.modules.define.config import DefineConfigError

    emb = DefineEmbedding(define_options(), 40, 1, 32)
    with pytest.raises(DefineConfigError, match="token_path must be one of auto, unique, plain, got 'dedup'"):
        set_unit_run(emb, token_path="dedup")
    assert emb.token_path == "auto"


def test_the_run_settings_reach_every_embedding_of_a_model():
    model = torch.nn.ModuleDict({"a": DefineEmbedding(define_options(), 40, 1, 32),
                                 "b": DefineEmbedding(define_options(define_transform="projective"), 40, 1, 32)})
    assert RUN.set_bench_run(set_unit_run(model, token_path="plain"), row_bucket=16) is model
    assert [(m.token_path, m.bench_row_bucket) for m in model.values()] == [("plain", 16)] * 2


dynamo = pytest.importorskip("torch._dynamo")


@pytest.mark.skipif(not dynamo.is_dynamo_supported(), reason="torch.compile is not supported on this Python")
@pytest.mark.parametrize("strided", [False, True], ids=["cpu-layout", "cuda-layout"])
def test_the_compiled_unit_sees_only_the_buckets(strided, monkeypatch):
    """One graph for every batch (no recompile as the row count changes, nor as the real rows
    within a bucket do: the counts carry them), and the buckets' shapes alone reach it;
    ``strided``: on a device whose matmuls write strided views (CUDA), which the compiled unit
    must not do (an ``out=`` into a view breaks the graph at every layer)."""
    monkeypatch.setattr(fused_unit, "strided_device", lambda device: strided)
    options = define_options(define_out_dim=32)
    torch.manual_seed(0)
    compiled = RUN.set_bench_run(set_unit_run(DefineEmbedding(options, 40, 1, 32), token_path="plain"), row_bucket=16,
                                 compile_mode="reduce-overhead", backend="aot_eager")
    eager = RUN.set_bench_run(set_unit_run(DefineEmbedding(options, 40, 1, 32), token_path="plain"), row_bucket=16)
    eager.load_state_dict(compiled.state_dict())
    seen = set()
    call = compiled.bench_compiled  # the eager call into the compiled unit
    compiled.bench_compiled = lambda e, *a: seen.add(e.shape[0]) or call(e, *a)
    assert_one_compiled_graph(compiled, eager, [(3, 5), (2, 7), (4, 4), (5, 6), (3, 11)])  # 15, 14, 16, 30, 33 rows
    assert seen == {16, 32, 48}
