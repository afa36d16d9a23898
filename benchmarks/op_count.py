"""Count the aten operators a training step of a DeFINE embedding dispatches (issue 40): one
forward and backward, ``emb(tokens).sum().backward()``, recorded with a TorchDispatchMode.

Views launch no kernel and are not counted; every other operator is (allocations and the
loss's sum and ones_like included, as the issue counted them). On a GPU every counted
operator but an allocation is at least one kernel launch. The count does not depend on the
number of tokens, so a small batch measures it, and it is taken on the CPU for either device
(:func:`as_on`: the fused unit's operators differ by device only in its layout copies).

    .venv/bin/python benchmarks/op_count.py    # the paper's three units, both styles, both token paths, both devices
"""

import argparse
from collections import Counter
from contextlib import contextmanager
from dataclasses import replace

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# the data-dependent operators: their output's size (or value) must reach the host
HOST_SYNC_OPS = ("aten::_unique", "aten::unique", "aten::_unique2", "aten::nonzero", "aten::item",
                 "aten::_local_scalar_dense", "aten::masked_select", "aten::bincount")


class OpRecorder(TorchDispatchMode):
    """Every aten overload dispatched inside the ``with`` block, by name."""

    def __init__(self):
        super().__init__()
        self.ops = Counter()  # name -> calls
        self.views = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        (self.views if func.is_view else self.ops)[func.name()] += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def as_on(device: str):
    """Run the DeFINE unit's fused path as it runs on ``device`` (cpu or cuda), on any
    device: its operators differ where a batched matmul writes a strided layout, and in a
    layer's activation and dropout (CUDA's: one operator a direction, act_dropout.py, whose
    CPU kernel is the aten pair; counted as the one operator CUDA launches)."""
    from fairseq_define.modules.define import fused_unit
    from fairseq_define.modules.define.act_dropout import KERNEL_ACTIVATIONS

    originals = fused_unit.writes_strided, fused_unit.fuses_dropout
    fused_unit.writes_strided = lambda _device: device != "cpu"
    fused_unit.fuses_dropout = lambda _device, activation: device != "cpu" and activation in KERNEL_ACTIVATIONS
    try:
        yield
    finally:
        fused_unit.writes_strided, fused_unit.fuses_dropout = originals


def step_ops(emb, tokens, device: str = "cuda") -> Counter:
    """The non-view operators of one training forward and backward of ``emb`` on
    ``tokens``, as ``device`` dispatches them (:func:`as_on`; after a warm-up step, whose
    one-off work is not counted)."""
    emb.train()
    with as_on(device):
        for _ in range(2):
            for p in emb.parameters():
                p.grad = None  # as fairseq's zero_grad: the step's gradients are new tensors
            with OpRecorder() as rec:
                emb(tokens).sum().backward()
    return rec.ops


def host_syncs(ops: Counter) -> list:
    """The data-dependent operators among ``ops``."""
    return sorted(name for name in ops if name.split(".")[0] in HOST_SYNC_OPS)


# (label, n, k, m, N): the units of benchmarks/bench_define.py's benchmark 1
SHAPES = [("NMT", 128, 1024, 512, 3), ("LSTM", 384, 1024, 384, 7), ("TXL", 384, 4096, 384, 3)]
# (style, transform, --define-dropout) of the units counted
UNITS = [("paper", "define", 0.0), ("authors", "define", 0.0), ("paper", "define", 0.1), ("authors", "define", 0.1),
         ("paper", "projective", 0.0)]


def build(style: str, transform: str, token_path: str, n: int, k: int, m: int, depth: int, vocab: int = 1000,
          dropout: float = 0.0):
    from fairseq_define.modules import DefineConfig, DefineEmbedding, DefineOptions
    from fairseq_define.modules.define.embedding import set_unit_run

    cfg = replace(DefineConfig(), define_style=style, define_transform=transform, define_map_dim=n,
                  define_expand_dim=k, define_depth=depth, define_dropout=dropout)
    torch.manual_seed(0)
    return set_unit_run(DefineEmbedding(DefineOptions.from_config(cfg), vocab, 1, m), token_path=token_path)


def main():
    import logging

    logging.disable(logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verbose", action="store_true", help="list the operators")
    args = parser.parse_args()
    tokens = torch.randint(4, 1000, (8, 32))
    print("non-view aten operators of a training step (forward + backward) of the DeFINE embedding, as CUDA and "
          "as the CPU dispatch them (the CPU copies a grouped layer's product once more)")
    print(f"{'shape':<5} {'unit':<15} {'token path':<10} {'cuda':>5} {'cpu':>5}  host syncs")
    for label, n, k, m, depth in SHAPES:
        for style, transform, dropout in UNITS:
            for path in ("unique", "plain") if not dropout else ("plain",):  # dropout: one row a position
                emb = build(style, transform, path, n, k, m, depth, dropout=dropout)
                ops = {device: step_ops(emb, tokens, device) for device in ("cuda", "cpu")}
                name = (style if transform == "define" else transform) + (" dropout" if dropout else "")
                print(f"{label:<5} {name:<15} {path:<10} {sum(ops['cuda'].values()):>5} {sum(ops['cpu'].values()):>5}  "
                      f"{', '.join(host_syncs(ops['cuda'])) or '-'}")
                if args.verbose:
                    for op, calls in ops["cuda"].most_common():
                        print(f"      {calls:>3} {op}")


if __name__ == "__main__":
    main()
