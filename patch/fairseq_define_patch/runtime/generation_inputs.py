"""fairseq-generate / fairseq-interactive: the generation settings, the seed and an unusable
--input get one line.

--beam 0 failed mid-generation with a reshape RuntimeError; --nbest 0 in BLEU's
ZeroDivisionError after the whole test set; --unkpen nan, --max-len-a nan, --temperature 0, a
--min-len above the longest output, --diverse-beam-groups that do not divide --beam and
--sampling without --nbest equal to --beam in an assertion or a ValueError of fairseq's; --lenpen
nan or inf (the hub's lenpen too) scored every hypothesis nan or -0.0 and exited 0; a
negative --sampling-topk/-topp turned sampling's limit off without a word; --retain-iter-history
and --print-step (iterative refinement's) in a KeyError after the first batch; the hub's
``beam='2'`` was told "must be at least 1". Every generation number has a kind and a range here
(_GENERATION_RANGES), in one table that the task's ``build_generator`` checks (fairseq-generate,
-interactive and the hub alike: fairseq/tasks/fairseq_task.py calls ``check_generation_settings``)
and the two command-line tools check again before a model is loaded, with their own settings
(``check_generation_command``: the seed, interactive's --batch-size against --buffer-size). An
--input that is a folder, a missing file or text that is not UTF-8 failed with a traceback from
fileinput, and a pipe (--input /dev/stdin, a named pipe) was refused as "not an existing file"; standard input that
is not UTF-8 was translated as <unk> without a word (sys.stdin's surrogateescape).
fairseq/sequence_generator.py calls ``check_beam_size`` (every
generator, the hub's too); fairseq_cli/interactive.py reads its input through
``read_input_batches``.
"""

import fileinput
import math
import os

from fairseq import UserError, add_user_error_reader

from .training_settings import check_seed, check_world_size_positive, in_range

__all__ = ["check_beam_size", "check_generation_command", "check_generation_settings",
           "read_input_batches"]

# (option, kind, range, what the line says after "--flag VALUE"). Kinds: "int" (a whole number),
# "number" (finite); ranges as training_settings.in_range reads them, None for any value of the kind.
# -1 is fairseq's "off" for the sampling limits.
_GENERATION_RANGES = (
    ("beam", "int", ">=1", "must be at least 1 (1 is greedy search)"),
    ("nbest", "int", ">=1", "must be at least 1 (the hypotheses printed per sentence)"),
    ("max_len_a", "number", None, ""),
    ("max_len_b", "int", None, ""),
    ("min_len", "int", None, ""),
    ("unkpen", "number", None, ""),
    ("temperature", "number", ">0", "must be positive (1 samples from the model's own distribution)"),
    ("sampling_topk", "int", "-1|>=1", "must be at least 1 (the most likely tokens sampled from), or -1 for no limit"),
    ("sampling_topp", "number", "-1|(0,1]", "is not a probability mass: give a value in (0, 1], or -1 for no limit"),
    ("diverse_beam_groups", "int", None, ""),
    ("diverse_beam_strength", "number", None, ""),
    ("diversity_rate", "number", None, ""),
    ("prefix_size", "int", ">=0", "is negative: give a number of target tokens to force, or 0"),
    ("no_repeat_ngram_size", "int", ">=0", "is negative: give an n-gram size, or 0 for no blocking"),
    ("lm_weight", "number", None, ""),
    ("lenpen", "number", None, ""),  # nan or inf scored every hypothesis nan (or -0.0) and exited 0
)
_KIND_WORDS = {"int": "must be an integer", "number": "must be a number"}
# settings only iterative refinement (--task translation_lev) fills, which a beam search leaves unset
_ITERATIVE_ONLY = (("retain_iter_history", "keeps the steps"), ("print_step", "prints the number of steps"))


def _flag(name):
    return "--" + name.replace("_", "-")


def _get(cfg, name):
    return cfg.get(name, None) if hasattr(cfg, "get") else getattr(cfg, name, None)


def check_beam_size(beam_size):
    if isinstance(beam_size, bool) or not isinstance(beam_size, int):
        raise UserError("--beam {!r} must be an integer (1 or more; 1 is greedy search)".format(beam_size))
    if beam_size < 1:
        raise UserError("--beam {} must be at least 1 (1 is greedy search)".format(beam_size))


def check_generation_settings(cfg):
    """The generation group ``cfg`` (fairseq's GenerationConfig, a Namespace, or the hub's
    settings with its keyword arguments): each number of its kind, finite, in its range; the
    search strategies one at a time; the output length possible. FairseqTask.build_generator
    calls this, so the command lines and the hub share it."""
    for name, kind, rule, why in _GENERATION_RANGES:
        v = _get(cfg, name)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind == "int" and not isinstance(v, int)):
            raise UserError("{} {!r} {}, not {}".format(_flag(name), v, _KIND_WORDS[kind], type(v).__name__))
        if not math.isfinite(v):
            raise UserError("{} {} is not a finite number: give a finite value".format(_flag(name), v))
        if rule is not None and not in_range(rule, v):
            raise UserError("{} {} {}".format(_flag(name), v, why))
    sampling = bool(_get(cfg, "sampling"))
    for name in ("sampling_topk", "sampling_topp"):
        if not sampling and _get(cfg, name) not in (None, -1):
            raise UserError(
                "{} {} needs --sampling: add it, or leave {} out".format(_flag(name), _get(cfg, name), _flag(name))
            )
    groups, beam = _get(cfg, "diverse_beam_groups") or -1, _get(cfg, "beam")
    strategies = [flag for flag, on in (("--sampling", sampling), ("--diverse-beam-groups", groups > 0),
                                        ("--match-source-len", bool(_get(cfg, "match_source_len"))),
                                        ("--diversity-rate", (_get(cfg, "diversity_rate") or -1) > 0)) if on]
    if len(strategies) > 1:
        raise UserError("{} choose different searches: give one of them".format(" and ".join(strategies)))
    if groups > 0 and beam is not None and beam % groups:
        raise UserError("--diverse-beam-groups {} does not divide --beam {}: each group searches --beam / groups "
                        "hypotheses; give a --beam that is a multiple of it".format(groups, beam))
    a, b, low = _get(cfg, "max_len_a"), _get(cfg, "max_len_b"), _get(cfg, "min_len")
    if not a and b is not None and low is not None and b < max(low, 1) and not _get(cfg, "match_source_len"):
        raise UserError("--max-len-b {} is below {}: the longest output is --max-len-a * source length + "
                        "--max-len-b tokens; give a --max-len-b of at least {}".format(
                            b, "--min-len {}".format(low) if low >= 1 else "1", max(low, 1)))
    for name, what in _ITERATIVE_ONLY:
        if _get(cfg, name):
            raise UserError("{} {} of iterative refinement (--task translation_lev), which this model's beam search "
                            "does not make: leave it out".format(_flag(name), what))


def _length_assertion_line(exc):
    """SequenceGenerator's assertion that --min-len is not above the longest output of a batch
    (--max-len-a * source length + --max-len-b): TorchScript compiles that method, so the patch
    gives the assertion the words of the fix and the command-line hook prints them."""
    if isinstance(exc, AssertionError) and str(exc).startswith("--min-len ") and _LENGTH_WORDS in str(exc):
        return str(exc)
    return None


_LENGTH_WORDS = "is above the longest output for a source of"
add_user_error_reader(_length_assertion_line)


def check_generation_command(cfg, interactive=False):
    """fairseq-generate's and fairseq-interactive's settings (``cfg`` their whole config),
    checked before a model is loaded: the generation group (check_generation_settings),
    --sampling's --nbest, the seed, the world size, and interactive's --batch-size against --buffer-size."""
    generation = cfg.generation
    check_generation_settings(generation)
    if generation.sampling and generation.nbest != generation.beam:
        raise UserError("--sampling draws --beam samples and prints --nbest of them, which must be equal: give "
                        "--nbest {} (or --beam {})".format(generation.beam, generation.nbest))
    check_seed(cfg.common.seed)
    check_world_size_positive(cfg.distributed_training)  # generate shards the test set by it
    if interactive and cfg.dataset.batch_size and cfg.dataset.batch_size > cfg.interactive.buffer_size:
        raise UserError("--batch-size {} is larger than --buffer-size {}: interactive translates the lines it has "
                        "read, --buffer-size at a time; give --buffer-size {} (or a smaller --batch-size)".format(
                            cfg.dataset.batch_size, cfg.interactive.buffer_size, cfg.dataset.batch_size))


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
