"""fairseq-generate / fairseq-interactive: --beam below 1 and an unusable --input get one line."""

from ..edits import Edit, FilePatch

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/sequence_generator.py",
        "--beam 0 (or negative): one line, not a reshape RuntimeError mid-generation",
        (
            Edit(
                "        self.vocab_size = len(tgt_dict)\n        self.beam_size = beam_size\n",
                "        self.vocab_size = len(tgt_dict)\n"
                "        if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:\n"
                "            from fairseq import UserError  # (fairseq_define)\n\n"
                "            raise UserError(\"--beam {} must be at least 1 (1 is greedy search)\".format(beam_size))\n"
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
                "    from fairseq import UserError  # (fairseq_define) kind and encoding checked\n\n"
                "    buffer = []\n"
                '    if input != "-" and not os.path.isfile(input):\n'
                "        raise UserError(\n"
                '            "--input {} is {}: give a text file, or - for standard input".format(\n'
                '                input, "a folder" if os.path.isdir(input) else "not an existing file"\n'
                "            )\n"
                "        )\n"
                '    with fileinput.input(files=[input], openhook=fileinput.hook_encoded("utf-8")) as h:\n'
                "        try:\n"
                "            for src_str in h:\n"
                "                buffer.append(src_str.strip())\n"
                "                if len(buffer) >= buffer_size:\n"
                "                    yield buffer\n"
                "                    buffer = []\n"
                "        except UnicodeDecodeError as e:\n"
                "            raise UserError(\n"
                '                "--input {} is not UTF-8 text ({}): convert it to UTF-8 (e.g. iconv -f "\n'
                '                "latin1 -t utf-8)".format(input, e.reason)\n'
                "            ) from None\n",
            ),
        ),
    ),
)
