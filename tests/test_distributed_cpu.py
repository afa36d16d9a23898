"""Multi-process training on CPU (torchrun + gloo, fairseq's default pytorch_ddp, no
--find-unused-parameters): two processes reach the same losses and parameters as one process
with --update-freq 2, and resume; fairseq's own transformer trains the same way."""

import re

import pytest

from .helpers import (
    BIN,
    TINY,
    TINY_STOCK_TRANSFORMER,
    USER_DIR,
    assert_same_model,
    free_port,
    losses,
    run_cli,
    run_in_process,
)

pytestmark = pytest.mark.cli  # starts fairseq's command-line tools or a recipe


def common(wmt_bin, save_dir, updates):
    return [wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
            "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1000", "--max-update", str(updates),
            "--dropout", "0", "--seed", "5", "--cpu", "--save-dir", save_dir, "--no-epoch-checkpoints",
            "--log-format", "simple", "--log-interval", "1", "--disable-validation"]


def torchrun(*args):
    return run_cli("torchrun", "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
                   BIN / "fairseq-train", *args, "--distributed-backend", "gloo", timeout=900)


def two_processes(wmt_bin, save_dir, updates, *extra):
    return torchrun(*common(wmt_bin, save_dir, updates), *extra)


def one_process(wmt_bin, save_dir, updates, *extra):
    # the reference arm needs no process of its own: fairseq-train's start is tested elsewhere
    return run_in_process("fairseq-train", *common(wmt_bin, save_dir, updates), *extra, "--update-freq", "2")


def test_two_processes_equal_one_process_with_update_freq_2_and_resume(wmt_bin, tmp_path):
    dist, single = tmp_path / "dist", tmp_path / "single"
    out = two_processes(wmt_bin, dist, 4).stdout
    # fairseq's count is the model's true size: the paper's distribution, nothing besides
    logged = int(re.search(r"num\. shared model params: ([0-9,]+)", out).group(1).replace(",", ""))
    assert abs(logged / 1e6 - float(re.search(r"paper's distribution\): .*total ([0-9.]+)M", out).group(1))) < 0.006
    d = losses(out)
    s = losses(one_process(wmt_bin, single, 4).stdout)
    assert sorted(d) == sorted(s) == [1, 2, 3, 4]
    for u in d:
        assert abs(d[u] - s[u]) <= 1e-4, (u, d[u], s[u])
    assert_same_model(dist, single)

    # resume both runs for two more updates
    out = two_processes(wmt_bin, dist, 6).stdout
    assert "Loaded checkpoint" in out
    d2 = losses(out)
    s2 = losses(one_process(wmt_bin, single, 6).stdout)
    assert sorted(d2) == sorted(s2) == [5, 6]
    for u in d2:
        assert abs(d2[u] - s2[u]) <= 1e-4, (u, d2[u], s2[u])
    assert_same_model(dist, single)


def test_stock_transformer_trains_on_two_processes(wmt_bin, tmp_path):
    """Every parameter of fairseq's own transformer is used in a training step, so DDP needs
    no --find-unused-parameters (fairseq 0.12.2's encoder layers held untrained copies)."""
    out = torchrun(
        wmt_bin / "bin",
        *TINY_STOCK_TRANSFORMER,
        "--optimizer",
        "adam",
        "--lr",
        "1e-3",
        "--max-tokens",
        "1000",
        "--max-update",
        "3",
        "--cpu",
        "--save-dir",
        tmp_path,
        "--no-save",
        "--disable-validation",
        "--log-format",
        "simple",
        "--log-interval",
        "1",
    ).stdout
    assert sorted(losses(out)) == [1, 2, 3]


@pytest.mark.parametrize("form", [["--define-output-layer", "untied"],
                                  ["--define-output-layer", "tied_unit", "--share-all-embeddings"]])
def test_output_layer_forms_train_on_two_processes_as_on_one(wmt_bin, tmp_path, form):
    """The untied output layer (a table per side) and the output tied to the unit's outputs
    (the unit runs twice a step) under DDP, without --find-unused-parameters."""
    dist, single = tmp_path / "dist", tmp_path / "single"
    d = losses(two_processes(wmt_bin, dist, 3, *form).stdout)
    s = losses(one_process(wmt_bin, single, 3, *form).stdout)
    assert sorted(d) == sorted(s) == [1, 2, 3]
    for u in d:
        assert abs(d[u] - s[u]) <= 1e-4, (u, d[u], s[u])
    assert_same_model(dist, single)
