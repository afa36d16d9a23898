"""Checkpoints load through torch's weights-only unpickler with fairseq's allow-list."""

import os
import random
import shutil

import numpy as np
import pytest
import torch
from fairseq.checkpoint_utils import CheckpointLoadError, load_checkpoint_to_cpu, safe_torch_load

from .helpers import BIN, TINY, USER_DIR, run_cli, run_in_process

pytestmark = pytest.mark.cli  # starts fairseq's command-line tools or a recipe


class RunsCode:
    """Unpickling this runs a shell command (the attack a crafted checkpoint carries)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"echo pwned > {self.marker}",))


def crafted_checkpoint(trained, path, marker):
    state = safe_torch_load(str(trained / "checkpoint_last.pt"))
    state["extra_state"]["payload"] = RunsCode(marker)
    torch.save(state, path)


def test_checkpoints_written_by_fairseq_load_safely(trained):
    state = load_checkpoint_to_cpu(str(trained / "checkpoint_last.pt"))
    assert state["cfg"]["model"].arch == "define_transformer_tiny"
    assert torch.serialization.get_unsafe_globals_in_checkpoint(str(trained / "checkpoint_last.pt")) == [
        "argparse.Namespace"
    ]


def test_a_checkpoint_that_would_run_code_is_refused(trained, tmp_path):
    marker = tmp_path / "pwned"
    bad = tmp_path / "bad.pt"
    crafted_checkpoint(trained, bad, marker)
    with pytest.raises(CheckpointLoadError, match="refusing to load .*posix.system"):
        load_checkpoint_to_cpu(str(bad))
    assert not marker.exists()
    # the CLIs too, and torch's escape hatch variable does not override it
    for cli in ("fairseq-generate", "fairseq-validate"):
        out = run_cli(cli, trained.parent / "bin", "--user-dir", USER_DIR, "--task", "translation",
                      "--path", bad, "--cpu", "--max-tokens", "2000", check=False,
                      env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
        assert out.returncode != 0 and not marker.exists()
        assert f"{cli}: error: refusing to load {bad}" in out.stdout
        assert "Traceback" not in out.stdout


def test_resume_refuses_a_crafted_checkpoint_last(wmt_bin, trained, tmp_path):

    save = tmp_path / "ck"
    save.mkdir()
    marker = tmp_path / "pwned"
    crafted_checkpoint(trained, save / "checkpoint_last.pt", marker)
    before = (save / "checkpoint_last.pt").read_bytes()
    out = run_cli("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
                  "--share-all-embeddings", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500",
                  "--max-update", "14", "--save-dir", save, "--cpu", check=False)
    assert out.returncode != 0 and not marker.exists()
    assert "fairseq-train: error: refusing to load" in out.stdout
    assert (save / "checkpoint_last.pt").read_bytes() == before


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_trusted_old_checkpoint_is_converted_once(trained, tmp_path, legacy):
    from fairseq.data.text_compressor import TextCompressionLevel

    old = tmp_path / "old.pt"
    state = safe_torch_load(str(trained / "checkpoint_last.pt"))
    # what older software stored: numpy scalars, arrays and dtypes, fairseq enums
    state["extra_state"].update(best=np.float64(3.5), steps=np.arange(3), dtype=np.dtype("float32"),
                                level=TextCompressionLevel.low)
    torch.save(state, old, _use_new_zipfile_serialization=not legacy)
    with pytest.raises(CheckpointLoadError, match="they are plain data, so if you trust this file, convert it once "
                                                  "with: fairseq-define-trust-checkpoint"):
        safe_torch_load(str(old))
    new = tmp_path / "converted.pt"
    run_in_process("fairseq-define-trust-checkpoint", old, new)  # its refusal below: the console script's
    converted = safe_torch_load(str(new))
    assert converted["extra_state"]["best"] == 3.5 and converted["extra_state"]["dtype"] == "float32"
    assert (
        torch.equal(converted["extra_state"]["steps"], torch.arange(3)) and converted["extra_state"]["level"] == "low"
    )
    for k, v in state["model"].items():
        # equal_nan: fairseq's sinusoidal positions keep an uninitialized one-element buffer
        # (_float_tensor), which is NaN on some runs
        torch.testing.assert_close(converted["model"][k], v, rtol=0, atol=0, equal_nan=True, msg=k)
    again = run_cli("fairseq-define-trust-checkpoint", old, new, check=False)
    assert again.returncode == 2 and "exists" in again.stdout


def garbage(seed, pickle_header=False):
    """4 KiB of random bytes (seeded); with a pickle header, the unpickler runs random opcodes,
    which raise KeyError, IndexError, struct.error and the like rather than UnpicklingError."""
    data = random.Random(seed).randbytes(4096)
    return b"\x80\x02" + data if pickle_header else data


@pytest.mark.parametrize("damage", ["truncate", "garbage", "pickle_garbage", "empty"])
def test_corrupt_checkpoints_give_a_clear_error(trained, tmp_path, damage):
    data = (trained / "checkpoint_last.pt").read_bytes()
    if damage in ("garbage", "pickle_garbage"):
        files = [garbage(seed, damage == "pickle_garbage") for seed in range(40)]
    else:
        files = [{"truncate": data[: len(data) // 2], "empty": b""}[damage]]
    for i, content in enumerate(files):
        path = tmp_path / f"ck{i}.pt"
        path.write_bytes(content)
        with pytest.raises(CheckpointLoadError, match="cannot read .*truncated, corrupt or not a PyTorch checkpoint"):
            load_checkpoint_to_cpu(str(path))


def test_average_checkpoints_loads_safely(trained, tmp_path):
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    shutil.copy(trained / "checkpoint_last.pt", a)
    state = safe_torch_load(str(a))
    state["model"] = {k: v + 1 if v.is_floating_point() else v for k, v in state["model"].items()}
    torch.save(state, b)
    run_in_process("fairseq-define-average-checkpoints", "--inputs", a, b, "--output", tmp_path / "avg.pt")
    avg = safe_torch_load(str(tmp_path / "avg.pt"))["model"]
    orig = safe_torch_load(str(a))["model"]
    k = next(k for k, v in orig.items() if v.is_floating_point())
    torch.testing.assert_close(avg[k], orig[k] + 0.5)
    marker = tmp_path / "pwned"
    crafted_checkpoint(trained, tmp_path / "bad.pt", marker)
    out = run_cli(
        "fairseq-define-average-checkpoints",
        "--inputs",
        a,
        tmp_path / "bad.pt",
        "--output",
        tmp_path / "avg2.pt",
        check=False,
    )
    assert out.returncode == 2 and "refusing to load" in out.stdout and not marker.exists()
    assert not (tmp_path / "avg2.pt").exists()


# A checkpoint that holds only strings passes any weights-only loader; fairseq 0.12.2 then
# eval()-ed some of its config strings while building the model. The patch parses them as
# plain data (fairseq.utils.parse_config_literal) and refuses anything else.
def payload(marker):
    return f"__import__('os').system('touch {marker}')"


def crafted_config_checkpoint(trained, path, arch, **fields):
    """The trained checkpoint with another arch and config fields: strings only."""
    state = safe_torch_load(str(trained / "checkpoint_last.pt"))
    model_cfg = state["cfg"]["model"]  # an argparse.Namespace
    model_cfg.arch = model_cfg._name = arch
    for k, v in fields.items():
        setattr(model_cfg, k, v)
    torch.save(state, path)
    assert torch.serialization.get_unsafe_globals_in_checkpoint(str(path)) == ["argparse.Namespace"]


LAYERS = "[(64, 3)] * 2"
# (arch, field that fairseq evaluates, other fields the builder needs to reach it)
CONFIG_EVAL_SLOTS = [
    ("fconv", "encoder_layers", {}),  # fconv.py: eval()
    ("fconv", "decoder_attention", {"encoder_layers": LAYERS, "decoder_layers": LAYERS}),
    ("fconv_self_att", "pretrained", {}),
    ("lstm", "decoder_attention", {"decoder_out_embed_dim": 64}),  # utils.eval_bool
    # utils.eval_str_list; a separate output layer, which an adaptive softmax needs
    ("define_transformer_tiny", "adaptive_softmax_cutoff", {"define_output_layer": "untied"}),
    ("define_transformer_tiny", "encoder_xformers_att_config", {}),  # utils.eval_str_dict
    ("transformer_lm", "character_filters", {"character_embeddings": True}),
    ("wav2vec2", "conv_feature_layers", {}),
]


@pytest.mark.parametrize("arch,field,extra", CONFIG_EVAL_SLOTS, ids=[f"{a}.{f}" for a, f, _ in CONFIG_EVAL_SLOTS])
def test_config_strings_are_never_evaluated(wmt_bin, trained, tmp_path, arch, field, extra):
    from fairseq import checkpoint_utils
    from fairseq.utils import ConfigLiteralError

    marker, bad = tmp_path / "pwned", tmp_path / "bad.pt"
    crafted_config_checkpoint(trained, bad, arch, **{field: payload(marker), **extra})
    with pytest.raises(ConfigLiteralError, match=r"refusing to evaluate the config value .*__import__"):
        checkpoint_utils.load_model_ensemble_and_task([str(bad)], arg_overrides={"data": str(wmt_bin / "bin")})
    assert not marker.exists()


@pytest.mark.parametrize("value,expected", [
    # fairseq's own defaults are expressions of literals: they parse as eval gave them
    ("[(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2", [(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2),
    ("[(512, 10, 5)] + [(512, 3, 2)] * 4 + [(512,2,2)]", [(512, 10, 5)] + [(512, 3, 2)] * 4 + [(512, 2, 2)]),
    ("(0.9, 0.98)", (0.9, 0.98)), (" True", True), ("False", False), ("None", None), ("-1e-3", -1e-3),
    ("{'a': [1, -2], 'b': 'x'}", {"a": [1, -2], "b": "x"}), ("'ab' * 2", "abab"), ("1 / 4 - 1", -0.75),
])
def test_config_literals_parse_as_eval_gave_them(value, expected):
    from fairseq.utils import parse_config_literal

    assert parse_config_literal(value) == expected


@pytest.mark.parametrize("value", [
    "__import__('os').system('true')", "open('/etc/passwd').read()", "().__class__.__base__", "x",
    "lambda: 0", "[c for c in 'ab']", "[0] * 10 ** 12", "[0] * 100_000_000", "{**{}}", "-'a'", "1 / 0",
    "(1,", "f'{1}'",
])
def test_config_values_that_are_not_plain_data_are_refused(value):
    from fairseq.utils import ConfigLiteralError, parse_config_literal

    with pytest.raises(ConfigLiteralError, match="refusing to evaluate the config value"):
        parse_config_literal(value)


def test_no_installed_fairseq_module_calls_the_builtin_eval():
    """Every module of the installed fairseq (examples included) that calls ``eval`` gets
    the parser bound to that name by the patch: a new call site would show up here."""
    import ast
    from pathlib import Path

    import fairseq

    site = Path(fairseq.__file__).parents[1]
    unbound = []
    for top in ("fairseq", "fairseq_cli"):
        for f in sorted((site / top).rglob("*.py")):
            src = f.read_text(encoding="utf-8", errors="replace")
            calls = [n.lineno for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Name) and n.func.id in ("eval", "exec")]
            if calls and "from fairseq.utils import parse_config_literal as eval" not in src:
                unbound.append(f"{f.relative_to(site)}:{calls}")
    assert not unbound


def _run_tool_on(tool, ckpt, wmt_bin, tmp_path):
    bin_dir = wmt_bin / "bin"
    if tool == "fairseq-interactive":
        import subprocess


        return subprocess.run([str(BIN / tool), str(bin_dir), "--user-dir", USER_DIR, "--path", str(ckpt),
                               "--source-lang", "en", "--target-lang", "de", "--cpu"],
                              input="the Parliament\n", capture_output=True, text=True, timeout=300)
    args = {
        "fairseq-generate": [bin_dir, "--user-dir", USER_DIR, "--path", ckpt, "--gen-subset", "test", "--cpu"],
        "fairseq-validate": [bin_dir, "--user-dir", USER_DIR, "--task", "translation", "--path", ckpt, "--cpu",
                             "--max-tokens", "2000"],
        "fairseq-eval-lm": [bin_dir, "--user-dir", USER_DIR, "--task", "translation", "--path", ckpt, "--cpu"],
        "fairseq-define-cache-tables": ["--path", ckpt, "--output", tmp_path / "out.pt", "--data", bin_dir],
        "fairseq-define-compress": ["--path", ckpt, "--output", tmp_path / "out.pt", "--data", bin_dir],
        "fairseq-define-results": ["correlations", "--path", ckpt, "--output", tmp_path / "out.png",
                                   "--data", bin_dir],
    }[tool]
    return run_cli(tool, *args, check=False)


LOADING_TOOLS = ["fairseq-generate", "fairseq-interactive", "fairseq-validate", "fairseq-eval-lm",
                 "fairseq-define-cache-tables", "fairseq-define-compress", "fairseq-define-results"]


@pytest.mark.parametrize("tool", LOADING_TOOLS)
def test_every_tool_refuses_config_code_with_one_line(wmt_bin, trained, tmp_path, tool):
    marker, bad = tmp_path / "pwned", tmp_path / "bad.pt"
    crafted_config_checkpoint(trained, bad, "fconv", encoder_layers=payload(marker))
    proc = _run_tool_on(tool, bad, wmt_bin, tmp_path)
    out = proc.stdout + (proc.stderr or "")
    assert proc.returncode != 0 and not marker.exists(), out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    errors = [l for l in out.splitlines() if l.startswith(f"{tool}: error: ")]
    assert len(errors) == 1 and "refusing to evaluate the config value" in errors[0], out[-3000:]
    assert not (tmp_path / "out.pt").exists() and not (tmp_path / "out.png").exists()


def test_the_hub_refuses_config_code(wmt_bin, trained, tmp_path):
    from fairseq.utils import ConfigLiteralError

    from fairseq_define.models.define_transformer import DefineTransformerModel

    marker = tmp_path / "pwned"
    crafted_config_checkpoint(trained, tmp_path / "bad.pt", "fconv", encoder_layers=payload(marker))
    with pytest.raises(ConfigLiteralError, match="refusing to evaluate the config value"):
        DefineTransformerModel.from_pretrained(str(tmp_path), checkpoint_file="bad.pt",
                                               data_name_or_path=str(wmt_bin / "bin"))
    assert not marker.exists()


def test_a_checkpoint_with_literal_layer_strings_builds_its_model(wmt_bin, trained, tmp_path):
    """Plain literals still work: fairseq's fconv model is built from the checkpoint's strings."""
    from fairseq import checkpoint_utils, tasks

    crafted_config_checkpoint(trained, tmp_path / "fconv.pt", "fconv", encoder_layers=LAYERS,
                              decoder_layers=LAYERS, decoder_attention="True")
    cfg = checkpoint_utils.load_checkpoint_to_cpu(str(tmp_path / "fconv.pt"), {"data": str(wmt_bin / "bin")})["cfg"]
    model = tasks.setup_task(cfg.task).build_model(cfg.model)
    assert type(model).__name__ == "FConvModel" and len(model.encoder.convolutions) == 2
    assert all(a is not None for a in model.decoder.attention)  # "True" for every layer


def test_safe_load_reads_a_stream_that_does_not_say_its_size():
    """fairseq's own test_load_ema_from_checkpoint hands a stand-in file object to a mocked
    torch.load: a stream without a size is loaded without the size bound, not refused."""
    from unittest.mock import MagicMock, patch

    from fairseq import checkpoint_utils

    state = {"extra_state": {"ema": {"a": torch.tensor([1])}}}
    with patch(f"{checkpoint_utils.__name__}.torch.load", return_value=state):
        assert checkpoint_utils.safe_torch_load(MagicMock()) is state
