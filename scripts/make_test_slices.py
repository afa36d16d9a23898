#!/usr/bin/env python3
"""Regenerate tests/data/: the small slices of real text that the test suite reads, so it
runs on a machine without the data root (docs/testing.md).

    python scripts/make_test_slices.py [--data-root DIR] [--out tests/data]

The data root is found as every script finds it (--data-root, else $FAIRSEQ_DEFINE_DATA,
else the default locations: run_scripts/corpora.py), and each source set is checked against
its published checksums first. What is cut, and from what:

- ``wikitext-2/``: the first lines of WikiText-2's three token files, unchanged.
- ``ptb_style/``: WikiText-2 processed as Mikolov's Penn Treebank is (one sentence a line,
  lower case, no punctuation, numbers as ``N``, the 10,000 most frequent words of the whole
  processed training split, the rest ``<unk>``). The PTB's own text is WSJ text under LDC's
  licence and may not ship here; WikiText-2 is CC BY-SA 3.0, so the suite's PTB-format tests
  read this instead.
- ``wmt_news/``: WMT EN-DE news test sets (free for research), Moses-tokenized: train from the
  news proxy corpus (``wmt14_en_de/train_news_proxy``), valid from newstest2013, test from
  newstest2014.

SHA256SUMS in the output folder lists every file (``cd tests/data && sha256sum -c SHA256SUMS``);
tests/test_data_slices.py checks it.
"""

import argparse
import hashlib
import logging
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "run_scripts"))
import corpora  # noqa: E402

logger = logging.getLogger("make_test_slices")

# lines (sentences for ptb_style, pairs for wmt_news) of each split; the tests read at most these
WIKITEXT2_LINES = {"train": 1500, "valid": 150, "test": 60}
PTB_STYLE_LINES = {"train": 3000, "valid": 400, "test": 100}
PTB_STYLE_VOCAB = 10000  # words besides <unk>, as in Mikolov's PTB
WMT_NEWS_PAIRS = {"train": 2000, "valid": 60, "test": 40}
WMT_NEWS_SOURCES = {  # split: (data set of run_scripts/corpora.tsv, file stem in its folder)
    "train": ("wmt-news-proxy", "train"),
    "valid": ("wmt14-test", "newstest2013"),
    "test": ("wmt14-test", "newstest2014"),
}
NUMBER = re.compile(r"^[0-9][0-9.,]*$")
SENTENCE_END = {".", "?", "!"}


def head(path, count):
    with open(path, encoding="utf-8") as f:
        return [line for _, line in zip(range(count), f)]


def ptb_style_sentences(lines):
    """WikiText token lines as PTB-style sentences (lists of lower-case words), in order."""
    for line in lines:
        text = line.strip()
        if not text or text.startswith("= "):  # blank lines and section headings
            continue
        # WikiText splits numbers and hyphenated words: "1 @,@ 000", "snack @-@ food"
        text = re.sub(r" @([-,.])@ ", r"\1", text)
        sentence = []
        for token in text.split():
            if token in SENTENCE_END:
                if sentence:
                    yield sentence
                sentence = []
            elif token == "<unk>":
                sentence.append(token)
            elif NUMBER.match(token):
                sentence.append("N")
            elif any(c.isalnum() for c in token):
                sentence.append(token.lower())
        if sentence:
            yield sentence


def write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")


def make_wikitext2(src, out):
    for split, n in WIKITEXT2_LINES.items():
        write(out / "wikitext-2" / f"wiki.{split}.tokens", head(src / f"wiki.{split}.tokens", n))


def make_ptb_style(src, out):
    with open(src / "wiki.train.tokens", encoding="utf-8") as f:
        train = list(ptb_style_sentences(f))
    counts = Counter(w for s in train for w in s if w != "<unk>")
    vocab = {w for w, _ in counts.most_common(PTB_STYLE_VOCAB)}
    for split, n in PTB_STYLE_LINES.items():
        if split == "train":
            sentences = train[:n]
        else:
            with open(src / f"wiki.{split}.tokens", encoding="utf-8") as f:
                sentences = list(ptb_style_sentences(f))[:n]
        # PTB's layout: a space before every word and one after the last
        write(out / "ptb_style" / f"{split}.txt",
              ["".join(f" {w if w in vocab else '<unk>'}" for w in s) + " \n" for s in sentences])


def make_wmt_news(data_root, out):
    from sacremoses import MosesTokenizer

    for split, (dataset, stem) in WMT_NEWS_SOURCES.items():
        src = corpora.locate(dataset, data_root)
        for lang in ("en", "de"):
            tok = MosesTokenizer(lang=lang)
            lines = head(src / f"{stem}.{lang}", WMT_NEWS_PAIRS[split])
            write(out / "wmt_news" / f"{split}.{lang}",
                  [tok.tokenize(line.strip(), escape=False, aggressive_dash_splits=True, return_str=True) + "\n"
                   for line in lines])


def write_checksums(out):
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.suffix != ".md" and p.name != "SHA256SUMS")
    sums = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(out).as_posix()}\n" for p in files]
    (out / "SHA256SUMS").write_text("".join(sums), encoding="utf-8")
    return files


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-root", help=f"the corpora (default ${corpora.ENV}, else run_scripts/corpora.py's defaults)")
    p.add_argument("--out", default=str(ROOT / "tests" / "data"), help="the folder to write (default tests/data)")
    args = p.parse_args(argv)
    logging.basicConfig(format="%(message)s", level=logging.INFO)
    out = Path(args.out)
    try:
        wt2 = corpora.locate("wikitext-2", args.data_root)
        make_wikitext2(wt2, out)
        make_ptb_style(wt2, out)
        make_wmt_news(args.data_root, out)
    except corpora.DataError as e:
        p.exit(2, f"{p.prog}: error: {e}\n")
    files = write_checksums(out)
    logger.info("%d files, %d bytes, in %s", len(files), sum(f.stat().st_size for f in files), out)


if __name__ == "__main__":
    main()
