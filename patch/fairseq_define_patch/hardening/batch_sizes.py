"""A sample longer than --max-tokens, or a split with every sample dropped as too long, gets
one line naming the size and the fix (not an AssertionError from the Cython batcher, or
"The dataset is empty" after the model was built); fairseq-interactive skips a chunk of its
input whose every line is too long, under --skip-invalid-size-inputs-valid-test, as it skips
the lines."""

from ..edits import CopiedModule, Edit, FilePatch, insert_before

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
                "        indices, ignored = dataset.filter_indices_by_size(indices, max_positions)  # "
                "(fairseq_define)\n"
                "        from fairseq._define_runtime.batch_sizes import check_sizes_left\n\n"
                "        check_sizes_left(indices, ignored, dataset, max_positions, ignore_invalid_inputs)\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/interactive.py",
        "--skip-invalid-size-inputs-valid-test skips a chunk of the input whose every line is too long",
        (
            insert_before(
                "    itr = task.get_batch_iterator(\n",
                "    from fairseq._define_runtime.batch_sizes import inputs_in_chunks  # (fairseq_define)\n"
                "    inputs_in_chunks()  # a chunk of skipped lines is no empty split\n",
            ),
        ),
    ),
)
