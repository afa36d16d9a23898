"""The test slices of real text (tests/data): their checksum list, their format, and the
script that cuts them (scripts/make_test_slices.py) reproducing them from the data root."""

import hashlib
import importlib.util
import subprocess
import sys

import pytest

from .helpers import ROOT, TEST_DATA

SCRIPT = ROOT / "scripts" / "make_test_slices.py"


def load_script():
    spec = importlib.util.spec_from_file_location("make_test_slices", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def listed():
    rows = [line.split("  ", 1) for line in (TEST_DATA / "SHA256SUMS").read_text(encoding="utf-8").splitlines()]
    return {path: digest for digest, path in rows}


def test_every_slice_is_listed_with_its_checksum():
    files = {p.relative_to(TEST_DATA).as_posix() for p in TEST_DATA.rglob("*")
             if p.is_file() and p.name not in ("README.md", "SHA256SUMS")}
    sums = listed()
    assert files == set(sums)
    for path, digest in sums.items():
        assert hashlib.sha256((TEST_DATA / path).read_bytes()).hexdigest() == digest, path
    total = sum((TEST_DATA / p).stat().st_size for p in files)
    assert 200_000 < total < 4_000_000  # a few hundred KB to a few MB


def test_slices_have_the_lines_the_script_cuts():
    m = load_script()
    for folder, name, counts in [("wikitext-2", "wiki.{}.tokens", m.WIKITEXT2_LINES),
                                 ("ptb_style", "{}.txt", m.PTB_STYLE_LINES)]:
        for split, n in counts.items():
            assert len((TEST_DATA / folder / name.format(split)).read_text(encoding="utf-8").splitlines()) == n
    for split, n in m.WMT_NEWS_PAIRS.items():
        for lang in ("en", "de"):
            assert len((TEST_DATA / "wmt_news" / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()) == n


def test_ptb_style_text_has_ptbs_format():
    lines = (TEST_DATA / "ptb_style" / "train.txt").read_text(encoding="utf-8").splitlines()
    words = [w for line in lines for w in line.split()]
    assert all(line.startswith(" ") and line.endswith(" ") and line.strip() for line in lines)
    assert all(w == "<unk>" or w == "N" or (w == w.lower() and any(c.isalnum() for c in w)) for w in words)
    assert "<unk>" in words and "N" in words
    assert len(set(words)) <= 10001


@pytest.mark.parametrize("line, sentences", [
    (" = Valkyria Chronicles III = \n", []),
    (" \n", []),
    (" It sold 1 @,@ 000 copies in 2011 . A snack @-@ food maker , <unk> , bought it ! \n",
     [["it", "sold", "N", "copies", "in", "N"], ["a", "snack-food", "maker", "<unk>", "bought", "it"]]),
    (" The ( 2 @.@ 5 % ) rise \" was \" expected \n", [["the", "N", "rise", "was", "expected"]]),
])
def test_ptb_style_processing(line, sentences):
    assert list(load_script().ptb_style_sentences([line])) == sentences


def test_the_script_reproduces_the_slices_from_the_data_root(corpus_root, tmp_path):
    out = tmp_path / "slices"
    subprocess.run([sys.executable, SCRIPT, "--data-root", corpus_root, "--out", out], check=True,
                   capture_output=True, timeout=300)
    assert (out / "SHA256SUMS").read_text(encoding="utf-8") == (TEST_DATA / "SHA256SUMS").read_text(encoding="utf-8")


def test_the_script_without_a_data_root_says_what_to_set(tmp_path):
    proc = subprocess.run([sys.executable, SCRIPT, "--data-root", tmp_path / "none", "--out", tmp_path / "out"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "FAIRSEQ_DEFINE_DATA" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()
