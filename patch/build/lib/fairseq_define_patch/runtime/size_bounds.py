"""The one table of size bounds: the largest value of every size of a model that multiplies
into memory, for fairseq's models and the fairseq-define plugin's alike.

A config reaches a model from the command line, --model-overrides or a checkpoint's stored
config, and argparse's types say nothing of magnitude: a 15 KB file asking for a width of
10**9 or 100,000 layers would build for minutes before running out of memory. Each bound is
far beyond any trained model, and small enough that a size at the bound is refused by the
model budget (model_budget.py) at once instead of after minutes of building. The budget
reads this table for fairseq's sizes; the plugin reads its own rows through
``fairseq_define_patch.installed.size_bound`` (its config_bounds.py) and names them in its
own lines. docs/errors.md lists them.
"""

__all__ = ["SIZE_BOUNDS", "size_bound"]

# kind -> (largest value, what it bounds and why)
SIZE_BOUNDS = {
    # fairseq's sizes, whatever the family
    "width": (1 << 20, "a dimension: embeddings, hidden, FFN and attention-head sizes"),
    "layers": (10_000, "the layers of one stack"),
    "heads": (1 << 16, "the attention heads of one layer (each of its head width)"),
    "positions": (1 << 24, "a length in tokens: a positions table's rows (max_*_positions, tokens_per_sample), "
                            "Transformer-XL's mem_len, tgt_len and clamp_len"),
    # the fairseq-define plugin's: the DeFINE unit (Mehta et al., 2020)
    "define_width": (65_536, "n, k, m of the DeFINE unit: 64 times the paper's widest layer (k = 1024)"),
    "define_depth": (64, "N, the DeFINE unit's Expand layers: the paper's deepest unit has N = 11 (Table 1a)"),
    "vocabulary": (10_000_000, "a vocabulary fairseq-define-params counts (WikiText-103 has 267,735 types)"),
}


def size_bound(kind):
    """The largest value of a size of ``kind`` (a key of SIZE_BOUNDS)."""
    return SIZE_BOUNDS[kind][0]
