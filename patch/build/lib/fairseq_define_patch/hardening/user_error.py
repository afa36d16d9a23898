"""One error type for bad input, and one hook that prints it.

fairseq.UserError (a ValueError) is what fairseq's patched code raises for bad input or
settings, and what the fairseq-define plugin raises too (fairseq_define/errors.py re-exports
it): one class to catch. In fairseq's command-line tools (``fairseq-*``) one excepthook
prints it as ``PROG: error: MESSAGE`` and exits 1, with or without the plugin; a plugin adds
readers (``add_user_error_reader``) for fairseq's own exceptions that mean bad input, and
the same hook prints their line. FAIRSEQ_DEFINE_TRACEBACK=1 shows the traceback instead.
"""

from ..edits import CopiedModule, Edit, FilePatch

# The code is runtime/user_error.py (copied into fairseq); fairseq/__init__.py imports it
# before any of its submodules, which raise the error.
COPIES = (CopiedModule("user_error", "bad input: fairseq.UserError and the one excepthook"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/__init__.py",
        "bad input: fairseq.UserError, one line from the command-line tools",
        (
            Edit(
                '__all__ = ["pdb"]\n',
                '__all__ = ["pdb", "UserError"]  # (fairseq_define) one error type, one hook that prints it\n'
                "from fairseq._define_runtime.user_error import *  # noqa: E402 F401 F403\n"
                "install_user_error_hook()\n",
            ),
        ),
    ),
)
