"""Damaged weights, each named for what is wrong with it, in every loader (issue 53): NaN and
infinite values, missing, extra and misshapen tensors, an entry that is no tensor, through
fairseq's loading, the export, a resume, the hub and fairseq-interactive."""

import subprocess

import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.checkpoint_utils import safe_torch_load

from .helpers import BIN, damaged_checkpoint, nmt_checkpoint


def _set(key, value):
    return lambda m: m.__setitem__(key, value(m[key]) if callable(value) else value)


def _nan_at(t, value=float("nan")):
    t = t.clone()
    t.view(-1)[3] = value
    return t


FC1 = "decoder.layers.0.fc1.weight"

DAMAGED_WEIGHTS = [  # (name, edit of the state dict, the one line)
    ("nan", _set(FC1, _nan_at), f"the checkpoint is damaged: its weight {FC1} holds 1 NaN value (of 2,048)"),
    ("inf", _set(FC1, lambda t: _nan_at(t, float("-inf"))), f"its weight {FC1} holds 1 infinite value (of 2,048)"),
    (
        "missing",
        lambda m: m.pop("decoder.layers.0.fc1.bias"),
        "the checkpoint lacks decoder.layers.0.fc1.bias, which this model has",
    ),
    (
        "extra",
        _set("decoder.layers.0.extra.weight", torch.zeros(2)),
        "the checkpoint holds decoder.layers.0.extra.weight, which this model has no place for",
    ),
    (
        "ffn_shape",
        _set(FC1, lambda t: torch.zeros(65, 32)),  # rows only, but not a dictionary's: not blamed on it
        f"the checkpoint's weight {FC1} is [65, 32], but [64, 32] in the model its settings build",
    ),
    (
        "one_table",
        _set("decoder.output_projection.weight", lambda t: t[:-8].clone()),  # the other tables fit the data
        "the checkpoint's weight decoder.output_projection.weight is [296, 32], but [304, 32] in the model",
    ),
    ("not_a_tensor", _set(FC1, "weights"), f"the checkpoint is damaged: its entry {FC1} is a str, not a tensor"),
]


@pytest.mark.parametrize("edit,expected", [c[1:] for c in DAMAGED_WEIGHTS], ids=[c[0] for c in DAMAGED_WEIGHTS])
def test_damaged_weights_are_named_by_the_loader(tmp_path, edit, expected):
    """What fairseq-generate, -interactive, -eval-lm and the hub load through: one line naming
    the tensor, before the model runs (a NaN weight ended a beam search in AssertionError)."""
    from fairseq import UserError

    path, overrides = damaged_checkpoint(tmp_path, edit)
    with pytest.raises(UserError) as e:
        checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)
    assert expected in str(e.value) and "\n" not in str(e.value), str(e.value)


@pytest.mark.parametrize("edit,expected", [c[1:] for c in DAMAGED_WEIGHTS[:3]], ids=[c[0] for c in DAMAGED_WEIGHTS[:3]])
def test_damaged_weights_are_named_by_the_export(tmp_path, capsys, edit, expected):
    """The export loads through the same check: the line names the weight (a NaN model was
    called "not an exact form"), and nothing is written."""
    from fairseq_define.tools import export

    path, overrides = damaged_checkpoint(tmp_path, edit)
    assert export.main([path, str(tmp_path / "export.pt"), "--data", overrides["data"]]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1 and "exact form" not in err, err
    assert not (tmp_path / "export.pt").exists()


@pytest.mark.parametrize("changed,table", [(("en", "de"), "encoder.embed_tokens.map.weight"),
                                           (("de",), "decoder.embed_tokens.map.weight")], ids=["both", "target"])
def test_another_dictionary_is_named_for_every_table_it_changes(tmp_path, changed, table):
    """Every table of a dictionary's rows differs: the dictionary, not a damaged file."""
    from fairseq import UserError

    path, overrides = nmt_checkpoint(tmp_path)
    for lang in changed:
        with open(tmp_path / f"dict.{lang}.txt", "a", encoding="utf-8") as f:
            f.write("".join(f"extra{i} 1\n" for i in range(8)))
    with pytest.raises(UserError, match=rf"does not fit the data: {table} has 304 rows in the "
                                        r"checkpoint but 312 here.*use the dictionary \(dict.\*.txt\)"):
        checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)


def test_a_nan_in_a_tied_tensor_is_damage_not_another_form():
    """NaN never equals NaN: the tied keys' comparison named another output layer."""
    from fairseq import UserError

    from fairseq_define_patch.runtime.checkpoint_weights import check_tied_values

    from .test_define_transformer import tiny_model

    tied, _ = tiny_model("--define-map-dim", "32", "--define-output-layer", "tied_map")
    state = {k: v.clone() for k, v in tied.state_dict().items()}
    key = "decoder.output_projection.weight"
    state[key] = _nan_at(state[key])
    for load in (lambda: tied.load_state_dict(state, strict=False), lambda: check_tied_values(tied, state)):
        with pytest.raises(UserError, match=f"damaged: its weight {key} holds 1 NaN value") as e:
            load()
        assert "output layer" not in str(e.value)


def test_a_resumed_checkpoint_with_damaged_weights_names_its_file():
    from fairseq_define_patch.runtime.checkpoint_misfit import checkpoint_misfit
    from fairseq_define_patch.runtime.checkpoint_weights import CheckpointWeightsError, check_state_dict

    def misfit(expected, state):
        with pytest.raises(CheckpointWeightsError) as e:
            check_state_dict(expected, state)
        return str(checkpoint_misfit("ck/checkpoint_last.pt", {}, None, e.value))

    w = torch.zeros(3)
    line = misfit({"w": w}, {"w": torch.tensor([0.0, float("inf"), 1.0])})
    assert line.startswith("checkpoint ck/checkpoint_last.pt is damaged: its weight w holds 1 infinite value"), line
    line = misfit({"w": w, "b": w}, {"w": w})
    assert line.startswith("checkpoint ck/checkpoint_last.pt does not fit this model: the checkpoint lacks b"), line


def test_fairseqs_uninitialised_dtype_buffer_is_not_a_weight():
    """Sinusoidal positions keep torch.FloatTensor(1), whatever bits it holds."""
    from fairseq_define_patch.runtime.checkpoint_weights import check_finite

    check_finite({"decoder.embed_positions._float_tensor": torch.tensor([float("nan")])})


def test_the_hubs_export_of_a_half_precision_model_is_float32(tmp_path):
    """hub.bfloat16(); hub.export(...) was refused as "not an exact form": the export probes a
    float32 copy (each bfloat16 value converts exactly); a NaN in memory is named as damage."""
    from fairseq import UserError

    from fairseq_define.models.define_transformer import DefineTransformerModel

    path, overrides = nmt_checkpoint(tmp_path)
    hub = DefineTransformerModel.from_pretrained(str(tmp_path), "checkpoint.pt", overrides.pop("data"), **overrides)
    hub.bfloat16()
    hub.export(str(tmp_path / "export.pt"))
    exported = safe_torch_load(str(tmp_path / "export.pt"))["model"]
    fc1 = "decoder.layers.0.fc1.weight"
    assert {v.dtype for v in exported.values() if v.is_floating_point()} == {torch.float32}
    assert torch.equal(exported[fc1], hub.models[0].state_dict()[fc1].float())
    assert next(hub.models[0].parameters()).dtype == torch.bfloat16  # the hub's own model is left as it was
    with torch.no_grad():
        hub.models[0].decoder.layers[0].fc1.weight[0, 0] = float("nan")
    with pytest.raises(UserError, match=f"the model is damaged: its weight {fc1} holds 1 NaN value") as e:
        hub.export(str(tmp_path / "nan.pt"))
    assert "exact form" not in str(e.value) and not (tmp_path / "nan.pt").exists()


@pytest.mark.cli  # starts fairseq-interactive
@pytest.mark.parametrize("edit,expected", [DAMAGED_WEIGHTS[0][1:], DAMAGED_WEIGHTS[2][1:]], ids=["nan", "missing"])
def test_damaged_weights_from_the_command_line(tmp_path, edit, expected):
    """fairseq-interactive on a damaged checkpoint: one line naming the weight, no traceback."""
    from .helpers import USER_DIR, assert_user_error

    path, _ = damaged_checkpoint(tmp_path, edit)
    proc = subprocess.run(
        [str(BIN / "fairseq-interactive"), str(tmp_path), "--user-dir", USER_DIR, "--path", path, "--source-lang",
         "en", "--target-lang", "de", "--cpu"], input="a house\n", capture_output=True, text=True, timeout=300)
    assert_user_error(proc, "fairseq-interactive", expected)
