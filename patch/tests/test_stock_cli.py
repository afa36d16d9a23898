"""Stock fairseq 0.12.2, patched, with no plugin: fairseq-preprocess, fairseq-train (a stock
``transformer``), a resume from its checkpoint, fairseq-generate and fairseq-score on a small
slice of real WMT news text (tests/data/README.md); a mistake and a hostile checkpoint get one
line, no traceback. The commands run as a user runs them: the environment's console scripts."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fairseq.checkpoint_utils import load_checkpoint_to_cpu

DATA = Path(__file__).resolve().parent / "data" / "wmt_news"
BIN = Path(sys.executable).parent  # the console scripts of the environment running the tests
TINY = ["--arch", "transformer", "--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "32",
        "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
        "--encoder-attention-heads", "2", "--decoder-attention-heads", "2"]
TRAIN = ["--cpu", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "2000", "--seed", "1",
         "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "1", "--num-workers", "0"]


def run(*cmd, check=True):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([str(BIN / cmd[0]), *map(str, cmd[1:])], capture_output=True, text=True, env=env,
                          timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd[0]} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc


def one_line_error(proc, prog):
    """Exit status non-zero, and stderr ends in one line '<prog>: error: ...' with no traceback."""
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{prog}: error: "), proc.stderr[-3000:]
    return last


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A binarized slice and a stock transformer trained on it for 4 updates."""
    root = tmp_path_factory.mktemp("stock")
    data = root / "bin"
    run("fairseq-preprocess", "--source-lang", "en", "--target-lang", "de", "--trainpref", DATA / "train",
        "--validpref", DATA / "valid", "--testpref", DATA / "test", "--destdir", data, "--joined-dictionary",
        "--workers", "1")
    save = root / "ckpt"
    proc = run("fairseq-train", data, *TINY, *TRAIN, "--max-update", "4", "--save-dir", save)
    return data, save, proc


def test_a_stock_transformer_trains_and_saves(trained):
    _, save, proc = trained
    assert re.search(r"num_updates 4\b", proc.stdout + proc.stderr), proc.stdout[-2000:]
    state = load_checkpoint_to_cpu(str(save / "checkpoint_last.pt"))
    assert state["cfg"].model.arch == "transformer"
    assert state["optimizer_history"][-1]["num_updates"] == 4


def test_training_resumes_from_its_checkpoint(trained, tmp_path):
    """torch >= 2.6 loads weights only: the patch's allow-list lets fairseq's own checkpoint in."""
    data, save, _ = trained
    resumed = tmp_path / "ckpt"
    resumed.mkdir()
    (resumed / "checkpoint_last.pt").write_bytes((save / "checkpoint_last.pt").read_bytes())
    proc = run("fairseq-train", data, *TINY, *TRAIN, "--max-update", "6", "--save-dir", resumed)
    log = proc.stdout + proc.stderr
    assert re.search(r"Loaded checkpoint \S+ \(epoch 1 @ 4 updates\)", log), log[-2000:]
    assert re.search(r"num_updates 6\b", log), log[-2000:]


def test_generate_translates_every_test_sentence_and_scores_them(trained):
    data, save, _ = trained
    proc = run("fairseq-generate", data, "--path", save / "checkpoint_last.pt", "--gen-subset", "test", "--beam", "2",
               "--max-len-b", "20", "--batch-size", "8", "--cpu")
    hyps = [l for l in proc.stdout.splitlines() if l.startswith("H-")]
    assert len(hyps) == sum(1 for _ in open(DATA / "test.en", encoding="utf-8"))
    assert re.search(r"BLEU4? = [0-9.]+", proc.stdout + proc.stderr), proc.stdout[-2000:]


def test_a_mistake_is_one_line(trained):
    """No batch size: fairseq 0.12.2 itself fails later with an assertion's traceback."""
    data, _, _ = trained
    proc = run("fairseq-train", data, *TINY, "--cpu", "--optimizer", "adam", "--lr", "1e-3", check=False)
    assert "batch" in one_line_error(proc, "fairseq-train")


class _RunsCode:
    """A pickled object whose loading would create a file (what an unsafe torch.load runs)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_checkpoint_that_runs_code_is_refused_and_does_not_run(trained, tmp_path):
    data, save, _ = trained
    state = load_checkpoint_to_cpu(str(save / "checkpoint_last.pt"))
    marker = tmp_path / "ran"
    state["extra_state"] = {"payload": _RunsCode(marker)}
    hostile = tmp_path / "hostile.pt"
    torch.save(state, hostile)
    proc = run("fairseq-generate", data, "--path", hostile, "--gen-subset", "test", "--cpu", check=False)
    one_line_error(proc, "fairseq-generate")
    assert not marker.exists()
