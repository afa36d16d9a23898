"""fairseq-preprocess checks its input files (exist, UTF-8, line-aligned) and its --destdir
before anything is written."""

from ..edits import CopiedModule, Edit, FilePatch

# The checks are runtime/preprocess_inputs.py (copied into fairseq), called first in main.
COPIES = (CopiedModule("preprocess_inputs", "fairseq-preprocess's inputs checked before anything is written"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq_cli/preprocess.py",
        "check the input files (exist, UTF-8, aligned) before anything is written",
        (
            Edit(
                "    utils.import_user_module(args)\n\n    os.makedirs(args.destdir, exist_ok=True)\n",
                "    utils.import_user_module(args)\n"
                "    from fairseq._define_runtime.preprocess_inputs import check_inputs  # (fairseq_define)\n"
                "    check_inputs(args, _file_name, _dict_path)  # before anything is written\n"
                "    os.makedirs(args.destdir, exist_ok=True)\n",
            ),
        ),
    ),
)
