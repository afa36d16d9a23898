"""User errors: one clear line naming the problem and the fix, no traceback.

Library code raises :class:`UserError` (or a subclass) for bad settings and bad input. It is
``fairseq.UserError``, which the fairseq patch adds (fairseq_define_patch/hardening/
user_error.py): one class for fairseq's patched code and this plugin, so callers catch one
type. In a fairseq command-line tool (``fairseq-*``) the patch's one excepthook prints it as
``PROG: error: MESSAGE`` and the tool exits non-zero; this module adds to that hook the
fairseq failures that mean bad input (a missing split, a truncated dataset, a checkpoint
that does not fit the data). ``FAIRSEQ_DEFINE_TRACEBACK=1`` shows the full traceback
instead. Python sessions get no hook (the hub interface keeps ordinary tracebacks).
"""

import re
import sys

from fairseq import UserError, add_user_error_reader

__all__ = ["UserError", "cli_error", "register_user_error_messages", "user_error_message"]


# fairseq's own exceptions for bad input, with the explanation a user needs.
# (exception class name, pattern on the message, message template using the match groups)
_FAIRSEQ_USER_ERRORS = [
    (
        "FileNotFoundError",
        r"Dataset not found: (\S+) \((.*)\)",
        "no binarized '{0}' split in {1}: binarize it with fairseq-preprocess "
        "(--trainpref/--validpref/--testpref), or pick an existing split "
        "(--gen-subset / --valid-subset)",
    ),
    (
        "FileNotFoundError",
        r"No such file or directory: '(.*dict[^']*\.txt)'",
        "missing dictionary {0}: point the command at a directory written by fairseq-preprocess",
    ),
    (
        "OSError",
        r"Model file not found: (.*)",
        "no such checkpoint: {0}; check --path (checkpoints are in fairseq-train's --save-dir)",
    ),
    (
        "FileNotFoundError",
        r"(.*)",
        "{0}: check the path (binarized data comes from fairseq-preprocess, checkpoints from fairseq-train --save-dir)",
    ),
    (
        "ValueError",
        r"cannot mmap an empty file",
        "a binarized dataset file is empty (0 sentences): check the text files given to "
        "fairseq-preprocess and run it again",
    ),
    (
        "ValueError",
        r"offset must be non-negative and no greater than buffer length",
        "a binarized dataset (.bin) is shorter than its index (.idx): the file was truncated; "
        "run fairseq-preprocess again",
    ),
    (
        "ValueError",
        r"mmap length is greater than file size",
        "a binarized dataset (.bin) is shorter than its index (.idx): the file was truncated; "
        "run fairseq-preprocess again",
    ),
    (
        "RuntimeError",
        r"size mismatch for (\S+cached_table\.weight): copying a param with shape (torch.Size\(\[[0-9, ]*\]\)) from "
        r"checkpoint, the shape in current model is (torch.Size\(\[[0-9, ]*\]\))",
        "the cached DeFINE table {0} is {1} but this dictionary needs {2}; use the dictionary "
        "(dict.*.txt) the model was trained with, or cache the tables again with "
        "fairseq-define-cache-tables from the trained checkpoint",
    ),
    # learned positions: --max-*-positions (or --model-overrides of them) at other values
    (
        "RuntimeError",
        r"size mismatch for (\S*embed_positions\S*): copying a param with shape (torch.Size\(\[[0-9, ]*\]\)) from "
        r"checkpoint, the shape in current model is (torch.Size\(\[[0-9, ]*\]\))",
        "the learned positions table {0} is {1} in the checkpoint but {2} in this model: keep "
        "--max-source-positions / --max-target-positions (and --model-overrides of them) at the "
        "values it was trained with",
    ),
    (
        "RuntimeError",
        r"size mismatch for (\S+): copying a param with shape (torch.Size\(\[[0-9, ]*\]\)) from checkpoint, the shape "
        r"in current model is (torch.Size\(\[[0-9, ]*\]\))",
        "the checkpoint does not fit the data: {0} is {1} in the checkpoint but {2} for this "
        "dictionary; use the dictionary (dict.*.txt) the model was trained with",
    ),
    (
        "Exception",
        r"Size of sample #(\d+) is invalid.*max_positions=(.*), skip this example with "
        r"--skip-invalid-size-inputs-valid-test",
        "sentence #{0} is longer than the model accepts (max positions {1}): drop or split "
        "overlong lines, or skip this example with --skip-invalid-size-inputs-valid-test",
    ),
    (
        "ValueError",
        r"--share-all-embeddings requires a joined dictionary",
        "--share-all-embeddings needs one dictionary for source and target: binarize with "
        "fairseq-preprocess --joined-dictionary, or drop --share-all-embeddings",
    ),
    (
        "ValueError",
        r"--share-all-embeddings requires --encoder-embed-dim to match --decoder-embed-dim",
        "--share-all-embeddings needs --encoder-embed-dim equal to --decoder-embed-dim: set "
        "both to the same value, or drop --share-all-embeddings",
    ),
    (
        "ValueError",
        r"loaded state dict contains a parameter group that doesn't match the size of optimizer's group",
        "the checkpoint's optimizer state does not fit this model's parameters: resume with the "
        "settings it was trained with (define_cache_on_load and --define-cached-table drop the "
        "DeFINE units, and compressed checkpoints hold codes: those are for inference only), or "
        "pass --reset-optimizer",
    ),
    # another --optimizer, or another precision: --fp16/--bf16 (and their memory-efficient
    # forms) wrap the optimizer, so a checkpoint resumed without them names another class
    (
        "AssertionError",
        r"Optimizer does not match; please reset the optimizer \(--reset-optimizer\)\. (\S+) vs (\S+)",
        "the checkpoint's optimizer is {0} but this run builds {1}: resume with the --optimizer "
        "and precision it was trained with (--fp16 and --bf16 train through FP16Optimizer, their --memory-efficient- "
        "forms through MemoryEfficientFP16Optimizer), or pass --reset-optimizer",
    ),
]


def user_error_message(exc: BaseException):
    """The one-line message for a user error, or None for a genuine bug."""
    if isinstance(exc, UserError):
        return str(exc)
    names = {cls.__name__ for cls in type(exc).__mro__}
    text = str(exc).strip()
    for cls_name, pattern, template in _FAIRSEQ_USER_ERRORS:
        if cls_name in names:
            m = re.search(pattern, text, re.S)
            if m:
                return template.format(*m.groups())
    return None


def cli_error(prog: str, message) -> int:
    """Print ``PROG: error: MESSAGE`` to stderr, as argparse does; return the exit status 2."""
    sys.stderr.write(f"{prog}: error: {message}\n")
    sys.stderr.flush()
    return 2


def register_user_error_messages() -> None:
    """fairseq's command-line hook (the patch's) prints the lines of user_error_message too."""
    add_user_error_reader(user_error_message)
