"""fairseq-generate / fairseq-interactive: --beam below 1 and an unusable --input get one line."""

from ..edits import CopiedModule, Edit, FilePatch

# The checks are runtime/generation_inputs.py (copied into fairseq).
COPIES = (CopiedModule("generation_inputs", "--beam below 1; an unusable --input"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/sequence_generator.py",
        "--beam 0 (or negative): one line, not a reshape RuntimeError mid-generation",
        (
            Edit(
                "        self.vocab_size = len(tgt_dict)\n        self.beam_size = beam_size\n",
                "        self.vocab_size = len(tgt_dict)\n"
                "        from fairseq._define_runtime.generation_inputs import check_beam_size\n\n"
                "        check_beam_size(beam_size)  # (fairseq_define)\n"
                "        self.beam_size = beam_size\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/interactive.py",
        "--input: a folder, a missing file or text that is not UTF-8 gives one line",
        (
            Edit(
                "    buffer = []\n"
                '    with fileinput.input(files=[input], openhook=fileinput.hook_encoded("utf-8")) as h:\n'
                "        for src_str in h:\n"
                "            buffer.append(src_str.strip())\n"
                "            if len(buffer) >= buffer_size:\n"
                "                yield buffer\n"
                "                buffer = []\n",
                "    from fairseq._define_runtime.generation_inputs import read_input_batches\n\n"
                "    buffer = yield from read_input_batches(input, buffer_size)  # (fairseq_define) checked\n",
            ),
        ),
    ),
)
