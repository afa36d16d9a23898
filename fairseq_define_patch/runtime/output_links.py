"""fairseq's command-line tools never write through a link planted where their output goes.

fairseq-preprocess wrote its dictionaries, binarized splits and preprocess.log into --destdir
with plain open() calls, and fairseq-generate its generate-SPLIT.txt into --results-path:
a symbolic link planted at one of those names (dangling or not) had the tool write, or
truncate, the file it points to. fairseq-generate now opens its results with O_NOFOLLOW
(``open_output``); fairseq-preprocess refuses, before anything is written, a --destdir where a
name it writes is a link (``check_no_links``, called by preprocess_inputs.check_inputs).
fairseq's checkpoint writes are atomic and never follow a link (checkpoint_writes.py).
"""

import errno
import os
import re

from fairseq import UserError

__all__ = ["PREPROCESS_OUTPUT", "check_no_links", "open_output"]

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


def open_output(path, flag):
    """``open(path, "w", buffering=1, encoding="utf-8")`` that refuses a link at ``path``."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP or os.path.islink(path):
            raise UserError(
                "{} is a link where this tool writes its output: it would write through it; remove the "
                "link or choose another {}".format(path, flag)
            ) from None
        raise
    return os.fdopen(fd, "w", buffering=1, encoding="utf-8")
