"""Adaptive input and softmax cutoffs beyond the vocabulary, or not above the padding index,
get one line naming the flag (fairseq asserted the one and torch's Embedding the other)."""

from ..edits import CopiedModule, FilePatch, replace_span

# The check is runtime/adaptive_bands.py (copied into fairseq): both constructors call it
# where fairseq appended the vocabulary size to the cutoffs.
COPIES = (CopiedModule("adaptive_bands", "adaptive cutoffs against the vocabulary and the padding index"),)


def _checked(flag, padding=""):
    """fairseq's six lines that append the vocabulary size or assert, as a call naming ``flag``."""
    return replace_span(
        "        if vocab_size > cutoff[-1]:\n",
        '            ), "cannot specify cutoff larger than vocab size"\n',
        "        from fairseq._define_runtime.adaptive_bands import band_cutoffs  # (fairseq_define)\n\n"
        '        cutoff = band_cutoffs(cutoff, vocab_size, "{}"{})  # one line, not an assertion\n'.format(
            flag, padding
        ),
    )


PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/modules/adaptive_input.py",
        "--adaptive-input-cutoff beyond the vocabulary or not above the padding index: one line",
        (_checked("--adaptive-input-cutoff", ", padding_idx"),),
    ),
    FilePatch(
        "fairseq",
        "fairseq/modules/adaptive_softmax.py",
        "--adaptive-softmax-cutoff beyond the vocabulary: one line",
        (_checked("--adaptive-softmax-cutoff"),),
    ),
)
