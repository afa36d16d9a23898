"""No stock command-line output is written through a planted link: fairseq-generate opens
--results-path's file without following a link (fairseq-preprocess's --destdir is checked by
preprocess_inputs)."""

from ..edits import CopiedModule, Edit, FilePatch

# The code is runtime/output_links.py (copied into fairseq).
COPIES = (CopiedModule("output_links", "outputs never written through a planted link"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq_cli/generate.py",
        "--results-path: its file is never written through a planted link",
        (
            Edit(
                '        with open(output_path, "w", buffering=1, encoding="utf-8") as h:\n',
                "        from fairseq._define_runtime.output_links import open_output\n\n"
                '        with open_output(output_path, "--results-path") as h:  # (fairseq_define) no link followed\n',
            ),
        ),
    ),
)
