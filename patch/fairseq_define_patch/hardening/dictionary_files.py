"""A damaged dict.*.txt (a line without a count, a token twice, not UTF-8) gets one line
naming the file, the line and the fix."""

from ..edits import CopiedModule, Edit, FilePatch

# The check is runtime/dictionary_files.py (copied into fairseq), called before fairseq reads the file.
COPIES = (CopiedModule("dictionary_files", "a damaged dictionary file: one line"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/data/dictionary.py",
        "a damaged dictionary file: one line naming the file, the line and the fix",
        (
            Edit(
                '                with open(PathManager.get_local_path(f), "r", encoding="utf-8") as fd:\n',
                "                from fairseq._define_runtime.dictionary_files import check_dictionary_file\n\n"
                "                check_dictionary_file(self, PathManager.get_local_path(f))\n"
                '                with open(PathManager.get_local_path(f), "r", encoding="utf-8") as fd:  # '
                '(fairseq_define)\n',
            ),
        ),
    ),
)
