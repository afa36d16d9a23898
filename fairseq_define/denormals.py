"""Subnormal floats on the CPU (docs/language_models.md, "Subnormal floats on the CPU").

An x86 core takes tens to a hundred times longer on arithmetic that reads or writes a subnormal
float32 (0 < |x| < 1.2e-38). A language model whose LSTM gates saturate makes them in its
recurrence: study 5's LSTM with a DeFINE unit on an adaptive input did, and by 1,500 updates
a training step took 3.6-4.1 times as long (benchmarks/denormal_step.py). GPUs compute
with subnormals at full speed. ``FAIRSEQ_DEFINE_FLUSH_DENORMAL=1`` flushes them to zero
(``torch.set_flush_denormal``) in every process that imports the plugin (fairseq-train,
fairseq-eval-lm, ...): values below 1.2e-38 become 0, nothing else changes."""

import logging
import os

import torch

from .errors import UserError

logger = logging.getLogger(__name__)

ENV = "FAIRSEQ_DEFINE_FLUSH_DENORMAL"


def flush_denormal_from_env() -> bool:
    """Apply ``ENV`` (unset or 0: torch's default, subnormals kept; 1: flushed); whether they
    are flushed now."""
    value = os.environ.get(ENV, "").strip()
    if value not in ("", "0", "1"):
        raise UserError(f"{ENV} must be 0 or 1, not {value!r}: unset it, or set 1 to flush subnormal floats "
                        "to zero on the CPU")
    if value != "1":
        return False
    if not torch.set_flush_denormal(True):
        logger.warning("%s=1: this CPU cannot flush subnormal floats (it needs SSE3); they are kept", ENV)
        return False
    logger.info("%s=1: subnormal floats are flushed to zero on the CPU (torch.set_flush_denormal)", ENV)
    return True
