"""An attention width that its number of heads does not divide gets one line, not an
AssertionError, wherever the model is built."""

from ..edits import CopiedModule, Edit, FilePatch

# The check is runtime/model_shapes.py (copied into fairseq), called where fairseq asserted.
COPIES = (CopiedModule("model_shapes", "shapes that must divide (attention width by heads)"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/modules/multihead_attention.py",
        "an attention width its heads do not divide: one line, not an AssertionError",
        (
            Edit(
                "        self.head_dim = embed_dim // num_heads\n"
                "        assert (\n"
                "            self.head_dim * num_heads == self.embed_dim\n"
                '        ), "embed_dim must be divisible by num_heads"\n',
                "        from fairseq._define_runtime.model_shapes import check_attention_heads\n\n"
                "        check_attention_heads(embed_dim, num_heads)  # (fairseq_define) one line\n"
                "        self.head_dim = embed_dim // num_heads\n",
            ),
        ),
    ),
)
