"""examples/nmt_demo/run.sh (``make demo``) end to end on a slice of its shipped Tatoeba data:
the DeFINE model and its baseline (fairseq's transformer at the same sizes, trained with the
same recipe and the -- ARGS that are not DeFINE settings) are trained, translated and scored."""

import gzip
import os
import re
import subprocess

import pytest

from .helpers import BIN, ROOT

pytestmark = pytest.mark.cli  # starts fairseq's command-line tools or a recipe

DATA = ROOT / "examples" / "data" / "tatoeba_de_en"


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    """600 / 20 / 20 sentence pairs of the shipped corpus as --train/--valid/--test files (an
    untrained model's beam search runs to its length limit: each test sentence costs time)."""
    folder = tmp_path_factory.mktemp("demo_data")
    lines = {
        l: gzip.open(DATA / f"tatoeba.{l}.gz", "rt", encoding="utf-8").read().splitlines()[:640] for l in ("en", "de")
    }
    for name, (a, b) in {"train": (0, 600), "valid": (600, 620), "test": (620, 640)}.items():
        for l in ("en", "de"):
            (folder / f"{name}.{l}").write_text("\n".join(lines[l][a:b]) + "\n", encoding="utf-8")
    return folder


def demo(splits, work, *args):
    cmd = ["bash", str(ROOT / "examples" / "nmt_demo" / "run.sh"), "--train", splits / "train", "--valid",
           splits / "valid", "--test", splits / "test", "--workdir", work, "--updates", "12", "--bpe-ops", "300",
           "--minutes", "0", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": f"{BIN}:{os.environ['PATH']}"}
    proc = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("demo_work")


def test_demo_trains_and_scores_the_model_and_its_baseline(splits, work):
    out = demo(splits, work, "--", "--define-map-dim", "64", "--dropout", "0.2")
    summary = out[out.index("=== DeFINE NMT demo"):]
    rows = {
        name: re.search(
            rf"^  {re.escape(name)} \(12 updates\)\s+sacreBLEU\s+([0-9.]+)\s+chrF\s+([0-9.]+)", summary, re.M
        )
        for name in ("define_transformer_tiny", "transformer, same sizes")
    }
    assert all(rows.values()), summary
    assert "copy the source sentence" in summary and "ratio define_transformer_tiny / transformer" in summary
    # the baseline: the model's sizes, the recipe, the -- ARGS without the DeFINE setting
    base_log = (work / "train_transformer.log").read_text()
    assert "'arch': 'transformer'" in base_log or "arch='transformer'" in base_log
    for setting in ("encoder_embed_dim=128", "decoder_layers=3", "dropout=0.2", "max_update=12"):
        assert setting in base_log, setting
    assert "define_map_dim" not in base_log
    main_log = (work / "train.log").read_text()
    assert "define_map_dim=64" in main_log
    # Table 3's form beside the paper's baseline form: a table (or map) per side, untied outputs
    assert "output layer: untied" in main_log
    for log in (main_log, base_log):
        assert "share_all_embeddings=False" in log and "share_decoder_input_output_embed=False" in log


def test_demo_without_baseline(splits, work):
    out = demo(splits, work, "--no-baseline")  # the same data: tokenization and BPE reused
    assert "reusing" in out and "baseline skipped" in out
    summary = out[out.index("=== DeFINE NMT demo"):]
    assert "define_transformer_tiny (12 updates)" in summary and "transformer, same sizes (" not in summary
