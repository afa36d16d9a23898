"""fairseq-eval-lm: a --context-window that is negative, or leaves no token of a block to
score, gets one line before the data loads."""

from ..edits import CopiedModule, Edit, FilePatch

# The check is runtime/eval_lm_settings.py (copied into fairseq), called first in main.
COPIES = (CopiedModule("eval_lm_settings", "--context-window against --tokens-per-sample"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq_cli/eval_lm.py",
        "--context-window negative or not below --tokens-per-sample: one line",
        (
            Edit(
                "    if cfg.eval_lm.context_window > 0:\n",
                "    from fairseq._define_runtime.eval_lm_settings import check_context_window\n\n"
                "    check_context_window(cfg)\n"
                "    if cfg.eval_lm.context_window > 0:  # (fairseq_define) checked above\n",
            ),
        ),
    ),
)
