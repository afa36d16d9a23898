"""fairseq-preprocess checks its input files (exist, UTF-8, line-aligned) and its --destdir
(no dictionary to overwrite, no link where an output goes) before anything is written.

fairseq-preprocess failed halfway on a missing or non-UTF-8 file, or binarized misaligned
source and target files without a word, leaving a half-written --destdir behind.
"""

import os

from fairseq import UserError

from .output_links import PREPROCESS_OUTPUT, check_no_links

__all__ = ["check_inputs"]


def check_inputs(args, _file_name, _dict_path):
    """Before anything is written: every input file exists, is UTF-8, and a source file has as
    many lines as its target file; --destdir holds no dictionary that would be overwritten,
    and no link where an output goes.
    ``_file_name`` and ``_dict_path`` are fairseq_cli/preprocess.py's own (PREFIX.LANG,
    DESTDIR/dict.LANG.txt)."""
    separate_tgt = not args.only_source and not args.joined_dictionary
    if not args.trainpref and (not args.srcdict or (separate_tgt and not args.tgtdict)):
        raise UserError(
            "no --trainpref to build the dictionary from: give --trainpref, or existing "
            "dictionaries with --srcdict{}".format(" and --tgtdict" if separate_tgt else "")
        )
    langs = [args.source_lang] + ([] if args.only_source else [args.target_lang])
    prefixes = [args.trainpref] if args.trainpref else []
    for pref in (args.validpref, args.testpref):
        prefixes += pref.split(",") if pref else []
    for prefix in prefixes:
        counts = {}
        for lang in langs:
            path = _file_name(prefix, lang)
            if not os.path.isfile(path):
                raise UserError(
                    "no such input file {}: check --trainpref/--validpref/--testpref and "
                    "--source-lang/--target-lang (files are PREFIX.LANG)".format(path)
                )
            lines = 0
            with open(path, "rb") as f:
                for lines, line in enumerate(f, 1):
                    try:
                        line.decode("utf-8")
                    except UnicodeDecodeError as e:
                        raise UserError(
                            "{} line {} is not UTF-8 ({}): convert the file to UTF-8 (e.g. "
                            "iconv -f latin1 -t utf-8) or remove the line".format(path, lines, e.reason)
                        ) from None
            counts[path] = lines
        if len(set(counts.values())) > 1:
            (src, n_src), (tgt, n_tgt) = counts.items()
            raise UserError(
                "{} has {} lines but {} has {}: source and target files must be line-aligned "
                "(one sentence pair per line); fix or re-extract them".format(src, n_src, tgt, n_tgt)
            )
    check_no_links(args.destdir, PREPROCESS_OUTPUT, "--destdir")
    dicts = [(args.source_lang, args.srcdict)]
    if not args.only_source:
        dicts.append((args.target_lang, args.tgtdict))
    for lang, given in dicts:
        dict_path = _dict_path(lang, args.destdir)
        if not given and os.path.exists(dict_path):
            raise UserError(
                "{} exists: --destdir already holds binarized data; choose a new --destdir, "
                "or reuse the dictionary with --srcdict/--tgtdict".format(dict_path)
            )
