"""torch 2: the fused encoder path takes the mask type, and masked_fill takes a bool mask."""

from ..edits import Edit, FilePatch

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/modules/transformer_layer.py",
        "torch >= 2.x: the encoder fast path needs the mask type",
        (
            Edit(
                "                encoder_padding_mask if encoder_padding_mask is not None else attn_mask,\n"
                "            )\n",
                "                encoder_padding_mask if encoder_padding_mask is not None else attn_mask,\n"
                "                1 if encoder_padding_mask is not None else 0,\n"
                "            )\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/modules/multihead_attention.py",
        "torch 2: masked_fill takes a bool mask (xFormers masks may be uint8)",
        (
            Edit(
                '        new_mask = new_mask.masked_fill_(mask, -float("inf"))\n',
                '        new_mask = new_mask.masked_fill_(mask.bool(), -float("inf"))\n',
            ),
        ),
    ),
)
