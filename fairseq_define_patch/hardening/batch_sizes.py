"""A sample longer than --max-tokens, or a split with every sample dropped as too long, gets
one line naming the size and the fix (not an AssertionError from the Cython batcher, or
"The dataset is empty" after the model was built)."""

from ..edits import CopiedModule, Edit, FilePatch

# The checks are runtime/batch_sizes.py (copied into fairseq).
COPIES = (CopiedModule("batch_sizes", "samples against --max-tokens and the model's positions"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/data/data_utils.py",
        "a sample longer than --max-tokens: one line before batching",
        (
            Edit(
                "    if fixed_shapes is None:\n",
                "    from fairseq._define_runtime.batch_sizes import check_longest_sample\n\n"
                "    check_longest_sample(indices, num_tokens_vec, num_tokens_fn, max_tokens)\n"
                "    if fixed_shapes is None:  # (fairseq_define) no sample longer than max_tokens\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/tasks/fairseq_task.py",
        "a sample too long for a split that may not drop any, or no sample left: one line",
        (
            Edit(
                "        indices, ignored = dataset.filter_indices_by_size(indices, max_positions)\n",
                "        indices, ignored = dataset.filter_indices_by_size(indices, max_positions)  # (fairseq_define)\n"
                "        from fairseq._define_runtime.batch_sizes import check_sizes_left\n\n"
                "        check_sizes_left(indices, ignored, dataset, max_positions, ignore_invalid_inputs)\n",
            ),
        ),
    ),
)
