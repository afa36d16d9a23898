"""Classes of user mistakes, one parametrized table each, tested in process where the class can
be (the command-line rows, one per class at least, are in test_bad_input.py, and for the
training, data-file and output classes at the end of this file): every numeric
setting of a model has a checked range (inf and nan included), every override is checked
against the model's own options, types and choices, every path a user gives is checked for
kind, and the tools refuse a file that is not a fairseq checkpoint. One line each, naming the
problem and the fix (docs/errors.md)."""

import argparse
import errno
import io
import os
from pathlib import Path

import pytest
import torch

from fairseq_define.errors import UserError

from .helpers import USER_DIR


def build(arch, flags=(), overrides=None):
    """What fairseq-train does with ``flags`` (and --model-overrides / a stored config with
    ``overrides``) up to the built model (shapes only)."""
    from fairseq import options
    from fairseq.models import build_model

    from fairseq_define.models.without_data import VocabularyOnlyTask, dictionary_of_size, is_translation_arch

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
    (
        LSTM,
        {"define_activation": "softmax"},
        "define_activation='softmax' is not one of swish, gelu, relu, tanh, linear",
    ),
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
    (
        "incomplete_checkpoint",
        lambda d, p: load(incomplete(d)),
        "is not a complete fairseq checkpoint (KeyError: 'best_loss')",
    ),
    (
        "overrides_not_a_dict",
        lambda d, p: load(p, arg_overrides=[1, 2]),
        "--model-overrides must be a dict of settings",
    ),
    ("input_is_a_folder", lambda d, p: interactive_lines(d), "is a folder: give a text file, or - for standard input"),
    ("input_is_missing", lambda d, p: interactive_lines(d / "nope.txt"), "is not an existing file"),
    (
        "input_not_utf8",
        lambda d, p: interactive_lines(latin1_file(d)),
        "latin1.txt is not UTF-8 text (invalid continuation byte)",
    ),
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
    cfg = {
        "model": {"_name": "define_lstm_lm", "lstm_hidden_dim": 8},
        "task": {"_name": "language_modeling", "data": "x"},
    }
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


@pytest.mark.parametrize(
    "tool,args,expected", TOOL_MISTAKES, ids=[f"{t}:{' '.join(a[:2])}" for t, a, _ in TOOL_MISTAKES]
)
def test_tools_refuse_what_is_not_a_checkpoint(tmp_path, capsys, plain_state_dict, tool, args, expected):
    import importlib

    main = importlib.import_module(f"fairseq_define.tools.{tool}").main
    args = [
        {"PLAIN": str(plain_state_dict), "OUT": str(tmp_path / "out.pt"), "DIR": str(tmp_path)}.get(a, a) for a in args
    ]
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


# -- training numbers, shapes and sizes, text inputs and outputs -----------------------------
# Every optimizer, schedule, interval and precision setting has a range (runtime/
# training_settings.py's one table); the rows name at least one setting of each kind.
TRAINING_RANGE_MISTAKES = [
    (["--required-batch-size-multiple", "0"], "--required-batch-size-multiple 0 must be at least 1"),  # SIGFPE
    (["--save-interval", "0"], "--save-interval 0 must be at least 1"),  # crashed after an epoch
    (["--validate-interval", "0"], "--validate-interval 0 must be at least 1"),
    (["--keep-last-epochs", "-2"], "--keep-last-epochs -2 is negative"),
    (["--patience", "0"], "--patience 0 must be at least 1"),
    (["--log-interval", "0"], "--log-interval 0 must be at least 1"),
    (["--num-shards", "2", "--shard-id", "2"], "--shard-id 2 is not below --num-shards 2"),
    (
        ["--lr-scheduler", "polynomial_decay", "--total-num-update", "10", "--end-learning-rate", "-5"],
        "--end-learning-rate -5.0 is negative",
    ),
    (
        ["--lr-scheduler", "polynomial_decay", "--total-num-update", "10", "--power", "-1"],
        "--power -1.0 must be positive",
    ),
    (["--lr-scheduler", "inverse_sqrt", "--warmup-init-lr", "-5"], "--warmup-init-lr -5.0 is negative"),
    (["--lr-scheduler", "reduce_lr_on_plateau", "--lr-shrink", "1.5"], "--lr-shrink 1.5 is not a shrink factor"),
    (["--lr-scheduler", "cosine", "--t-mult", "0"], "--t-mult 0.0 must be positive"),
    (["--adam-eps", "-1"], "--adam-eps -1.0 must be positive"),
    (["--adam-betas", "(0.9, 1.5)"], "--adam-betas 1.5 holds a beta outside [0, 1)"),
    (["--adam-betas", "(-0.1, 0.98)"], "--adam-betas -0.1 holds a beta outside [0, 1)"),
    (["--optimizer", "sgd", "--momentum", "1.5"], "--momentum 1.5 is not a momentum"),  # a Namespace group
    (["--optimizer", "adamax", "--adamax-betas", "(0.9, 1)"], "--adamax-betas 1 holds a beta outside [0, 1)"),
    (["--fp16-init-scale", "0"], "--fp16-init-scale 0 must be positive"),
    (["--criterion", "adaptive_loss"], "--criterion adaptive_loss needs fairseq's own DistributedDataParallel"),
    (["--fp16"], "--fp16 trains on a CUDA GPU, and this machine has no CUDA GPU"),
    (["--fp16", "--cpu"], "--fp16 trains on a CUDA GPU, and this run is on the CPU (--cpu)"),
    (["--amp", "--cpu"], "--amp trains under CUDA's autocast, and this run is on the CPU (--cpu)"),
]


@pytest.mark.parametrize(
    "flags,expected", TRAINING_RANGE_MISTAKES, ids=[" ".join(f) for f, _ in TRAINING_RANGE_MISTAKES]
)
def test_every_training_setting_has_a_range(monkeypatch, flags, expected):
    from fairseq import UserError as FairseqUserError

    from fairseq_define_patch.runtime.training_settings import check_training_numbers

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same rows on a GPU machine
    with pytest.raises(FairseqUserError) as info:
        check_training_numbers(training_cfg(*flags))
    assert expected in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("flags", [
    ["--lr-scheduler", "inverse_sqrt", "--warmup-init-lr", "-1"],  # -1: fairseq's "unset"
    ["--keep-last-epochs", "-1", "--keep-interval-updates", "0", "--patience", "-1"],
    ["--adam-betas", "(0.9, 0.98)", "--adam-eps", "1e-9", "--required-batch-size-multiple", "1"],
    ["--lr-scheduler", "polynomial_decay", "--end-learning-rate", "0", "--power", "2", "--total-num-update", "10"],
    ["--optimizer", "sgd", "--momentum", "0"],
    ["--bf16", "--cpu"], ["--memory-efficient-fp16", "--cpu"],
], ids=lambda f: " ".join(f))
def test_edge_values_of_the_training_ranges_pass(monkeypatch, flags):
    from fairseq_define_patch.runtime.training_settings import check_training_numbers

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    check_training_numbers(training_cfg(*flags))


def test_an_unset_total_num_update_follows_max_update():
    """--lr-scheduler polynomial_decay without --total-num-update was a ConfigCompositionException
    traceback (its default is an interpolation, which the config conversion turned into null)."""
    from fairseq import UserError as FairseqUserError

    from fairseq_define_patch.runtime.training_settings import check_training_numbers

    cfg = training_cfg("--lr-scheduler", "polynomial_decay", "--max-update", "10")
    assert cfg.lr_scheduler.total_num_update == 10
    check_training_numbers(cfg)
    # the field is a float: omegaconf >= 2.1 gives the interpolated --max-update its type
    with pytest.raises(FairseqUserError, match="--total-num-update 0.0 must be at least 1: give --total-num-update"):
        check_training_numbers(training_cfg("--lr-scheduler", "polynomial_decay"))


def test_precision_against_a_gpu(monkeypatch):
    """On CUDA --fp16 and --amp train; --bf16 needs a GPU that has bfloat16 (faked here)."""
    from fairseq import UserError as FairseqUserError

    from fairseq_define_patch.runtime.precision_devices import check_precision_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla V100")
    check_precision_device(training_cfg("--fp16"))
    check_precision_device(training_cfg("--amp"))
    check_precision_device(training_cfg("--bf16", "--cpu"))
    with pytest.raises(FairseqUserError, match="--bf16 needs a GPU with bfloat16 support, and Tesla V100 has none"):
        check_precision_device(training_cfg("--bf16"))


@pytest.mark.parametrize(
    "overrides,expected",
    [
        ({"lr": -1}, "--optimizer-overrides: lr -1 is negative"),
        ({"lr": float("nan")}, "--optimizer-overrides: lr nan is not a finite number"),
        ({"eps": 0}, "--optimizer-overrides: eps 0 must be positive"),
        ({"betas": (0.9, 1.2)}, "--optimizer-overrides: betas 1.2 holds a beta outside [0, 1)"),
        ({"weight_decay": -0.1}, "--optimizer-overrides: weight_decay -0.1 is negative"),
        (
            {"lrr": 0.1},
            "--optimizer-overrides names 'lrr', which this optimizer does not have: its settings are amsgrad, betas",
        ),
        ([1, 2], "--optimizer-overrides must be a dict of settings"),
    ],
    ids=["lr", "nan", "eps", "betas", "weight_decay", "unknown", "not_a_dict"],
)
def test_optimizer_overrides_are_checked_as_they_are_applied(overrides, expected):
    """What fairseq/optim/fairseq_optimizer.py does when a resumed optimizer takes the overrides."""
    from fairseq import UserError as FairseqUserError

    from fairseq_define_patch.runtime.training_settings import check_optimizer_overrides

    group = torch.optim.Adam([torch.zeros(2, requires_grad=True)]).param_groups[0]
    with pytest.raises(FairseqUserError) as info:
        check_optimizer_overrides(group, overrides)
    assert expected in str(info.value) and "\n" not in str(info.value)
    assert check_optimizer_overrides(group, {"lr": 1e-4, "betas": (0.9, 0.98)}) == {"lr": 1e-4, "betas": (0.9, 0.98)}


def test_a_divergence_is_one_line(tmp_path):
    """The trainer's except FloatingPointError, in process: the NaN detector's own failure (a
    StopIteration under torch 2.x) is logged, not raised; the step ends in one line."""
    from types import SimpleNamespace as NS

    from fairseq import UserError as FairseqUserError

    from fairseq_define_patch.runtime.training_divergence import nan_detector, raise_divergence

    class Detector:
        def __init__(self, model):
            self.closed = False

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.closed = True

    with nan_detector(Detector, None) as detector:
        raise StopIteration  # what fairseq's hooks raised on a module whose output holds no tensor
    assert detector.closed
    cfg = NS(optimization=NS(clip_norm=0.0), lr_scheduler=NS(warmup_updates=0), common=NS(fp16=True, amp=False),
             checkpoint=NS(save_dir=str(tmp_path)))
    (tmp_path / "crash.pt").write_bytes(b"")
    trainer = NS(cfg=cfg, get_num_updates=lambda: 6, get_lr=lambda: 0.5)
    with pytest.raises(FairseqUserError) as info:
        try:
            raise FloatingPointError("gradients are Nan/Inf")
        except FloatingPointError:
            raise_divergence(trainer)
    line = str(info.value)
    assert line.startswith("training diverged at update 7 (gradients are Nan/Inf") and "\n" not in line
    for hint in ("a lower --lr (now 0.5)", "--clip-norm 1.0", "--warmup-updates N", "--bf16 or float32", "crash.pt"):
        assert hint in line, hint


def test_attention_heads_must_divide_the_width():
    from fairseq import UserError as FairseqUserError
    from fairseq.modules.multihead_attention import MultiheadAttention

    with pytest.raises(FairseqUserError, match="an attention layer of width 32 cannot be split into 3 heads"):
        MultiheadAttention(32, 3)
    with pytest.raises(FairseqUserError, match="cannot be split into 0 heads"):
        MultiheadAttention(32, 0)  # a ZeroDivisionError before
    assert MultiheadAttention(32, 4).head_dim == 8


def test_samples_against_max_tokens():
    """The batcher's checks, in process: a sample longer than --max-tokens (the validation split is
    not filtered by it), a split that may not drop any, a split with none left."""
    import numpy as np
    from fairseq import UserError as FairseqUserError
    from fairseq.data import data_utils

    from fairseq_define_patch.runtime.batch_sizes import check_sizes_left

    sizes = np.array([5, 48, 7])
    with pytest.raises(FairseqUserError, match="sample #1 has 48 tokens, more than --max-tokens 20 allows"):
        data_utils.batch_by_size(np.arange(3), lambda i: int(sizes[i]), max_tokens=20)
    with pytest.raises(FairseqUserError, match="sample #1 has 48 tokens"):
        data_utils.batch_by_size(np.arange(3), None, num_tokens_vec=sizes, max_tokens=20)
    assert len(data_utils.batch_by_size(np.arange(3), lambda i: int(sizes[i]), max_tokens=48)) >= 1
    with pytest.raises(FairseqUserError, match="sentence #4 is longer than the model accepts"):
        check_sizes_left(np.array([1]), np.array([4]), None, (30, 30), ignore_invalid_inputs=False)
    with pytest.raises(FairseqUserError, match=r"every sample of this split \(2\) is longer"):
        check_sizes_left(np.array([], dtype=int), np.array([0, 1]), None, 8, ignore_invalid_inputs=True)
    check_sizes_left(np.array([1]), np.array([0]), None, 8, ignore_invalid_inputs=True)  # dropped with a warning


# dict.*.txt as fairseq-preprocess writes it, damaged: (name, bytes, the one line)
DICTIONARY_MISTAKES = [
    ("no_count", b"the 5\nof\n", "dict.txt line 2: 'of' is not '<token> <count>'"),
    ("count_not_a_number", b"the 5\nof many\n", "dict.txt line 2: the count 'many' of 'of' is not an integer"),
    ("duplicate", b"the 5\nof 4\nthe 3\n", "dict.txt line 3: 'the' is listed already on line 1"),
    (
        "special_symbol",
        b"<unk> 5\n",
        "dict.txt line 1: '<unk>' is listed already (a symbol the dictionary adds itself)",
    ),
    ("empty_line", b"the 5\n\nof 4\n", "dict.txt line 2: '' is not '<token> <count>'"),
    ("not_utf8", b"the 5\ncaf\xe9 4\n", "dict.txt is not UTF-8 text (line 2: invalid continuation byte)"),
]


@pytest.mark.parametrize("name,content,expected", DICTIONARY_MISTAKES, ids=[m[0] for m in DICTIONARY_MISTAKES])
def test_damaged_dictionaries(tmp_path, name, content, expected):
    from fairseq import UserError as FairseqUserError
    from fairseq.data import Dictionary

    (tmp_path / "dict.txt").write_bytes(content)
    with pytest.raises(FairseqUserError) as info:
        Dictionary.load(str(tmp_path / "dict.txt"))
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_dictionaries_fairseq_reads_still_load(tmp_path):
    """Tokens with spaces (the last space separates the count), the overwrite flag, CRLF ends."""
    from fairseq.data import Dictionary

    (tmp_path / "dict.txt").write_bytes(b"the 5\r\nNew York 3\nthe 2 #fairseq:overwrite\n")
    d = Dictionary.load(str(tmp_path / "dict.txt"))
    assert d.index("New York") > d.unk() and d.count[d.index("the")] == 2


@pytest.mark.parametrize("value,expected", [("10,20", [10, 20]), ("(10, 20.0)", [10, 20]), (4.0, [4]), ([3], [3])])
def test_integer_lists_of_configs(value, expected):
    from fairseq import utils

    assert utils.eval_str_list(value, type=int) == expected


def test_float_cutoffs_are_not_truncated():
    from fairseq import UserError as FairseqUserError
    from fairseq import utils

    with pytest.raises(FairseqUserError, match="holds 10.5, which is not a whole number"):
        utils.eval_str_list("10.5,20", type=int)  # fairseq's transformer, transformer_lm, lstm cutoffs
    assert utils.eval_str_list("0.5,2", type=float) == [0.5, 2.0]


LM_TINY = "define_transformer_lm_tiny"
# define_transformer_lm settings that its output form would replace without a word: (flags, the line)
DEFINE_LM_MISTAKES = [
    (["--decoder-output-dim", "24"], "--decoder-output-dim 24 does not apply to --define-output-layer tied_map"),
    (
        ["--adaptive-input", "--adaptive-input-cutoff", "20,50", "--adaptive-softmax-factor", "2"],
        "--adaptive-softmax-factor 2.0 differs from --adaptive-input-factor 4",
    ),
    (
        ["--adaptive-input", "--adaptive-input-cutoff", "20.5,50"],
        "--adaptive-input-cutoff must be comma-separated integers",
    ),
    (
        ["--define-output-layer", "untied", "--adaptive-softmax-cutoff", "20,50.5"],
        "--adaptive-softmax-cutoff must be comma-separated integers",
    ),
    (
        ["--define-output-layer", "untied", "--share-decoder-input-output-embed"],
        "--share-decoder-input-output-embed ties the output layer, but --define-output-layer untied keeps one of its "
        "own",
    ),
]


@pytest.mark.parametrize("flags,expected", DEFINE_LM_MISTAKES, ids=[" ".join(f) for f, _ in DEFINE_LM_MISTAKES])
def test_language_model_settings_are_not_replaced_silently(flags, expected):
    assert expected in build_error(LM_TINY, flags)


def test_a_tied_output_flag_with_the_untied_translation_output_is_refused():
    # not under --share-all-embeddings, where fairseq sets the flag itself and stores it: a
    # checkpoint trained so must load (test_define_authors' cached-table test)
    flags = ["--define-output-layer", "untied", "--share-decoder-input-output-embed"]
    assert ("--share-decoder-input-output-embed ties the output layer to the decoder's input embedding, but "
            "--define-output-layer untied keeps a separate d_model x vocabulary layer: drop the flag") in build_error(
        TRANSFORMER, flags)


@pytest.mark.parametrize("flags", [
    ["--decoder-output-dim", "16"],  # n: what tied_map sets
    ["--adaptive-input", "--adaptive-input-cutoff", "20,50", "--adaptive-input-factor", "2"],  # the softmax follows
    ["--define-output-layer", "untied", "--decoder-output-dim", "24"],
], ids=lambda f: " ".join(f))
def test_language_model_settings_the_form_honours(flags):
    build(LM_TINY, flags)


@pytest.mark.parametrize("window,expected", [
    (-1, "--context-window -1 is negative"), (64, "--context-window 64 leaves no token to score in blocks of "
                                              "--tokens-per-sample 64"), (100, "--context-window 100 leaves no token"),
])
def test_eval_lm_context_window(window, expected):
    from fairseq import UserError as FairseqUserError
    from omegaconf import OmegaConf

    from fairseq_define_patch.runtime.eval_lm_settings import check_context_window

    with pytest.raises(FairseqUserError, match=expected):
        check_context_window(
            OmegaConf.create({"eval_lm": {"context_window": window}, "task": {"tokens_per_sample": 64}})
        )
    check_context_window(OmegaConf.create({"eval_lm": {"context_window": 63}, "task": {"tokens_per_sample": 64}}))


def test_input_from_a_pipe(tmp_path):
    """fairseq-interactive --input /dev/stdin (or a named pipe) reads, as - does."""
    import os
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "w", encoding="utf-8") as f:
            f.write("a b\nc\n")

    writer = threading.Thread(target=write)
    writer.start()
    assert interactive_lines(fifo) == ["a b", "c"]
    writer.join()


def test_outputs_are_not_written_through_links(tmp_path):
    from fairseq import UserError as FairseqUserError

    from fairseq_define_patch.runtime.output_links import PREPROCESS_OUTPUT, check_no_links, open_output

    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "generate-test.txt").symlink_to(victim)
    with pytest.raises(FairseqUserError, match="generate-test.txt is a link where this tool writes its output"):
        with open_output(str(tmp_path / "generate-test.txt"), "--results-path"):
            pass
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "valid1.en-de.de.idx").symlink_to(tmp_path / "missing")  # dangling: would be created
    with pytest.raises(FairseqUserError, match=r"valid1.en-de.de.idx is a link \(to .*missing\)"):
        check_no_links(str(tmp_path / "dest"), PREPROCESS_OUTPUT, "--destdir")
    assert victim.read_text() == "keep" and not (tmp_path / "missing").exists()
    with open_output(str(tmp_path / "out.txt"), "--results-path") as f:
        f.write("ok\n")
    assert (tmp_path / "out.txt").read_text() == "ok\n"


def test_user_dir_that_is_a_file(tmp_path):
    from fairseq import UserError as FairseqUserError

    from fairseq_define_patch.runtime.plugin_names import check_user_dir

    init = Path(__file__).resolve().parents[1] / "fairseq_define" / "__init__.py"
    with pytest.raises(FairseqUserError, match=r"__init__.py is a file: .*did you mean .*fairseq_define\?"):
        check_user_dir(str(init), str(init))
    (tmp_path / "plugin.py").write_text("")
    with pytest.raises(FairseqUserError, match="plugin.py is a file: give the plugin's package folder"):
        check_user_dir(str(tmp_path / "plugin.py"), str(tmp_path / "plugin.py"))


# The same classes through the real commands, on tiny slices of tests/data: a language model
# (PTB-style text, define_transformer_lm_tiny, one update) and a translation pair (WMT news,
# fairseq's own transformer, one update, no --user-dir).
@pytest.fixture(scope="module")
def cli_slices(tmp_path_factory):
    from .helpers import TEST_DATA, TINY_STOCK_TRANSFORMER, binarize_ptb_slice, head, run_in_process

    # the fixture's checkpoints, made in the test's process: the mistakes below are the console scripts'
    d = tmp_path_factory.mktemp("cli_slices")
    lm = binarize_ptb_slice(d, 300, 40)
    run_in_process(
        "fairseq-train",
        lm,
        "--user-dir",
        USER_DIR,
        "--task",
        "language_modeling",
        "--arch",
        "define_transformer_lm_tiny",
        "--tokens-per-sample",
        "32",
        "--max-tokens",
        "256",
        "--max-update",
        "1",
        "--cpu",
        "--optimizer",
        "adam",
        "--lr",
        "1e-3",
        "--save-dir",
        d / "lm_ck",
        "--no-epoch-checkpoints",
    )
    for split, count in (("train", 200), ("valid", 30)):
        for lang in ("en", "de"):
            head(TEST_DATA / "wmt_news" / f"{split}.{lang}", d / f"{split}.{lang}", 0, count)
    run_in_process("fairseq-preprocess", "-s", "en", "-t", "de", "--trainpref", d / "train", "--validpref",
                   d / "valid", "--destdir", d / "mt", "--joined-dictionary", "--workers", "1")
    run_in_process(
        "fairseq-train",
        d / "mt",
        *TINY_STOCK_TRANSFORMER,
        "--optimizer",
        "adam",
        "--lr",
        "1e-3",
        "--max-tokens",
        "500",
        "--max-update",
        "1",
        "--cpu",
        "--save-dir",
        d / "mt_ck",
        "--no-epoch-checkpoints",
    )
    return d


def _lm_train(d, *flags, data="bin", user_dir=None):
    return (
        "fairseq-train",
        d / data,
        "--user-dir",
        user_dir or USER_DIR,
        "--task",
        "language_modeling",
        "--arch",
        "define_transformer_lm_tiny",
        "--tokens-per-sample",
        "32",
        "--max-tokens",
        "256",
        "--max-update",
        "2",
        "--cpu",
        "--optimizer",
        "adam",
        "--lr",
        "1e-3",
        "--save-dir",
        d / "new_ck",
        *flags,
    )


def _mt_train(d, *flags):
    from .helpers import TINY_STOCK_TRANSFORMER

    return ("fairseq-train", d / "mt", *TINY_STOCK_TRANSFORMER, "--optimizer", "adam", "--max-tokens", "500",
            "--max-update", "3", "--cpu", "--save-dir", d / "new_ck", *flags)


def _eval_lm(d, *flags):
    return ("fairseq-eval-lm", d / "bin", "--user-dir", USER_DIR, "--path", d / "lm_ck" / "checkpoint_last.pt", "--cpu",
            "--max-tokens", "256", "--tokens-per-sample", "32", "--gen-subset", "valid", *flags)


def _damaged_dict_copy(d):
    """The slice's binarized folder with its dictionary's first token listed again on line 6."""
    import shutil

    shutil.rmtree(d / "bad_bin", ignore_errors=True)
    shutil.copytree(d / "bin", d / "bad_bin")
    lines = (d / "bin" / "dict.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    (d / "bad_bin" / "dict.txt").write_text("".join(lines[:5] + lines[:1] + lines[5:]), encoding="utf-8")
    return d / "bad_bin"


def _planted_destdir(d):
    import shutil

    shutil.rmtree(d / "planted", ignore_errors=True)
    (d / "planted").mkdir()
    (d / "planted" / "train.en-de.en.bin").symlink_to(d / "victim.txt")
    return d / "planted"


def _planted_results(d):
    (d / "results").mkdir(exist_ok=True)
    if not (d / "results" / "generate-valid.txt").is_symlink():
        (d / "results" / "generate-valid.txt").symlink_to(d / "victim.txt")
    return d / "results"


# (name, the command given the slices' folder, what the one line says)
CLI_TRAINING_AND_TEXT_MISTAKES = [
    (
        "batch_size_multiple_0",
        lambda d: _lm_train(d, "--required-batch-size-multiple", "0"),
        "--required-batch-size-multiple 0 must be at least 1",
    ),  # SIGFPE before
    ("save_interval_0", lambda d: _lm_train(d, "--save-interval", "0"), "--save-interval 0 must be at least 1"),
    (
        "negative_end_lr",
        lambda d: _lm_train(
            d, "--lr-scheduler", "polynomial_decay", "--total-num-update", "10", "--end-learning-rate", "-5"
        ),
        "--end-learning-rate -5.0 is negative",
    ),
    ("fp16_on_the_cpu", lambda d: _lm_train(d, "--fp16"), "--fp16 trains on a CUDA GPU"),
    (
        "optimizer_override_out_of_range",
        lambda d: _lm_train(
            d, "--restore-file", d / "lm_ck" / "checkpoint_last.pt", "--optimizer-overrides", "{'lr': -1}"
        ),
        "--optimizer-overrides: lr -1 is negative",
    ),
    (
        "optimizer_override_unknown",
        lambda d: _lm_train(
            d, "--restore-file", d / "lm_ck" / "checkpoint_last.pt", "--optimizer-overrides", "{'lrr': 0.1}"
        ),
        "--optimizer-overrides names 'lrr', which this optimizer does not have",
    ),
    ("nan_loss_stock_transformer", lambda d: _mt_train(d, "--lr", "1e30"), "training diverged at update"),
    (
        "heads_do_not_divide",
        lambda d: _mt_train(d, "--decoder-attention-heads", "3"),
        "an attention layer of width 32 cannot be split into 3 heads",
    ),
    ("max_tokens_below_a_sentence", lambda d: _mt_train(d, "--max-tokens", "20"), "more than --max-tokens 20 allows"),
    ("max_tokens_below_every_block", lambda d: _lm_train(d, "--max-tokens", "8"), "every sample of this split"),
    (
        "decoder_output_dim_replaced",
        lambda d: _lm_train(d, "--decoder-output-dim", "24"),
        "--decoder-output-dim 24 does not apply to --define-output-layer tied_map",
    ),
    ("damaged_dictionary", lambda d: _lm_train(d, data=_damaged_dict_copy(d).name), "dict.txt line 6: "),
    (
        "user_dir_is_a_file",
        lambda d: _lm_train(d, user_dir=Path(USER_DIR) / "__init__.py"),
        "__init__.py is a file: give the plugin's package folder",
    ),
    (
        "context_window_not_below_the_block",
        lambda d: _eval_lm(d, "--context-window", "32"),
        "--context-window 32 leaves no token to score",
    ),
    ("context_window_negative", lambda d: _eval_lm(d, "--context-window", "-1"), "--context-window -1 is negative"),
    (
        "preprocess_through_a_link",
        lambda d: (
            "fairseq-preprocess",
            "-s",
            "en",
            "-t",
            "de",
            "--trainpref",
            d / "train",
            "--destdir",
            _planted_destdir(d),
            "--joined-dictionary",
            "--workers",
            "1",
        ),
        "train.en-de.en.bin is a link",
    ),
    (
        "generate_through_a_link",
        lambda d: (
            "fairseq-generate",
            d / "mt",
            "--path",
            d / "mt_ck" / "checkpoint_last.pt",
            "--gen-subset",
            "valid",
            "--beam",
            "1",
            "--max-tokens",
            "500",
            "--cpu",
            "--results-path",
            _planted_results(d),
        ),
        "generate-valid.txt is a link",
    ),
]


# run by their console scripts: a crash the check prevents (SIGFPE would take the test's process
# with it), a --user-dir import, and one of each other command; the rest in the test's process,
# which ends bad input as the console scripts' hook does (test_bad_input.py holds the two equal)
CONSOLE_SCRIPT_MISTAKES = {"batch_size_multiple_0", "user_dir_is_a_file", "preprocess_through_a_link",
                           "generate_through_a_link", "context_window_negative"}


def test_the_console_script_mistakes_are_mistakes_of_the_list():
    assert CONSOLE_SCRIPT_MISTAKES <= {m[0] for m in CLI_TRAINING_AND_TEXT_MISTAKES}


@pytest.mark.cli
@pytest.mark.parametrize("name,command,expected", CLI_TRAINING_AND_TEXT_MISTAKES,
                         ids=[m[0] for m in CLI_TRAINING_AND_TEXT_MISTAKES])
def test_training_and_text_mistakes_from_the_command_line(cli_slices, name, command, expected):
    import shutil

    from .helpers import assert_user_error, run_cli, run_in_process, snapshot

    d = cli_slices
    shutil.rmtree(d / "new_ck", ignore_errors=True)
    (d / "victim.txt").write_text("keep\n")
    before = snapshot(d / "lm_ck", d / "mt_ck")
    prog, *args = command(d)
    if name in CONSOLE_SCRIPT_MISTAKES:
        proc = run_cli(prog, *args, check=False, timeout=300)
    else:
        proc = run_in_process(prog, *args, check=False)
    assert_user_error(proc, prog, expected)
    assert (d / "victim.txt").read_text() == "keep\n" and snapshot(d / "lm_ck", d / "mt_ck") == before
    assert "is listed already on line 1" in proc.stdout or name != "damaged_dictionary"
    assert not (d / "new_ck" / "checkpoint_last.pt").exists()


@pytest.mark.cli
def test_interactive_reads_a_pipe(cli_slices):
    """fairseq-interactive --input /dev/stdin: the pipe is read like - (it was refused as "not an
    existing file")."""
    import subprocess

    from .helpers import BIN

    d = cli_slices
    proc = subprocess.run(
        [
            str(BIN / "fairseq-interactive"),
            str(d / "mt"),
            "--path",
            str(d / "mt_ck" / "checkpoint_last.pt"),
            "--cpu",
            "--beam",
            "1",
            "--max-len-b",
            "5",
            "--input",
            "/dev/stdin",
            "--source-lang",
            "en",
            "--target-lang",
            "de",
        ],
        input="the house\nwe said\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len([l for l in proc.stdout.splitlines() if l.startswith("H-")]) == 2


# -- issue 53: the tools check every choice before any work; a full disk is one line -------------

def trained_nmt(tmp_path):
    """A trained translation checkpoint (the legacy nmt_untied) whose task names its data."""
    from .helpers import damaged_checkpoint

    return damaged_checkpoint(tmp_path, lambda weights: None)[0]


def run_tool(tool, args, files, capsys):
    """``main`` of fairseq_define.tools.TOOL on ``args`` (names in ``files`` replaced): (exit
    status, standard error)."""
    import importlib

    main = importlib.import_module(f"fairseq_define.tools.{tool}").main
    try:
        rc = main([files.get(a, a) for a in args])
    except SystemExit as e:  # argparse
        rc = e.code
    return rc, capsys.readouterr().err


# (tool, arguments (MISSING: a checkpoint that does not exist, OUT: a new file), the one line):
# refused before the checkpoint is read (it would say "no such checkpoint") or anything written
TOOL_CHOICE_MISTAKES = [
    ("export", ["MISSING", "OUT", "--ct2", "CT2", "--ct2-quantization", "bogus"],
     "--ct2-quantization 'bogus' is not a CTranslate2 weight type: use one of int8, "),
    ("export", ["MISSING", "OUT", "--ct2-quantization", "int8"], "--ct2-quantization is the CTranslate2 model's weight "
     "type: give --ct2 DIR too, or drop it"),
    ("compress", ["--path", "MISSING", "--output", "OUT", "--codebooks", "10000000"], "--codebooks in 1..1024"),
    ("compress", ["--path", "MISSING", "--output", "OUT", "--codes", "300"], "--codes must be in 2..256"),
]


@pytest.mark.parametrize(
    "tool,args,expected", TOOL_CHOICE_MISTAKES, ids=[f"{t}:{' '.join(a[-2:])}" for t, a, _ in TOOL_CHOICE_MISTAKES]
)
def test_tool_choices_are_checked_before_any_work(tmp_path, capsys, tool, args, expected):
    if "--ct2" in args:
        pytest.importorskip("ctranslate2")
    files = {"MISSING": str(tmp_path / "missing.pt"), "OUT": str(tmp_path / "out.pt"), "CT2": str(tmp_path / "ct2")}
    rc, err = run_tool(tool, args, files, capsys)
    assert rc == 2 and expected in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


class FullDisk(io.BufferedWriter):
    """A file whose disk fills after its first 4 KB."""

    def write(self, data):
        self.written = getattr(self, "written", 0) + len(data)
        if self.written > 4096:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(data)


@pytest.fixture
def full_disk(monkeypatch):
    """Every file opened for writing by descriptor (how the atomic writes open their temporary
    file) finds the disk full."""
    fdopen = os.fdopen

    def opened(fd, mode="r", *args, **kwargs):
        return FullDisk(io.FileIO(fd, "wb")) if "w" in mode and "b" in mode else fdopen(fd, mode, *args, **kwargs)

    monkeypatch.setattr(os, "fdopen", opened)


FULL_DISK_TOOLS = [  # (tool, arguments (CK, CK2: trained checkpoints, DATA, OUT)): the output finds the disk full
    ("average_checkpoints", ["--inputs", "CK", "CK2", "--output", "OUT"]),
    ("cache_tables", ["--path", "CK", "--output", "OUT", "--data", "DATA"]),
    ("export", ["CK", "OUT", "--data", "DATA"]),
]


@pytest.mark.parametrize("tool,args", FULL_DISK_TOOLS, ids=[t for t, _ in FULL_DISK_TOOLS])
def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, capsys, full_disk, tool, args):
    """torch.save reported the failed write as its own RuntimeError ("unexpected pos"): a traceback."""
    import shutil

    (tmp_path / "data").mkdir()
    ck = trained_nmt(tmp_path / "data")
    shutil.copyfile(ck, tmp_path / "data" / "ck2.pt")
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "out.pt"
    files = {"CK": ck, "CK2": str(tmp_path / "data" / "ck2.pt"), "DATA": str(tmp_path / "data"), "OUT": str(out)}
    rc, err = run_tool(tool, args, files, capsys)
    assert rc == 2 and f"no space left on the device while writing {out}" in err and err.count("\n") == 1, err
    assert list((tmp_path / "out").iterdir()) == []  # nothing half-written, no temporary file


def test_a_full_disk_in_the_ctranslate2_conversion_is_one_line_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    """The converter writes model.bin with Python's open: a full disk there was an OSError
    traceback, and the export written before it stayed, so the same command then refused it."""
    pytest.importorskip("ctranslate2")
    from ctranslate2.specs import model_spec

    (tmp_path / "data").mkdir()
    ck = trained_nmt(tmp_path / "data")
    (tmp_path / "out").mkdir()
    files = {"CK": ck, "DATA": str(tmp_path / "data"), "OUT": str(tmp_path / "out" / "out.pt"),
             "CT2": str(tmp_path / "out" / "ct2")}
    real_open = open

    def full(path, mode="r", *args, **kwargs):
        return FullDisk(io.FileIO(path, "wb")) if "wb" in mode else real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(model_spec, "open", full, raising=False)
    rc, err = run_tool("export", ["CK", "OUT", "--data", "DATA", "--ct2", "CT2"], files, capsys)
    assert rc == 2 and err.count("\n") == 1, err
    assert f"no space left on the device while writing {files['CT2']}: free some space" in err, err
    assert f"{files['OUT']} is removed too" in err, err
    assert list((tmp_path / "out").iterdir()) == []  # neither the export nor a part of the CTranslate2 folder
    monkeypatch.undo()  # space freed: the same command runs
    rc, err = run_tool("export", ["CK", "OUT", "--data", "DATA", "--ct2", "CT2"], files, capsys)
    assert rc == 0 and (tmp_path / "out" / "ct2" / "model.bin").stat().st_size > 4096, err


def test_a_full_disk_during_a_checkpoint_save_is_one_line(tmp_path, full_disk):
    """fairseq-train's own writes (the patch's atomic save) read the same failure."""
    from fairseq import UserError, checkpoint_utils

    path = tmp_path / "checkpoint_last.pt"
    with pytest.raises(UserError, match=f"no space left on the device while writing {path}: free some space"):
        checkpoint_utils.torch_persistent_save({"model": {"w": torch.zeros(10_000)}}, str(path))
    assert list(tmp_path.iterdir()) == []


REAL_LARGE_MODELS = [  # built with no flag (the first was refused as "about 1.12 billion" before the budget
    # counted what a family builds: issue 53)
    ("transformer_vaswani_wmt_en_de_big", ["--vocab-size", "300000", "--share-all-embeddings"], "total 483.56M"),
    ("transformer_lm_gpt", ["--vocab-size", "250000"], "total 469.06M"),
]


@pytest.mark.parametrize("arch,args,expected", REAL_LARGE_MODELS, ids=[m[0] for m in REAL_LARGE_MODELS])
def test_real_large_models_build_without_a_flag(capsys, monkeypatch, arch, args, expected):
    """fairseq-define-params builds the model through fairseq's build_model, budget and all:
    large real models at realistic vocabularies pass the default limit (mbart_large at 250,027
    words, 610M: tests/test_model_budget.py)."""
    from fairseq_define.tools import params

    monkeypatch.delenv("FAIRSEQ_DEFINE_MAX_PARAMETERS", raising=False)
    assert params.cli_main(["--arch", arch, *args]) == 0
    assert expected in capsys.readouterr().out


def test_ct2_of_a_language_model_is_refused_before_the_export_is_written(tmp_path, capsys):
    """--ct2 converts translation models: a language model's export was written, then refused."""
    import shutil

    pytest.importorskip("ctranslate2")
    from .helpers import FAMILIES

    shutil.copyfile(FAMILIES / "lm.dict.txt", tmp_path / "dict.txt")
    files = {"CK": str(FAMILIES / "transformer_lm.pt"), "OUT": str(tmp_path / "out.pt"), "DATA": str(tmp_path),
             "CT2": str(tmp_path / "ct2")}
    rc, err = run_tool("export", ["CK", "OUT", "--data", "DATA", "--ct2", "CT2"], files, capsys)
    assert rc == 2 and "--ct2 converts translation models and this is a transformer_lm" in err, err
    assert err.count("\n") == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["dict.txt"]


def test_the_trust_tool_checks_its_output_before_reading(tmp_path, capsys):
    """A link at the destination (even a dangling one) is refused before the source is read (a
    source of one byte would be "not a PyTorch checkpoint")."""
    (tmp_path / "src.pt").write_bytes(b"x")
    (tmp_path / "new.pt").symlink_to(tmp_path / "nowhere")
    files = {"SRC": str(tmp_path / "src.pt"), "DEST": str(tmp_path / "new.pt")}
    rc, err = run_tool("trust_checkpoint", ["SRC", "DEST"], files, capsys)
    assert rc == 2 and f"{tmp_path / 'new.pt'} exists; choose a new file name (nothing is overwritten)" in err, err
    assert err.count("\n") == 1 and not (tmp_path / "nowhere").exists()
