"""fairseq-generate, -interactive, -eval-lm and -validate: --bf16 runs the model in bfloat16
(it was accepted and ignored: they read only --fp16)."""

from ..edits import CopiedModule, Edit, FilePatch

# The cast is runtime/inference_precision.py (copied into fairseq).
COPIES = (CopiedModule("inference_precision", "--bf16 in the inference tools: the model in bfloat16"),)

_WHY = "--bf16 runs the model in bfloat16 (it ran in float32 without a word)"
_CAST = (
    "        from fairseq._define_runtime.inference_precision import to_inference_precision  # (fairseq_define)\n\n"
    "        to_inference_precision(model, cfg)  # --fp16 or --bf16\n"
)


def _cast(flag_test):
    """Replace fairseq's ``if <flag_test>: model.half()`` of the loop over the models."""
    return Edit("        if {}:\n            model.half()\n".format(flag_test), _CAST)


PATCHES = (
    FilePatch("fairseq", "fairseq_cli/generate.py", _WHY, (_cast("cfg.common.fp16"),)),
    FilePatch("fairseq", "fairseq_cli/interactive.py", _WHY, (_cast("cfg.common.fp16"),)),
    FilePatch("fairseq", "fairseq_cli/eval_lm.py", _WHY, (_cast("use_fp16"),)),
    FilePatch("fairseq", "fairseq_cli/validate.py", _WHY, (_cast("use_fp16"),)),
)
