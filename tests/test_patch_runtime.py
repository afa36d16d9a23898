"""The patch's runtime modules (fairseq_define_patch/runtime/), imported directly: the code
that --apply copies into fairseq as fairseq/_define_runtime/, tested where it is written.
The end-to-end tests through the patched command-line tools are in the fixes' own test files
(test_hostile_files.py, test_bad_input.py, test_mistakes.py, ...)."""

import argparse
import io
import pickle
from argparse import Namespace

import pytest
import torch

import fairseq
from fairseq_define_patch.runtime import checkpoint_loading, checkpoint_misfit, config_literals


class _RunsCode:
    def __reduce__(self):
        import os

        return (os.system, ("true",))


def test_safe_load_reads_a_checkpoint_and_refuses_code(tmp_path):
    good = tmp_path / "good.pt"
    torch.save({"model": {"w": torch.ones(2)}, "args": Namespace(arch="x")}, good)
    state = checkpoint_loading.safe_torch_load(str(good))
    assert state["args"].arch == "x" and state["model"]["w"].tolist() == [1.0, 1.0]
    bad = tmp_path / "bad.pt"
    torch.save({"model": {}, "x": _RunsCode()}, bad)
    with pytest.raises(checkpoint_loading.CheckpointLoadError, match="holds code") as e:
        checkpoint_loading.safe_torch_load(str(bad))
    assert isinstance(e.value, fairseq.UserError) and "posix.system" in str(e.value)


def test_safe_load_bounds_what_a_file_asks_for():
    budget = checkpoint_loading.CheckpointBudget("f.pt", 10)
    budget.charge(checkpoint_loading.CHECKPOINT_MEMORY_SLACK, "most of the slack")
    with pytest.raises(checkpoint_loading.CheckpointLoadError, match="more memory than a checkpoint of 10 bytes"):
        budget.charge(100, "more")
    with pytest.raises(checkpoint_loading.CheckpointLoadError, match="truncated, corrupt"):
        checkpoint_loading.safe_torch_load(io.BytesIO(b"PK\x03\x04 not a zip"))


def test_load_checks_say_what_the_file_is(tmp_path):
    with pytest.raises(checkpoint_loading.CheckpointLoadError, match="is a folder"):
        checkpoint_loading.check_checkpoint_source(str(tmp_path), str(tmp_path), None)
    with pytest.raises(fairseq.UserError, match="--model-overrides must be a dict"):
        checkpoint_loading.check_checkpoint_source("c.pt", str(tmp_path / "c.pt"), "beam=5")
    with pytest.raises(checkpoint_loading.CheckpointLoadError, match="plain state_dict"):
        checkpoint_loading.check_is_checkpoint({"w": torch.ones(1)}, "c.pt")
    with pytest.raises(checkpoint_loading.CheckpointLoadError, match=r"not a complete fairseq checkpoint \(KeyError"):
        checkpoint_loading.upgrade_checked(lambda state: state["args"], {"model": {}}, "c.pt")
    cfg = Namespace(restore_file=str(tmp_path / "missing.pt"), finetune_from_model=None, save_dir="ck")
    with pytest.raises(fairseq.UserError, match="does not exist: give a checkpoint file"):
        checkpoint_loading.check_restore_file(cfg, cfg.restore_file)


def test_pickle_globals_are_read_without_unpickling(tmp_path):
    path = tmp_path / "p.pt"
    torch.save({"x": _RunsCode(), "ns": argparse.Namespace()}, path)
    names = checkpoint_loading.checkpoint_pickle_globals(str(path))
    assert "posix.system" in names and "argparse.Namespace" in names
    assert checkpoint_loading.resolve_checkpoint_global("posix.system") == ("code", None)
    assert checkpoint_loading.resolve_checkpoint_global("argparse.Namespace")[0] == "safe"


def test_config_literals_are_data_never_code():
    parse = config_literals.parse_config_literal
    assert parse("[(512, 3)] * 2 + [(256, 1)]") == [(512, 3), (512, 3), (256, 1)]
    assert parse("-0.5") == -0.5 and parse("{'a': (1, 2)}") == {"a": (1, 2)}
    for code in ("__import__('os').system('true')", "[0] * 10**12", "[" * 200 + "]" * 200):
        with pytest.raises(config_literals.ConfigLiteralError):
            parse(code)
    with pytest.raises(TypeError):
        parse(3)  # as eval: callers rely on it
    assert issubclass(config_literals.ConfigLiteralError, fairseq.UserError)


def test_a_misfit_is_one_user_error_caused_by_the_load_error():
    error = RuntimeError("Error(s) in loading state_dict for M:\n\tMissing key(s): w")
    cfg = Namespace(arch="no_such_arch", layers=2)
    raised = checkpoint_misfit.checkpoint_misfit("c.pt", {"args": cfg}, Namespace(arch="no_such_arch", layers=3), error)
    assert isinstance(raised, fairseq.UserError) and raised.__cause__ is error
    assert "--layers 2 in the checkpoint, 3 here" in str(raised)
    already = fairseq.UserError("one line")
    assert checkpoint_misfit.checkpoint_misfit("c.pt", {}, cfg, already) is already
