"""fairseq-generate / fairseq-interactive: --beam below 1, a --lenpen that is not finite and an
unusable --input get one line.

--beam 0 failed mid-generation with a reshape RuntimeError; --lenpen nan or inf (the hub's
lenpen too) scored every hypothesis nan or -0.0 and exited 0; an --input that is a folder, a
missing file or text that is not UTF-8 failed with a traceback from fileinput, and a pipe
(--input /dev/stdin, a named pipe) was refused as "not an existing file"; standard input that
is not UTF-8 was translated as <unk> without a word (sys.stdin's surrogateescape).
fairseq/sequence_generator.py calls ``check_beam_size`` and ``check_len_penalty`` (every
generator, the hub's too); fairseq_cli/interactive.py reads its input through
``read_input_batches``.
"""

import fileinput
import math
import os

from fairseq import UserError

__all__ = ["check_beam_size", "check_len_penalty", "read_input_batches"]


def check_beam_size(beam_size):
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
        raise UserError("--beam {} must be at least 1 (1 is greedy search)".format(beam_size))


def check_len_penalty(len_penalty):
    """--lenpen (the hub's ``lenpen``) divides each finished hypothesis's score by its length to
    that power: nan or inf scored every hypothesis nan (or -0.0) and picked among them blindly."""
    if isinstance(len_penalty, bool) or not isinstance(len_penalty, (int, float)) or not math.isfinite(len_penalty):
        raise UserError(
            "--lenpen {!r} is not a finite number: give the power of the length each score is divided by "
            "(1, the default, the average per token; 0 the sum; below 1 favours shorter hypotheses, above 1 "
            "longer)".format(len_penalty))


def read_input_batches(input, buffer_size):
    """fairseq-interactive's buffered_read, checked: yields the full batches of stripped lines
    of ``input`` (a file, a pipe such as /dev/stdin, or - for standard input) and returns the
    last, partial one."""
    buffer = []
    if input != "-" and (os.path.isdir(input) or not os.path.exists(input)):  # a pipe (/dev/stdin) reads
        raise UserError(
            "--input {} is {}: give a text file, or - for standard input".format(
                input, "a folder" if os.path.isdir(input) else "not an existing file"
            )
        )
    with fileinput.input(files=[input], openhook=fileinput.hook_encoded("utf-8")) as h:
        try:
            for src_str in h:
                if input == "-":
                    _check_decoded(src_str, h.filelineno())
                buffer.append(src_str.strip())
                if len(buffer) >= buffer_size:
                    yield buffer
                    buffer = []
        except UnicodeDecodeError as e:
            raise UserError(
                "--input {} is not UTF-8 text ({}): convert it to UTF-8 (e.g. iconv -f "
                "latin1 -t utf-8)".format(input, e.reason)
            ) from None
    return buffer


def _check_decoded(line, number):
    """Standard input is read through sys.stdin, whose errors are "surrogateescape" under a C
    or C.UTF-8 locale: bytes that are not UTF-8 arrived as lone surrogates, became <unk> and
    were translated without a word. Such a line is refused, as a file's is."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as e:
        raise UserError(
            "standard input line {} is not UTF-8 text (byte 0x{:02x}): convert it to UTF-8 (e.g. iconv -f "
            "latin1 -t utf-8)".format(number, ord(line[e.start]) & 0xFF)
        ) from None
