"""Classes of user mistakes, one parametrized table each, tested in process where the class can
be (the command-line rows, one per class at least, are in test_bad_input.py): every numeric
setting of a model has a checked range (inf and nan included), every override is checked
against the model's own options, types and choices, every path a user gives is checked for
kind, and the tools refuse a file that is not a fairseq checkpoint. One line each, naming the
problem and the fix (docs/errors.md)."""

import argparse
from pathlib import Path

import pytest
import torch

from fairseq_define.errors import UserError


def build(arch, flags=(), overrides=None):
    """What fairseq-train does with ``flags`` (and --model-overrides / a stored config with
    ``overrides``) up to the built model (shapes only)."""
    from fairseq import options

    from fairseq_define.tools.params import VocabularyOnlyTask, build_model, dictionary_of_size, is_translation_arch

    task = "translation" if is_translation_arch(arch) else "language_modeling"
    args = options.parse_args_and_arch(options.get_training_parser(default_task=task),
                                       input_args=["-", "--task", task, "--arch", arch, *flags])
    for name, value in (overrides or {}).items():
        setattr(args, name, value)
    d = dictionary_of_size(100)
    with torch.device("meta"):
        return build_model(args, VocabularyOnlyTask(d, d))


def build_error(arch, flags=(), overrides=None):
    with pytest.raises(UserError) as info:
        build(arch, flags, overrides)
    return str(info.value)


TRANSFORMER, TXL, LSTM = "define_transformer_tiny", "define_txl_tiny", "define_lstm_tiny"

# numbers out of range, on the command line: (arch, flags, what the line says)
NUMERIC_MISTAKES = [
    (TRANSFORMER, ["--define-unit-grad-scale", "inf"], "define_unit_grad_scale=inf is not a finite number"),
    (TRANSFORMER, ["--define-unit-grad-scale", "1e400"], "define_unit_grad_scale=inf is not a finite number"),
    (TRANSFORMER, ["--define-unit-grad-scale", "-1"], "define_unit_grad_scale=-1.0 must be positive"),
    (TRANSFORMER, ["--dropout", "nan"], "dropout=nan is not a dropout probability"),
    (TRANSFORMER, ["--adaptive-softmax-factor", "0"], "adaptive_softmax_factor=0.0 must be at least 1"),
    (TRANSFORMER, ["--adaptive-softmax-factor", "1e999"], "adaptive_softmax_factor=inf is not a finite number"),
    (TRANSFORMER, ["--encoder-layers", "0"], "encoder_layers=0 is a size and must be at least 1"),
    (TRANSFORMER, ["--decoder-attention-heads", "-2"], "decoder_attention_heads=-2 is a size and must be at least 1"),
    (LSTM, ["--div-val", "nan"], "div_val=nan is not a finite number"),
    (LSTM, ["--div-val", "0"], "div_val=0.0 must be at least 1"),
    (TXL, ["--div-val", "inf"], "div_val=inf is not a finite number"),
    (TXL, ["--init-std", "nan"], "init_std=nan is not a finite number"),
    (TXL, ["--attention-dropout", "1.5"], "attention_dropout=1.5 is not a dropout probability"),
]


@pytest.mark.parametrize("arch,flags,expected", NUMERIC_MISTAKES,
                         ids=[f"{a}:{' '.join(f)}" for a, f, _ in NUMERIC_MISTAKES])
def test_numeric_settings_have_checked_ranges(arch, flags, expected):
    assert expected in build_error(arch, flags)


# --model-overrides and stored configs bypass argparse: (arch, overrides, what the line says)
OVERRIDE_MISTAKES = [
    (TRANSFORMER, {"define_unit_centring": "bogus"}, "define_unit_centring='bogus' is not one of batch_mean, none"),
    (TRANSFORMER, {"define_transform": "dense"}, "define_transform='dense' is not one of"),
    (TRANSFORMER, {"define_map_dim": "32"}, "define_map_dim='32' must be an integer"),
    (TRANSFORMER, {"define_no_bias": "yes"}, "define_no_bias='yes' must be True or False"),
    (TRANSFORMER, {"define_dropout": "0.1"}, "define_dropout='0.1' must be a number"),
    (TRANSFORMER, {"define_unit_grad_scale": float("nan")}, "define_unit_grad_scale=nan is not a finite number"),
    (LSTM, {"define_activation": "softmax"}, "define_activation='softmax' is not one of swish, gelu, relu, tanh, linear"),
    (LSTM, {"div_val": float("inf")}, "div_val=inf is not a finite number"),
    (TXL, {"define_style": "mine"}, "define_style='mine' is not one of paper, authors"),
    (TXL, {"div_val": -4.0}, "div_val=-4.0 must be at least 1"),
]


@pytest.mark.parametrize("arch,overrides,expected", OVERRIDE_MISTAKES,
                         ids=[f"{a}:{list(o.items())[0]}" for a, o, _ in OVERRIDE_MISTAKES])
def test_overrides_are_checked_against_the_models_options(arch, overrides, expected):
    assert expected in build_error(arch, overrides=overrides)


@pytest.mark.parametrize("arch", [TRANSFORMER, TXL, LSTM])
def test_valid_settings_still_build(arch):
    build(arch, overrides={"define_unit_centring": "none", "define_dropout": 0.1})


@pytest.fixture(scope="module")
def plain_state_dict(tmp_path_factory):
    """torch.save(model.state_dict()): parameters without fairseq's checkpoint around them."""
    path = tmp_path_factory.mktemp("plain") / "weights.pt"
    torch.save({"encoder.w": torch.zeros(2, 2)}, path)
    return path


def interactive_lines(path):
    from fairseq_cli.interactive import buffered_read

    return next(buffered_read(str(path), 10))


def load(path, **kwargs):
    from fairseq.checkpoint_utils import load_checkpoint_to_cpu

    return load_checkpoint_to_cpu(str(path), **kwargs)


def beam(size):
    from fairseq.sequence_generator import SequenceGenerator

    model = build(TRANSFORMER)
    return SequenceGenerator([model], model.decoder.dictionary, beam_size=size)


def incomplete(folder):
    """A dict with a 'model' entry and nothing else fairseq writes."""
    torch.save({"model": {}}, folder / "incomplete.pt")
    return folder / "incomplete.pt"


def latin1_file(folder):
    (folder / "latin1.txt").write_bytes(b"ok\ncaf\xe9\n")
    return folder / "latin1.txt"


# paths of the wrong kind, files of the wrong kind, values fairseq used without a check:
# (name, what runs (given a scratch folder), what the one line says)
INPUT_MISTAKES = [
    ("path_is_a_folder", lambda d, p: load(d), "is a folder, not a checkpoint file: give the file"),
    ("plain_state_dict", lambda d, p: load(p), "is not a fairseq checkpoint (it has no 'model' entry"),
    ("incomplete_checkpoint", lambda d, p: load(incomplete(d)), "is not a complete fairseq checkpoint (KeyError: 'best_loss')"),
    ("overrides_not_a_dict", lambda d, p: load(p, arg_overrides=[1, 2]), "--model-overrides must be a dict of settings"),
    ("input_is_a_folder", lambda d, p: interactive_lines(d), "is a folder: give a text file, or - for standard input"),
    ("input_is_missing", lambda d, p: interactive_lines(d / "nope.txt"), "is not an existing file"),
    ("input_not_utf8", lambda d, p: interactive_lines(latin1_file(d)), "latin1.txt is not UTF-8 text (invalid continuation byte)"),
    ("beam_0", lambda d, p: beam(0), "--beam 0 must be at least 1"),
    ("beam_negative", lambda d, p: beam(-3), "--beam -3 must be at least 1"),
]


@pytest.mark.parametrize("name,run,expected", INPUT_MISTAKES, ids=[m[0] for m in INPUT_MISTAKES])
def test_inputs_of_the_wrong_kind(tmp_path, plain_state_dict, name, run, expected):
    from fairseq import UserError as FairseqUserError

    with pytest.raises(FairseqUserError, match=None) as info:
        run(tmp_path, plain_state_dict)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_load_errors_are_fairseq_user_errors():
    """fairseq's own command-line hook prints these as one line (no --user-dir needed)."""
    from fairseq import UserError as FairseqUserError
    from fairseq.checkpoint_utils import CheckpointLoadError
    from fairseq.utils import ConfigLiteralError

    assert issubclass(CheckpointLoadError, FairseqUserError) and issubclass(CheckpointLoadError, RuntimeError)
    assert issubclass(ConfigLiteralError, FairseqUserError) and issubclass(ConfigLiteralError, ValueError)


LEGACY = Path(__file__).parent / "legacy_checkpoints" / "legacy_shared.pt"  # a model kept as a Namespace


def overrides_of(path, overrides):
    """What fairseq-generate does with --model-overrides: load with them, then check them."""
    from fairseq_define_patch.runtime.model_overrides import check_model_overrides

    state = load(path, arg_overrides=overrides)
    check_model_overrides(overrides, state["cfg"])
    return state["cfg"]


@pytest.fixture(scope="module")
def dataclass_model_checkpoint(tmp_path_factory):
    """A checkpoint of a model with a dataclass config (define_lstm_lm), saved before
    lstm_layers existed: its stored model config lacks it."""
    path = tmp_path_factory.mktemp("lstm") / "checkpoint.pt"
    cfg = {"model": {"_name": "define_lstm_lm", "lstm_hidden_dim": 8}, "task": {"_name": "language_modeling", "data": "x"}}
    history = [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "Adam", "lr_scheduler_state": {},
                "num_updates": 0}]
    torch.save({"model": {}, "cfg": cfg, "optimizer_history": history, "extra_state": {}, "last_optimizer_state": None},
               path)
    return path


@pytest.mark.parametrize("path,overrides,expected", [
    ("legacy", {"define_map_dimm": 8}, "'define_map_dimm' (did you mean 'define_map_dim'?) is not a setting"),
    ("legacy", {"beem": 5, "foo": 1}, "'beem' (did you mean 'beam'?), 'foo' are not a setting"),
    ("dataclass", {"lstm_hiden_dim": 8}, "'lstm_hiden_dim' (did you mean 'lstm_hidden_dim'?) is not a setting"),
    ("dataclass", {"tokens_per_sampel": 8}, "'tokens_per_sampel'"),
], ids=["namespace_model", "two_names", "dataclass_model", "task_name"])
def test_overrides_that_name_no_setting_are_refused(dataclass_model_checkpoint, path, overrides, expected):
    from fairseq import UserError as FairseqUserError

    with pytest.raises(FairseqUserError) as info:
        overrides_of(LEGACY if path == "legacy" else dataclass_model_checkpoint, overrides)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_overrides_of_settings_are_applied(dataclass_model_checkpoint):
    """Known names pass the check and take effect: a group's key, a model option kept in a
    Namespace, and a model option the stored config lacks (saved before it existed), which
    fairseq 0.12.2 dropped without a word."""
    cfg = overrides_of(LEGACY, {"define_output_layer": "tied_map", "data": "elsewhere", "beam": 3})
    assert cfg.model.define_output_layer == "tied_map" and cfg.task.data == "elsewhere" and cfg.generation.beam == 3
    cfg = overrides_of(dataclass_model_checkpoint, {"lstm_layers": 2, "dropout": 0.25})
    assert cfg.model.lstm_layers == 2 and cfg.model.dropout == 0.25
    # a stored setting that changes what the weights compute keeps the checkpoint's value
    # (docs/checkpoints.md, "Loading into the model's own form")
    from fairseq import UserError as FairseqUserError

    with pytest.raises(FairseqUserError, match=r"lstm_hidden_dim=16 \(trained with 8\)"):
        overrides_of(dataclass_model_checkpoint, {"lstm_hidden_dim": 16})


def training_cfg(*flags):
    """fairseq-train's config for ``flags`` (a stock Transformer; the data folder is not read)."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["DATA", "--arch", "transformer", "--optimizer", "adam",
                                                "--lr-scheduler", "inverse_sqrt", "--criterion",
                                                "label_smoothed_cross_entropy", "--max-tokens", "100", *flags])
    return convert_namespace_to_omegaconf(args)


# fairseq-train's own numbers, checked once before any worker starts: (flags, the one line)
TRAINING_MISTAKES = [
    (["--lr", "-1"], "--lr -1.0 is negative"),
    (["--lr", "1e-3,0.5,-2"], "--lr -2.0 is negative"),
    (["--update-freq", "0"], "--update-freq 0 must be at least 1"),
    (["--clip-norm", "-1"], "--clip-norm -1.0 is negative"),
    (["--max-update", "-3"], "--max-update -3 is negative"),
    (["--weight-decay", "nan"], "--weight-decay nan is not a finite number"),
    (["--adam-eps", "inf"], "--adam-eps inf is not a finite number"),
    (["--warmup-updates", "-5"], "--warmup-updates -5 is negative"),
    (["--warmup-init-lr", "inf"], "--warmup-init-lr inf is not a finite number"),
    (["--max-tokens", "0"], "--max-tokens 0 must be at least 1"),
    (["--batch-size", "0"], "--batch-size 0 must be at least 1"),
    (["--label-smoothing", "2"], "--label-smoothing 2.0 must be below 1"),
    (["--label-smoothing", "-0.1"], "--label-smoothing -0.1 is negative"),
]


@pytest.mark.parametrize("flags,expected", TRAINING_MISTAKES, ids=[" ".join(f) for f, _ in TRAINING_MISTAKES])
def test_training_numbers_have_checked_ranges(flags, expected):
    from fairseq import UserError as FairseqUserError
    from fairseq_define_patch.runtime.training_settings import check_training_numbers as _check_training_numbers

    with pytest.raises(FairseqUserError) as info:
        _check_training_numbers(training_cfg(*flags))
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_usual_training_numbers_pass():
    from fairseq_define_patch.runtime.training_settings import check_training_numbers as _check_training_numbers

    _check_training_numbers(training_cfg("--lr", "5e-4", "--clip-norm", "0", "--warmup-updates", "0",
                                         "--label-smoothing", "0.1", "--update-freq", "2", "--max-epoch", "0"))


def test_training_groups_kept_as_namespaces_are_checked():
    """A component without a dataclass (here fairseq's sgd optimizer) keeps its group as a Namespace."""
    from fairseq import UserError as FairseqUserError
    from fairseq_define_patch.runtime.training_settings import check_training_numbers as _check_training_numbers

    cfg = training_cfg("--optimizer", "sgd", "--lr", "5")
    assert isinstance(cfg.optimizer, argparse.Namespace)
    _check_training_numbers(cfg)  # an AttributeError (.keys() of a Namespace) before
    with pytest.raises(FairseqUserError, match="--weight-decay -1.0 is negative"):
        _check_training_numbers(training_cfg("--optimizer", "sgd", "--weight-decay", "-1"))


# our tools given something that is not a fairseq checkpoint, or a count that is not one:
# (tool module, arguments (PLAIN: the plain state_dict, OUT: a new file), the one line)
TOOL_MISTAKES = [
    ("average_checkpoints", ["--inputs", "PLAIN", "PLAIN", "--output", "OUT"], "is not a fairseq checkpoint"),
    ("average_checkpoints", ["--inputs", "DIR", "--num-epoch-checkpoints", "-2", "--output", "OUT"],
     "argument --num-epoch-checkpoints: -2 is not a positive count of checkpoints"),
    ("average_checkpoints", ["--inputs", "DIR", "--num-update-checkpoints", "x", "--output", "OUT"],
     "argument --num-update-checkpoints: 'x' is not an integer"),
    ("cache_tables", ["--path", "PLAIN", "--output", "OUT"], "is not a fairseq checkpoint"),
    ("compress", ["--path", "PLAIN", "--output", "OUT"], "is not a fairseq checkpoint"),
    ("cache_tables", ["--path", "DIR", "--output", "OUT"], "is a folder, not a checkpoint file"),
]


@pytest.mark.parametrize("tool,args,expected", TOOL_MISTAKES, ids=[f"{t}:{' '.join(a[:2])}" for t, a, _ in TOOL_MISTAKES])
def test_tools_refuse_what_is_not_a_checkpoint(tmp_path, capsys, plain_state_dict, tool, args, expected):
    import importlib

    main = importlib.import_module(f"fairseq_define.tools.{tool}").main
    args = [{"PLAIN": str(plain_state_dict), "OUT": str(tmp_path / "out.pt"), "DIR": str(tmp_path)}.get(a, a) for a in args]
    try:
        rc = main(args)
    except SystemExit as e:  # argparse
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2 and expected in err and "Traceback" not in err, err
    assert [l for l in err.splitlines() if ": error: " in l] and not (tmp_path / "out.pt").exists()


def binarized(folder, lines=("a b c", "d e", "f")):
    """A small split written by fairseq's own builder: folder/data.{bin,idx}."""
    from fairseq.data import indexed_dataset

    builder = indexed_dataset.make_builder(str(folder / "data.bin"), impl="mmap", vocab_size=100)
    for line in lines:
        builder.add_item(torch.IntTensor([5 + len(w) for w in line.split()]))
    builder.finalize(str(folder / "data.idx"))
    return folder / "data"


def damage(prefix, how):
    import numpy as np

    idx, bin_ = prefix.with_suffix(".idx"), prefix.with_suffix(".bin")
    if how == "bin_truncated":
        bin_.write_bytes(bin_.read_bytes()[:-2])
    elif how == "bin_longer":
        bin_.write_bytes(bin_.read_bytes() + b"\0\0")
    elif how == "idx_truncated":
        idx.write_bytes(idx.read_bytes()[:-8])
    elif how == "pointer_changed":  # the second sentence's offset (after the header and the sizes)
        data = bytearray(idx.read_bytes())
        data[26 + 3 * 4 + 8] = 40
        idx.write_bytes(bytes(data))
    elif how == "bad_version":
        data = bytearray(idx.read_bytes())
        data[9] = 7
        idx.write_bytes(bytes(data))
    return np


@pytest.mark.parametrize("how,expected", [
    ("bin_truncated", "do not match (the index describes 12 bytes, the data file holds 10)"),
    ("bin_longer", "do not match (the index describes 12 bytes, the data file holds 14)"),
    ("pointer_changed", "do not match"),
    ("idx_truncated", "data.idx is damaged or truncated: its 54 bytes do not match its header"),
    ("bad_version", "data.idx is damaged or truncated"),
])
def test_binarized_data_is_checked_whole(tmp_path, how, expected):
    from fairseq import UserError as FairseqUserError
    from fairseq.data import indexed_dataset

    prefix = binarized(tmp_path)
    assert len(indexed_dataset.MMapIndexedDataset(str(prefix))) == 3
    damage(prefix, how)
    with pytest.raises(FairseqUserError) as info:
        indexed_dataset.MMapIndexedDataset(str(prefix))
    assert expected in str(info.value) and "run fairseq-preprocess again" in str(info.value)
