"""Helpers shared by the test modules: paths, the CLIs, the data slices, tiny models built in
process, and checks several files make. Test modules import from here, never from one
another; conftest.py holds the hooks and fixtures."""

import functools
import hashlib
import math
import os
import pickle
import re
import shutil
import socket
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import torch
from fairseq.checkpoint_utils import safe_torch_load
from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY
from filelock import FileLock

from fairseq_define.models.define_transformer_lm import DefineTransformerLanguageModel
from fairseq_define.models.lstm_lm import LSTMLanguageModel, LSTMLMConfig
from fairseq_define.models.transformer_xl import TransformerXLConfig, TransformerXLLanguageModel

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


def compile_with_aot_eager(monkeypatch):
    """``nn.Module.compile`` with dynamo's ``aot_eager`` backend, whatever mode is asked for:
    the graphs AOTAutograd hands a compiler, without generating code, so a test takes seconds."""
    original = torch.nn.Module.compile
    monkeypatch.setattr(torch.nn.Module, "compile",
                        lambda module, *a, **kw: original(module, *a, **{**kw, "mode": None, "backend": "aot_eager"}))


def benchmark_module(name: str):
    """The script benchmarks/<name>.py as a module (benchmarks/ is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_one_compiled_graph(compiled, eager, batches, vocab=40):
    """A compiled DeFINE embedding and its eager twin over token batches of the (B, T) sizes
    ``batches``: the same outputs and gradients, and one graph with no break and no
    recompile (dynamo's ``error_on_recompile``)."""
    import torch._dynamo as dynamo
    from torch._dynamo.utils import counters

    dynamo.reset()
    counters.clear()
    weight = torch.linspace(-1, 1, eager.embedding_dim)
    with dynamo.config.patch(error_on_recompile=True):
        for i, (B, T) in enumerate(batches):
            tokens = torch.randint(2, vocab, (B, T), generator=torch.Generator().manual_seed(i))
            outs = [emb(tokens) for emb in (compiled, eager)]
            for out in outs:
                (out * weight).sum().backward()
            torch.testing.assert_close(outs[0], outs[1])
    assert dict(counters["graph_break"]) == {}
    assert counters["stats"]["unique_graphs"] == 1
    for (name, p), q in zip(compiled.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


def model_map(kind, vocab=40, n=16, cutoff=(20,), factor=4.0):
    """The map a model hands its DeFINE embedding: None for ``standard`` (the embedding's own
    n-dim table), or for ``adaptive`` the language models' adaptive input of width n (bands
    below ``cutoff`` n wide, the next n / factor, each projected to n)."""
    if kind == "standard":
        return None
    from fairseq_define.modules.lm.adaptive_io import ProjectedAdaptiveInput

    return ProjectedAdaptiveInput(vocab, 1, n, factor, n, list(cutoff))


# fairseq's tools that load data through torch's DataLoader, with one loader process by default
LOADING_TOOLS = ("fairseq-train", "fairseq-generate", "fairseq-validate", "fairseq-eval-lm")


def in_the_process(cmd):
    """``cmd`` loading its data in its own process (--num-workers 0) unless it names a number:
    a loader process proves nothing about this project, and torch's shutdown of one waited its
    5 s status interval whenever the loader was dropped unfinished (a run stopped mid-epoch by
    --max-update; contiguous_lm itself never starts one)."""
    if cmd and cmd[0] in LOADING_TOOLS and not any(str(a).startswith("--num-workers") for a in cmd):
        return (*cmd, "--num-workers", "0")
    return cmd


def run_cli(*cmd, cwd=None, check=True, timeout=600, env=None):
    """Run one of the environment's console scripts; return the CompletedProcess, with
    stderr merged into stdout (fairseq logs to stdout, warnings go to stderr)."""
    cmd = in_the_process(cmd)
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


@functools.lru_cache(maxsize=None)
def entry_point(script: str) -> str:
    """The installed console script's ``module:function`` (fairseq's setup.py and ours)."""
    from importlib.metadata import entry_points

    (point,) = [p for p in entry_points(group="console_scripts") if p.name == script]
    return point.value


def run_in_process(*cmd, check=True, env=None):
    """:func:`run_cli` inside the test's own process: the console script's entry point with
    ``sys.argv`` set, its logging and printed output (stdout and stderr) captured as the
    CompletedProcess's stdout. It saves the start of a process (torch, fairseq and its tasks,
    seconds each time); for runs where a subprocess proves nothing more. The state fairseq
    leaves behind is put back: argv, the loggers' handlers and the root's level, the torch
    thread count, the random generators, the best loss kept on fairseq's functions and the
    variables of ``env``. Bad input ends as the patch's excepthook ends a command
    (``PROG: error: LINE``, exit status 1, from fairseq.user_error_line, the hook's own reader);
    any other exception propagates, so a bug fails the test as a traceback would. Each command
    keeps tests on its real entry point (run_cli): a process's exit code, tracebacks and
    warnings at import, the excepthook itself."""
    import contextlib
    import importlib
    import io
    import logging
    import random

    import fairseq
    import numpy as np
    from fairseq import checkpoint_utils

    cmd = in_the_process(cmd)
    module_name, function = entry_point(cmd[0]).split(":")
    module = importlib.import_module(module_name)
    # fairseq keeps the best validation loss (and --patience's count) on functions: a fresh
    # run starts without them
    functions = (checkpoint_utils.save_checkpoint, getattr(module, "should_stop_early", None))
    kept = [(f, f.__dict__.copy()) for f in functions if f is not None]
    for f, _ in kept:
        f.__dict__.clear()
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)  # fairseq's format (fairseq_cli/train.py)
    handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(message)s", "%Y-%m-%d %H:%M:%S"))
    root = logging.getLogger()
    loggers = [root, *(logging.getLogger(name) for name in list(logging.root.manager.loggerDict))]
    handlers = {id(logger): list(logger.handlers) for logger in loggers}  # preprocess adds a file's
    saved = (sys.argv, root.level, torch.get_num_threads(), torch.random.get_rng_state(), np.random.get_state(),
             random.getstate(), {k: os.environ.get(k) for k in env or {}})
    returncode = 0
    try:
        sys.argv = [cmd[0], *map(str, cmd[1:])]
        os.environ.update(env or {})
        if env and "OMP_NUM_THREADS" in env:
            torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            try:  # fairseq's entry points return None; ours the exit status their console script exits with
                returncode = getattr(module, function)() or 0
            except SystemExit as e:  # argparse and the tools' own exits
                returncode = e.code if isinstance(e.code, int) else int(e.code is not None)
            except Exception as e:  # bad input: the patch's excepthook's line and exit status; a bug propagates
                line = fairseq.user_error_line(e)
                if line is None:
                    raise
                buffer.write(f"{cmd[0]}: error: {line}\n")
                returncode = 1
    finally:
        for f, attributes in kept:
            f.__dict__.clear()
            f.__dict__.update(attributes)
        root.removeHandler(handler)
        for logger in [root, *(logging.getLogger(name) for name in list(logging.root.manager.loggerDict))]:
            for added in [h for h in logger.handlers if h not in handlers.get(id(logger), [])]:
                logger.removeHandler(added)
                added.close()
        sys.argv, level, threads, torch_rng, np_rng, py_rng, variables = saved
        root.setLevel(level)
        torch.set_num_threads(threads)
        torch.random.set_rng_state(torch_rng)
        np.random.set_state(np_rng)
        random.setstate(py_rng)
        for k, v in variables.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    proc = subprocess.CompletedProcess(cmd, returncode, buffer.getvalue())
    if check and returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {returncode}\n--- output\n{proc.stdout[-6000:]}")
    return proc


USER_DIR = str(ROOT / "fairseq_define")
TINY = ["--encoder-embed-dim", "64", "--decoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128",
        "--decoder-ffn-embed-dim", "128", "--encoder-layers", "2", "--decoder-layers", "2",
        "--define-map-dim", "32", "--define-expand-dim", "128"]
# beside TINY, the form of the shared `trained` checkpoint (conftest): one embedding for both
# sides, the output tied at the map width; resuming it needs these flags too
TINY_TIED = ["--share-all-embeddings", "--define-output-layer", "tied_map"]
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
    run_in_process("fairseq-preprocess", "--only-source", "--trainpref", d / "train.txt", "--validpref",
                   d / "valid.txt", "--destdir", d / "bin", "--workers", "1")
    return d / "bin"


# -- tiny models built in process, and checks several test files make --------------------


def dictionary(vocab=60):
    """A fairseq Dictionary of ``vocab`` entries, the special symbols included."""
    d = Dictionary()
    for i in range(vocab - len(d)):
        d.add_symbol(f"w{i}")
    return d


def tiny_lstm(vocab=60, **overrides):
    """An LSTM language model with a DeFINE unit (2 layers of 12, n=8, k=32, N=3), in eval mode."""
    cfg = LSTMLMConfig(lstm_layers=2, lstm_hidden_dim=12, define_map_dim=8, define_expand_dim=32,
                       define_depth=3, define_max_groups=4)
    for k, v in overrides.items():
        setattr(cfg, k, v)
    model = LSTMLanguageModel.build_model(cfg, Namespace(target_dictionary=dictionary(vocab)))
    return model.eval()


def tiny_model(vocab=50, **overrides):
    """A Transformer-XL (2 layers, d=16, n=8, memory 6, segments of 4) with random non-zero
    biases, in eval mode."""
    cfg = TransformerXLConfig(
        decoder_layers=2, decoder_embed_dim=16, decoder_attention_heads=2, decoder_head_dim=8,
        decoder_ffn_embed_dim=32, define_map_dim=8, dropout=0.0, mem_len=6, tgt_len=4,
    )
    for k, v in overrides.items():
        setattr(cfg, k, v)
    d = dictionary(vocab)
    model = TransformerXLLanguageModel.build_model(cfg, Namespace(target_dictionary=d))
    with torch.no_grad():  # non-zero biases, so that a wrong tie or bias shows
        for name, p in model.named_parameters():
            if "bias" in name:
                p.normal_(0, 0.1)
    return model.eval()


def tiny_lm(vocab=40, arch="define_transformer_lm_tiny", **settings):
    """The tiny architecture, built as fairseq-train builds it (the arch fills what is unset)."""
    d = dictionary(vocab)
    args = Namespace(arch=arch, dropout=0.0, tokens_per_sample=64, **settings)
    ARCH_CONFIG_REGISTRY[arch](args)
    model = DefineTransformerLanguageModel.build_model(args, Namespace(source_dictionary=d, target_dictionary=d))
    return model.eval()


ADAPTIVE = dict(adaptive_input=True, adaptive_input_cutoff="10,20", adaptive_input_factor=2)


def sinusoid(distance: int, dim: int) -> torch.Tensor:
    """[sin(distance * f_0), ..., sin(distance * f_{d/2-1}), cos(... f_0), ...] with
    f_k = 10000^(-2k/d), element by element."""
    freqs = [10000 ** (-2 * k / dim) for k in range(dim // 2)]
    return torch.tensor([math.sin(distance * f) for f in freqs] + [math.cos(distance * f) for f in freqs])


def target_scores(model, tokens):
    """log p(tokens[i] | eos, tokens[:i]) for every i, one token at a time through the
    incremental state (the path generation takes, not the one-pass forward the hub's scorer
    runs), each scored by the adaptive softmax's ``target_log_prob`` (the training
    criterion's path) instead of the full distribution: [L]."""
    eos = model.decoder.dictionary.eos()
    src = torch.cat([torch.tensor([eos]), tokens[:-1]])[None]  # [1, L]
    state = {}
    with torch.no_grad():
        features = torch.cat([model.decoder(src[:, :t + 1], incremental_state=state)[0][0, -1:]
                              for t in range(src.size(1))])  # [L, d]
        return model.decoder.adaptive_softmax.target_log_prob(features, tokens)


def assert_same_model(a, b):
    ma, mb = (
        safe_torch_load(str(a / "checkpoint_last.pt"))["model"],
        safe_torch_load(str(b / "checkpoint_last.pt"))["model"],
    )
    for k in ma:
        if not k.endswith("_float_tensor"):
            torch.testing.assert_close(ma[k], mb[k], atol=1e-4, rtol=1e-4, msg=k)


def losses(output):
    return {int(u): float(l) for l, u in re.findall(r"train_inner \| .*? loss=([0-9.]+),.*?num_updates=(\d+)", output)}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def result(out):
    tokens = int(re.search(r"Evaluated ([0-9,]+) tokens", out).group(1).replace(",", ""))
    loss = float(re.search(r"Loss \(base 2\): ([0-9.]+)", out).group(1))
    return tokens, loss


def subprocess_run_interactive(wmt_bin, ckpt, text, device_args=("--cpu",)):
    """fairseq-interactive on ``ckpt`` (a checkpoint file, or a folder holding checkpoint_last.pt);
    ``device_args=()`` runs it on the GPU."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    exe = Path(sys.executable).parent / "fairseq-interactive"
    path = ckpt if str(ckpt).endswith(".pt") else ckpt / "checkpoint_last.pt"
    proc = subprocess.run(
        [
            str(exe),
            str(wmt_bin / "bin"),
            "--user-dir",
            USER_DIR,
            "--path",
            str(path),
            "--source-lang",
            "en",
            "--target-lang",
            "de",
            "--beam",
            "2",
            *device_args,
            "--max-len-b",
            "20",
        ],
        input=text,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def assert_user_error(proc, prog, *expected):
    out = proc.stdout + (proc.stderr or "")
    assert proc.returncode != 0, out[-2000:]
    assert "Traceback" not in out, out[-4000:]
    errors = [l for l in out.splitlines() if l.startswith(f"{prog}: error:")]
    assert errors, out[-2000:]
    for text in expected:
        assert text in errors[-1], errors[-1]


def snapshot(*dirs):
    files = {}
    for d in dirs:
        for p in sorted(Path(d).rglob("*")):
            if p.is_file():
                files[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return files


def assert_png(path, min_std=0.02):
    import matplotlib.image as mpimg

    assert path.is_file(), f"{path} was not written"
    img = mpimg.imread(str(path))[..., :3]  # [H, W, RGB]
    assert img.shape[0] >= 200 and img.shape[1] >= 300
    assert img.std() > min_std, f"{path} looks blank"
    return img


# checkpoints of tests/legacy_checkpoints/families, edited: the hostile-file tests' inputs (test_hostile_*.py)

FAMILIES = Path(__file__).parent / "legacy_checkpoints" / "families"


def nmt_checkpoint(tmp_path, edit=None):
    """The legacy nmt_untied checkpoint (define_transformer_tiny, n=8, d=32), its config edited
    by ``edit(model_cfg)``, and the overrides that find its dictionaries in tmp_path."""
    import shutil

    for name in ("dict.en.txt", "dict.de.txt"):
        shutil.copyfile(FAMILIES / "nmt.dict.txt", tmp_path / name)
    state = safe_torch_load(str(FAMILIES / "nmt_untied.pt"))
    if edit is not None:
        edit(state["cfg"]["model"])
    path = tmp_path / "checkpoint.pt"
    torch.save(state, path)
    return str(path), {"data": str(tmp_path), "source_lang": "en", "target_lang": "de"}


def damaged_checkpoint(tmp_path, edit):
    """nmt_checkpoint with its weights edited by ``edit``; its task names the data in tmp_path
    (the tools read no --model-overrides)."""
    path, overrides = nmt_checkpoint(tmp_path)
    state = safe_torch_load(path)
    edit(state["model"])
    state["cfg"]["task"].update(overrides)
    torch.save(state, path)
    return path, overrides
