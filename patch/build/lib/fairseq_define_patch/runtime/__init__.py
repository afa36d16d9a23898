"""Code that the fairseq-define patch adds to fairseq 0.12.2, as ordinary modules.

``fairseq-define-patch-fairseq --apply`` copies each module of this folder whole into the
installed fairseq as ``fairseq/_define_runtime/`` (hashes.py holds each copy's SHA-256), and
the edits of fairseq's own files import from there: a patched fairseq needs nothing from the
fairseq-define project at run time, and uninstalling the project leaves it working.

So that the copies work where they land, these modules import only the standard library,
torch, numpy, omegaconf, fairseq and each other (relative imports), never
``fairseq_define_patch`` or ``fairseq_define``; tests/test_fairseq_patch.py checks it. The
project's tests import them from here (``fairseq_define_patch.runtime.NAME``) as well as
through the patched fairseq.
"""
