"""fairseq-generate / fairseq-interactive and the hub: the generation settings (one table, where
the task builds its generator and again before the CLIs load a model), the seed, interactive's
--batch-size against --buffer-size and an unusable --input get one line."""

from ..edits import CopiedModule, Edit, FilePatch, insert_before, replace_span

# The checks are runtime/generation_inputs.py (copied into fairseq).
COPIES = (CopiedModule("generation_inputs", "the generation settings, the seed, --batch-size; an unusable --input"),)

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
            # TorchScript compiles _generate: its assertion stays, in words the CLIs print as one line
            Edit(
                '        ), "min_len cannot be larger than max_len, please adjust these!"\n',
                '        ), (f"--min-len {self.min_len} is above the longest output for a source of {src_len} tokens, '
                '{max_len} "\n'
                '            f"(--max-len-a * source length + --max-len-b, below the model\'s positions): lower '
                '--min-len or "\n'
                '            f"raise --max-len-a/--max-len-b")  # (fairseq_define) one line: generation_inputs reads '
                'it\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/tasks/fairseq_task.py",
        "the generation settings checked where the generator is built (fairseq-generate, -interactive, the hub)",
        (
            insert_before(
                '        if getattr(args, "score_reference", False):\n',
                "        from fairseq._define_runtime.generation_inputs import check_generation_settings  # "
                "(fairseq_define)\n"
                "        check_generation_settings(args)  # one line, the CLIs and the hub alike\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/generate.py",
        "the generation settings and the seed checked before a model is loaded",
        (
            Edit(
                "    assert (\n"
                "        not cfg.generation.sampling or cfg.generation.nbest == cfg.generation.beam\n"
                '    ), "--sampling requires --nbest to be equal to --beam"\n',
                "    from fairseq._define_runtime.generation_inputs import check_generation_command  # "
                "(fairseq_define)\n"
                "    check_generation_command(cfg)  # one line: the generation numbers, --sampling's --nbest, --seed\n",
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
            Edit(
                "    assert (\n"
                "        not cfg.generation.sampling or cfg.generation.nbest == cfg.generation.beam\n"
                '    ), "--sampling requires --nbest to be equal to --beam"\n',
                "    from fairseq._define_runtime.generation_inputs import check_generation_command  # "
                "(fairseq_define)\n"
                "    check_generation_command(cfg, interactive=True)  # one line, --batch-size against --buffer-size "
                "too\n",
            ),
            Edit(
                "    assert (\n"
                "        not cfg.dataset.batch_size\n"
                "        or cfg.dataset.batch_size <= cfg.interactive.buffer_size\n"
                '    ), "--batch-size cannot be larger than --buffer-size"\n',
                "    # (fairseq_define) --batch-size above --buffer-size: check_generation_command's line\n",
            ),
        ),
    ),
)
