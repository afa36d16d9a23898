"""Ways to run a built DeFINE embedding's unit that only the benchmarks measure (issue 61: out
of the package, which trains through one path): the unit's rows padded with zero rows to a
multiple of a bucket (static shapes for CUDA graphs), and the unit under torch.compile with a
dynamic row count. Neither changes what the weights compute (tests/test_row_bucket.py,
tests/test_compile.py); the package's own way to take the unit's launches off the host is
its graphed unit (fairseq_define/modules/define/graphed_unit.py).

    from unit_run import set_bench_run   # benchmarks/ on sys.path
    set_bench_run(model, compile_mode="reduce-overhead", row_bucket=256)
"""

import types
from typing import Optional

import torch
import torch.fx.experimental._config as fx_config
import torch.nn as nn
import torch.nn.functional as F

from fairseq_define.modules.define.embedding import DefineEmbedding
from fairseq_define.modules.define.fused_unit import program_of, unit_forward

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
MAX_ROW_BUCKET = 1 << 20  # 256 times the paper's 4,096 tokens a GPU


def pad_rows(e: torch.Tensor, counts, positions, bucket: int):
    """``e`` [R, n] with zero rows up to a multiple of ``bucket`` rows, the counts [R'] each
    row stands for (a padded row: none) and the positions they sum to.

    A padded row's output is dropped, so its gradient is zero: it adds nothing to any
    parameter's gradient, and the gradient centring reads the counts. The counts carry the
    1 / positions factor themselves (positions 1): the unit's inputs are then tensors of a
    bucket's shape and constants, so a compiled unit's CUDA graph is replayed for every
    batch of that bucket, whatever its row count."""
    rows = e.shape[0]
    padded = -(-rows // bucket) * bucket
    dtype = torch.promote_types(
        e.dtype, torch.float32
    )  # e's own in float64 (a bf16 unit rounds them as it rounds counts)
    weights = torch.zeros(padded, device=e.device, dtype=dtype)  # [R']
    if counts is None:
        weights[:rows] = 1.0 / rows
    else:
        weights[:rows] = counts.to(dtype) / positions
    return F.pad(e, (0, 0, 0, padded - rows)), weights, 1


def _bench_run_unit(emb: DefineEmbedding, e, counts, positions, scale):
    """:meth:`DefineEmbedding.run_unit` with the rows padded (``emb.bench_row_bucket``) and
    the call compiled (``emb.bench_compiled``)."""
    lead = e.shape[:-1]
    rows = e.numel() // e.shape[-1]
    if emb.bench_row_bucket:  # every batch, padded or not, hands the unit counts of one kind
        e, counts, positions = pad_rows(e.reshape(rows, -1), counts, positions, emb.bench_row_bucket)  # [R', n], [R']
    if emb.bench_compiled is None:
        out = unit_forward(emb.unit, emb.program, e, emb.stability, counts, positions, scale)
    else:  # each size its own symbol: a batch whose row count equals n would otherwise tie it to n
        with fx_config.patch(use_duck_shape=False):
            out = emb.bench_compiled(e, counts, positions, scale)
    return out if out.shape[:-1] == lead else out[:rows].view(*lead, -1)  # [*, m]


def set_bench_run(module: nn.Module, compile_mode: Optional[str] = None, row_bucket: Optional[int] = None,
                  backend: str = "inductor") -> nn.Module:
    """Run every DeFINE embedding of ``module`` with its rows padded to a multiple of
    ``row_bucket`` (0: none) and/or its unit under torch.compile in ``compile_mode``
    (``default`` or one of torch.compile's; dynamic row count: one graph, no recompile; the
    module keeps its parameter names) with ``backend`` (the tests: ``aot_eager``, the graphs
    without generated code). None leaves a setting as it is. Returns ``module``."""
    if compile_mode is not None and compile_mode not in COMPILE_MODES:
        raise ValueError(f"compile_mode must be one of {', '.join(COMPILE_MODES)}, got {compile_mode!r}")
    if row_bucket is not None and (isinstance(row_bucket, bool) or not isinstance(row_bucket, int)
                                   or not 0 <= row_bucket <= MAX_ROW_BUCKET):
        raise ValueError(
            f"row_bucket must be 0 (no padding) or a number of rows up to {MAX_ROW_BUCKET}, got {row_bucket!r}"
        )
    for emb in (m for m in module.modules() if isinstance(m, DefineEmbedding)):
        if not hasattr(emb, "bench_row_bucket"):
            emb.bench_row_bucket, emb.bench_compiled = 0, None
            emb.run_unit = types.MethodType(_bench_run_unit, emb)
        if row_bucket is not None:
            emb.bench_row_bucket = row_bucket
        if compile_mode is not None and emb.unit is not None:
            def call(e, counts, positions, scale, emb=emb):
                return unit_forward(emb.unit, emb.program, e, emb.stability, counts, positions, scale)

            mode = None if compile_mode == "default" or backend != "inductor" else compile_mode
            emb.bench_compiled = torch.compile(call, dynamic=True, mode=mode, backend=backend)
    return module


class TrainingPath(nn.Module):
    """A bare unit (no embedding) run as the package trains it (fused_unit.unit_forward), for
    timing the unit alone; ``stability``: (centring, grad scale), None for neither."""

    def __init__(self, unit: nn.Module, stability=None):
        super().__init__()
        self.unit, self.program, self.stability = unit, program_of(unit), stability

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        return unit_forward(self.unit, self.program, e, self.stability)
