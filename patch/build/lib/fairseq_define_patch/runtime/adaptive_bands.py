"""Adaptive input and softmax bands checked against the vocabulary and the padding index.

fairseq's AdaptiveInput and AdaptiveSoftmax asserted "cannot specify cutoff larger than vocab
size", and AdaptiveInput's first band, which holds the padding symbol, failed in torch's
Embedding ("Padding_idx must be within num_embeddings") when the first cutoff was not above
the padding index: tracebacks after the model's other layers were built. Both constructors
(fairseq/modules/adaptive_input.py and adaptive_softmax.py) now call ``band_cutoffs``, which
names the flag; the plugin's own adaptive input (fairseq_define/modules/lm/adaptive_io.py)
calls it too, with its flags. ``band_width`` is a band's width without the OverflowError that
``width // factor ** band`` raised for a huge factor (--div-val 1e308).
"""

from fairseq import UserError

__all__ = ["band_cutoffs", "band_width"]


def band_cutoffs(cutoff, vocab_size, flag, padding_idx=None):
    """``cutoff`` (the bands' upper word indices) with the vocabulary size appended as the
    last band's end, as fairseq's constructors use it: increasing positive word counts, the
    last at most ``vocab_size``, and (for an adaptive input) the first above ``padding_idx``,
    since the first band holds the padding symbol."""
    cutoff = list(cutoff)
    shown = ",".join(map(str, cutoff))
    if not cutoff or any(b <= a for a, b in zip([0] + cutoff, cutoff)):
        raise UserError("{} {} must be increasing positive word counts, e.g. 20000,60000".format(flag, shown))
    if cutoff[-1] > vocab_size:
        raise UserError(
            "{} {} goes beyond the vocabulary of {} words: give cutoffs below {} (e.g. about 10% and 40% of "
            "it), or drop the last".format(flag, shown, vocab_size, vocab_size))
    if padding_idx is not None and cutoff[0] <= padding_idx:
        raise UserError(
            "{} {}: the first band must hold the padding symbol (index {}), so the first cutoff must be above "
            "{}: give a larger first cutoff".format(flag, shown, padding_idx, padding_idx))
    return cutoff if cutoff[-1] == vocab_size else cutoff + [vocab_size]


def band_width(width, factor, band):
    """``int(width // factor ** band)``, the width fairseq gives band ``band``; 0 where the
    power is too large for a float (the band is then narrower than one dimension anyway)."""
    try:
        return int(width // factor ** band)
    except OverflowError:
        return 0
