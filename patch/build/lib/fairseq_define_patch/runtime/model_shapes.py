"""Shapes that must divide: the width of an attention layer by its number of heads.

fairseq's MultiheadAttention asserted ``embed_dim must be divisible by num_heads``: an
AssertionError traceback for --decoder-attention-heads 3 with --decoder-embed-dim 32, wherever
the model is built (training, a stored config, --model-overrides).
fairseq/modules/multihead_attention.py calls ``check_attention_heads``.
"""

from fairseq import UserError

__all__ = ["check_attention_heads"]


def check_attention_heads(embed_dim, num_heads):
    if num_heads < 1 or embed_dim % num_heads:
        raise UserError(
            "an attention layer of width {} cannot be split into {} heads: give a number of heads that "
            "divides the width (--encoder-attention-heads / --decoder-attention-heads against "
            "--encoder-embed-dim / --decoder-embed-dim)".format(embed_dim, num_heads)
        )
