"""The benchmarks' compiled unit (benchmarks/unit_run.py, ``set_bench_run(compile_mode=...)``): the
DeFINE unit under torch.compile is one graph with no break and no recompile as the number of rows
changes from batch to batch (on the plain token path, CUDA's, and on the CPU's unique-token path),
and computes what the eager unit computes. Compiled with dynamo's ``aot_eager`` backend (the graphs
AOTAutograd hands a compiler, without generating code), so the test runs in seconds."""

import pytest
import torch

from fairseq_define.modules import DefineEmbedding
from fairseq_define.modules.define.embedding import set_unit_run

from .helpers import assert_one_compiled_graph, benchmark_module, define_options

RUN = benchmark_module("unit_run")

dynamo = pytest.importorskip("torch._dynamo")
if not dynamo.is_dynamo_supported():
    pytest.skip("torch.compile is not supported on this Python", allow_module_level=True)

# the first batch has a size equal to n (16): dynamo would by default give the two one symbol
BATCHES = [(3, 16), (3, 7), (4, 9), (2, 8), (5, 11)]


@pytest.mark.parametrize("style", ["paper", "authors"])
@pytest.mark.parametrize("token_path", ["plain", "unique"])
@pytest.mark.parametrize("strided", [False, True], ids=["cpu-layout", "cuda-layout"])
def test_the_compiled_unit_is_one_graph_for_every_batch(style, token_path, strided, monkeypatch):
    """``strided``: as on a device whose matmuls write strided views (CUDA: an ``out=`` into
    a view, which would break the graph at every layer; fused_unit.writes_strided)."""
    from fairseq_define.modules.define import fused_unit

    monkeypatch.setattr(fused_unit, "strided_device", lambda device: strided)
    # the batches' rows (16-55) cross the CPU's per-group threshold, which the compiled
    # unit must not read (a guard on the row count: a recompile where it is crossed)
    monkeypatch.setattr(fused_unit, "PER_GROUP_ROWS", 30)
    options = define_options(define_style=style, define_max_groups=4, define_out_dim=32)  # grouped layers
    torch.manual_seed(0)
    # float64: past the threshold the eager twin sums in another order than the compiled unit
    compiled = RUN.set_bench_run(set_unit_run(DefineEmbedding(options, 40, 1, 32).double(), token_path=token_path),
                                 compile_mode="default", backend="aot_eager")
    eager = set_unit_run(DefineEmbedding(options, 40, 1, 32).double(), token_path=token_path)
    eager.load_state_dict(compiled.state_dict())
    assert compiled.state_dict().keys() == eager.state_dict().keys()  # checkpoints keep their names
    assert_one_compiled_graph(compiled, eager, BATCHES)
