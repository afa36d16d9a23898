"""A checkpoint's stored config held to the model budget (issue 41, docs/checkpoints.md): sizes
refused before anything is allocated, the model counted as what it builds, the limit a
command-line flag (--max-model-parameters) of fairseq's CLIs and the project's tools, and a
run resumed under another limit."""

import os
import re
import subprocess

import pytest
from fairseq import checkpoint_utils

from .helpers import BIN, nmt_checkpoint

STORED_BUDGET = [  # a stored config's sizes: refused before anything is allocated
    ("ffn", "decoder_ffn_embed_dim", 10**9, "decoder_ffn_embed_dim=1,000,000,000 is larger than fairseq builds"),
    ("positions", "max_source_positions", 10**9, "max_source_positions=1,000,000,000 is larger"),
    ("layers", "encoder_layers", 100000, "encoder_layers=100,000 is larger"),
    ("wide", "decoder_embed_dim", 65536,
     "more than the limit of 1,073,741,824; the largest part is decoder.layers \\(decoder_embed_dim=65,536"),
]


@pytest.mark.parametrize("setting,value,expected", [c[1:] for c in STORED_BUDGET], ids=[c[0] for c in STORED_BUDGET])
def test_a_stored_config_is_held_to_the_model_budget(tmp_path, setting, value, expected):
    import tracemalloc

    from fairseq import UserError

    path, overrides = nmt_checkpoint(tmp_path, lambda cfg: setattr(cfg, setting, value))
    with pytest.raises(UserError, match=expected):  # first: the modules a build imports are no model memory
        checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)
    tracemalloc.start()
    with pytest.raises(UserError, match=expected):
        checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 << 20  # refused before the model is built (counted without memory: model_budget.py)


COUNTED_BUDGET = [  # sizes each within its own bound whose product is too large: the count refuses them (issue 53)
    ("define unit", {"define_map_dim": 65536, "define_expand_dim": 65536},
     "the largest part is encoder.embed_tokens (encoder_embed_dim=32, define_map_dim=65,536, define_expand_dim=65,536"),
    ("define depth", {"define_expand_dim": 65536, "define_depth": 3}, "more than the limit of 1,073,741,824"),
]


@pytest.mark.parametrize("settings,expected", [c[1:] for c in COUNTED_BUDGET], ids=[c[0] for c in COUNTED_BUDGET])
def test_a_stored_config_is_counted_as_what_it_builds(tmp_path, settings, expected):
    """A checkpoint's stored config whose DeFINE unit its schedule makes too large is one
    line, before any weight is allocated (the model is counted on the meta device; heads x
    head width: tests/test_model_budget.py)."""
    from fairseq import UserError

    path, overrides = nmt_checkpoint(tmp_path, lambda cfg: [setattr(cfg, k, v) for k, v in settings.items()])
    with pytest.raises(UserError, match=re.escape(expected)):
        checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)


@pytest.mark.cli
@pytest.mark.parametrize("tool,args", [
    ("fairseq-define-export", ["{path}", "{out}"]),
    ("fairseq-define-cache-tables", ["--path", "{path}", "--output", "{out}"]),
    ("fairseq-define-compress", ["--path", "{path}", "--output", "{out}"]),
])
@pytest.mark.parametrize("flag", ["--max-model-parameters", "--max-model"])
def test_the_tools_take_the_flag_their_budget_line_names(tmp_path, tool, args, flag):
    """The budget's line names --max-model-parameters; the project's tools that build a model
    take it as fairseq's do (a limit below the tiny model's ~20K parameters: refused, nothing
    written), abbreviated too, as their parsers take every option (the limit was ignored)."""
    from .helpers import assert_user_error

    path, _ = nmt_checkpoint(tmp_path)
    (tmp_path / "train.en-de.en.idx").touch()  # the language pair, as fairseq-preprocess names its files
    out = tmp_path / "out.pt"
    proc = subprocess.run(
        [str(BIN / tool), *[a.format(path=path, out=out) for a in args], "--data", str(tmp_path),
         flag, "1000"],
        capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if k != "FAIRSEQ_DEFINE_MAX_PARAMETERS"})
    assert_user_error(proc, tool, "more than the limit of 1,000", "--max-model-parameters")
    assert not out.exists()


@pytest.mark.cli
@pytest.mark.parametrize("limit,expected", [
    ("1000", "more than the limit of 1,000; the largest part is"),  # the flag sets the limit, below or above
    ("lots", "--max-model-parameters 'lots' must be a positive number of parameters"),
    ("0", "--max-model-parameters '0' must be a positive number of parameters"),
])
def test_the_budget_limit_is_a_command_line_flag(tmp_path, limit, expected):
    """--max-model-parameters on a stock CLI (fairseq-interactive on the tiny NMT checkpoint,
    which holds ~20K parameters): one line, before the model is built."""
    from .helpers import USER_DIR, assert_user_error

    path, _ = nmt_checkpoint(tmp_path)
    proc = subprocess.run(
        [str(BIN / "fairseq-interactive"), str(tmp_path), "--user-dir", USER_DIR, "--path", path, "--source-lang",
         "en", "--target-lang", "de", "--cpu", "--max-model-parameters", limit],
        input="a house\n", capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if k != "FAIRSEQ_DEFINE_MAX_PARAMETERS"})
    assert_user_error(proc, "fairseq-interactive", expected)


def test_the_budget_flag_is_read_before_the_model_and_listed_in_help(monkeypatch):
    """parse_args_and_arch hands --max-model-parameters on as the limit (workers fairseq spawns
    inherit it) and --help lists it; without the flag the limit stays where it was."""
    from fairseq import options
    from fairseq._define_runtime import model_budget

    # set (empty: no limit given) through monkeypatch, so that what the parse writes into the
    # environment is undone after the test
    monkeypatch.setenv(model_budget.LIMIT_VARIABLE, "")
    parser = options.get_training_parser()
    options.parse_args_and_arch(parser, ["data", "--arch", "transformer", "--max-model-parameters", "5e9"])
    assert model_budget.parameter_limit() == 5 * 10**9
    monkeypatch.setenv(model_budget.LIMIT_VARIABLE, "")
    options.parse_args_and_arch(options.get_training_parser(), ["data", "--arch", "transformer"])
    assert model_budget.parameter_limit() == model_budget.MAX_PARAMETERS
    help_text = subprocess.run([str(BIN / "fairseq-generate"), "--help"], capture_output=True, text=True,
                               timeout=120).stdout
    assert "--max-model-parameters N" in help_text


@pytest.mark.cli  # starts fairseq-train
def test_a_run_resumes_with_another_budget_limit(wmt_bin, trained, tmp_path):
    """--max-model-parameters is kept in a legacy model's stored args but changes no weight: a
    run resumes under another limit (the form check does not name it) and trains on."""
    import shutil

    from .helpers import TINY, TINY_TIED, USER_DIR, run_cli

    (tmp_path / "ck").mkdir()
    shutil.copy(trained / "checkpoint_last.pt", tmp_path / "ck")
    out = run_cli(
        "fairseq-train",
        wmt_bin / "bin",
        "--user-dir",
        USER_DIR,
        "--arch",
        "define_transformer_tiny",
        *TINY,
        *TINY_TIED,
        "--optimizer",
        "adam",
        "--lr",
        "1e-3",
        "--max-tokens",
        "1500",
        "--max-update",
        "14",
        "--save-dir",
        tmp_path / "ck",
        "--cpu",
        "--no-epoch-checkpoints",
        "--max-model-parameters",
        "5e9",
    ).stdout
    assert "Loaded checkpoint" in out and "@ 12 updates" in out and "num_updates 14" in out, out[-2000:]
