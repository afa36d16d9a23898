"""Resuming the DeFINE language models in the middle of an epoch, through fairseq-train on
a slice of PTB: a run stopped at a mid-epoch checkpoint (``--save-interval-updates``,
``--max-update``) and resumed ends with exactly the parameters and optimizer state of an
uninterrupted run, dropout on. The state carried into the next segment (Transformer-XL
memory, LSTM hidden states) is saved with the data iterator's position; NT-ASGD has switched
to averaging before the stop. Validation between training steps leaves training unchanged."""

import pytest
import torch
from fairseq.checkpoint_utils import safe_torch_load

from fairseq_define.param_report import FASTPATH_COPIES

from .conftest import USER_DIR, head, run_cli

# 96 lines of PTB: 2,039 tokens, 4 streams of 26 segments of 20 tokens per epoch
K, N = 32, 40  # the stop (epoch 2, segment 6) and the end
COMMON = ["--user-dir", USER_DIR, "--task", "contiguous_lm", "--tokens-per-sample", "20",
          "--batch-size", "4", "--cpu", "--seed", "5", "--log-format", "simple", "--no-epoch-checkpoints"]
TXL = ["--arch", "define_txl_tiny", "--define-map-dim", "16", "--criterion", "projected_adaptive_loss",
       "--dropout", "0.2", "--attention-dropout", "0.1", "--define-transform", "define",
       "--optimizer", "adam", "--lr", "2e-3"]
LSTM_MODEL = ["--arch", "define_lstm_tiny", "--criterion", "awd_lm_loss", "--clip-norm", "0.25",
              "--dropout", "0.2", "--dropout-hidden", "0.1", "--dropout-input", "0.2",
              "--dropout-embedding", "0.05", "--weight-drop", "0.2", "--define-transform", "define"]
NT_ASGD = ["--optimizer", "nt_asgd", "--lr-scheduler", "nt_asgd", "--nonmono", "0", "--lr", "5"]
MODELS = {"transformer_xl": TXL, "lstm": LSTM_MODEL + NT_ASGD}


@pytest.fixture(scope="module")
def ptb_bin(tmp_path_factory, shared_data):
    d = tmp_path_factory.mktemp("ptb_resume")
    head(shared_data / "ptb" / "ptb.train.txt", d / "train.txt", 0, 96)
    head(shared_data / "ptb" / "ptb.valid.txt", d / "valid.txt", 0, 30)
    run_cli("fairseq-preprocess", "--only-source", "--trainpref", d / "train.txt", "--validpref", d / "valid.txt",
            "--destdir", d / "bin", "--workers", "1")
    return d / "bin"


def train(ptb_bin, model, save_dir, *extra):
    return run_cli("fairseq-train", ptb_bin, *COMMON, *MODELS[model], "--save-dir", save_dir, *extra).stdout


def assert_same_training_state(got, want):
    """Every parameter and every optimizer tensor bit for bit."""
    assert got["optimizer_history"][-1]["num_updates"] == want["optimizer_history"][-1]["num_updates"]
    assert got["model"].keys() == want["model"].keys()
    for k in want["model"]:
        if k.endswith("._float_tensor") or k.rsplit(".", 1)[-1] in FASTPATH_COPIES:
            continue  # fairseq's uninitialised buffer; fast-path copies filled only on load
        assert torch.equal(got["model"][k], want["model"][k]), k
    got_opt, want_opt = got["last_optimizer_state"], want["last_optimizer_state"]
    assert got_opt["param_groups"] == want_opt["param_groups"]
    assert got_opt["state"].keys() == want_opt["state"].keys()
    for i, state in want_opt["state"].items():
        for name, value in state.items():
            assert torch.equal(torch.as_tensor(got_opt["state"][i][name]), torch.as_tensor(value)), (i, name)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_mid_epoch_resume_matches_an_uninterrupted_run(model, ptb_bin, tmp_path):
    saves = ["--save-interval-updates", str(K)]
    train(ptb_bin, model, tmp_path / "straight", *saves, "--max-update", str(N))
    train(ptb_bin, model, tmp_path / "split", *saves, "--max-update", str(K))
    stopped = safe_torch_load(str(tmp_path / "split" / "checkpoint_last.pt"))
    position = stopped["extra_state"]["train_iterator"]
    assert (position["epoch"], position["iterations_in_epoch"]) == (2, K - 26)  # mid-epoch 2
    assert position["stream_state"]["segment"] == K - 26
    if model == "lstm":
        groups = stopped["last_optimizer_state"]["param_groups"]
        assert groups[0]["averaging"] and groups[0]["averaged_steps"] == K - 26  # NT-ASGD switched
    out = train(ptb_bin, model, tmp_path / "split", *saves, "--max-update", str(N))
    assert "Loaded checkpoint" in out and "continues its 4 streams at segment 6" in out
    assert_same_training_state(safe_torch_load(str(tmp_path / "split" / "checkpoint_last.pt")),
                               safe_torch_load(str(tmp_path / "straight" / "checkpoint_last.pt")))


@pytest.mark.parametrize("model", sorted(MODELS))
def test_validation_between_updates_leaves_training_unchanged(model, ptb_bin, tmp_path):
    """Validation runs its own stream: the training streams' state is the same after it
    (NT-ASGD's swap to the averaged weights is undone before the next step)."""
    args = ["--max-update", "30", "--save-interval-updates", "30"]
    train(ptb_bin, model, tmp_path / "often", *args, "--validate-interval-updates", "3")
    train(ptb_bin, model, tmp_path / "rarely", *args)
    often = safe_torch_load(str(tmp_path / "often" / "checkpoint_last.pt"))
    rarely = safe_torch_load(str(tmp_path / "rarely" / "checkpoint_last.pt"))
    assert_same_training_state(often, rarely)
