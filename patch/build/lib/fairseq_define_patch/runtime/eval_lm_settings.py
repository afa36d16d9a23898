"""fairseq-eval-lm's --context-window against --tokens-per-sample, checked before the data loads.

fairseq-eval-lm subtracted the context from each block: --context-window equal to
--tokens-per-sample ended in a ZeroDivisionError, above it in "negative dimensions are not
allowed", and below 0 was taken as 0 without a word. fairseq_cli/eval_lm.py calls
``check_context_window`` first.
"""

from fairseq import UserError

__all__ = ["check_context_window"]


def check_context_window(cfg):
    window = cfg.eval_lm.context_window
    if window < 0:
        raise UserError(
            "--context-window {} is negative: give the number of tokens of context each block "
            "carries over, or 0 for none".format(window)
        )
    block = getattr(cfg.task, "tokens_per_sample", None)
    if window > 0 and block is not None and window >= block:
        raise UserError(
            "--context-window {} leaves no token to score in blocks of --tokens-per-sample {}: give a "
            "context below it (e.g. {}), or raise --tokens-per-sample".format(window, block, block // 2)
        )
