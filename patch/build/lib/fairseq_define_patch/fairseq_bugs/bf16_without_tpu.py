"""--bf16 without a TPU: train in bfloat16 on the device at hand (CUDA or CPU).

fairseq 0.12.2's command-line parsing turns every ``--bf16`` (and ``--memory-efficient-bf16``)
into ``--tpu``, so ``fairseq-train --bf16`` died on any machine without torch_xla, ``--cpu``
included, with ``'NoneType' object has no attribute 'xla_device'``. The trainer itself
handles bfloat16 on any device (the model and criterion cast to bfloat16, fp32 master
weights in FP16Optimizer or MemoryEfficientFP16Optimizer, no loss scaling); only the forced
TPU stood in the way. Now ``--bf16`` means the TPU only where torch_xla can be imported and
``--cpu`` is not given (fairseq's behaviour on TPU hosts); elsewhere it trains on CUDA, or
on the CPU with ``--cpu``.

Settings that cannot mean anything get one line (fairseq.UserError) instead of a traceback
or a silent choice: ``--bf16`` with ``--fp16`` (once refused only through the forced
``--tpu``), ``--bf16`` with ``--amp`` (float16 autocast on a bfloat16 model), and ``--tpu``
without torch_xla.
"""

from ..edits import CopiedModule, Edit, FilePatch

# The flags are settled by runtime/bf16_devices.py (copied into fairseq), where options.py
# turned --bf16 into --tpu.
COPIES = (CopiedModule("bf16_devices", "--bf16 on CUDA or the CPU; precision flags that conflict"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/options.py",
        "--bf16 means --tpu only where torch_xla is importable; bad precision combinations",
        (
            Edit(
                "    if args.bf16:\n        args.tpu = True\n",
                "    from fairseq._define_runtime.bf16_devices import settle_bf16  # (fairseq_define)\n"
                "    settle_bf16(args)  # --tpu only where torch_xla is\n",
            ),
        ),
    ),
)
