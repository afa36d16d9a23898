"""Every setting checked where it enters (issue 53, class 5), one parametrized table a class:
--model-overrides (keys, nested groups, unknown names, kinds of value), in process through
fairseq's own loader. One line each, naming the problem and the fix (docs/errors.md)."""

from pathlib import Path

import pytest
import torch

LEGACY = Path(__file__).parent / "legacy_checkpoints" / "legacy_shared.pt"  # a model kept as a Namespace


def one_line(run):
    """The message of the fairseq.UserError that ``run()`` raises (one line)."""
    from fairseq import UserError

    with pytest.raises(UserError) as info:
        run()
    assert "\n" not in str(info.value)
    return str(info.value)


@pytest.fixture(scope="module")
def lstm_checkpoint(tmp_path_factory):
    """A checkpoint of a model with a dataclass config (define_lstm_lm), saved before
    lstm_layers existed: its stored model config lacks it."""
    path = tmp_path_factory.mktemp("lstm") / "checkpoint.pt"
    cfg = {"model": {"_name": "define_lstm_lm", "lstm_hidden_dim": 8, "dropout": 0.1},
           "task": {"_name": "language_modeling", "data": "x"}, "bpe": None}
    history = [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "Adam", "lr_scheduler_state": {},
                "num_updates": 0}]
    torch.save({"model": {}, "cfg": cfg, "optimizer_history": history, "extra_state": {}, "last_optimizer_state": None},
               path)
    return path


def overrides_of(path, overrides):
    """What fairseq-generate does with --model-overrides: load with them, then check them."""
    from fairseq.checkpoint_utils import load_checkpoint_to_cpu
    from fairseq_define_patch.runtime.model_overrides import check_model_overrides

    state = load_checkpoint_to_cpu(str(path), arg_overrides=overrides)
    check_model_overrides(overrides, state["cfg"])
    return state


def test_nested_groups_are_applied(lstm_checkpoint):
    """fairseq's nested form ({'model': {...}}) set nothing where the group was a Namespace
    (an architecture without a dataclass) and never reached an old checkpoint's args; it is
    applied as its names, a missing model option included."""
    state = overrides_of(LEGACY, {"model": {"dropout": 0.3}, "task": {"data": "elsewhere"}})
    assert state["cfg"].model.dropout == 0.3 and state["cfg"].task.data == "elsewhere"
    assert not hasattr(state["cfg"].model, "model")  # the group itself is no setting
    cfg = overrides_of(lstm_checkpoint, {"model": {"lstm_layers": 2, "dropout": 0.25}})["cfg"]
    assert cfg.model.lstm_layers == 2 and cfg.model.dropout == 0.25
    # the same names flat give the same config
    flat = overrides_of(lstm_checkpoint, {"lstm_layers": 2, "dropout": 0.25})["cfg"]
    assert flat.model == cfg.model


# (checkpoint, overrides, what the one line says)
MODEL_OVERRIDE_MISTAKES = [
    ("legacy", {1: 2}, "--model-overrides: the key 1 (int) is not a setting's name"),
    ("legacy", {True: 1}, "the key True (bool) is not a setting's name"),
    ("legacy", {"model": {1: 2}}, "the key 1 (int) is not a setting's name"),
    ("legacy", {"model": {"bogus": 1}}, "'bogus' is not a setting of this checkpoint's model group"),
    ("legacy", {"model": {"dropoutt": 0.1}}, "'dropoutt' (did you mean 'dropout'?) is not a setting"),
    ("lstm", {"task": {"lstm_layers": 2}}, "'lstm_layers' is not a setting of this checkpoint's task group"),
    ("lstm", {"bpe": {"bpe_codes": "codes"}}, "this checkpoint's config has no bpe group (it is unset)"),
    ("legacy", {"model": {"dropout": {"p": 0.1}}}, "nests deeper than a config group"),
    ("legacy", {"dropout": 0.2, "model": {"dropout": 0.3}}, "gives dropout twice (dropout=0.2, model.dropout=0.3)"),
    ("legacy", {"dropout": "x"}, "dropout='x' must be a number (the checkpoint's dropout is"),
    ("legacy", {"dropout": {0.1}}, "dropout={0.1} must be a number"),
    ("lstm", {"model": {"dropout": "0.1"}}, "dropout='0.1' must be a number (the checkpoint's dropout is 0.1)"),
    ("legacy", {"dropout": float("nan")}, "dropout=nan is not a finite number"),
    ("legacy", {"checkpoint_activations": "yes"}, "checkpoint_activations='yes' must be True or False"),
    ("legacy", {"arch": 3}, "arch=3 must be a string"),
]


@pytest.mark.parametrize("path,overrides,expected", MODEL_OVERRIDE_MISTAKES,
                         ids=[repr(o) for _, o, _ in MODEL_OVERRIDE_MISTAKES])
def test_model_overrides_are_checked_before_they_are_applied(lstm_checkpoint, path, overrides, expected):
    assert expected in one_line(lambda: overrides_of(LEGACY if path == "legacy" else lstm_checkpoint, overrides))
