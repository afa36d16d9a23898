"""Checkpoints load through torch's weights-only unpickler with fairseq's allow-list."""

import os
import shutil

import numpy as np
import pytest
import torch
from fairseq.checkpoint_utils import CheckpointLoadError, load_checkpoint_to_cpu, safe_torch_load

from .conftest import USER_DIR, run_cli


class RunsCode:
    """Unpickling this runs a shell command (the attack a crafted checkpoint carries)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"echo pwned > {self.marker}",))


def crafted_checkpoint(trained, path, marker):
    state = safe_torch_load(str(trained / "checkpoint_last.pt"))
    state["extra_state"]["payload"] = RunsCode(marker)
    torch.save(state, path)


def test_checkpoints_written_by_fairseq_load_safely(trained):
    state = load_checkpoint_to_cpu(str(trained / "checkpoint_last.pt"))
    assert state["cfg"]["model"].arch == "define_transformer_tiny"
    assert torch.serialization.get_unsafe_globals_in_checkpoint(str(trained / "checkpoint_last.pt")) == ["argparse.Namespace"]


def test_a_checkpoint_that_would_run_code_is_refused(trained, tmp_path):
    marker = tmp_path / "pwned"
    bad = tmp_path / "bad.pt"
    crafted_checkpoint(trained, bad, marker)
    with pytest.raises(CheckpointLoadError, match="refusing to load .*posix.system"):
        load_checkpoint_to_cpu(str(bad))
    assert not marker.exists()
    # the CLIs too, and torch's escape hatch variable does not override it
    for cli in ("fairseq-generate", "fairseq-validate"):
        out = run_cli(cli, trained.parent / "bin", "--user-dir", USER_DIR, "--task", "translation",
                      "--path", bad, "--cpu", "--max-tokens", "2000", check=False,
                      env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
        assert out.returncode != 0 and not marker.exists()
        assert f"{cli}: error: refusing to load {bad}" in out.stdout
        assert "Traceback" not in out.stdout


def test_resume_refuses_a_crafted_checkpoint_last(wmt_bin, trained, tmp_path):
    from .conftest import TINY

    save = tmp_path / "ck"
    save.mkdir()
    marker = tmp_path / "pwned"
    crafted_checkpoint(trained, save / "checkpoint_last.pt", marker)
    before = (save / "checkpoint_last.pt").read_bytes()
    out = run_cli("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
                  "--share-all-embeddings", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500",
                  "--max-update", "14", "--save-dir", save, "--cpu", check=False)
    assert out.returncode != 0 and not marker.exists()
    assert "fairseq-train: error: refusing to load" in out.stdout
    assert (save / "checkpoint_last.pt").read_bytes() == before


def test_trusted_old_checkpoint_is_converted_once(trained, tmp_path):
    old = tmp_path / "old.pt"
    state = safe_torch_load(str(trained / "checkpoint_last.pt"))
    state["extra_state"]["best"] = np.float64(3.5)  # what older fairseq versions stored
    torch.save(state, old)
    with pytest.raises(CheckpointLoadError, match="fairseq-define-trust-checkpoint"):
        safe_torch_load(str(old))
    new = tmp_path / "converted.pt"
    run_cli("fairseq-define-trust-checkpoint", old, new)
    converted = safe_torch_load(str(new))
    assert converted["extra_state"]["best"] == 3.5
    for k, v in state["model"].items():
        assert torch.equal(converted["model"][k], v)
    again = run_cli("fairseq-define-trust-checkpoint", old, new, check=False)
    assert again.returncode == 2 and "exists" in again.stdout


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_corrupt_checkpoints_give_a_clear_error(trained, tmp_path, damage):
    path = tmp_path / "ck.pt"
    data = (trained / "checkpoint_last.pt").read_bytes()
    path.write_bytes({"truncate": data[: len(data) // 2], "garbage": os.urandom(4096), "empty": b""}[damage])
    with pytest.raises(CheckpointLoadError, match="cannot read .*truncated, corrupt or not a PyTorch checkpoint"):
        load_checkpoint_to_cpu(str(path))


def test_average_checkpoints_loads_safely(trained, tmp_path):
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    shutil.copy(trained / "checkpoint_last.pt", a)
    state = safe_torch_load(str(a))
    state["model"] = {k: v + 1 if v.is_floating_point() else v for k, v in state["model"].items()}
    torch.save(state, b)
    run_cli("fairseq-define-average-checkpoints", "--inputs", a, b, "--output", tmp_path / "avg.pt")
    avg = safe_torch_load(str(tmp_path / "avg.pt"))["model"]
    orig = safe_torch_load(str(a))["model"]
    k = next(k for k, v in orig.items() if v.is_floating_point())
    torch.testing.assert_close(avg[k], orig[k] + 0.5)
    marker = tmp_path / "pwned"
    crafted_checkpoint(trained, tmp_path / "bad.pt", marker)
    out = run_cli("fairseq-define-average-checkpoints", "--inputs", a, tmp_path / "bad.pt", "--output", tmp_path / "avg2.pt", check=False)
    assert out.returncode == 2 and "refusing to load" in out.stdout and not marker.exists()
    assert not (tmp_path / "avg2.pt").exists()
