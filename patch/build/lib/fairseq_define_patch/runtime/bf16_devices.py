"""--bf16 without a TPU: train in bfloat16 on the device at hand (CUDA or CPU).

fairseq 0.12.2's command-line parsing (fairseq/options.py) turned every ``--bf16`` into
``--tpu``, which dies without torch_xla (``--cpu`` included). ``settle_bf16`` replaces that
line: ``--bf16`` means the TPU only where torch_xla can be imported and ``--cpu`` is not given
(fairseq's behaviour on TPU hosts); elsewhere bfloat16 trains on CUDA, or on the CPU with
``--cpu``. Settings that cannot mean anything get one line (fairseq.UserError): ``--bf16``
with ``--fp16``, ``--bf16`` with ``--amp``, ``--tpu`` without torch_xla.
"""

import importlib.util

from fairseq import UserError

__all__ = ["settle_bf16"]


def settle_bf16(args):
    """Check the precision flags of ``args`` and set ``args.tpu`` for ``--bf16``."""
    has_xla = importlib.util.find_spec("torch_xla") is not None
    if args.bf16 and getattr(args, "fp16", False):
        raise UserError(
            "--bf16 and --fp16 cannot be combined: pick one precision "
            "(--memory-efficient-bf16 implies --bf16, --memory-efficient-fp16 --fp16)"
        )
    if args.bf16 and getattr(args, "amp", False):
        raise UserError(
            "--bf16 and --amp cannot be combined: --amp trains in float16 under "
            "autocast, --bf16 in bfloat16; pick one"
        )
    if args.tpu and not has_xla:
        raise UserError(
            "--tpu needs torch_xla, which is not installed; --bf16 alone trains in "
            "bfloat16 on CUDA or, with --cpu, on the CPU"
        )
    if args.bf16 and has_xla and not getattr(args, "cpu", False):
        args.tpu = True
