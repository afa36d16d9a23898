"""One error type for bad input, and one hook that prints it.

fairseq.UserError (a ValueError) is what fairseq's patched code raises for bad input or
settings, and what the fairseq-define plugin raises too (fairseq_define/errors.py re-exports
it): one class to catch. In fairseq's command-line tools (``fairseq-*``) one excepthook prints
it as ``PROG: error: MESSAGE`` and exits 1, with or without the plugin; a plugin adds readers
(``add_user_error_reader``) for fairseq's own exceptions that mean bad input, and the same hook
prints their line. FAIRSEQ_DEFINE_TRACEBACK=1 shows the traceback instead. fairseq/__init__.py
imports these names (fairseq.UserError, ...) before it imports any of its submodules, which
raise the error, and installs the hook.
"""

import os
import sys

__all__ = ["UserError", "add_user_error_reader", "install_user_error_hook", "user_error_line"]


class UserError(ValueError):
    # (added by fairseq_define) bad input or settings; the message names the problem and the
    # fix. fairseq's command-line tools print it as one line, PROG: error: MESSAGE, and exit
    # non-zero (FAIRSEQ_DEFINE_TRACEBACK=1 shows the traceback).
    pass


_USER_ERROR_READERS = []


def add_user_error_reader(reader):
    # (added by fairseq_define) reader(exc) gives the one line for an exception that means
    # bad input, or None; a plugin adds its readers, the hook below prints their line
    if reader not in _USER_ERROR_READERS:
        _USER_ERROR_READERS.append(reader)


def user_error_line(exc):
    # (added by fairseq_define) the line for a UserError or an exception a reader knows;
    # None for a bug (a traceback)
    if isinstance(exc, UserError):
        return str(exc)
    for reader in _USER_ERROR_READERS:
        line = reader(exc)
        if line is not None:
            return line
    return None


def _print_user_errors(previous):
    def hook(exc_type, exc, tb):
        line = None if os.environ.get("FAIRSEQ_DEFINE_TRACEBACK") else user_error_line(exc)
        if line is not None:
            prog = os.path.basename(sys.argv[0]) if sys.argv else "fairseq"
            sys.stderr.write("{}: error: {}\n".format(prog, line))
            sys.stderr.flush()
            sys.stdout.flush()
            import multiprocessing

            for child in multiprocessing.active_children():  # the data loader's workers
                child.terminate()
            os._exit(1)  # now: a data loader thread still running made the shutdown abort
        else:
            previous(exc_type, exc, tb)

    return hook


def install_user_error_hook():
    """In fairseq's command-line tools only (a program named fairseq-*): a library user's
    program keeps its own excepthook. fairseq/__init__.py calls this once."""
    if sys.argv and os.path.basename(sys.argv[0]).startswith("fairseq-"):
        sys.excepthook = _print_user_errors(sys.excepthook)
