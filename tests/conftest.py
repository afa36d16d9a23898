import os
import shutil
import subprocess
import sys
from pathlib import Path

import re

import pytest

import fairseq_define  # noqa: F401  (registers architectures for in-process tests)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "run_scripts"))
import corpora  # noqa: E402  (the data root: $FAIRSEQ_DEFINE_DATA, else its default locations)

DATA_ROOT = corpora.roots()[0]
BIN = Path(sys.executable).parent  # the CLIs of the environment running the tests


# Tests that start fairseq's command-line tools or a recipe (directly or through a fixture
# that trains a checkpoint) are marked ``cli``; ``make test-fast`` (pytest -m "not cli")
# leaves them out and runs the in-process unit tests.
CLI_MODULES = {
    "test_bad_input", "test_cached_tables", "test_checkpoint_safety", "test_cli_end_to_end", "test_crash_safe",
    "test_distributed_cpu", "test_lstm_cli", "test_recipes", "test_txl_cli",
    "test_studies",
}
CLI_FIXTURES = {"wmt_bin", "trained", "lm_checkpoints"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in CLI_MODULES or CLI_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.cli)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The data root: the corpora of run_scripts/corpora.tsv and the smoke-test sets beside them."""
    if not (DATA_ROOT / "ptb" / "ptb.train.txt").is_file():
        pytest.fail(f"real corpora not found at {DATA_ROOT}: set {corpora.ENV} to the data root (docs/testing.md)")
    return DATA_ROOT


def define_cfg(**overrides):
    """DeFINE settings at tiny sizes (n=16, k=64, N=3, g_max=4), as a model's args."""
    from argparse import Namespace
    from dataclasses import fields

    from fairseq_define.modules import DefineConfig

    cfg = Namespace(**{f.name: f.default for f in fields(DefineConfig)})
    cfg.define_map_dim, cfg.define_expand_dim, cfg.define_depth, cfg.define_max_groups = 16, 64, 3, 4
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg


def define_options(**overrides):
    """:func:`define_cfg` resolved as a model resolves it, for the modules."""
    from fairseq_define.modules import DefineOptions

    return DefineOptions.from_config(define_cfg(**overrides))


def run_cli(*cmd, cwd=None, check=True, timeout=600, env=None):
    """Run one of the environment's console scripts; return the CompletedProcess, with
    stderr merged into stdout (fairseq logs to stdout, warnings go to stderr)."""
    exe = shutil.which(cmd[0], path=str(BIN)) or cmd[0]
    proc = subprocess.run(
        [exe, *map(str, cmd[1:])], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=timeout,
        env={**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", **(env or {})},
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} exited {proc.returncode}\n--- output\n{proc.stdout[-6000:]}"
        )
    return proc


USER_DIR = str(ROOT / "fairseq_define")
TINY = ["--encoder-embed-dim", "64", "--decoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128",
        "--decoder-ffn-embed-dim", "128", "--encoder-layers", "2", "--decoder-layers", "2",
        "--define-map-dim", "32", "--define-expand-dim", "128"]


def head(src, dst, start, count):
    with open(src, encoding="utf-8") as f:
        lines = f.readlines()[start:start + count]
    dst.write_text("".join(lines), encoding="utf-8")


def binarize_ptb_slice(d, shared_data, train_lines, valid_lines):
    """The first lines of PTB's train and valid splits, binarized for a language model in
    ``d / "bin"``; returns that folder."""
    head(shared_data / "ptb" / "ptb.train.txt", d / "train.txt", 0, train_lines)
    head(shared_data / "ptb" / "ptb.valid.txt", d / "valid.txt", 0, valid_lines)
    run_cli("fairseq-preprocess", "--only-source", "--trainpref", d / "train.txt", "--validpref", d / "valid.txt",
            "--destdir", d / "bin", "--workers", "1")
    return d / "bin"


@pytest.fixture(scope="session")
def wmt_bin(tmp_path_factory, shared_data):
    """Tokenized WMT EN-DE (toy_ende_10k): joint BPE (subword-nmt), binarized."""
    d = tmp_path_factory.mktemp("wmt")
    toy = shared_data / "toy_ende_10k"
    for split, name, start, n in [("train", "train", 0, 2000), ("valid", "val", 0, 60), ("test", "test", 0, 40)]:
        head(toy / f"src-{name}.txt", d / f"{split}.tok.en", start, n)
        head(toy / f"tgt-{name}.txt", d / f"{split}.tok.de", start, n)
    run_cli("subword-nmt", "learn-joint-bpe-and-vocab", "--input", d / "train.tok.en", d / "train.tok.de",
            "-s", "600", "-o", d / "codes", "--write-vocabulary", d / "voc.en", d / "voc.de")
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            out = run_cli("subword-nmt", "apply-bpe", "-c", d / "codes", "--input", d / f"{split}.tok.{lang}").stdout
            (d / f"{split}.bpe.{lang}").write_text(out, encoding="utf-8")
    run_cli("fairseq-preprocess", "-s", "en", "-t", "de", "--trainpref", d / "train.bpe", "--validpref",
            d / "valid.bpe", "--testpref", d / "test.bpe", "--destdir", d / "bin", "--joined-dictionary",
            "--workers", "1")
    return d


@pytest.fixture(scope="session")
def trained(wmt_bin):
    ckpt = wmt_bin / "ckpt"
    out = run_cli("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny",
                  *TINY, "--share-all-embeddings", "--optimizer", "adam", "--lr", "1e-3",
                  "--max-tokens", "1500", "--max-update", "12", "--save-dir", ckpt, "--cpu",
                  "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "4", "--seed", "3")
    assert "parameters (paper's distribution): define_transformer_tiny: DeFINE" in out.stdout
    losses = [float(x) for x in re.findall(r"\| train \|.*?\| loss ([0-9.]+)", out.stdout)]
    assert losses and all(l == l for l in losses)  # finite
    assert (ckpt / "checkpoint_last.pt").is_file()
    return ckpt


