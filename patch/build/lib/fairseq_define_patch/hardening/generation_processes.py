"""fairseq-generate / fairseq-interactive: --distributed-world-size, --distributed-rank,
--num-shards and --shard-id, which would split the input of a tool that runs one process,
get one line before a model loads."""

from ..edits import CopiedModule, FilePatch, insert_after, insert_before

# The check is runtime/generation_processes.py (copied into fairseq).
COPIES = (CopiedModule("generation_processes", "generate and interactive: one process over the whole input"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq_cli/generate.py",
        "--distributed-world-size/--distributed-rank/--num-shards/--shard-id: one line, not a shard scored",
        (
            insert_after(
                "        cfg = convert_namespace_to_omegaconf(cfg)\n",
                "    from fairseq._define_runtime.generation_processes import check_one_process  # (fairseq_define)\n\n"
                '    check_one_process(cfg, "fairseq-generate")  # no shard scored as the test set\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/interactive.py",
        "--distributed-world-size/--distributed-rank/--num-shards/--shard-id: one line",
        (
            insert_before(
                "    distributed_utils.call_main(convert_namespace_to_omegaconf(args), main)\n",
                "    from fairseq._define_runtime.generation_processes import check_one_process  # (fairseq_define)\n\n"
                '    check_one_process(args, "fairseq-interactive")  # before any process starts\n',
            ),
        ),
    ),
)
