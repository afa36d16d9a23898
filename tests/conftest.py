import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

# Under pytest-xdist (make test: two workers on two cores) each worker and the CLIs it
# starts use one thread, so the workers do not fight over the cores.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")

import fairseq_define  # noqa: F401  (registers architectures for in-process tests)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "run_scripts"))
import corpora  # noqa: E402  (the data root: $FAIRSEQ_DEFINE_DATA, else its default locations)

# Tests read real text from the slices in tests/data (tests/data/README.md: sources, terms,
# checksums), so the suite needs no data root. The few that need a whole corpus (its published
# checksums, a recipe or study that verifies them) take the ``corpus_root`` fixture instead:
# they are marked ``corpus`` and skip, with one line, where no data root holds the corpora.
TEST_DATA = ROOT / "tests" / "data"
DATA_ROOT = next((r for r in corpora.roots() if (r / "ptb" / "ptb.train.txt").is_file()), None)
CORPUS_SKIP = f"needs the whole corpora: set {corpora.ENV} to the data root (docs/testing.md)"
BIN = Path(sys.executable).parent  # the CLIs of the environment running the tests


# Tests that start fairseq's command-line tools or a recipe (directly or through a fixture
# that trains a checkpoint) are marked ``cli``; ``make test-fast`` (pytest -m "not cli")
# leaves them out and runs the in-process unit tests.
CLI_MODULES = {
    "test_bad_input", "test_cached_tables", "test_checkpoint_safety", "test_cli_end_to_end", "test_crash_safe",
    "test_distributed_cpu", "test_lm_resume", "test_lstm_cli", "test_nmt_demo", "test_recipes", "test_studies", "test_txl_cli",
    "test_transformer_lm_cli",
}
CLI_FIXTURES = {"wmt_bin", "trained", "lm_checkpoints"}


@pytest.hookimpl(wrapper=True)  # around the others: the marker is there before -m reads it
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in CLI_MODULES or CLI_FIXTURES & set(item.fixturenames):
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


def made_once(tmp_path_factory, name, build):
    """``build(folder)`` run once for the whole test run: it fills ``folder`` and returns a
    picklable value. Under pytest-xdist the first worker to ask builds it while the others
    wait on a lock, then all read it (the run's base temporary folder is shared)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder, done = base / name, base / f"{name}.value.pkl"
    with FileLock(str(base / f"{name}.lock")):
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a failed build of another worker
            folder.mkdir()
            value = build(folder)
            done.write_bytes(pickle.dumps(value))
    return pickle.loads(done.read_bytes())


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


def ptb_style(split):
    """PTB-format text of the test slices (tests/data/README.md): ``split`` is train, valid or test."""
    return TEST_DATA / "ptb_style" / f"{split}.txt"


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


def model_map(kind, vocab=40, n=16, cutoff=(20,), factor=4.0):
    """The map a model hands its DeFINE embedding: None for ``standard`` (the embedding's own
    n-dim table), or for ``adaptive`` the language models' adaptive input of width n (bands
    below ``cutoff`` n wide, the next n / factor, each projected to n)."""
    if kind == "standard":
        return None
    from fairseq_define.modules.adaptive_io import ProjectedAdaptiveInput

    return ProjectedAdaptiveInput(vocab, 1, n, factor, n, list(cutoff))


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
# fairseq's own transformer at its smallest, for the CLIs (one layer each side, d = 32)
TINY_STOCK_TRANSFORMER = ["--arch", "transformer", "--encoder-layers", "1", "--decoder-layers", "1",
                          "--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "32",
                          "--decoder-ffn-embed-dim", "32"]


def head(src, dst, start, count):
    with open(src, encoding="utf-8") as f:
        lines = f.readlines()[start:start + count]
    dst.write_text("".join(lines), encoding="utf-8")


def binarize_ptb_slice(d, train_lines, valid_lines):
    """The first lines of the PTB-format slices' train and valid splits, binarized for a
    language model in ``d / "bin"``; returns that folder."""
    head(ptb_style("train"), d / "train.txt", 0, train_lines)
    head(ptb_style("valid"), d / "valid.txt", 0, valid_lines)
    run_cli("fairseq-preprocess", "--only-source", "--trainpref", d / "train.txt", "--validpref", d / "valid.txt",
            "--destdir", d / "bin", "--workers", "1")
    return d / "bin"


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
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            out = run_cli("subword-nmt", "apply-bpe", "-c", d / "codes", "--input", d / f"{split}.tok.{lang}").stdout
            (d / f"{split}.bpe.{lang}").write_text(out, encoding="utf-8")
    run_cli("fairseq-preprocess", "-s", "en", "-t", "de", "--trainpref", d / "train.bpe", "--validpref",
            d / "valid.bpe", "--testpref", d / "test.bpe", "--destdir", d / "bin", "--joined-dictionary",
            "--workers", "1")
    return d


@pytest.fixture(scope="session")
def trained(wmt_bin, tmp_path_factory):
    """define_transformer_tiny trained 12 updates on wmt_bin: its checkpoint folder."""
    made_once(tmp_path_factory, "wmt_ckpt", lambda _: train_tiny_transformer(wmt_bin))
    return wmt_bin / "ckpt"


def train_tiny_transformer(wmt_bin):
    ckpt = wmt_bin / "ckpt"
    shutil.rmtree(ckpt, ignore_errors=True)  # a failed build of another worker
    out = run_cli("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny",
                  *TINY, "--share-all-embeddings", "--optimizer", "adam", "--lr", "1e-3",
                  "--max-tokens", "1500", "--max-update", "12", "--save-dir", ckpt, "--cpu",
                  "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "4", "--seed", "3")
    assert "parameters (paper's distribution): define_transformer_tiny: DeFINE" in out.stdout
    losses = [float(x) for x in re.findall(r"\| train \|.*?\| loss ([0-9.]+)", out.stdout)]
    assert losses and all(l == l for l in losses)  # finite
    assert (ckpt / "checkpoint_last.pt").is_file()


