"""Multi-process training on CPU (torchrun + gloo): two processes reach the same losses and
parameters as one process with --update-freq 2, and resume."""

import re
import socket

import torch
from fairseq.checkpoint_utils import safe_torch_load

from .conftest import BIN, TINY, USER_DIR, run_cli


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def losses(output):
    return {int(u): float(l) for l, u in re.findall(r"train_inner \| .*? loss=([0-9.]+),.*?num_updates=(\d+)", output)}


def common(wmt_bin, save_dir, updates):
    return [wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
            "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1000", "--max-update", str(updates),
            "--dropout", "0", "--seed", "5", "--cpu", "--save-dir", save_dir, "--no-epoch-checkpoints",
            "--log-format", "simple", "--log-interval", "1", "--disable-validation"]


def two_processes(wmt_bin, save_dir, updates):
    return run_cli("torchrun", "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
                   BIN / "fairseq-train", *common(wmt_bin, save_dir, updates),
                   "--distributed-backend", "gloo", "--find-unused-parameters", timeout=900)


def one_process(wmt_bin, save_dir, updates):
    return run_cli("fairseq-train", *common(wmt_bin, save_dir, updates), "--update-freq", "2")


def assert_same_model(a, b):
    ma, mb = safe_torch_load(str(a / "checkpoint_last.pt"))["model"], safe_torch_load(str(b / "checkpoint_last.pt"))["model"]
    for k in ma:
        if not k.endswith("_float_tensor"):
            torch.testing.assert_close(ma[k], mb[k], atol=1e-4, rtol=1e-4, msg=k)


def test_two_processes_equal_one_process_with_update_freq_2_and_resume(wmt_bin, tmp_path):
    dist, single = tmp_path / "dist", tmp_path / "single"
    d = losses(two_processes(wmt_bin, dist, 4).stdout)
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
