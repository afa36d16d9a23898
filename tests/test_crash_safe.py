"""SIGKILL fairseq-train mid-epoch and while it writes checkpoints, then resume: no good
checkpoint is lost and, on CPU with a fixed seed, the resumed run ends with exactly the
parameters of an uninterrupted run."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fairseq.checkpoint_utils import safe_torch_load

from .helpers import BIN, TINY, USER_DIR, binarize_ptb_slice, run_in_process

pytestmark = pytest.mark.cli  # starts fairseq's command-line tools or a recipe

HERE = Path(__file__).parent


def nmt_args(wmt_bin, save_dir):
    return [wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
            "--share-all-embeddings", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500",
            "--max-update", "12", "--save-interval-updates", "4", "--save-dir", save_dir, "--cpu",
            "--seed", "7", "--log-format", "simple"]


@pytest.fixture(scope="module")
def lm_bin(tmp_path_factory):
    d = tmp_path_factory.mktemp("ptb")
    binarize_ptb_slice(d, 1500, 100)
    return d


def lm_args(lm_bin, save_dir):
    # our Transformer-XL on 8 contiguous streams: the kill and the saves at updates 4 and 8
    # fall mid-epoch, so the resumed run needs the memory saved with the checkpoint
    return [lm_bin / "bin", "--user-dir", USER_DIR, "--task", "contiguous_lm", "--arch", "define_txl_tiny",
            "--criterion", "projected_adaptive_loss", "--dropout", "0.1", "--attention-dropout", "0.1",
            "--optimizer", "adam", "--lr", "1e-3", "--tokens-per-sample", "64", "--max-tokens", "512",
            "--max-update", "12", "--save-interval-updates", "4", "--save-dir", save_dir, "--cpu", "--seed", "7",
            "--log-format", "simple"]


def killed_run(args, fault):
    proc = subprocess.run([sys.executable, str(HERE / "fault_injection.py"), "fairseq-train", *map(str, args)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
                          env={**os.environ, "FAULT": fault, "PATH": f"{BIN}:{os.environ['PATH']}"})
    assert proc.returncode == -9, proc.stdout[-3000:]  # killed, as planned


def final_params(save_dir):
    state = safe_torch_load(str(save_dir / "checkpoint_last.pt"))
    assert state["optimizer_history"][-1]["num_updates"] == 12
    return state["model"]


@pytest.fixture(scope="module")
def references(wmt_bin, lm_bin, tmp_path_factory):
    out = {}
    for name, make in (("nmt", lambda d: nmt_args(wmt_bin, d)), ("lm", lambda d: lm_args(lm_bin, d))):
        d = tmp_path_factory.mktemp(f"ref_{name}")
        run_in_process("fairseq-train", *make(d))  # the killed runs are processes; the rest need none
        out[name] = final_params(d)
    return out


@pytest.mark.parametrize("model", ["nmt", "lm"])
@pytest.mark.parametrize("fault", ["update:6", "save:2", "copy:2"])
def test_resume_after_sigkill_matches_an_uninterrupted_run(model, fault, wmt_bin, lm_bin, references, tmp_path):
    make = (lambda d: nmt_args(wmt_bin, d)) if model == "nmt" else (lambda d: lm_args(lm_bin, d))
    save = tmp_path / "ck"
    killed_run(make(save), fault)
    # the last good checkpoint survived the kill intact (update 4), whatever was being written
    last = safe_torch_load(str(save / "checkpoint_last.pt"))
    # update:6 strikes between the saves at 4 and 8; save:2 and copy:2 while writing the
    # second checkpoint (update 8; no epoch ends within 12 updates): update 4's remains
    assert last["optimizer_history"][-1]["num_updates"] == 4
    if fault != "update:6":
        assert any(p.name.endswith(".tmp") for p in save.iterdir())  # the half-written file
    run_in_process("fairseq-train", *make(save))
    resumed, reference = final_params(save), references[model]
    assert resumed.keys() == reference.keys()
    for k in reference:
        if k.endswith("._float_tensor"):
            continue  # fairseq's uninitialised buffer
        assert torch.equal(resumed[k], reference[k]), k
