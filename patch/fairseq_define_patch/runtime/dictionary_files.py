"""A damaged dictionary file (dict.*.txt) gets one line naming the file, the line and the fix.

fairseq's Dictionary.add_from_file failed with a traceback on every kind of damage: a line
without a count ("Incorrect dictionary format" inside a ValueError that fairseq then
re-raised), a token listed twice (a RuntimeError about Camembert), a file that is not UTF-8
(a bare Exception). fairseq/data/dictionary.py calls ``check_dictionary_file`` before it
reads the file, with the same reading rules (fairseq's own: the last space separates the
count; a ``#fairseq:overwrite`` flag allows a repeated token).
"""

from fairseq import UserError

__all__ = ["check_dictionary_file"]


def check_dictionary_file(dictionary, path):
    """Every line of the dictionary file ``path`` as ``dictionary.add_from_file`` reads it:
    UTF-8, ``<token> <count> [#fairseq:overwrite]``, no token twice (the special symbols the
    dictionary holds already count) unless the later line overwrites it."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            "{} is not UTF-8 text (line {}: {}): a dictionary is a UTF-8 file of '<token> <count>' "
            "lines; build it again with fairseq-preprocess".format(path, raw[:e.start].count(b"\n") + 1, e.reason)
        ) from None
    with open(path, encoding="utf-8") as f:  # the lines as fairseq reads them (universal newlines)
        lines = f.readlines()
    seen = {}
    start = dictionary._load_meta(lines)
    for number, line in enumerate(lines[start:], start + 1):
        where = "{} line {}".format(path, number)
        parts = line.rstrip().rsplit(" ", 1)
        overwrite = len(parts) == 2 and parts[1] == "#fairseq:overwrite"
        if overwrite:
            parts = parts[0].rsplit(" ", 1)
        if len(parts) < 2 or not parts[0]:
            raise UserError(
                "{}: {!r} is not '<token> <count>': every line of a dictionary holds a token, a space and "
                "its count; fix the line or build the dictionary again with fairseq-preprocess".format(
                    where, line.rstrip("\n"))
            )
        word, count = parts
        try:
            int(count)
        except ValueError:
            raise UserError(
                "{}: the count {!r} of {!r} is not an integer: every line of a dictionary holds a token, a "
                "space and its count; fix the line or build the dictionary again with fairseq-preprocess".format(
                    where, count, word)
            ) from None
        if not overwrite and (word in seen or word in dictionary):
            raise UserError(
                "{}: {!r} is listed {}: remove the line, or end it with ' #fairseq:overwrite' to replace "
                "the earlier entry".format(
                    where, word, "already on line {}".format(seen[word]) if word in seen
                    else "already (a symbol the dictionary adds itself)")
            )
        seen[word] = number
