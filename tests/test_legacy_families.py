"""Checkpoints of each model family saved by an earlier commit (tests/legacy_checkpoints/families,
written by scripts/make_legacy_checkpoints.py; the commit is in families.json) load with today's
code, build the same parameters, and give the same log-probabilities for a validation batch as
the code that saved them: what a refactor must keep (issue 32)."""

import json
import shutil
from pathlib import Path

import pytest
import torch

FAMILIES = Path(__file__).parent / "legacy_checkpoints" / "families"
MANIFEST = json.loads((FAMILIES / "families.json").read_text())


@pytest.mark.parametrize("family", sorted(MANIFEST))
def test_a_checkpoint_of_each_family_scores_as_it_did(family, tmp_path):
    from fairseq import checkpoint_utils

    kind = MANIFEST[family]["kind"]
    names = ["dict.txt"] if kind == "lm" else ["dict.en.txt", "dict.de.txt"]
    for name in names:  # the dictionaries the task reads from its data folder
        shutil.copyfile(FAMILIES / f"{kind}.dict.txt", tmp_path / name)
    path = FAMILIES / f"{family}.pt"
    overrides = {"data": str(tmp_path)} if kind == "lm" else {"data": str(tmp_path), "source_lang": "en", "target_lang": "de"}
    (model,), _cfg, _task = checkpoint_utils.load_model_ensemble_and_task([str(path)], arg_overrides=overrides)
    saved = torch.load(path, map_location="cpu", weights_only=False)["model"]
    built = model.state_dict()
    assert sorted(built) == sorted(saved)  # the same parameters and buffers, by name
    assert all(built[k].shape == saved[k].shape for k in saved)
    ref = torch.load(FAMILIES / f"{family}.ref.pt", weights_only=True)
    model.eval()
    with torch.no_grad():
        lp = model.get_normalized_probs(model(**ref["net_input"]), log_probs=True)  # [B, T, V]
    got = lp.gather(-1, ref["target"].unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(got, ref["target_log_probs"], atol=1e-5, rtol=1e-5)
    assert torch.equal(lp.argmax(-1), ref["argmax"])
