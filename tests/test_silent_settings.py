"""Settings that were accepted and ignored, or gave a wrong result with exit 0 (issue 60,
"Silent"): each is honoured or refused in one line naming the problem and the fix, through the
real command-line tools on the shared tiny checkpoints (docs/errors.md)."""

import pytest

from .helpers import USER_DIR, assert_user_error, run_cli


def _generate(wmt_bin, trained, *flags):
    return ("fairseq-generate", wmt_bin / "bin", "--user-dir", USER_DIR, "--path", trained / "checkpoint_last.pt",
            "-s", "en", "-t", "de", "--beam", "2", "--max-len-b", "20", "--cpu", *flags)


def _interactive(wmt_bin, trained, *flags):
    return ("fairseq-interactive", wmt_bin / "bin", "--user-dir", USER_DIR, "--path", trained / "checkpoint_last.pt",
            "-s", "en", "-t", "de", "--beam", "2", "--max-len-b", "20", "--cpu", *flags)


# fairseq-generate scored one shard of the test set as the whole and exited 0; --num-shards and
# --shard-id were ignored; interactive runs one process too
@pytest.mark.cli
@pytest.mark.parametrize("tool,flags,expected", [
    ("generate", ["--distributed-world-size", "2"], "--distributed-world-size 2 splits the test set"),
    ("generate", ["--distributed-world-size", "2", "--distributed-rank", "1"], "--distributed-world-size 2 splits"),
    ("generate", ["--distributed-rank", "1"], "--distributed-rank 1 splits the test set"),
    ("generate", ["--num-shards", "2", "--shard-id", "1"], "--num-shards 2 splits the test set"),
    ("generate", ["--shard-id", "1"], "drop --shard-id"),
    ("interactive", ["--distributed-world-size", "2"], "fairseq-interactive translates all of it in one process"),
    ("interactive", ["--num-shards", "2"], "drop --num-shards"),
])
def test_generation_runs_one_process_over_the_whole_input(wmt_bin, trained, tool, flags, expected):
    command = (_generate if tool == "generate" else _interactive)(wmt_bin, trained, *flags)
    proc = run_cli(*command, check=False, timeout=300)
    assert_user_error(proc, f"fairseq-{tool}", expected)
