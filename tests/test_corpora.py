"""The data root (run_scripts/corpora.py): the checksum list against the local copies, a
local source found by flag or environment variable, a changed file refused, the message
when nothing is found, and a download (from file:// URLs, as no network is at hand) checked
before it is kept."""

import gzip
import io
import os
import shutil
import subprocess
import tarfile
import zipfile

import pytest

from .helpers import BIN, ROOT, corpora

CORPORA = ROOT / "run_scripts" / "corpora.py"


def run(cmd, env=None):
    """A script with the environment's CLIs on PATH and no data root set unless given."""
    base = {k: v for k, v in os.environ.items() if k != corpora.ENV}
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300,
                          env={**base, "PATH": f"{BIN}:{base.get('PATH', '')}", **(env or {})})


def copy_set(data_root, dataset, dest_root):
    for f in corpora.dataset_files(dataset):
        (dest_root / f.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data_root / f.path, dest_root / f.path)


def test_checksum_list_matches_the_local_copies(corpus_root):
    """Every file of corpora.tsv that the data root holds has the listed checksum."""
    checked = set()
    for f in corpora.read_table():
        if (corpus_root / f.path).is_file():
            algo, want = f.checksum.split(":")
            assert corpora.digest(corpus_root / f.path, algo) == want, f.path
            checked.add(f.dataset)
    assert {"ptb", "wikitext-2", "wmt14-test"} <= checked


@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_local_copy_is_found(tmp_path, corpus_root, how):
    copy_set(corpus_root, "ptb", tmp_path)
    args, env = (["--data-root", tmp_path], None) if how == "flag" else ([], {corpora.ENV: str(tmp_path)})
    proc = run(["python3", CORPORA, "path", "ptb", *args], env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str((tmp_path / "ptb").resolve())


def one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for n in needles:
        assert n in errors[0], errors[0]
    return errors[0]


def entry_points(tmp_path):
    """Every script that reads PTB through the data root, with that root given by --data-root."""
    root = tmp_path / "root"
    return {
        "corpora.py": ["python3", CORPORA, "path", "ptb", "--data-root", root],
        "prepare_lm.sh": ["bash", ROOT / "run_scripts" / "prepare_lm.sh", "--dataset", "ptb",
                          "--out", tmp_path / "out", "--data-root", root],
        # (a few updates: were the data taken, the run would stay short)
        "lstm_ptb": ["bash", ROOT / "examples" / "lstm_ptb" / "run.sh", "--workdir", tmp_path / "out",
                     "--data-root", root, "--updates", "2", "--max-eval-lines", "5"],
        "table1c": ["bash", ROOT / "run_scripts" / "table1c_awd_lstm_ptb.sh", "--small", "--workdir", tmp_path / "out",
                    "--prepared-dir", tmp_path / "out" / "data", "--data-root", root, "--updates", "2",
                    "--max-eval-lines", "5"],
    }


@pytest.mark.parametrize("entry", ["corpora.py", "prepare_lm.sh", "lstm_ptb", "table1c"])
def test_a_changed_file_is_refused(tmp_path, corpus_root, entry):
    copy_set(corpus_root, "ptb", tmp_path / "root")
    with open(tmp_path / "root" / "ptb" / "ptb.valid.txt", "a", encoding="utf-8") as f:
        f.write(" one more line\n")
    line = one_line_error(run(entry_points(tmp_path)[entry]), "checksum mismatch for", "ptb.valid.txt", "--no-verify")
    assert "md5" in line
    assert not (tmp_path / "out" / "bin").exists() and not list((tmp_path / "out").glob("*/bin"))


@pytest.mark.parametrize("entry", ["corpora.py", "prepare_lm.sh", "lstm_ptb", "table1c"])
def test_no_data_names_the_flag_the_variable_and_the_download(tmp_path, entry):
    (tmp_path / "root").mkdir()
    one_line_error(run(entry_points(tmp_path)[entry]), "ptb not found", "--data-root", corpora.ENV, "--download",
                   "simple-examples.tgz")


def test_prepare_lm_checks_a_local_folder(tmp_path, corpus_root):
    copy_set(corpus_root, "ptb", tmp_path)
    (tmp_path / "ptb" / "ptb.test.txt").write_text("a b c\n", encoding="utf-8")
    one_line_error(run(["bash", ROOT / "run_scripts" / "prepare_lm.sh", "--dataset", "ptb", "--local", tmp_path / "ptb",
                        "--out", tmp_path / "out"]), "checksum mismatch for", "ptb.test.txt")


def published_files(tmp_path, corpus_root, tamper=False):
    """PTB as Mikolov's archive, WikiText-2 as its zip and Multi30k's val split as gzipped
    files, served from file:// URLs, and a corpora.tsv that names them."""
    serve = tmp_path / "serve"
    serve.mkdir()
    with tarfile.open(serve / "simple-examples.tgz", "w:gz") as t:
        for split in ("train", "valid", "test"):
            data = (corpus_root / "ptb" / f"ptb.{split}.txt").read_bytes()
            if tamper and split == "test":
                data = data.replace(b"the", b"teh", 1)
            info = tarfile.TarInfo(f"./simple-examples/data/ptb.{split}.txt")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    with zipfile.ZipFile(serve / "wikitext-2-v1.zip", "w") as z:
        for split in ("train", "valid", "test"):
            z.write(corpus_root / "wikitext-2" / f"wiki.{split}.tokens", f"wikitext-2/wiki.{split}.tokens")
    rows = []
    for f in corpora.read_table():
        if f.dataset == "wikitext-2":
            rows.append([f.dataset, f.path, f.checksum, (serve / "wikitext-2-v1.zip").as_uri(), f.member])
        elif f.dataset == "ptb":
            rows.append([f.dataset, f.path, f.checksum, (serve / "simple-examples.tgz").as_uri(), f.member])
        elif f.dataset == "multi30k" and "/val." in f.path:
            gz = serve / (os.path.basename(f.path) + ".gz")
            gz.write_bytes(gzip.compress((corpus_root / f.path).read_bytes()))
            rows.append([f.dataset, f.path, f.checksum, gz.as_uri(), f.member])
    table = tmp_path / "corpora.tsv"
    table.write_text("".join("\t".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")
    return table


def test_a_download_is_checked_and_kept(tmp_path, corpus_root, monkeypatch):
    monkeypatch.setattr(corpora, "TABLE", published_files(tmp_path, corpus_root))
    with pytest.raises(corpora.DataError, match="--download"):
        corpora.locate("ptb", tmp_path / "root")
    for dataset in ("ptb", "wikitext-2", "multi30k"):
        folder = corpora.locate(dataset, tmp_path / "root", download=True)
        for f in corpora.dataset_files(dataset):
            assert (folder / os.path.basename(f.path)).read_bytes() == (corpus_root / f.path).read_bytes()
    # found without downloading once it is there
    assert corpora.locate("ptb", tmp_path / "root") == (tmp_path / "root" / "ptb").resolve()


def test_a_changed_download_is_refused_and_not_kept(tmp_path, corpus_root, monkeypatch):
    monkeypatch.setattr(corpora, "TABLE", published_files(tmp_path, corpus_root, tamper=True))
    with pytest.raises(corpora.DataError, match="ptb/ptb.test.txt does not match its published checksum"):
        corpora.locate("ptb", tmp_path / "root", download=True)
    assert not (tmp_path / "root" / "ptb" / "ptb.test.txt").exists()
    assert not list((tmp_path / "root" / "ptb").glob("*.tmp"))
