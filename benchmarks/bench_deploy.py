"""Deploying a DeFINE translation model (docs/inference.md, "Deploy"): one test set translated
three ways with the same beam, sentences per second and detokenized sacreBLEU side by side:

    plugin       fairseq-generate --user-dir fairseq_define on the checkpoint (live DeFINE units)
    export       fairseq-generate, no --user-dir, on fairseq-define-export's stock transformer
    ct2 int8     CTranslate2 on the CPU, int8 weights (fairseq-define-export --ct2 ... int8)

    .venv/bin/python benchmarks/bench_deploy.py --path CHECKPOINT --data-bin DATA_BIN --bpe-codes CODES \\
        [--data-root ../shared/data] [--test wmt14_en_de/test/newstest2014] [--beam 4] [--threads 1]

Command (the measured run, docs/inference.md "Deploy"): study 1's Multi30k model
(define_transformer, d=128, 3+3 layers, the authors' unit, untied output; docs/studies.md) with
--test multi30k/raw/test_2016_flickr, and with the default newstest2014, out of its domain.
Hardware: the project's 2-core CPU machine, loaded by other work; every system gets --threads
threads (1: more threads than free cores make torch many times slower there).
Time: 44 s for Multi30k's 1,000 sentences, 4 min 41 s for newstest2014's 3,003 (conversion
and three translations).
Expected: the export gives the plugin's hypotheses and BLEU; CTranslate2 int8 is several times
faster at a BLEU within about 0.3 (int8 weights change some hypotheses); the measured table is
in docs/inference.md.

Source text is prepared as run_scripts/prepare_wmt14_en_de.sh prepares it (sacremoses
normalize, tokenize -a -x; the model's subword-nmt codes), hypotheses scored as
run_scripts/evaluate_nmt.sh scores them (BPE removed, sacremoses detokenize, sacreBLEU
against the untokenized reference). Timing: fairseq-generate's own "Translated N sentences
in S s" (after loading); CTranslate2's translate_batch call (after loading). Not a test.
"""

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MAX_LEN = 200  # hypothesis tokens at most, every system (fairseq-generate's default --max-len-b)


def default_data_root():
    for root in (os.environ.get("FAIRSEQ_DEFINE_DATA"), ROOT.parent / "shared" / "data"):
        if root and Path(root).is_dir():
            return Path(root)
    return None


def prepare(lines, lang, codes):
    """Untokenized text -> BPE'd tokens, as prepare_wmt14_en_de.sh."""
    from sacremoses import MosesPunctNormalizer, MosesTokenizer
    from subword_nmt.apply_bpe import BPE

    norm, tok = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)
    with open(codes, encoding="utf-8") as f:
        bpe = BPE(f)
    return [bpe.process_line(tok.tokenize(norm.normalize(l), aggressive_dash_splits=True, escape=True, return_str=True))
            for l in lines]


def detokenize(bpe_lines, lang):
    from sacremoses import MosesDetokenizer

    detok = MosesDetokenizer(lang=lang)
    return [detok.detokenize((l + " ").replace("@@ ", "").split()) for l in bpe_lines]


def run(cmd, env):
    proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"{cmd[0]} failed:\n{proc.stdout[-3000:]}")
    return proc.stdout


def generate(data, path, beam, batch, env, user_dir=None):
    """(hypotheses in order, sentences/s) of fairseq-generate."""
    extra = ["--user-dir", ROOT / "fairseq_define"] if user_dir else []
    out = run([BIN / "fairseq-generate", data, *extra, "--path", path, "--gen-subset", "test", "--beam", beam,
               "--lenpen", "0.6", "--batch-size", batch, "--cpu", "--max-len-b", MAX_LEN], env)
    hyps = dict((int(i), h) for i, h in re.findall(r"^H-(\d+)\t[-0-9.e]+\t(.*)$", out, re.M))
    n, seconds = re.search(r"Translated ([0-9,]+) sentences \([0-9,]+ tokens\) in ([0-9.]+)s", out).groups()
    return [hyps[i] for i in range(len(hyps))], int(n.replace(",", "")) / float(seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", required=True, help="a trained define_transformer checkpoint")
    parser.add_argument("--data-bin", required=True, help="its fairseq data directory (dict.*.txt)")
    parser.add_argument("--bpe-codes", required=True, help="its subword-nmt codes")
    parser.add_argument(
        "--data-root", type=Path, default=default_data_root(), help="the corpora (default ../shared/data)"
    )
    parser.add_argument(
        "--test", default="wmt14_en_de/test/newstest2014", help="PREFIX under the data root: PREFIX.en, PREFIX.de"
    )
    parser.add_argument("--src", default="en")
    parser.add_argument("--tgt", default="de")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads for every system (on a shared machine, more threads than free cores make torch many "
        "times slower)",
    )
    parser.add_argument("--limit", type=int, default=None, help="the first N sentences only")
    parser.add_argument(
        "--work", type=Path, default=None, help="folder for the export and data (default: a temporary one)"
    )
    args = parser.parse_args()
    import ctranslate2
    import sacrebleu

    if args.data_root is None:
        sys.exit("no data root: pass --data-root (the folder holding wmt14_en_de/)")
    prefix = args.data_root / args.test
    src_raw = Path(f"{prefix}.{args.src}").read_text(encoding="utf-8").splitlines()[: args.limit]
    ref_raw = Path(f"{prefix}.{args.tgt}").read_text(encoding="utf-8").splitlines()[: args.limit]
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_deploy."))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    for lang, lines in ((args.src, src_raw), (args.tgt, ref_raw)):
        (work / f"test.{lang}").write_text("\n".join(prepare(lines, lang, args.bpe_codes)) + "\n", encoding="utf-8")
    data = work / "bin"
    if not data.is_dir():
        run([BIN / "fairseq-preprocess", "-s", args.src, "-t", args.tgt, "--testpref", work / "test", "--destdir", data,
             "--srcdict", Path(args.data_bin) / f"dict.{args.src}.txt",
             "--tgtdict", Path(args.data_bin) / f"dict.{args.tgt}.txt", "--workers", "1"], env)
    export, ct2 = work / "export.pt", work / "ct2_int8"
    if not export.exists():
        run([BIN / "fairseq-define-export", args.path, export, "--data", args.data_bin, "--ct2", ct2,
             "--ct2-quantization", "int8"], env)

    rows = []
    hyps, speed = generate(data, args.path, args.beam, args.batch_size, env, user_dir=True)
    rows.append(("fairseq-generate, plugin (live units)", speed, hyps))
    hyps, speed = generate(data, export, args.beam, args.batch_size, env)
    rows.append(("fairseq-generate, export (stock)", speed, hyps))
    translator = ctranslate2.Translator(str(ct2), device="cpu", compute_type="int8", inter_threads=1,
                                        intra_threads=args.threads)
    source = [l.split() for l in (work / f"test.{args.src}").read_text(encoding="utf-8").splitlines()]
    start = time.perf_counter()
    results = translator.translate_batch(
        source, beam_size=args.beam, length_penalty=0.6, max_batch_size=args.batch_size, max_decoding_length=MAX_LEN
    )
    seconds = time.perf_counter() - start
    rows.append(("CTranslate2 int8, CPU", len(source) / seconds, [" ".join(r.hypotheses[0]) for r in results]))

    print(f"{prefix.name}: {len(source)} sentences, beam {args.beam}, batch {args.batch_size}, {args.threads} threads, "
          f"{platform.processor() or platform.machine()}, ctranslate2 {ctranslate2.__version__}")
    print(f"{'system':40s} {'sent/s':>8s} {'BLEU':>6s} {'same as plugin':>15s}")
    plugin = rows[0][2]
    for name, speed, hyps in rows:
        bleu = sacrebleu.corpus_bleu(detokenize(hyps, args.tgt), [ref_raw]).score
        same = sum(a == b for a, b in zip(hyps, plugin))
        print(f"{name:40s} {speed:8.1f} {bleu:6.2f} {same:10d}/{len(plugin)}")


if __name__ == "__main__":
    main()
