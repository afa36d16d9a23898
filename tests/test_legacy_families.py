"""Checkpoints of each model family saved by an earlier commit (tests/legacy_checkpoints/families,
written by scripts/make_legacy_checkpoints.py; the commit is in families.json) load with today's
code, build the same parameters, and give the same log-probabilities for a validation batch as
the code that saved them: what a refactor must keep (issue 32)."""

import io
import json
import shutil
from pathlib import Path

import pytest
import torch

FAMILIES = Path(__file__).parent / "legacy_checkpoints" / "families"
MANIFEST = json.loads((FAMILIES / "families.json").read_text())


@pytest.mark.parametrize("family", sorted(MANIFEST))
def test_a_checkpoint_of_each_family_scores_as_it_did(family, tmp_path):
    assert_scores_as_it_did(family, FAMILIES / f"{family}.pt", tmp_path)


def test_a_config_pickled_by_omegaconf_2_0_loads_and_scores_as_it_did(tmp_path):
    """The transformer_lm family's checkpoint with its config stored as an omegaconf 2.0
    DictConfig (pickled under hydra-core 1.0.7 / omegaconf 2.0.6, fairseq 0.12.2's own pins;
    scripts/make_legacy_checkpoints.py stores plain dicts): on omegaconf 2.3 the weights-only
    loader reads it and it builds and scores as it did (compat/hydra13.py)."""
    from fairseq import checkpoint_utils
    from fairseq._define_runtime.checkpoint_loading import safe_torch_load  # what fairseq's loading calls
    from omegaconf import OmegaConf

    path = FAMILIES / "transformer_lm.omegaconf20.pt"
    stored = safe_torch_load(str(path))
    assert stored["omegaconf"] == "2.0.6" and OmegaConf.is_config(stored["cfg"])
    plain = torch.load(FAMILIES / "transformer_lm.pt", map_location="cpu", weights_only=False)["cfg"]
    assert OmegaConf.to_container(stored["cfg"]) == plain  # the family's settings
    assert_scores_as_it_did("transformer_lm", path, tmp_path)
    # resuming under DDP, rank 0 loads the checkpoint and sends the state to the others through
    # the same weights-only loader: the loaded config holds nothing it refuses (omegaconf 2.3
    # read 2.0's metadata as typing.Dict[Any, Any], which pickles as a call)
    state = checkpoint_utils.load_checkpoint_to_cpu(str(path))
    sent = io.BytesIO()
    torch.save(state, sent)
    sent.seek(0)
    assert OmegaConf.to_container(safe_torch_load(sent)["cfg"]) == plain


def assert_scores_as_it_did(family, path, tmp_path):
    from fairseq import checkpoint_utils

    kind = MANIFEST[family]["kind"]
    names = ["dict.txt"] if kind == "lm" else ["dict.en.txt", "dict.de.txt"]
    for name in names:  # the dictionaries the task reads from its data folder
        shutil.copyfile(FAMILIES / f"{kind}.dict.txt", tmp_path / name)
    overrides = (
        {"data": str(tmp_path)} if kind == "lm" else {"data": str(tmp_path), "source_lang": "en", "target_lang": "de"}
    )
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
