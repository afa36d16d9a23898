"""Compatibility: what stock fairseq 0.12.2 needs to import and run on Python 3.11 to 3.13,
torch 2, numpy 2, hydra-core 1.3 and omegaconf 2.3, and with today's sacrebleu and bitarray. Loading
checkpoints under torch >= 2.6's weights-only default is in hardening.checkpoint_loading:
its allow-list is a safety fix as much as a compatibility one."""

from . import hydra13, libraries, numpy2, python311, python312, torch2, torch_warnings

PATCHES = (
    python311.PATCHES + python312.PATCHES + hydra13.PATCHES + torch2.PATCHES + torch_warnings.PATCHES + numpy2.PATCHES
    + libraries.PATCHES
)
# the runtime modules (CopiedModule) that the fixes' edits import; none here yet
COPIES = sum(
    (getattr(m, "COPIES", ()) for m in (python311, python312, hydra13, torch2, torch_warnings, numpy2, libraries)), ()
)
