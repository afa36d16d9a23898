"""fairseq-define-average-checkpoints on inputs that have no mean (another form, compressed or
cached tables, integers that differ) or damaged weights: one line, nothing written."""

import pytest
import torch

AVERAGING = [  # (name, how the second checkpoint differs, expected line)
    ("other_form", lambda s: s["cfg"]["model"].update(define_output_layer="tied_map"),
     "--define-output-layer untied in one, tied_map in the other"),
    ("compressed", lambda s: s["model"].update({"emb.codes": torch.zeros(4, 2, dtype=torch.uint8)}), "is compressed"),
    ("cached", lambda s: s["cfg"]["model"].update(define_cached_table=True), "holds cached DeFINE tables"),
    ("integers", lambda s: s["model"].update(steps=torch.tensor([7])), "integer tensor steps"),
]


def averaging_inputs(tmp_path, change=None):
    paths = []
    for i in range(2):
        state = {"model": {"w": torch.full((3,), float(i)), "steps": torch.tensor([5])},
                 "cfg": {"model": {"_name": "define_transformer", "define_output_layer": "untied", "dropout": 0.1 * i}}}
        if i and change is not None:
            change(state)
        paths.append(str(tmp_path / f"c{i}.pt"))
        torch.save(state, paths[-1])
    return paths


@pytest.mark.parametrize("change,expected", [c[1:] for c in AVERAGING], ids=[c[0] for c in AVERAGING])
def test_averaging_refuses_what_has_no_mean(tmp_path, capsys, change, expected):
    from fairseq_define.tools import average_checkpoints

    paths = averaging_inputs(tmp_path, change)
    assert average_checkpoints.main(["--inputs", *paths, "--output", str(tmp_path / "avg.pt")]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1, err
    assert not (tmp_path / "avg.pt").exists()


def test_averaging_keeps_equal_integers_and_ignores_dropout(tmp_path):
    from fairseq_define.tools import average_checkpoints

    state = average_checkpoints.average(averaging_inputs(tmp_path))
    assert torch.equal(state["model"]["steps"], torch.tensor([5]))
    torch.testing.assert_close(state["model"]["w"], torch.full((3,), 0.5))


@pytest.mark.parametrize("change,expected", [
    (lambda m: m.update(w=torch.tensor([0.0, float("nan"), 1.0])), "c1.pt is damaged: its weight w holds 1 NaN value"),
    (lambda m: m.update(w=torch.zeros(4)), "c1.pt's weight w is [4], but [3] in"),
    (lambda m: m.pop("w"), "c1.pt lacks w, which"),
], ids=["nan", "shape", "missing"])
def test_averaging_refuses_damaged_weights(tmp_path, capsys, change, expected):
    from fairseq_define.tools import average_checkpoints

    paths = averaging_inputs(tmp_path, lambda s: change(s["model"]))
    assert average_checkpoints.main(["--inputs", *paths, "--output", str(tmp_path / "avg.pt")]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1, err
    assert not (tmp_path / "avg.pt").exists()
