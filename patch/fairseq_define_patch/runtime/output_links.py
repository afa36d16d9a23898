"""fairseq's command-line tools never write through a link planted where their output goes.

fairseq-preprocess wrote its dictionaries, binarized splits and preprocess.log into --destdir
with plain open() calls, and fairseq-generate its generate-SPLIT.txt into --results-path:
a symbolic link planted at one of those names (dangling or not) had the tool write, or
truncate, the file it points to. fairseq-generate now opens its results with O_NOFOLLOW
(``open_output``); fairseq-preprocess refuses, before anything is written, a --destdir where a
name it writes is a link (``check_no_links``, called by preprocess_inputs.check_inputs).
fairseq's checkpoint writes are atomic and never follow a link (checkpoint_writes.py).

Both were also left half-written by a full disk, with a traceback, and fairseq-preprocess's
retry was then refused because of the dictionary the failed run had left. fairseq-generate now
writes its results to a temporary file beside them and moves it into place when generation
ends (``open_output``); fairseq-preprocess removes what a failed run wrote in --destdir
(``preprocess_all_or_nothing``, around its main). A full disk is one line for both, and the
same command runs again.
"""

import contextlib
import os
import re
import tempfile

from fairseq import UserError

from .checkpoint_writes import disk_full

__all__ = ["PREPROCESS_OUTPUT", "check_no_links", "open_output", "preprocess_all_or_nothing"]

# the names fairseq-preprocess writes in --destdir: its log, dict.LANG.txt, and SPLIT.* for the
# splits train, valid, valid1, ..., test, test1, ... (data, index and alignment files)
PREPROCESS_OUTPUT = re.compile(r"^(preprocess\.log|dict\..*|(train|valid\d*|test\d*)\..*)$")


def check_no_links(folder, names, flag):
    """No entry of ``folder`` whose name matches ``names`` (a compiled pattern) is a link."""
    if not os.path.isdir(folder):
        return
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if names.match(name) and os.path.islink(path):
            raise UserError(
                "{} is a link (to {}) where this tool writes its output: it would write through it; "
                "remove the link or choose another {}".format(path, os.readlink(path), flag)
            )


def _refuse_link(path, flag):
    raise UserError(
        "{} is a link where this tool writes its output: it would write through it; remove the "
        "link or choose another {}".format(path, flag)
    )


@contextlib.contextmanager
def open_output(path, flag):
    """A text file (line-buffered, UTF-8) for ``path``, all or nothing: a fresh temporary file
    beside it (``mkstemp``: created exclusively, never through a link), moved over ``path``
    when the block ends; a failure removes it and leaves ``path`` as it was, and a full disk
    is one line. A link at ``path`` is refused."""
    if os.path.islink(path):
        _refuse_link(path, flag)
    existed = os.path.lexists(path)
    fd, tmp = tempfile.mkstemp(prefix=".{}.".format(os.path.basename(path)), suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # what open() gives (mkstemp: 0600)
        with os.fdopen(fd, "w", buffering=1, encoding="utf-8") as h:
            yield h
            h.flush()
            os.fsync(h.fileno())
        if os.path.islink(path):  # planted while it was written
            _refuse_link(path, flag)
        os.replace(tmp, path)
    except OSError as e:
        if not disk_full(e):
            raise
        raise UserError("no space left on the device while writing {}: free some space or choose another {} ({} is "
                        "{})".format(path, flag, path, "unchanged" if existed else "not made")) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


@contextlib.contextmanager
def preprocess_all_or_nothing(destdir):
    """fairseq-preprocess's run in ``destdir``, all or nothing: a run that fails removes the
    outputs it made there (PREPROCESS_OUTPUT names that were not there before; the folder
    too, if it made it and it is left empty), so the same command runs again; a full disk is
    one line."""
    existed = os.path.isdir(destdir)
    before = set(os.listdir(destdir)) if existed else set()
    try:
        yield
    except BaseException as e:
        made = sorted(set(os.listdir(destdir)) - before) if os.path.isdir(destdir) else []
        for name in made:
            path = os.path.join(destdir, name)
            if PREPROCESS_OUTPUT.match(name) and (os.path.isfile(path) or os.path.islink(path)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        if not existed:
            with contextlib.suppress(OSError):
                os.rmdir(destdir)  # only if empty
        if disk_full(e):
            raise UserError("no space left on the device while writing into --destdir {}: free some space or choose "
                            "another --destdir (what this run wrote there is removed)".format(destdir)) from None
        raise
