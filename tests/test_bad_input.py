"""Bad input: one clear message naming the problem and the fix, a non-zero exit, no
traceback, and no existing file changed."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .helpers import (
    BIN,
    ROOT,
    TINY,
    TINY_TIED,
    USER_DIR,
    assert_user_error,
    head,
    ptb_style,
    run_cli,
    run_in_process,
    snapshot,
)

pytestmark = pytest.mark.cli  # starts fairseq's command-line tools or a recipe


# the refusals of train() and generate() run in the test's process and end as the patch's hook
# ends a command (run_in_process); the hook itself and each command's exit from its console
# script: the run_cli tests below (no --user-dir, no batch size, preprocess, eval-lm)
def train(wmt_bin, tmp_path, *flags):
    return run_in_process("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch",
                          "define_transformer_tiny", *TINY, "--optimizer", "adam", "--lr", "1e-3", "--max-tokens",
                          "1500", "--max-update", "2", "--save-dir", tmp_path / "ck", "--cpu", *flags, check=False)


DEFINE_SETTINGS = [
    (["--define-expand-dim", "16"], ["define_expand_dim (k)=16 is smaller than define_map_dim (n)=32", "at least 32"]),
    (
        ["--define-map-dim", "30", "--define-max-groups", "4"],
        ["define_map_dim (n)=30 is not divisible by the 4 groups", "28 or 32"],
    ),
    (["--define-depth", "0"], ["define_depth (N) must be a positive integer, got 0", "--define-depth"]),
    (["--define-map-dim", "-8"], ["define_map_dim (n) must be a positive integer, got -8"]),
    (["--define-groups", "4,2"], ["define_groups lists 2 values", "define_depth (N) is 3"]),
    (["--define-groups", "4,x,1"], ["--define-groups must be comma-separated integers", "4,x,1"]),
    (["--define-max-groups", "0"], ["define_max_groups (g_max) must be a positive integer, got 0"]),
    (
        ["--define-transform", "projective", "--define-no-reduce"],
        ["cannot be used with --define-no-reduce", "drop that flag"],
    ),
    (
        ["--define-out-dim", "48"],
        ["outputs 48 dims but the Transformer's embedding dim is 64", "--define-out-dim to 64"],
    ),
    (["--define-no-reduce"], ["outputs 128 dims but the Transformer's embedding dim is 64", "drop --define-no-reduce"]),
    (["--encoder-embed-path", "/nonexistent/emb.txt"], ["cannot use", "drop them or use --arch transformer"]),
]


@pytest.mark.parametrize("flags,expected", DEFINE_SETTINGS, ids=[" ".join(f) for f, _ in DEFINE_SETTINGS])
def test_invalid_define_settings_refused_when_the_model_is_built(flags, expected):
    """fairseq-train's arguments parsed and the model built in process, as fairseq-train
    does it (build_arch): the refusal and its message."""
    message = build_error("define_transformer_tiny", *TINY, *flags)
    for text in expected:
        assert text in message, message


# a few of them through fairseq-train itself: the refusal reaches the user as one line
CLI_DEFINE_SETTINGS = [DEFINE_SETTINGS[i] for i in (0, 5, 8)]


@pytest.mark.parametrize("flags,expected", CLI_DEFINE_SETTINGS, ids=[" ".join(f) for f, _ in CLI_DEFINE_SETTINGS])
def test_invalid_define_settings_in_fairseq_train(wmt_bin, tmp_path, flags, expected):
    before = snapshot(wmt_bin / "bin")
    proc = train(wmt_bin, tmp_path, *flags)
    assert_user_error(proc, "fairseq-train", *expected)
    assert snapshot(wmt_bin / "bin") == before
    assert not (tmp_path / "ck" / "checkpoint_last.pt").exists()


@pytest.mark.parametrize("command", ["fairseq-train", "fairseq-generate"])
def test_a_refusal_in_the_process_is_the_console_scripts(wmt_bin, trained, tmp_path, command):
    """train() and generate() refuse in the test's process (run_in_process): the same status
    and the same one line as the console script, whose excepthook prints it."""
    if command == "fairseq-train":
        args = train(wmt_bin, tmp_path, *CLI_DEFINE_SETTINGS[0][0]).args
    else:
        args = generate(wmt_bin / "bin", trained / "checkpoint_last.pt", "--gen-subset", "test2").args
    inside, console = run_in_process(*args, check=False), run_cli(*args, check=False)
    assert inside.returncode == console.returncode == 1
    assert "Traceback" not in console.stdout
    assert inside.stdout.strip().splitlines()[-1] == console.stdout.strip().splitlines()[-1]
    assert console.stdout.strip().splitlines()[-1].startswith(f"{command}: error: ")


def test_unknown_transform_is_an_argparse_error(wmt_bin, tmp_path):
    proc = train(wmt_bin, tmp_path, "--define-transform", "dense")
    assert proc.returncode == 2 and "Traceback" not in proc.stdout
    assert "argument --define-transform: invalid choice: 'dense'" in proc.stdout


def generate(bin_dir, ckpt, *flags):
    return run_in_process("fairseq-generate", bin_dir, "--user-dir", USER_DIR, "--path", ckpt, "--gen-subset",
                          "test", "--beam", "2", "--max-tokens", "2000", "--cpu", *flags, check=False)


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
    assert_user_error(
        proc,
        "fairseq-generate",
        "the checkpoint does not fit the data",
        "use the dictionary (dict.*.txt) the model was trained with",
    )
    assert snapshot(trained) == before


def test_truncated_binarized_dataset(bin_copy, trained):
    path = bin_copy / "test.en-de.en.bin"
    os.truncate(path, path.stat().st_size // 3)
    proc = generate(bin_copy, trained / "checkpoint_last.pt")
    assert_user_error(proc, "fairseq-generate", "truncated", "run fairseq-preprocess again")


def test_empty_binarized_dataset(bin_copy, trained, tmp_path):
    for lang in ("en", "de"):
        (tmp_path / f"empty.{lang}").write_text("")
    run_in_process(
        "fairseq-preprocess",
        "-s",
        "en",
        "-t",
        "de",
        "--testpref",
        tmp_path / "empty",
        "--destdir",
        tmp_path / "ebin",
        "--srcdict",
        bin_copy / "dict.en.txt",
        "--tgtdict",
        bin_copy / "dict.de.txt",
        "--workers",
        "1",
    )
    proc = generate(tmp_path / "ebin", trained / "checkpoint_last.pt")
    assert_user_error(proc, "fairseq-generate", "empty (0 sentences)", "fairseq-preprocess")


def test_overlong_lines(bin_copy, trained):
    proc = generate(bin_copy, trained / "checkpoint_last.pt", "--max-source-positions", "30")
    assert_user_error(
        proc, "fairseq-generate", "is longer than the model accepts", "--skip-invalid-size-inputs-valid-test"
    )
    ok = generate(
        bin_copy,
        trained / "checkpoint_last.pt",
        "--max-source-positions",
        "30",
        "--skip-invalid-size-inputs-valid-test",
    )
    assert ok.returncode == 0


def interactive(bin_dir, ckpt, text, *flags):
    exe = Path(BIN) / "fairseq-interactive"
    return subprocess.run([str(exe), str(bin_dir), "--user-dir", USER_DIR, "--path", str(ckpt), "--source-lang", "en",
                           "--target-lang", "de", "--beam", "2", "--cpu", "--max-len-b", "10", *flags],
                          input=text, capture_output=True, text=True, timeout=300)


def test_empty_lines_and_unknown_tokens_are_translated(wmt_bin, trained):
    proc = interactive(wmt_bin / "bin", trained / "checkpoint_last.pt", "\nthe zzqxwv Parliament\n")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "S-0\t\n" in proc.stdout  # the empty line: an empty source, translated
    from fairseq.data import Dictionary

    d = Dictionary.load(str(wmt_bin / "bin" / "dict.en.txt"))
    unk_line = d.string(d.encode_line("the zzqxwv Parliament", add_if_not_exist=False))  # the source as read
    assert "<unk>" in unk_line and f"S-1\t{unk_line}\n" in proc.stdout
    assert len([l for l in proc.stdout.splitlines() if l.startswith("H-")]) == 2


def test_overlong_interactive_line(wmt_bin, trained):
    proc = interactive(wmt_bin / "bin", trained / "checkpoint_last.pt", " ".join(["the"] * 1100) + "\n")
    assert_user_error(proc, "fairseq-interactive", "is longer than the model accepts")


def test_overlong_interactive_line_skipped_as_the_line_advises(wmt_bin, trained):
    """--skip-invalid-size-inputs-valid-test, which the line above advises, refused the whole
    input ("every sample of this split"): interactive reads a chunk of lines at a time, and a
    chunk of one long line was left empty. Now the long line is skipped, the others translated."""
    text = "the house\n" + " ".join(["the"] * 1100) + "\na cat\n"
    proc = interactive(wmt_bin / "bin", trained / "checkpoint_last.pt", text, "--skip-invalid-size-inputs-valid-test")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert [l.split("\t")[0] for l in proc.stdout.splitlines() if l.startswith("H-")] == ["H-0", "H-2"]
    assert "1 samples have invalid sizes and will be skipped" in proc.stderr + proc.stdout


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
    run_in_process("fairseq-train", wmt_bin / "bin", "--arch", "transformer", "--encoder-layers", "1",
                   "--decoder-layers", "1", "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
                   "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32", "--optimizer", "adam", "--lr",
                   "1e-3", "--max-tokens", "1500", "--max-update", "1", "--save-dir", other, "--cpu",
                   "--disable-validation", "--no-epoch-checkpoints")
    return other


def test_checkpoint_of_another_architecture(wmt_bin, stock_transformer, tmp_path):
    other = stock_transformer
    before = snapshot(other)
    proc = train(wmt_bin, tmp_path, "--restore-file", other / "checkpoint_last.pt", "--share-all-embeddings")
    assert_user_error(proc, "fairseq-train", "does not fit this model",
                      "--arch transformer in the checkpoint, define_transformer_tiny here")
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
    proc = subprocess.run(
        ["bash", str(ROOT / "examples/nmt_demo/run.sh"), "--epochs", "3"], capture_output=True, text=True
    )
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
    proc = run_tool(
        "fairseq-define-average-checkpoints", "--inputs", tmp_path / "nope.pt", "--output", tmp_path / "avg.pt"
    )
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
    run_in_process(
        "fairseq-define-cache-tables",
        "--path",
        trained / "checkpoint_last.pt",
        "--output",
        cached,
        "--data",
        wmt_bin / "bin",
    )
    state = safe_torch_load(str(cached))
    for k in [k for k in state["model"] if k.endswith("cached_table.weight")]:
        state["model"][k] = state["model"][k][:-8].clone()
    torch.save(state, cached)
    before = snapshot(tmp_path, wmt_bin / "bin")
    proc = generate(wmt_bin / "bin", cached)
    # the map tables still have the dictionary's rows: this table alone is wrong (damaged), not the dictionary
    assert_user_error(proc, "fairseq-generate", "the checkpoint's weight encoder.embed_tokens.cached_table.weight is",
                      "the file is damaged or was edited")
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
    assert proc.returncode == 1 and "terminate called" not in proc.stdout  # no abort (134) after the line
    assert not (tmp_path / "ck").exists() or not any((tmp_path / "ck").iterdir())  # no crash.pt either


@pytest.mark.parametrize("flags,named", [
    # define_transformer_tiny's default is untied; the fixture's checkpoint is tied at n
    ([], ["--define-output-layer tied_map in the checkpoint, untied here"]),
    ([*TINY_TIED, "--decoder-layers", "1"], ["--decoder-layers 2 in the checkpoint, 1 here"]),
], ids=["output_layer", "layers"])
def test_resuming_a_checkpoint_that_does_not_fit_names_the_settings(wmt_bin, trained, tmp_path, flags, named):
    """fairseq said "please ensure that the architectures match"; the line names the model
    settings that differ from the checkpoint's, and nothing else of the model's."""
    (tmp_path / "ck").mkdir()
    shutil.copy(trained / "checkpoint_last.pt", tmp_path / "ck")
    before = snapshot(tmp_path / "ck")
    proc = train(wmt_bin, tmp_path, "--share-all-embeddings", "--max-update", "20", *flags)
    assert_user_error(proc, "fairseq-train", "does not fit this model", *named)
    line = [l for l in proc.stdout.splitlines() if l.startswith("fairseq-train: error:")][-1]
    assert "--max-update" not in line and "--encoder-layers" not in line  # not a model setting; equal
    assert snapshot(tmp_path / "ck") == before


def test_a_misfit_with_the_same_settings_says_what_the_load_found():
    """Same settings (another dictionary, say): the line carries the load's first complaint."""
    from argparse import Namespace

    from fairseq_define_patch.runtime.checkpoint_misfit import _checkpoint_misfit

    cfg = Namespace(arch="transformer", encoder_layers=6, lr=[0.1])
    error = RuntimeError("Error(s) in loading state_dict for TransformerModel:\n\tsize mismatch for "
                         "encoder.embed_tokens.weight: copying a param with shape torch.Size([8, 4]) ...")
    line = _checkpoint_misfit("ck.pt", {"cfg": {"model": cfg}}, Namespace(**vars(cfg)), error)
    assert line.startswith("checkpoint ck.pt does not fit this model: the same model settings, but size "
                           "mismatch for encoder.embed_tokens.weight"), line
    assert "\n" not in line and "dict.*.txt" in line
    here = Namespace(arch="transformer", encoder_layers=2, lr=[0.5],
                     **{f"decoder_{k}": 1 for k in ["layers", "attention_heads", "embed_dim", "ffn_embed_dim",
                                                    "output_dim", "learned_pos"]})
    line = _checkpoint_misfit("ck.pt", {"args": cfg}, here, error)  # a checkpoint with args, not cfg
    assert "--encoder-layers 6 in the checkpoint, 2 here" in line and "--lr" not in line, line
    assert "--decoder-embed-dim unset in the checkpoint, 1 here" in line and line.count(" here") == 6, line
    assert "and 1 more" in line and "size mismatch" not in line, line


@pytest.mark.parametrize("reset", [False, True])
def test_resuming_with_cache_on_load_is_refused(wmt_bin, trained, tmp_path, reset):
    """define_cache_on_load drops the units when the checkpoint loads: the optimizer state
    no longer fits, and without it the first training step refuses the cached table."""
    (tmp_path / "ck").mkdir()
    shutil.copy(trained / "checkpoint_last.pt", tmp_path / "ck")
    before = snapshot(tmp_path / "ck")
    proc = train(wmt_bin, tmp_path, *TINY_TIED,
                 "--define-cache-on-load", "--max-update", "20",
                 *(["--reset-optimizer"] if reset else []))
    assert_user_error(proc, "fairseq-train", "for inference only" if reset else "--reset-optimizer")
    assert snapshot(tmp_path / "ck") == before


def test_shared_embeddings_with_separate_dictionaries(shared_data, tmp_path):

    news = shared_data / "wmt_news"
    head(news / "train.en", tmp_path / "train.en", 0, 200)
    head(news / "train.de", tmp_path / "train.de", 0, 200)
    run_cli("fairseq-preprocess", "-s", "en", "-t", "de", "--trainpref", tmp_path / "train", "--validpref",
            tmp_path / "train", "--destdir", tmp_path / "bin", "--workers", "1")
    before = snapshot(tmp_path / "bin")
    proc = run_cli(
        "fairseq-train",
        tmp_path / "bin",
        "--user-dir",
        USER_DIR,
        "--arch",
        "define_transformer_tiny",
        *TINY,
        "--share-all-embeddings",
        "--optimizer",
        "adam",
        "--lr",
        "1e-3",
        "--max-tokens",
        "1500",
        "--max-update",
        "1",
        "--save-dir",
        tmp_path / "ck",
        "--cpu",
        check=False,
    )
    assert_user_error(proc, "fairseq-train", "needs one dictionary for source and target", "--joined-dictionary")
    assert snapshot(tmp_path / "bin") == before


# --- a missing or wrong plugin (the patch's errors: fairseq runs without the plugin) ------


def test_checkpoint_of_ours_without_user_dir(bin_copy, trained):
    proc = run_cli("fairseq-generate", bin_copy, "--path", trained / "checkpoint_last.pt", "--gen-subset", "test",
                   "--cpu", check=False)
    assert_user_error(proc, "fairseq-generate", "unknown model architecture 'define_transformer_tiny'",
                      f"pass --user-dir {USER_DIR}", "import fairseq_define")


def test_arch_of_ours_without_user_dir(wmt_bin, tmp_path):
    proc = run_cli("fairseq-train", wmt_bin / "bin", "--arch", "define_transformer_tiny", "--cpu",
                   "--max-tokens", "1000", "--save-dir", tmp_path / "ck", check=False)
    assert_user_error(proc, "fairseq-train", "unknown model architecture 'define_transformer_tiny'",
                      f"pass --user-dir {USER_DIR}")


@pytest.mark.parametrize("where,expected", [
    ("missing", "does not exist: point it at the plugin's package folder"),
    ("empty", "is not a plugin (a Python package with an __init__.py): point it at"),
    ("repo", f"is not a plugin (a Python package with an __init__.py): did you mean {ROOT}/fairseq_define?"),
])
def test_user_dir_that_is_not_a_plugin(wmt_bin, tmp_path, where, expected):
    user_dir = {"missing": tmp_path / "nope", "empty": tmp_path, "repo": ROOT}[where]
    proc = run_cli("fairseq-train", wmt_bin / "bin", "--user-dir", user_dir, "--arch", "define_transformer_tiny",
                   "--cpu", "--max-tokens", "1000", "--save-dir", tmp_path / "ck", check=False)
    assert_user_error(proc, "fairseq-train", f"--user-dir {user_dir} ", expected)


# --- damaged binarized data ----------------------------------------------------------------


def test_token_ids_outside_the_dictionary(bin_copy, tmp_path):
    import numpy as np

    ids = np.memmap(bin_copy / "train.en-de.en.bin", dtype=np.uint16, mode="r+")
    ids[5] = 60000
    ids.flush()
    del ids
    proc = run_cli("fairseq-train", bin_copy, "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
                   "--share-all-embeddings", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500",
                   "--max-update", "2", "--save-dir", tmp_path / "ck", "--cpu", check=False)
    assert_user_error(proc, "fairseq-train", "train.en-de.en.bin holds token ids outside the dictionary",
                      "max 60000", "run fairseq-preprocess again")
    assert not any((tmp_path / "ck").iterdir())  # no crash.pt, no checkpoint


def test_garbage_index_header(bin_copy, trained):
    with open(bin_copy / "test.en-de.de.idx", "r+b") as f:
        f.write(b"GARBAGE!GARBAGE!")
    proc = generate(bin_copy, trained / "checkpoint_last.pt")
    assert_user_error(proc, "fairseq-generate", "test.en-de.de.idx is not an index written by fairseq-preprocess",
                      "b'GARBAGE!'", "run fairseq-preprocess again")


# --- fairseq-preprocess checks its inputs before writing anything --------------------------


@pytest.mark.parametrize("case,expected", [
    ("misaligned", ["train.en has 3 lines but", "train.de has 2", "line-aligned"]),
    ("latin1", ["train.de line 2 is not UTF-8", "iconv"]),
    ("missing", ["no such input file", "train.de", "PREFIX.LANG"]),
])
def test_preprocess_refuses_bad_text_before_writing(tmp_path, case, expected):
    (tmp_path / "train.en").write_text("one\ntwo\nthree\n")
    de = {"misaligned": b"eins\nzwei\n", "latin1": b"eins\nzw\xe4i\ndrei\n", "missing": None}[case]
    if de is not None:
        (tmp_path / "train.de").write_bytes(de)
    proc = run_cli("fairseq-preprocess", "-s", "en", "-t", "de", "--trainpref", tmp_path / "train",
                   "--destdir", tmp_path / "bin", "--workers", "1", check=False)
    assert_user_error(proc, "fairseq-preprocess", *expected)
    assert not (tmp_path / "bin").exists()


def test_preprocess_without_text_for_the_dictionary(wmt_bin, tmp_path):
    proc = run_cli("fairseq-preprocess", "--only-source", "--validpref", wmt_bin / "valid.bpe.en",
                   "--destdir", tmp_path / "bin", "--workers", "1", check=False)
    assert_user_error(proc, "fairseq-preprocess", "no --trainpref to build the dictionary from", "--srcdict")
    assert not (tmp_path / "bin").exists()


@pytest.mark.parametrize("cli", ["fairseq-train", "fairseq-validate"])
def test_no_batch_size(wmt_bin, trained, tmp_path, cli):
    args = (["--arch", "define_transformer_tiny", "--save-dir", tmp_path / "ck"] if cli == "fairseq-train"
            else ["--path", trained / "checkpoint_last.pt", "--task", "translation"])
    proc = run_cli(cli, wmt_bin / "bin", "--user-dir", USER_DIR, "--cpu", *args, check=False)
    assert_user_error(proc, cli, "no batch size: pass --max-tokens N")


def test_validate_without_task(wmt_bin, trained):
    proc = run_cli(
        "fairseq-validate",
        wmt_bin / "bin",
        "--user-dir",
        USER_DIR,
        "--path",
        trained / "checkpoint_last.pt",
        "--cpu",
        "--max-tokens",
        "1000",
        check=False,
    )
    assert_user_error(proc, "fairseq-validate", "no --task: pass --task translation")


def test_preprocess_refuses_a_destdir_that_holds_data(wmt_bin, tmp_path):
    shutil.copytree(wmt_bin / "bin", tmp_path / "bin")
    before = snapshot(tmp_path / "bin")
    proc = run_cli("fairseq-preprocess", "-s", "en", "-t", "de", "--trainpref", wmt_bin / "train.bpe",
                   "--destdir", tmp_path / "bin", "--workers", "1", check=False)
    assert_user_error(proc, "fairseq-preprocess", "dict.en.txt exists", "choose a new --destdir")
    assert snapshot(tmp_path / "bin") == before


# --- where checkpoints go ------------------------------------------------------------------


@pytest.mark.parametrize("case,expected", [
    ("file", "is a file, not a folder"),
    ("under_file", "cannot write checkpoints to --save-dir"),
])
def test_unusable_save_dir(wmt_bin, tmp_path, case, expected):
    (tmp_path / "f").write_text("a file")
    save_dir = tmp_path / "f" if case == "file" else tmp_path / "f" / "ck"
    proc = run_cli("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny",
                   *TINY, "--share-all-embeddings", "--optimizer", "adam", "--max-tokens", "1500", "--cpu",
                   "--save-dir", save_dir, check=False)
    assert_user_error(proc, "fairseq-train", f"--save-dir {save_dir}", expected)
    assert (tmp_path / "f").read_text() == "a file"


def test_disk_full_during_a_save(wmt_bin, tmp_path):
    """The second checkpoint write finds the disk full: one clear line, no temporary file,
    and the checkpoints written before are intact."""
    import sys

    import torch

    save = tmp_path / "ck"
    args = [wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
            "--share-all-embeddings", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500",
            "--max-update", "12", "--save-interval-updates", "4", "--save-dir", save, "--cpu"]
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "fault_injection.py"), "fairseq-train",
                           *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600, env={**os.environ, "FAULT": "full:2", "PATH": f"{BIN}:{os.environ['PATH']}"})
    assert_user_error(proc, "fairseq-train", "no space left on the device while writing", "checkpoint_1_8.pt",
                      "is unchanged")
    assert not [p.name for p in save.iterdir() if p.name.endswith(".tmp")]
    last = torch.load(save / "checkpoint_last.pt", weights_only=False)
    assert last["optimizer_history"][-1]["num_updates"] == 4


def run_with_fault(fault, cli, *args):
    import sys

    return subprocess.run([sys.executable, str(ROOT / "tests" / "fault_injection.py"), cli, *map(str, args)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
                          env={**os.environ, "FAULT": fault, "PATH": f"{BIN}:{os.environ['PATH']}"})


def test_disk_full_in_generate_results(wmt_bin, trained, tmp_path):
    """The 30th line of --results-path's file finds the disk full: one line; the results a
    former run wrote there are unchanged, and no part of the new ones is left."""
    (tmp_path / "generate-test.txt").write_text("former results\n")
    proc = run_with_fault(
        "results:30",
        "fairseq-generate",
        *generate_args(wmt_bin / "bin", trained / "checkpoint_last.pt", "--max-len-b", "5", "--results-path", tmp_path),
    )
    assert_user_error(
        proc,
        "fairseq-generate",
        f"no space left on the device while writing {tmp_path}/generate-test.txt",
        "choose another --results-path",
        "is unchanged",
    )
    assert [p.name for p in tmp_path.iterdir()] == ["generate-test.txt"]
    assert (tmp_path / "generate-test.txt").read_text() == "former results\n"


def test_disk_full_in_preprocess_leaves_nothing(wmt_bin, tmp_path):
    """The 50th sentence binarized finds the disk full: one line, nothing left in --destdir
    (its dictionaries refused the retry before), and the same command then runs."""
    args = ["--source-lang", "en", "--target-lang", "de", "--trainpref", wmt_bin / "train.bpe", "--validpref",
            wmt_bin / "valid.bpe", "--destdir", tmp_path / "bin", "--workers", "1"]
    proc = run_with_fault("binarize:50", "fairseq-preprocess", *args)
    assert_user_error(
        proc,
        "fairseq-preprocess",
        f"no space left on the device while writing into --destdir {tmp_path}/bin",
        "what this run wrote there is removed",
    )
    assert not (tmp_path / "bin").exists()
    run_cli("fairseq-preprocess", *args)
    assert (tmp_path / "bin" / "train.en-de.de.bin").is_file()


# --- a checkpoint given to the wrong command -----------------------------------------------


def test_translation_checkpoint_in_eval_lm(bin_copy, trained):
    proc = run_cli("fairseq-eval-lm", bin_copy, "--user-dir", USER_DIR, "--path", trained / "checkpoint_last.pt",
                   "--cpu", "--max-tokens", "1000", check=False)
    assert_user_error(proc, "fairseq-eval-lm", "has no dict.txt (it holds translation data: dict.de.txt, dict.en.txt)",
                      "a translation checkpoint goes with fairseq-generate")


def test_language_model_data_in_generate(trained, tmp_path):

    head(ptb_style("valid"), tmp_path / "valid.txt", 0, 50)
    run_in_process("fairseq-preprocess", "--only-source", "--trainpref", tmp_path / "valid.txt", "--validpref",
                   tmp_path / "valid.txt", "--destdir", tmp_path / "lm", "--workers", "1")
    proc = run_cli(
        "fairseq-generate",
        tmp_path / "lm",
        "--user-dir",
        USER_DIR,
        "--path",
        trained / "checkpoint_last.pt",
        "--gen-subset",
        "valid",
        "--cpu",
        check=False,
    )
    assert_user_error(proc, "fairseq-generate", "cannot tell the language pair", "language-model data (dict.txt)",
                      "fairseq-eval-lm")


@pytest.mark.parametrize(
    "arch,task_module,task_class,expected",
    [
        (
            "define_txl_tiny",
            "fairseq.tasks.translation",
            "TranslationTask",
            "is a language model, but this command runs a translation task",
        ),
        (
            "define_transformer_tiny",
            "fairseq.tasks.language_modeling",
            "LanguageModelingTask",
            "is a translation model, but this command runs a language modeling task",
        ),
    ],
)
def test_model_built_for_the_wrong_task(arch, task_module, task_class, expected):
    """What a checkpoint used with the wrong command meets: the model refuses the task."""
    import importlib

    from fairseq.models import ARCH_MODEL_REGISTRY

    from fairseq_define.errors import UserError
    from fairseq_define.tools.params import build_arch

    _, args = build_arch(arch, 100)
    task = getattr(importlib.import_module(task_module), task_class).__new__(
        getattr(importlib.import_module(task_module), task_class))
    with pytest.raises(UserError, match=expected):
        ARCH_MODEL_REGISTRY[arch].build_model(args, task)


# --- settings out of range, refused before any work ---------------------------------------


def build_error(arch, *flags):
    from fairseq_define.errors import UserError
    from fairseq_define.tools.params import build_arch

    with pytest.raises(UserError) as info:
        build_arch(arch, 100, extra=list(flags))
    return str(info.value)


@pytest.mark.parametrize("arch", ["define_transformer_tiny", "define_txl_tiny", "define_lstm_tiny"])
@pytest.mark.parametrize("flag,value", [("--dropout", "-0.1"), ("--define-dropout", "-0.2"),
                                        ("--define-map-dropout", "1.0"), ("--attention-dropout", "-0.5")])
def test_dropout_out_of_range(arch, flag, value):
    if flag == "--attention-dropout" and arch == "define_lstm_tiny":
        pytest.skip("the LSTM has no attention")
    name = flag[2:].replace("-", "_")
    assert f"{name}={float(value)} is not a dropout probability: use a value in [0, 1)" in build_error(
        arch, flag, value
    )


@pytest.mark.parametrize("flags,expected", [
    (["--define-out-dim", "0"], "define_out_dim (m) must be a positive integer, got 0"),
    (["--define-depth", "100000"], "define_depth (N)=100000 is larger than this plugin supports (64)"),
    (["--define-expand-dim", "1000000"], "define_expand_dim (k)=1000000 is larger than this plugin supports (65536)"),
])
def test_define_settings_refused_up_front(flags, expected):
    assert expected in build_error("define_transformer_tiny", *flags)


@pytest.mark.parametrize("arch", ["define_transformer_tiny", "define_txl_tiny", "define_lstm_tiny",
                                  "define_transformer_lm_tiny"])
@pytest.mark.parametrize("flags", [["--define-adaptive-cutoff", "50"], ["--define-map", "adaptive"],
                                   ["--define-adaptive-factor", "2"]])
def test_removed_define_map_flags_are_not_options(arch, flags, capsys):
    """The DeFINE map flags that every model refused are gone (a language model's adaptive map
    is its own adaptive input): argparse names the flag, and --help does not list it."""
    from fairseq import options

    from fairseq_define.tools.params import is_translation_arch

    task = "translation" if is_translation_arch(arch) else "language_modeling"
    parser = options.get_training_parser(default_task=task)
    with pytest.raises(SystemExit):
        options.parse_args_and_arch(parser, input_args=["-", "--task", task, "--arch", arch, *flags])
    assert f"unrecognized arguments: {' '.join(flags)}" in capsys.readouterr().err
    parser = options.get_training_parser(default_task=task)
    options.parse_args_and_arch(parser, input_args=["-", "--task", task, "--arch", arch])
    assert flags[0] + " " not in parser.format_help() and "define-map-dim" in parser.format_help()


@pytest.mark.parametrize("override,expected", [
    ({"mem_len": -1}, "mem_len=-1: give the memory length in tokens, or 0 for no memory"),
    ({"tgt_len": 0}, "tgt_len=0: the segment length must be at least 1 token"),
    ({"tgt_len": -4}, "tgt_len=-4"),
    ({"clamp_len": -2}, "clamp_len=-2"),
    # beyond the bounds table's positions row: a memory that grows with the evaluated text
    ({"mem_len": 10**12}, "mem_len=1000000000000 is larger than this plugin supports (16777216); lower --mem-len"),
    ({"tgt_len": 1 << 25}, "tgt_len=33554432 is larger than this plugin supports"),
    ({"clamp_len": 10**9}, "clamp_len=1000000000 is larger"),
])
def test_transformer_xl_memory_settings(override, expected):
    """What fairseq-eval-lm --model-overrides "{'mem_len': ...}" builds."""
    from argparse import Namespace

    from fairseq.data import Dictionary

    from fairseq_define.errors import UserError
    from fairseq_define.models.transformer_xl import TransformerXLConfig, TransformerXLLanguageModel

    cfg = TransformerXLConfig(decoder_layers=1, decoder_embed_dim=16, decoder_attention_heads=2, decoder_head_dim=8,
                              decoder_ffn_embed_dim=32, define_map_dim=8, mem_len=6, tgt_len=4)
    for k, v in override.items():
        setattr(cfg, k, v)
    with pytest.raises(UserError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        TransformerXLLanguageModel.build_model(cfg, Namespace(target_dictionary=Dictionary()))


def test_memory_zero_means_no_memory():
    from argparse import Namespace

    from fairseq.data import Dictionary

    from fairseq_define.models.transformer_xl import TransformerXLConfig, TransformerXLLanguageModel

    cfg = TransformerXLConfig(decoder_layers=1, decoder_embed_dim=16, decoder_attention_heads=2, decoder_head_dim=8,
                              decoder_ffn_embed_dim=32, define_map_dim=8, mem_len=0, tgt_len=4)
    model = TransformerXLLanguageModel.build_model(cfg, Namespace(target_dictionary=Dictionary()))
    assert model.memory_span(4) == 0


@pytest.mark.parametrize("context,ok", [(-5, False), (-2, False), (-1, True), (0, True), (64, True)])
def test_eval_context_range(context, ok):
    from argparse import Namespace

    from fairseq.data import Dictionary

    from fairseq_define.errors import UserError
    from fairseq_define.tasks.contiguous_lm import ContiguousLMTask

    args = Namespace(eval_context=context, tokens_per_sample=16, output_dictionary_size=-1, data=None)
    if ok:
        ContiguousLMTask(args, Dictionary())
    else:
        with pytest.raises(UserError, match=f"--eval-context {context}: give the context in tokens, 0 for none, or -1"):
            ContiguousLMTask(args, Dictionary())


@pytest.mark.parametrize(
    "args,expected",
    [
        (
            ["--arch", "define_txl_tiny", "--baseline", "transformer"],
            "--baseline transformer is a translation model but --arch define_txl_tiny is a language model",
        ),
        (
            ["--arch", "define_transformer_tiny", "--baseline", "transformer_lm"],
            "--baseline transformer_lm is a language model but --arch define_transformer_tiny is a translation model",
        ),
        (
            ["--arch", "define_transformer_tiny", "--paper-table", "3"],
            "--paper-table 3 prints the paper's fixed settings and ignores --arch",
        ),
        (["--paper-table", "2", "--define-map-dim", "64"], "ignores --define-map-dim 64"),
        (
            ["--arch", "define_transformer_tiny", "--vocab-size", "100000000000"],
            "the vocabulary size=100000000000 is larger than this plugin supports (10000000)",
        ),
        (["--arch", "define_transformer_tiny", "--define-depth", "100000"], "define_depth (N)=100000 is larger than"),
    ],
)
def test_params_tool_refuses_conflicting_or_huge_settings(args, expected):
    import time

    start = time.time()
    proc = run_tool("fairseq-define-params", *args)
    assert_user_error(proc, "fairseq-define-params", expected)
    assert time.time() - start < 60  # refused up front, not after minutes


# One command-line row per class of mistake (the classes' tables run in process in
# tests/test_mistakes.py and tests/test_hostile_*.py): the line reaches the user, exit
# non-zero, nothing written. (name, command (given the data, a checkpoint, a scratch folder),
# program, what the line says)
CLI_MISTAKES = [
    (
        "number_not_finite",
        lambda b, ck, t: ("fairseq-train", train_args(b, t, "--define-unit-grad-scale", "inf")),
        "define_unit_grad_scale=inf is not a finite number",
    ),
    (
        "training_number_out_of_range",
        lambda b, ck, t: ("fairseq-train", train_args(b, t, "--update-freq", "0")),
        "--update-freq 0 must be at least 1",
    ),
    (
        "override_not_a_choice",
        lambda b, ck, t: (
            "fairseq-generate",
            generate_args(b, ck, "--model-overrides", "{'define_unit_centring': 'bogus'}"),
        ),
        "define_unit_centring='bogus' is not one of",
    ),
    (
        "override_unknown",
        lambda b, ck, t: ("fairseq-generate", generate_args(b, ck, "--model-overrides", "{'define_map_dimm': 8}")),
        "'define_map_dimm' (did you mean 'define_map_dim'?) is not a setting",
    ),
    (
        "override_malformed",
        lambda b, ck, t: ("fairseq-interactive", generate_args(b, ck, "--model-overrides", "{'dropout': }")),
        "not a Python literal (SyntaxError)",
    ),
    (
        "path_is_a_folder",
        lambda b, ck, t: ("fairseq-generate", generate_args(b, ck.parent)),
        "is a folder, not a checkpoint file",
    ),
    (
        "restore_file_is_a_folder",
        lambda b, ck, t: ("fairseq-train", train_args(b, t, "--restore-file", ck.parent)),
        "is a folder: give a checkpoint file",
    ),
    (
        "beam_0",
        lambda b, ck, t: ("fairseq-generate", generate_args(b, ck, "--beam", "0")),
        "--beam 0 must be at least 1",
    ),
    (
        "generation_number",
        lambda b, ck, t: ("fairseq-generate", generate_args(b, ck, "--nbest", "0")),
        "--nbest 0 must be at least 1",
    ),
    (
        "min_len_above_a_batch",
        lambda b, ck, t: ("fairseq-generate", generate_args(b, ck, "--max-len-a", "0.01", "--max-len-b", "-3")),
        "--min-len 1 is above the longest output for a source of",
    ),
    (
        "generation_seed",
        lambda b, ck, t: ("fairseq-interactive", generate_args(b, ck, "--seed", "-1")),
        "--seed -1 is not a seed",
    ),
    (
        "batch_above_buffer",
        lambda b, ck, t: ("fairseq-interactive", generate_args(b, ck, "--batch-size", "4")),
        "--batch-size 4 is larger than --buffer-size 1",
    ),
    (
        "world_size_0",
        lambda b, ck, t: ("fairseq-generate", generate_args(b, ck, "--distributed-world-size", "0")),
        "--distributed-world-size 0 must be at least 1",
    ),
    (
        "seed_beyond_the_run",
        lambda b, ck, t: ("fairseq-train", train_args(b, t, "--seed", "4294967294", "--max-epoch", "2")),
        "--seed 4294967294 is too large for this run",
    ),
]


def train_args(bin_dir, tmp_path, *flags):
    return [bin_dir, "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY, "--optimizer", "adam",
            "--lr", "1e-3", "--max-tokens", "1500", "--max-update", "2", "--save-dir", tmp_path / "ck", "--cpu",
            "--share-all-embeddings", *flags]


def generate_args(bin_dir, ckpt, *flags):
    return [bin_dir, "--user-dir", USER_DIR, "--path", ckpt, "--gen-subset", "test", "--beam", "2",
            "--max-tokens", "2000", "--cpu", *flags]


@pytest.mark.parametrize("name,command,expected", CLI_MISTAKES, ids=[m[0] for m in CLI_MISTAKES])
def test_classes_of_mistakes_from_the_command_line(wmt_bin, trained, tmp_path, name, command, expected):
    before = snapshot(trained)
    prog, args = command(wmt_bin / "bin", trained / "checkpoint_last.pt", tmp_path)
    # in the test's process (train and generate refuse from their console scripts in the tests
    # above); fairseq-interactive from its own, which would go on to read standard input
    proc = (run_cli if prog == "fairseq-interactive" else run_in_process)(prog, *args, check=False)
    assert_user_error(proc, prog, expected)
    assert snapshot(trained) == before and not (tmp_path / "ck" / "checkpoint_last.pt").exists()


def test_a_plain_state_dict_without_user_dir(bin_copy, tmp_path):
    """fairseq's own hook (no plugin loaded) prints the load error as one line."""
    import torch

    torch.save({"encoder.w": torch.zeros(2)}, tmp_path / "weights.pt")
    proc = run_cli("fairseq-generate", bin_copy, "--path", tmp_path / "weights.pt", "--cpu", check=False)
    assert_user_error(proc, "fairseq-generate", "is not a fairseq checkpoint (it has no 'model' entry")


def test_compress_says_when_codes_would_not_shrink_the_tables(trained, tmp_path):
    """64 codebooks of 16 codes outweigh the tied 792 x 32 table: the tool said "has no lookup
    tables to compress"."""
    proc = run_tool(
        "fairseq-define-compress",
        "--path",
        trained / "checkpoint_last.pt",
        "--output",
        tmp_path / "out.pt",
        "--codebooks",
        "64",
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stdout, proc.stdout[-2000:]
    assert ("--codebooks 64 x --codes 16 would not make the lookup tables of" in proc.stdout
            and "as codes): lower --codebooks or --codes" in proc.stdout), proc.stdout[-2000:]
    assert not (tmp_path / "out.pt").exists()
