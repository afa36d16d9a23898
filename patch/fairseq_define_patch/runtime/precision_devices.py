"""The training precision against the device, checked before any worker starts.

fairseq-train --fp16 without a GPU (or with --cpu) died with "Torch not compiled with CUDA
enabled" deep inside FP16Optimizer; --amp on the CPU trained in float32 without a word (CUDA's
autocast is off there); --bf16 on a GPU without bfloat16 support failed in the first kernel.
Which precision trains where: float32 everywhere; --fp16 and --amp on CUDA;
--memory-efficient-fp16 on CUDA or the CPU; --bf16 on the CPU (--cpu) or a GPU that has
bfloat16 (bf16_devices.py settles --bf16 against --tpu).
"""

import torch
from fairseq import UserError

__all__ = ["check_precision_device"]


def check_precision_device(cfg):
    """One line for a precision the device of this run cannot train in (``cfg``: fairseq-train's
    config; fairseq's trainer uses CUDA where it is available and --cpu is not given)."""
    common = cfg.get("common", None)  # omegaconf >= 2.1: a missing group raises, not None
    cpu = bool(getattr(common, "cpu", False))
    on_cuda = torch.cuda.is_available() and not cpu and not getattr(common, "tpu", False)
    where = "this run is on the CPU (--cpu)" if cpu else "this machine has no CUDA GPU"
    bf16 = getattr(common, "bf16", False) or getattr(common, "memory_efficient_bf16", False)
    if getattr(common, "fp16", False) and not getattr(common, "memory_efficient_fp16", False) and not bf16 \
            and not on_cuda:
        raise UserError(
            "--fp16 trains on a CUDA GPU, and {}: drop --fp16, or train in half precision on the CPU "
            "with --bf16 --cpu (or --memory-efficient-fp16)".format(where)
        )
    if getattr(common, "amp", False) and not on_cuda:
        raise UserError(
            "--amp trains under CUDA's autocast, and {}: it would train in float32 without a word; "
            "drop --amp, or train in half precision on the CPU with --bf16 --cpu".format(where)
        )
    if bf16 and on_cuda and not torch.cuda.is_bf16_supported():
        raise UserError(
            "--bf16 needs a GPU with bfloat16 support, and {} has none: use --fp16, or train in "
            "bfloat16 on the CPU with --bf16 --cpu".format(torch.cuda.get_device_name())
        )
