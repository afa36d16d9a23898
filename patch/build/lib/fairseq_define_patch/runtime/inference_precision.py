"""The precision of the inference tools: --bf16 runs the model in bfloat16, as --fp16 runs it
in float16.

fairseq-generate, -interactive, -eval-lm and -validate read only --fp16 (``model.half()``):
--bf16 was accepted and the model ran in float32 without a word. Each tool calls
``to_inference_precision`` where it halved the model; the scores stay float32 (fairseq's
log-softmax works in float32 whatever the model's precision).
"""

__all__ = ["to_inference_precision"]


def to_inference_precision(model, cfg):
    """``model`` cast to the precision of ``cfg.common`` (--fp16, --bf16; float32 otherwise)."""
    if cfg.common.fp16:
        model.half()
    elif cfg.common.bf16:  # --memory-efficient-bf16 sets it too
        model.bfloat16()
    return model
