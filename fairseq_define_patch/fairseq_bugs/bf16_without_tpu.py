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

from ..edits import Edit, FilePatch

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/options.py",
        "--bf16 means --tpu only where torch_xla is importable; bad precision combinations",
        (
            Edit(
                "    args.tpu = getattr(args, \"tpu\", False)\n"
                "    args.bf16 = getattr(args, \"bf16\", False)\n"
                "    if args.bf16:\n"
                "        args.tpu = True\n"
                "    if args.tpu and args.fp16:\n",
                "    args.tpu = getattr(args, \"tpu\", False)\n"
                "    args.bf16 = getattr(args, \"bf16\", False)\n"
                "    # (fairseq_define) --bf16 implied --tpu, which dies without torch_xla: now only\n"
                "    # where torch_xla is there and --cpu is not given; elsewhere bfloat16 trains on\n"
                "    # the device at hand (CUDA, or the CPU with --cpu)\n"
                "    import importlib.util\n\n"
                "    from fairseq import UserError\n\n"
                "    has_xla = importlib.util.find_spec(\"torch_xla\") is not None\n"
                "    if args.bf16 and getattr(args, \"fp16\", False):\n"
                "        raise UserError(\n"
                "            \"--bf16 and --fp16 cannot be combined: pick one precision \"\n"
                "            \"(--memory-efficient-bf16 implies --bf16, --memory-efficient-fp16 --fp16)\"\n"
                "        )\n"
                "    if args.bf16 and getattr(args, \"amp\", False):\n"
                "        raise UserError(\n"
                "            \"--bf16 and --amp cannot be combined: --amp trains in float16 under \"\n"
                "            \"autocast, --bf16 in bfloat16; pick one\"\n"
                "        )\n"
                "    if args.tpu and not has_xla:\n"
                "        raise UserError(\n"
                "            \"--tpu needs torch_xla, which is not installed; --bf16 alone trains in \"\n"
                "            \"bfloat16 on CUDA or, with --cpu, on the CPU\"\n"
                "        )\n"
                "    if args.bf16 and has_xla and not getattr(args, \"cpu\", False):\n"
                "        args.tpu = True\n"
                "    if args.tpu and args.fp16:\n",
            ),
        ),
    ),
)
