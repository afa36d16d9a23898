import codecs
import os
import re
import shutil
from pathlib import Path

import pytest
from subword_nmt.apply_bpe import BPE

# Under pytest-xdist (make test: two workers on two cores) each worker and the CLIs it
# starts use one thread, so the workers do not fight over the cores.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")

import fairseq_define  # noqa: F401  (registers architectures for in-process tests)

from .helpers import (  # noqa: E402
    CORPUS_SKIP,
    DATA_ROOT,
    TEST_DATA,
    TINY,
    TINY_TIED,
    USER_DIR,
    head,
    made_once,
    run_cli,
    run_in_process,
)

# Tests that start fairseq's command-line tools or a recipe are marked ``cli`` (pytest.ini):
# a module of them says so itself (``pytestmark = pytest.mark.cli``), and a test that takes a
# fixture which trains a checkpoint through the CLIs gets the marker here; ``make test-fast``
# (pytest -m "not cli") leaves them out and runs the in-process unit tests.
CLI_FIXTURES = {"wmt_bin", "trained", "lm_checkpoints"}


@pytest.hookimpl(wrapper=True)  # around the others: the marker is there before -m reads it
def pytest_collection_modifyitems(config, items):
    for item in items:
        if CLI_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.cli)
        if "corpus_root" in item.fixturenames:
            item.add_marker(pytest.mark.corpus)
            if DATA_ROOT is None:
                item.add_marker(pytest.mark.skip(reason=CORPUS_SKIP))
    yield
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # pytest-xdist (--dist loadfile: a file's tests, and so its module fixtures, stay on one
        # worker) hands the files out in this order: the longest, then the other CLI files, first
        def rank(item):
            name = item.module.__name__.rsplit(".", 1)[-1]
            longest = LONGEST_MODULES.index(name) if name in LONGEST_MODULES else len(LONGEST_MODULES)
            return longest, item.get_closest_marker("cli") is None

        items.sort(key=rank)


# longest first; each worker starts with two files, so the first and third share a worker
LONGEST_MODULES = ("test_recipes", "test_bad_input", "test_crash_safe", "test_studies")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The test slices of real text (tests/data): ``wikitext-2/``, ``ptb_style/`` (WikiText-2 in
    PTB's format) and ``wmt_news/`` (tokenized WMT EN-DE news)."""
    return TEST_DATA


@pytest.fixture(scope="session")
def corpus_root() -> Path:
    """The data root with the whole corpora of run_scripts/corpora.tsv; a test that takes it is
    marked ``corpus`` and skipped where there is none (pytest_collection_modifyitems)."""
    return DATA_ROOT


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if CORPUS_SKIP in str(r.longrepr)]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} corpus tests skipped: {CORPUS_SKIP}")


@pytest.fixture(scope="session")
def wmt_bin(tmp_path_factory):
    """Tokenized WMT EN-DE news (tests/data/wmt_news): joint BPE (subword-nmt), binarized."""
    return made_once(tmp_path_factory, "wmt", make_wmt_bin)


def make_wmt_bin(d):
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            shutil.copyfile(TEST_DATA / "wmt_news" / f"{split}.{lang}", d / f"{split}.tok.{lang}")
    run_cli("subword-nmt", "learn-joint-bpe-and-vocab", "--input", d / "train.tok.en", d / "train.tok.de",
            "-s", "600", "-o", d / "codes", "--write-vocabulary", d / "voc.en", d / "voc.de")
    # apply-bpe and binarizing in this process: subword-nmt's BPE class as its apply-bpe runs it
    # (codecs' UTF-8 reader, a line at a time), fairseq-preprocess's cli_main
    with codecs.open(str(d / "codes"), encoding="utf-8") as codes:
        bpe = BPE(codes)
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            with codecs.open(str(d / f"{split}.tok.{lang}"), encoding="utf-8") as f:
                out = "".join(bpe.process_line(line) for line in f)
            (d / f"{split}.bpe.{lang}").write_text(out, encoding="utf-8")
    run_in_process("fairseq-preprocess", "-s", "en", "-t", "de", "--trainpref", d / "train.bpe", "--validpref",
                   d / "valid.bpe", "--testpref", d / "test.bpe", "--destdir", d / "bin", "--joined-dictionary",
                   "--workers", "1")
    return d


@pytest.fixture(scope="session")
def trained(wmt_bin, tmp_path_factory):
    """define_transformer_tiny trained 12 updates on wmt_bin, one shared embedding tied at the map
    width (its default untied form trains in test_output_layer_cli.py and the demo's test): its
    checkpoint folder."""
    made_once(tmp_path_factory, "wmt_ckpt", lambda _: train_tiny_transformer(wmt_bin))
    return wmt_bin / "ckpt"


def train_tiny_transformer(wmt_bin):
    ckpt = wmt_bin / "ckpt"
    shutil.rmtree(ckpt, ignore_errors=True)  # a failed build of another worker
    out = run_in_process("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR,
                         "--arch", "define_transformer_tiny", *TINY, *TINY_TIED, "--optimizer", "adam", "--lr", "1e-3",
                         "--max-tokens", "1500", "--max-update", "12", "--save-dir", ckpt, "--cpu",
                         "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "4", "--seed", "3")
    assert "parameters (paper's distribution): define_transformer_tiny: DeFINE" in out.stdout
    losses = [float(x) for x in re.findall(r"\| train \|.*?\| loss ([0-9.]+)", out.stdout)]
    assert losses and all(l == l for l in losses)  # finite
    assert (ckpt / "checkpoint_last.pt").is_file()


@pytest.fixture(scope="session")
def wt2_bin(tmp_path_factory, shared_data):
    """WikiText-2's first lines (tests/data/wikitext-2): 1500 train, 150 valid and 60 test,
    binarized for a language model: the bin folder."""
    d = tmp_path_factory.mktemp("wt2")
    wt2 = shared_data / "wikitext-2"
    head(wt2 / "wiki.train.tokens", d / "train.txt", 0, 1500)
    head(wt2 / "wiki.valid.tokens", d / "valid.txt", 0, 150)
    head(wt2 / "wiki.test.tokens", d / "test.txt", 0, 60)
    run_in_process("fairseq-preprocess", "--only-source", "--trainpref", d / "train.txt", "--validpref",
                   d / "valid.txt", "--testpref", d / "test.txt", "--destdir", d / "bin", "--workers", "1")
    return d / "bin"
