"""Bugs of fairseq 0.12.2 itself, on any Python, torch or numpy."""

from . import bf16_without_tpu, ddp_on_cpu, encoder_fastpath, tensorboardx_notice

PATCHES = (
    encoder_fastpath.PATCHES
    + ddp_on_cpu.PATCHES
    + bf16_without_tpu.PATCHES
    + tensorboardx_notice.PATCHES
)
# the runtime modules (CopiedModule) that the fixes' edits import
COPIES = sum(
    (getattr(m, "COPIES", ()) for m in (encoder_fastpath, ddp_on_cpu, bf16_without_tpu, tensorboardx_notice)),
    (),
)
