"""fairseq-generate and fairseq-interactive run in one process over the whole input: settings
that would split it are refused before a model loads.

fairseq-generate passed --distributed-world-size and --distributed-rank to its batch iterator as
the number of shards and this shard, without starting any other process: --distributed-world-size
2 translated and scored every other batch of the test set (24 or 16 of 40 sentences), exited 0,
and printed a BLEU that was not the test set's; a rank whose shard had no batch ended in a
ZeroDivisionError. --num-shards and --shard-id (read by fairseq-eval-lm) were accepted and
ignored. fairseq-interactive never splits its input, so under torchrun each process translated
all of it. Both tools call ``check_one_process`` first; fairseq-train, -validate and -eval-lm,
which do start their processes, keep fairseq's meaning (training_settings.check_world_size).
"""

from fairseq import UserError

__all__ = ["check_one_process"]

# (option, its group in the config, its name in the namespace, the value that splits nothing)
_SPLITTING = (
    ("--distributed-world-size", "distributed_training", "distributed_world_size", 1),
    ("--distributed-rank", "distributed_training", "distributed_rank", 0),
    ("--num-shards", "dataset", "num_shards", 1),
    ("--shard-id", "dataset", "shard_id", 0),
)


def check_one_process(cfg, tool):
    """``cfg``: the tool's config (or its argparse namespace, before fairseq converts it);
    ``tool``: fairseq-generate or fairseq-interactive."""
    for flag, group, name, whole in _SPLITTING:
        value = _read(cfg, group, name)
        if value is None or value == whole or (name == "distributed_world_size" and value < 1):
            continue  # a world size below 1 is out of range: training_settings.check_world_size_positive says so
        if tool == "fairseq-generate":
            raise UserError(
                "{flag} {value} splits the test set, but fairseq-generate runs one process and starts no "
                "other: it would translate and score one part as if it were all of --gen-subset; drop {flag} "
                "(to translate a part on purpose, binarize it as a subset of its own and give it to "
                "--gen-subset)".format(flag=flag, value=value))
        raise UserError(
            "{flag} {value} splits the input among processes, but {tool} translates all of it in one "
            "process and starts no other: drop {flag}".format(flag=flag, value=value, tool=tool))


def _read(cfg, group, name):
    if hasattr(cfg, group) and not isinstance(getattr(cfg, group), (int, str)):
        return getattr(getattr(cfg, group), name, None)
    return getattr(cfg, name, None)
