"""Bad input: one clear message naming the problem and the fix, a non-zero exit, no
traceback, and no existing file changed."""

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import BIN, ROOT, TINY, USER_DIR, run_cli


def snapshot(*dirs):
    files = {}
    for d in dirs:
        for p in sorted(Path(d).rglob("*")):
            if p.is_file():
                files[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return files


def assert_user_error(proc, prog, *expected):
    out = proc.stdout + (proc.stderr or "")
    assert proc.returncode != 0, out[-2000:]
    assert "Traceback" not in out, out[-4000:]
    errors = [l for l in out.splitlines() if l.startswith(f"{prog}: error:")]
    assert errors, out[-2000:]
    for text in expected:
        assert text in errors[-1], errors[-1]


def train(wmt_bin, tmp_path, *flags):
    return run_cli("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny",
                   *TINY, "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500", "--max-update", "2",
                   "--save-dir", tmp_path / "ck", "--cpu", *flags, check=False)


DEFINE_SETTINGS = [
    (["--define-expand-dim", "16"], ["define_expand_dim (k)=16 is smaller than define_map_dim (n)=32", "at least 32"]),
    (["--define-map-dim", "30", "--define-max-groups", "4"], ["define_map_dim (n)=30 is not divisible by the 4 groups", "28 or 32"]),
    (["--define-depth", "0"], ["define_depth (N) must be a positive integer, got 0", "--define-depth"]),
    (["--define-map-dim", "-8"], ["define_map_dim (n) must be a positive integer, got -8"]),
    (["--define-groups", "4,2"], ["define_groups lists 2 values", "define_depth (N) is 3"]),
    (["--define-groups", "4,x,1"], ["--define-groups must be comma-separated integers", "4,x,1"]),
    (["--define-max-groups", "0"], ["define_max_groups (g_max) must be a positive integer, got 0"]),
    (["--define-transform", "projective", "--define-no-reduce"], ["cannot be used with --define-no-reduce", "drop that flag"]),
    (["--define-out-dim", "48"], ["outputs 48 dims but the Transformer's embedding dim is 64", "--define-out-dim to 64"]),
    (["--define-no-reduce"], ["outputs 128 dims but the Transformer's embedding dim is 64", "drop --define-no-reduce"]),
    (["--define-map", "adaptive", "--define-adaptive-cutoff", "100"], ["--define-map adaptive is for the language models", "drop --define-map adaptive"]),
    (["--encoder-embed-path", "/nonexistent/emb.txt"], ["cannot use", "drop them or use --arch transformer"]),
]


@pytest.mark.parametrize("flags,expected", DEFINE_SETTINGS, ids=[" ".join(f) for f, _ in DEFINE_SETTINGS])
def test_invalid_define_settings_in_fairseq_train(wmt_bin, tmp_path, flags, expected):
    before = snapshot(wmt_bin / "bin")
    proc = train(wmt_bin, tmp_path, *flags)
    assert_user_error(proc, "fairseq-train", *expected)
    assert snapshot(wmt_bin / "bin") == before
    assert not (tmp_path / "ck" / "checkpoint_last.pt").exists()


def test_unknown_transform_is_an_argparse_error(wmt_bin, tmp_path):
    proc = train(wmt_bin, tmp_path, "--define-transform", "dense")
    assert proc.returncode == 2 and "Traceback" not in proc.stdout
    assert "argument --define-transform: invalid choice: 'dense'" in proc.stdout


def generate(bin_dir, ckpt, *flags):
    return run_cli("fairseq-generate", bin_dir, "--user-dir", USER_DIR, "--path", ckpt, "--gen-subset", "test",
                   "--beam", "2", "--max-tokens", "2000", "--cpu", *flags, check=False)


@pytest.fixture
def bin_copy(wmt_bin, tmp_path):
    dst = tmp_path / "bin"
    shutil.copytree(wmt_bin / "bin", dst)
    return dst


def test_missing_split(bin_copy, trained):
    before = snapshot(bin_copy, trained)
    proc = generate(bin_copy, trained / "checkpoint_last.pt", "--gen-subset", "test2")
    assert_user_error(proc, "fairseq-generate", "no binarized 'test2' split", "fairseq-preprocess")
    assert snapshot(bin_copy, trained) == before


def test_missing_dictionary(bin_copy, trained):
    (bin_copy / "dict.de.txt").unlink()
    proc = generate(bin_copy, trained / "checkpoint_last.pt")
    assert_user_error(proc, "fairseq-generate", "dict.de.txt", "fairseq-preprocess")


def test_mismatched_dictionary(bin_copy, trained):
    for lang in ("en", "de"):
        with open(bin_copy / f"dict.{lang}.txt", "a", encoding="utf-8") as f:
            f.write("".join(f"extra{i} 1\n" for i in range(16)))
    before = snapshot(trained)
    proc = generate(bin_copy, trained / "checkpoint_last.pt")
    assert_user_error(proc, "fairseq-generate", "the checkpoint does not fit the data", "use the dictionary (dict.*.txt) the model was trained with")
    assert snapshot(trained) == before


def test_truncated_binarized_dataset(bin_copy, trained):
    path = bin_copy / "test.en-de.en.bin"
    os.truncate(path, path.stat().st_size // 3)
    proc = generate(bin_copy, trained / "checkpoint_last.pt")
    assert_user_error(proc, "fairseq-generate", "truncated", "run fairseq-preprocess again")


def test_empty_binarized_dataset(bin_copy, trained, tmp_path):
    for lang in ("en", "de"):
        (tmp_path / f"empty.{lang}").write_text("")
    run_cli("fairseq-preprocess", "-s", "en", "-t", "de", "--testpref", tmp_path / "empty", "--destdir", tmp_path / "ebin",
            "--srcdict", bin_copy / "dict.en.txt", "--tgtdict", bin_copy / "dict.de.txt", "--workers", "1")
    proc = generate(tmp_path / "ebin", trained / "checkpoint_last.pt")
    assert_user_error(proc, "fairseq-generate", "empty (0 sentences)", "fairseq-preprocess")


def test_overlong_lines(bin_copy, trained):
    proc = generate(bin_copy, trained / "checkpoint_last.pt", "--max-source-positions", "30")
    assert_user_error(proc, "fairseq-generate", "is longer than the model accepts", "--skip-invalid-size-inputs-valid-test")
    ok = generate(bin_copy, trained / "checkpoint_last.pt", "--max-source-positions", "30", "--skip-invalid-size-inputs-valid-test")
    assert ok.returncode == 0


def interactive(bin_dir, ckpt, text):
    exe = Path(BIN) / "fairseq-interactive"
    return subprocess.run([str(exe), str(bin_dir), "--user-dir", USER_DIR, "--path", str(ckpt), "--source-lang", "en",
                           "--target-lang", "de", "--beam", "2", "--cpu", "--max-len-b", "10"],
                          input=text, capture_output=True, text=True, timeout=300)


def test_empty_lines_and_unknown_tokens_are_translated(wmt_bin, trained):
    proc = interactive(wmt_bin / "bin", trained / "checkpoint_last.pt", "\nthe zzqxwv Parliament\n")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "S-0\t\n" in proc.stdout or "S-0\t" in proc.stdout
    from fairseq.data import Dictionary

    d = Dictionary.load(str(wmt_bin / "bin" / "dict.en.txt"))
    unk_line = d.string(d.encode_line("the zzqxwv Parliament", add_if_not_exist=False))  # the source as read
    assert "<unk>" in unk_line and f"S-1\t{unk_line}\n" in proc.stdout
    assert len([l for l in proc.stdout.splitlines() if l.startswith("H-")]) == 2


def test_overlong_interactive_line(wmt_bin, trained):
    proc = interactive(wmt_bin / "bin", trained / "checkpoint_last.pt", " ".join(["the"] * 1100) + "\n")
    assert_user_error(proc, "fairseq-interactive", "is longer than the model accepts")


@pytest.mark.parametrize("damage", ["truncated", "garbage", "missing"])
def test_bad_checkpoint_for_generate(bin_copy, trained, tmp_path, damage):
    ckpt = tmp_path / "ck.pt"
    data = (trained / "checkpoint_last.pt").read_bytes()
    if damage != "missing":
        ckpt.write_bytes(data[: len(data) // 2] if damage == "truncated" else os.urandom(2048))
    before = snapshot(tmp_path)
    proc = generate(bin_copy, ckpt)
    expected = "no such checkpoint" if damage == "missing" else "truncated, corrupt or not a PyTorch checkpoint"
    assert_user_error(proc, "fairseq-generate", expected)
    assert snapshot(tmp_path) == before


@pytest.fixture(scope="module")
def stock_transformer(wmt_bin, tmp_path_factory):
    """A checkpoint of fairseq's own transformer (no DeFINE), trained one step."""
    other = tmp_path_factory.mktemp("stock_transformer")
    run_cli("fairseq-train", wmt_bin / "bin", "--arch", "transformer", "--encoder-layers", "1", "--decoder-layers", "1",
            "--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "32",
            "--decoder-ffn-embed-dim", "32", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500",
            "--max-update", "1", "--save-dir", other, "--cpu", "--disable-validation", "--no-epoch-checkpoints")
    return other


def test_checkpoint_of_another_architecture(wmt_bin, stock_transformer, tmp_path):
    other = stock_transformer
    before = snapshot(other)
    proc = train(wmt_bin, tmp_path, "--restore-file", other / "checkpoint_last.pt", "--share-all-embeddings")
    assert_user_error(proc, "fairseq-train", "does not fit this model", "same --arch")
    assert snapshot(other) == before


def run_tool(*cmd):
    return run_cli(*cmd, check=False)


def test_demo_with_missing_files(tmp_path):
    proc = subprocess.run(["bash", str(ROOT / "examples/nmt_demo/run.sh"), "--src-file", str(tmp_path / "nope.en"),
                           "--workdir", str(tmp_path / "w")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "missing or empty source file" in proc.stderr


def test_demo_with_misaligned_files(tmp_path):
    (tmp_path / "a.en").write_text("one\ntwo\n")
    (tmp_path / "a.de").write_text("eins\n")
    proc = subprocess.run(["bash", str(ROOT / "examples/nmt_demo/run.sh"), "--src-file", str(tmp_path / "a.en"),
                           "--tgt-file", str(tmp_path / "a.de"), "--workdir", str(tmp_path / "w")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "must be line-aligned" in proc.stderr
    assert (tmp_path / "a.en").read_text() == "one\ntwo\n"


def test_demo_with_incomplete_splits(tmp_path):
    proc = subprocess.run(["bash", str(ROOT / "examples/nmt_demo/run.sh"), "--train", str(tmp_path / "train")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--train, --valid and --test go together" in proc.stderr


def test_demo_with_unknown_option():
    proc = subprocess.run(["bash", str(ROOT / "examples/nmt_demo/run.sh"), "--epochs", "3"], capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown option '--epochs'" in proc.stderr


@pytest.mark.parametrize("args,expected", [
    (["--arch", "define_transformer_huge"], "unknown architecture 'define_transformer_huge'"),
    (["--arch", "define_transformer_tiny", "--vocab-size", "3"], "--vocab-size must be larger than 4"),
    (["--arch", "define_transformer_tiny", "--define-depth", "0"], "define_depth (N) must be a positive integer"),
])
def test_params_tool_errors(args, expected):
    proc = run_tool("fairseq-define-params", *args)
    assert proc.returncode == 2 and expected in proc.stdout and "Traceback" not in proc.stdout


def test_average_tool_errors(trained, tmp_path):
    proc = run_tool("fairseq-define-average-checkpoints", "--inputs", tmp_path / "nope.pt", "--output", tmp_path / "avg.pt")
    assert proc.returncode == 2 and "no such checkpoint" in proc.stdout
    same = trained / "checkpoint_last.pt"
    before = snapshot(trained)
    proc = run_tool("fairseq-define-average-checkpoints", "--inputs", same, "--output", same)
    assert proc.returncode == 2 and "is one of the inputs" in proc.stdout
    assert snapshot(trained) == before


def test_cached_table_that_does_not_fit_the_dictionary(wmt_bin, trained, tmp_path):
    """A cached checkpoint whose tables have fewer rows than the dictionary (e.g. tables
    cached from another model)."""
    import torch
    from fairseq.checkpoint_utils import safe_torch_load

    cached = tmp_path / "cached.pt"
    run_cli("fairseq-define-cache-tables", "--path", trained / "checkpoint_last.pt", "--output", cached, "--data", wmt_bin / "bin")
    state = safe_torch_load(str(cached))
    for k in [k for k in state["model"] if k.endswith("cached_table.weight")]:
        state["model"][k] = state["model"][k][:-8].clone()
    torch.save(state, cached)
    before = snapshot(tmp_path, wmt_bin / "bin")
    proc = generate(wmt_bin / "bin", cached)
    assert_user_error(proc, "fairseq-generate", "the cached DeFINE table", "cached_table.weight", "fairseq-define-cache-tables")
    assert snapshot(tmp_path, wmt_bin / "bin") == before


@pytest.mark.parametrize("tool", ["fairseq-define-compress", "fairseq-define-cache-tables"])
def test_table_tools_refuse_a_model_that_is_not_ours(wmt_bin, stock_transformer, tmp_path, tool):
    before = snapshot(stock_transformer)
    proc = run_tool(tool, "--path", stock_transformer / "checkpoint_last.pt", "--output", tmp_path / "out.pt",
                    "--data", wmt_bin / "bin")
    assert proc.returncode == 2 and "Traceback" not in proc.stdout, proc.stdout[-2000:]
    assert ("not a fairseq-define model" if tool.endswith("compress") else "no DeFINE embeddings") in proc.stdout
    assert not (tmp_path / "out.pt").exists() and snapshot(stock_transformer) == before


@pytest.mark.parametrize("tool", ["fairseq-define-compress", "fairseq-define-cache-tables"])
def test_table_tools_check_the_output_folder_before_the_work(trained, tmp_path, tool):
    proc = run_tool(tool, "--path", trained / "checkpoint_last.pt", "--output", tmp_path / "missing" / "out.pt")
    assert proc.returncode == 2 and "does not exist; create it first" in proc.stdout, proc.stdout[-2000:]


def test_training_with_cached_tables_is_refused(wmt_bin, tmp_path):
    proc = train(wmt_bin, tmp_path, "--share-all-embeddings", "--define-cached-table")
    assert_user_error(proc, "fairseq-train", "for inference only", "with the DeFINE units")
    assert not (tmp_path / "ck").exists() or not any((tmp_path / "ck").iterdir())  # no crash.pt either


@pytest.mark.parametrize("reset", [False, True])
def test_resuming_with_cache_on_load_is_refused(wmt_bin, trained, tmp_path, reset):
    """define_cache_on_load drops the units when the checkpoint loads: the optimizer state
    no longer fits, and without it the first training step refuses the cached table."""
    (tmp_path / "ck").mkdir()
    shutil.copy(trained / "checkpoint_last.pt", tmp_path / "ck")
    before = snapshot(tmp_path / "ck")
    proc = train(wmt_bin, tmp_path, "--share-all-embeddings", "--define-cache-on-load", "--max-update", "20",
                 *(["--reset-optimizer"] if reset else []))
    assert_user_error(proc, "fairseq-train", "for inference only" if reset else "--reset-optimizer")
    assert snapshot(tmp_path / "ck") == before


def test_shared_embeddings_with_separate_dictionaries(shared_data, tmp_path):
    from .conftest import head

    toy = shared_data / "toy_ende_10k"
    head(toy / "src-train.txt", tmp_path / "train.en", 0, 200)
    head(toy / "tgt-train.txt", tmp_path / "train.de", 0, 200)
    run_cli("fairseq-preprocess", "-s", "en", "-t", "de", "--trainpref", tmp_path / "train", "--validpref",
            tmp_path / "train", "--destdir", tmp_path / "bin", "--workers", "1")
    before = snapshot(tmp_path / "bin")
    proc = run_cli("fairseq-train", tmp_path / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
                   "--share-all-embeddings", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500",
                   "--max-update", "1", "--save-dir", tmp_path / "ck", "--cpu", check=False)
    assert_user_error(proc, "fairseq-train", "needs one dictionary for source and target", "--joined-dictionary")
    assert snapshot(tmp_path / "bin") == before
