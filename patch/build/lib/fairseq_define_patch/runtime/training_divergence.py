"""A training run whose loss or gradients go to NaN or Inf ends in one line naming the update
and what to try.

fairseq's trainer saves crash.pt, re-runs the step under its NanDetector (forward and
backward hooks that log the first module with a NaN) and re-raises "gradients are Nan/Inf".
Under torch 2.x the NanDetector's old-style backward hooks raise StopIteration on a module
whose output holds no tensor (fairseq's own encoders return dicts), so every divergence,
stock --arch transformer included, ended in a StopIteration traceback. fairseq/trainer.py
runs the detector through ``nan_detector`` (a failure of the diagnostic re-run is logged, not
raised) and ends the step with ``raise_divergence``.
"""

import logging
import os
import sys

from fairseq import UserError

__all__ = ["nan_detector", "raise_divergence"]

logger = logging.getLogger(__name__)


class nan_detector:
    """``with nan_detector(NanDetector, model):``: fairseq's detector around the re-run of the
    step; an exception of the re-run (the detector's own, or the step's) is logged and
    dropped, so that the divergence itself is what the user is told."""

    def __init__(self, detector_class, model):
        self.detector = detector_class(model)

    def __enter__(self):
        self.detector.__enter__()
        return self.detector

    def __exit__(self, exc_type, exc, tb):
        self.detector.__exit__(exc_type, exc, tb)
        if exc_type is not None and issubclass(exc_type, Exception):
            logger.warning("the NaN detector's re-run of the step stopped (%s: %s)", exc_type.__name__, exc)
            return True
        return False


def raise_divergence(trainer):
    """Called in the trainer's ``except FloatingPointError`` (after crash.pt and the detector):
    the error of that step as one line, with the settings to change."""
    error = sys.exc_info()[1]
    cfg = trainer.cfg
    update = trainer.get_num_updates() + 1
    tries = ["a lower --lr (now {:g})".format(trainer.get_lr())]
    if not cfg.optimization.clip_norm:
        tries.append("gradient clipping (--clip-norm 1.0)")
    if not getattr(cfg.lr_scheduler, "warmup_updates", 0):
        tries.append("a warmup (--warmup-updates N)")
    if cfg.common.fp16 or cfg.common.amp:
        tries.append("--bf16 or float32 (float16 overflows)")
    crash = os.path.join(cfg.checkpoint.save_dir, "crash.pt")
    saved = "; the state before it is in {}".format(crash) if os.path.isfile(crash) else ""
    raise UserError(
        "training diverged at update {} ({}: the loss or its gradients are NaN or Inf): try {}{}".format(
            update, error, ", ".join(tries), saved
        )
    ) from error
