"""fairseq-define-average-checkpoints on a checkpoint folder (in process): the last N
checkpoints by number (not by name), the others left out, and the mean of their weights."""

import pytest
import torch
from fairseq.checkpoint_utils import safe_torch_load

from fairseq_define.tools.average_checkpoints import main

# file -> the value of every weight in it; numbers chosen so that sorting by name would pick
# other files (checkpoint_1_5 > checkpoint_1_20 and checkpoint3 > checkpoint10 as strings)
FILES = {"checkpoint_1_5.pt": 1.0, "checkpoint_1_20.pt": 2.0, "checkpoint_2_100.pt": 4.0, "checkpoint_1_3.pt": 8.0,
         "checkpoint3.pt": 16.0, "checkpoint10.pt": 32.0, "checkpoint2.pt": 64.0,
         "checkpoint_last.pt": 128.0, "checkpoint_best.pt": 256.0}


@pytest.fixture
def folder(tmp_path):
    for name, value in FILES.items():
        torch.save({"model": {"w": torch.full((2, 3), value)}}, tmp_path / name)
    return tmp_path


@pytest.mark.parametrize("flag,n,chosen", [
    ("--num-update-checkpoints", 2, ["checkpoint_2_100.pt", "checkpoint_1_20.pt"]),
    ("--num-update-checkpoints", 3, ["checkpoint_2_100.pt", "checkpoint_1_20.pt", "checkpoint_1_5.pt"]),
    ("--num-epoch-checkpoints", 2, ["checkpoint10.pt", "checkpoint3.pt"]),
])
def test_a_folder_averages_its_last_n_checkpoints(folder, tmp_path_factory, flag, n, chosen, capsys):
    out = tmp_path_factory.mktemp("avg") / "avg.pt"
    assert main(["--inputs", str(folder), flag, str(n), "--output", str(out)]) == 0
    assert sorted(capsys.readouterr().out.split(": ", 1)[1].strip().split(", ")) == \
        sorted(str(folder / c) for c in chosen)
    model = safe_torch_load(str(out))["model"]
    mean = sum(FILES[c] for c in chosen) / n  # the sum of distinct powers of two names the files
    torch.testing.assert_close(model["w"], torch.full((2, 3), mean))
