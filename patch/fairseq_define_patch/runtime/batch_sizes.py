"""Samples against the batch and the model: one longer than --max-tokens, or every sample of
a split dropped as too long, gets one line naming the size and the fix.

fairseq filters the training split by the model's positions and --max-tokens (too long:
dropped with a warning) but batched the validation and test splits without that filter: a
sentence longer than --max-tokens (or --max-tokens-valid) ended in "AssertionError:
Sentences lengths should not exceed max_tokens" from the Cython batcher; a training split
left with no sample (a language model's blocks of --tokens-per-sample above --max-tokens)
ended in "The dataset is empty" after the model was built. fairseq/data/data_utils.py calls
``check_longest_sample`` before batching; fairseq/tasks/fairseq_task.py calls
``check_sizes_left`` after filtering. fairseq-interactive batches its input a chunk of
--buffer-size lines at a time: with --skip-invalid-size-inputs-valid-test (which the line for a
long line advises) a chunk whose every line is too long is skipped as its lines are, and the
next is read (``inputs_in_chunks``; such a chunk refused the whole input before).
"""

import numpy as np
from fairseq import UserError

__all__ = ["check_longest_sample", "check_sizes_left", "inputs_in_chunks"]

# set by fairseq-interactive: each "split" is a chunk of the input, which may be left empty
_chunked_input = [False]


def inputs_in_chunks():
    """This process batches its input chunk by chunk (fairseq-interactive): a chunk with no
    sample left after the skipped ones is no mistake."""
    _chunked_input[0] = True


def check_longest_sample(indices, num_tokens_vec, num_tokens_fn, max_tokens):
    """Before batching by size: no sample may be longer than ``max_tokens`` (-1 or None: no
    limit), or it fits in no batch. (--skip-invalid-size-inputs-valid-test drops samples longer
    than the model's positions only, not than --max-tokens: the line does not offer it.)"""
    if max_tokens is None or max_tokens <= 0 or len(indices) == 0:
        return
    if num_tokens_vec is not None:
        sizes = np.asarray(num_tokens_vec)
    elif num_tokens_fn is not None:
        sizes = np.fromiter((num_tokens_fn(i) for i in indices), dtype=np.int64, count=len(indices))
    else:
        return
    longest = int(np.argmax(sizes))
    if sizes[longest] > max_tokens:
        raise UserError(
            "sample #{} has {} tokens, more than --max-tokens {} allows in a batch: raise --max-tokens (for "
            "validation --max-tokens-valid) to at least {}, or shorten or drop that sample".format(
                int(indices[longest]), int(sizes[longest]), max_tokens, int(sizes[longest]))
        )


def check_sizes_left(indices, ignored, dataset, max_positions, ignore_invalid_inputs):
    """After fairseq filtered a split by ``max_positions`` (the model's positions, and for
    training --max-tokens): a sample too long for a split that may not drop any, or a split
    with no sample left, is one line."""
    if len(ignored) == 0:
        return
    if not ignore_invalid_inputs:
        raise UserError(
            "sentence #{} is longer than the model accepts (max positions {}): drop or split "
            "overlong lines, or skip this example with --skip-invalid-size-inputs-valid-test".format(
                ignored[0], max_positions
            )
        )
    if len(indices) == 0 and not _chunked_input[0]:
        raise UserError(
            "every sample of this split ({}) is longer than the model or a batch accepts (max positions {}, "
            "the smallest of the model's positions, --tokens-per-sample and --max-tokens): raise --max-tokens "
            "or the positions, or shorten the samples".format(len(ignored), max_positions)
        )
