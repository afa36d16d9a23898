"""Bugs of fairseq 0.12.2 itself, on any Python, torch or numpy."""

from . import ddp_on_cpu, encoder_fastpath

PATCHES = encoder_fastpath.PATCHES + ddp_on_cpu.PATCHES
