"""No stock command-line output is written through a planted link: fairseq-generate opens
--results-path's file without following a link (fairseq-preprocess's --destdir is checked by
preprocess_inputs); neither leaves a half-written output when a write fails (a full disk):
generate's results move into place when generation ends, and preprocess removes what a failed
run wrote in --destdir."""

from ..edits import CopiedModule, Edit, FilePatch

# The code is runtime/output_links.py (copied into fairseq).
COPIES = (CopiedModule("output_links", "outputs never written through a planted link, nor left half-written"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq_cli/generate.py",
        "--results-path: its file is never written through a planted link, nor left half-written",
        (
            Edit(
                '        with open(output_path, "w", buffering=1, encoding="utf-8") as h:\n',
                "        from fairseq._define_runtime.output_links import open_output\n\n"
                '        with open_output(output_path, "--results-path") as h:  # (fairseq_define) no link followed\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/preprocess.py",
        "a failed run (a full disk) leaves nothing in --destdir: one line, and the same command runs again",
        (
            Edit(
                "    args = parser.parse_args()\n    main(args)\n",
                "    args = parser.parse_args()\n"
                "    from fairseq._define_runtime.output_links import preprocess_all_or_nothing  # (fairseq_define)\n"
                "    with preprocess_all_or_nothing(args.destdir):  # a failed run leaves nothing in --destdir\n"
                "        main(args)\n",
            ),
        ),
    ),
)
