"""fairseq-generate / fairseq-interactive: --beam below 1 and an unusable --input get one line."""

from ..edits import CopiedModule, Edit, FilePatch, insert_before, replace_span

# The checks are runtime/generation_inputs.py (copied into fairseq).
COPIES = (CopiedModule("generation_inputs", "--beam below 1; an unusable --input"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/sequence_generator.py",
        "--beam 0 (or negative): one line, not a reshape RuntimeError mid-generation; --lenpen nan or inf: one line",
        (
            insert_before(
                "        self.beam_size = beam_size\n",
                "        from fairseq._define_runtime.generation_inputs import check_beam_size  # (fairseq_define)\n"
                "        check_beam_size(beam_size)\n",
            ),
            insert_before(
                "        self.len_penalty = len_penalty\n",
                "        from fairseq._define_runtime.generation_inputs import check_len_penalty  # (fairseq_define)\n"
                "        check_len_penalty(len_penalty)  # nan or inf scored every hypothesis nan\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/interactive.py",
        "--input: a folder, a missing file or text that is not UTF-8 gives one line",
        (
            replace_span(
                '    with fileinput.input(files=[input], openhook=fileinput.hook_encoded("utf-8")) as h:\n',
                "                yield buffer\n                buffer = []\n",
                "    from fairseq._define_runtime.generation_inputs import read_input_batches  # (fairseq_define)\n"
                "    buffer = yield from read_input_batches(input, buffer_size)  # checked\n",
            ),
        ),
    ),
)
