"""bfloat16 training without a TPU (the patch's fairseq_bugs/bf16_without_tpu.py):
``--bf16`` and ``--memory-efficient-bf16`` train on the CPU through fairseq-train (stock
fairseq 0.12.2 turned them into ``--tpu`` and died without torch_xla), their checkpoints
translate and evaluate with and without ``--bf16``, and settings that cannot go together get
one line. The CUDA case is in test_gpu.py."""

import importlib.util
import math
import re

import pytest
import torch
from fairseq.checkpoint_utils import safe_torch_load

from .helpers import TINY, USER_DIR, result, run_cli, run_in_process

NOTICE = "tensorboardX"  # fairseq's "Please install tensorboardX" line, silenced by the patch


def train_losses(out):
    """train_inner losses in order, nan and inf included (so a diverged run is seen)."""
    return [float(x) for x in re.findall(r"train_inner \| .*? loss=([0-9.]+|nan|inf)", out)]


def assert_trained_in_bf16(out, ckpt, optimizer_name):
    loss = train_losses(out)
    assert len(loss) >= 3 and all(math.isfinite(x) for x in loss), loss
    assert loss[-1] < loss[0] - 0.5, loss  # it learns (the NMT runs: about 9.7 -> 8.8 in 30 updates)
    valid = re.findall(r"valid on 'valid' subset \| loss ([0-9.]+|nan|inf)", out)
    assert valid and math.isfinite(float(valid[-1])), valid
    assert NOTICE not in out
    state = safe_torch_load(str(ckpt))
    common = state["cfg"]["common"]
    assert common["bf16"] and not common["tpu"]
    # fairseq's mixed-precision wrapper (float32 master weights), without fp16's loss scale
    assert state["optimizer_history"][-1]["optimizer_name"] == optimizer_name
    assert "loss_scale" not in state["last_optimizer_state"]
    return loss


@pytest.fixture(scope="module")
def bf16_nmt(wmt_bin, tmp_path_factory):
    """define_transformer_tiny trained 30 updates with ``--bf16 --cpu``: (output, checkpoint)."""
    ckpt = tmp_path_factory.mktemp("bf16_nmt")
    out = run_cli("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny",
                  *TINY, "--share-all-embeddings", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500",
                  "--max-update", "30", "--save-dir", ckpt, "--no-epoch-checkpoints", "--cpu", "--bf16",
                  "--log-format", "simple", "--log-interval", "10", "--seed", "3").stdout
    return out, ckpt / "checkpoint_last.pt"


@pytest.mark.cli
def test_bf16_trains_on_the_cpu(bf16_nmt):
    out, ckpt = bf16_nmt
    assert_trained_in_bf16(out, ckpt, "FP16Optimizer")


@pytest.mark.cli
def test_memory_efficient_bf16_trains_on_the_cpu(wmt_bin, tmp_path):
    # in the test's process: fairseq's notice at import is the fixture's process's to show
    out = run_in_process("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny",
                  *TINY, "--share-all-embeddings", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500",
                  "--max-update", "30", "--save-dir", tmp_path, "--no-epoch-checkpoints", "--cpu",
                  "--memory-efficient-bf16", "--log-format", "simple", "--log-interval", "10", "--seed", "3").stdout
    assert_trained_in_bf16(out, tmp_path / "checkpoint_last.pt", "MemoryEfficientFP16Optimizer")


def hypotheses(out):
    return re.findall(r"^H-\d+\t.*$", out, re.M)


@pytest.mark.cli
def test_bf16_checkpoint_translates_with_and_without_bf16(wmt_bin, bf16_nmt):
    """The checkpoint holds float32 weights (fairseq saves half-precision tensors as float32);
    fairseq-generate runs the model in float32, or in bfloat16 with ``--bf16`` (fairseq 0.12.2's
    generate ignored the flag; test_silent_settings.py checks that the scores move)."""
    _, ckpt = bf16_nmt
    # float32 in the test's process; --bf16 from the console script (fairseq's notice at import)
    outs = [run(("fairseq-generate", wmt_bin / "bin", "--user-dir", USER_DIR, "--path", ckpt, "--gen-subset",
                 "test", "--beam", "2", "--max-len-b", "10", "--batch-size", "20", "--cpu", *flag)).stdout
            for run, flag in ((lambda cmd: run_in_process(*cmd), []), (lambda cmd: run_cli(*cmd), ["--bf16"]))]
    assert [len(hypotheses(out)) for out in outs] == [40, 40]
    assert all(NOTICE not in out for out in outs)


@pytest.mark.cli
def test_transformer_lm_trains_and_evaluates_in_bf16(wt2_bin, tmp_path):
    out = run_cli("fairseq-train", wt2_bin, "--user-dir", USER_DIR, "--task", "language_modeling", "--arch",
                  "define_transformer_lm_tiny", "--tokens-per-sample", "32", "--optimizer", "adam", "--lr", "2e-3",
                  "--batch-size", "8", "--max-update", "40", "--save-dir", tmp_path, "--no-epoch-checkpoints",
                  "--cpu", "--bf16", "--log-format", "simple", "--log-interval", "10", "--seed", "2").stdout
    assert_trained_in_bf16(out, tmp_path / "checkpoint_last.pt", "FP16Optimizer")
    valid = float(re.findall(r"valid on 'valid' subset \| loss ([0-9.]+)", out)[-1])
    evals = [
        result(
            run_in_process(
                "fairseq-eval-lm",
                wt2_bin,
                "--user-dir",
                USER_DIR,
                "--path",
                tmp_path / "checkpoint_last.pt",
                "--gen-subset",
                "valid",
                "--tokens-per-sample",
                "32",
                "--batch-size",
                "4",
                "--cpu",
                *flag,
            ).stdout
        )
        for flag in ([], ["--bf16"])
    ]
    assert evals[0][0] == evals[1][0]  # the same tokens
    # training validated the bfloat16 model; eval-lm scores its float32 copy, and with --bf16
    # the bfloat16 model: bfloat16's relative step is 2^-8, so the losses agree within 1%
    assert all(abs(loss - valid) <= 0.01 * valid for _, loss in evals), (evals, valid)


# -- the command line: where --bf16 trains, and what cannot go together -------------------


def parse_training_args(*flags):
    from fairseq import options

    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, ["DATA", "--arch", "transformer", "--max-tokens", "100", *flags])


@pytest.mark.skipif(importlib.util.find_spec("torch_xla") is not None, reason="torch_xla is installed")
@pytest.mark.parametrize("flags", [["--bf16"], ["--memory-efficient-bf16"], ["--bf16", "--cpu"]])
def test_bf16_does_not_mean_tpu_without_torch_xla(flags):
    args = parse_training_args(*flags)
    assert args.bf16 and not args.tpu and not args.fp16


def test_bf16_means_tpu_where_torch_xla_is_installed(monkeypatch):
    """fairseq's behaviour on TPU hosts is kept; --cpu still means the CPU there."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "torch_xla" else find_spec(name, *a))
    assert parse_training_args("--bf16").tpu
    assert not parse_training_args("--bf16", "--cpu").tpu


BAD_COMBINATIONS = [
    (["--bf16", "--fp16"], "--bf16 and --fp16 cannot be combined"),
    (["--memory-efficient-bf16", "--memory-efficient-fp16"], "--bf16 and --fp16 cannot be combined"),
    (["--bf16", "--amp"], "--bf16 and --amp cannot be combined"),
]


@pytest.mark.parametrize("flags,expected", BAD_COMBINATIONS, ids=[" ".join(f) for f, _ in BAD_COMBINATIONS])
def test_precisions_that_cannot_go_together(flags, expected):
    from fairseq import UserError

    with pytest.raises(UserError, match=expected) as info:
        parse_training_args(*flags)
    assert "\n" not in str(info.value)


@pytest.mark.skipif(importlib.util.find_spec("torch_xla") is not None, reason="torch_xla is installed")
def test_tpu_without_torch_xla_is_one_line():
    from fairseq import UserError

    with pytest.raises(UserError, match="--tpu needs torch_xla"):
        parse_training_args("--tpu")


@pytest.mark.cli
def test_fairseq_train_prints_the_combination_error_as_one_line(tmp_path):
    proc = run_cli("fairseq-train", tmp_path, "--user-dir", USER_DIR, "--arch", "define_transformer_tiny",
                   "--max-tokens", "100", "--cpu", "--bf16", "--fp16", check=False)
    assert proc.returncode == 1
    assert proc.stdout.strip().splitlines()[-1].startswith("fairseq-train: error: --bf16 and --fp16 cannot be combined")
    assert "Traceback" not in proc.stdout and NOTICE not in proc.stdout


def test_cpu_bfloat16_matmul_and_backward():
    """What --bf16 --cpu runs: a bfloat16 model's linear layers forward and backward on the CPU."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 8).to(torch.bfloat16)
    x = torch.randn(4, 16, dtype=torch.bfloat16, requires_grad=True)
    y = layer(x)
    y.float().pow(2).sum().backward()
    assert y.dtype == torch.bfloat16 and layer.weight.grad.dtype == torch.bfloat16
    assert torch.isfinite(layer.weight.grad.float()).all() and torch.isfinite(x.grad.float()).all()


@pytest.mark.cli
def test_resume_with_bf16_and_without_it(wmt_bin, bf16_nmt, tmp_path):
    """Resuming with --bf16 continues; without it fairseq builds another optimizer class and
    refuses the checkpoint's state: one line naming both and the fix."""
    import shutil

    _, ckpt = bf16_nmt
    shutil.copy(ckpt, tmp_path / "checkpoint_last.pt")
    args = [wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
            "--share-all-embeddings", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500",
            "--max-update", "33", "--save-dir", tmp_path, "--no-save", "--cpu", "--disable-validation",
            "--log-format", "simple", "--log-interval", "1", "--seed", "3"]
    out = run_in_process("fairseq-train", *args, "--bf16").stdout  # the refusal below: the console script's
    assert "Loaded checkpoint" in out and "num_updates 33" in out
    loss = train_losses(out)
    assert len(loss) == 3 and all(math.isfinite(x) for x in loss), loss
    proc = run_cli("fairseq-train", *args, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == (
        "fairseq-train: error: the checkpoint's optimizer is FP16Optimizer but this run builds FairseqAdam: "
        "resume with the --optimizer and precision it was trained with (--fp16 and --bf16 train through "
        "FP16Optimizer, their --memory-efficient- forms through MemoryEfficientFP16Optimizer), or pass "
        "--reset-optimizer")


@pytest.mark.cli
def test_nt_asgd_still_refuses_bf16(wt2_bin, tmp_path):
    """AWD-LSTM's optimizer trains in float32 by design; --bf16 --cpu now reaches its check."""
    proc = run_cli("fairseq-train", wt2_bin, "--user-dir", USER_DIR, "--task", "contiguous_lm", "--arch",
                   "define_lstm_tiny", "--tokens-per-sample", "20", "--criterion", "awd_lm_loss", "--optimizer",
                   "nt_asgd", "--lr-scheduler", "nt_asgd", "--lr", "5", "--batch-size", "8", "--max-update", "5",
                   "--save-dir", tmp_path, "--cpu", "--bf16", check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith(
        "fairseq-train: error: --optimizer nt_asgd trains in float32 (as AWD-LSTM): drop --fp16/--bf16/--amp")
