"""The paper recipes (run_scripts/) in their small mode, end to end on real data from the
data root: data preparation, fairseq-train, evaluation, the results table and figures.
The NMT recipe (Table 3) and one language-model recipe (Table 1c) run here with a few
updates; run_scripts/run_all_small.sh runs every recipe at its default small size."""

import json
import os
import re
import shutil
import sys

import numpy as np
import pytest
import sacrebleu
import torch

from .helpers import BIN, ROOT, assert_png, head, run_cli

pytestmark = pytest.mark.cli  # starts fairseq's command-line tools or a recipe

RUN_SCRIPTS = ROOT / "run_scripts"


def recipe(name, *args, check=True):
    return run_cli("bash", RUN_SCRIPTS / name, *args, check=check, timeout=1200)


NMT_TRAIN_PAIRS = 3000  # of the proxy corpus's 23,739: tokenizing and learning BPE on all of it took minutes


@pytest.fixture(scope="module")
def nmt_run(tmp_path_factory, corpus_root):
    """The recipe as it stands, as the GPU check's CPU mode runs it (scripts/gpu_check.sh --cpu
    --steps table3: --small, trained on the proxy corpus's first pairs through --local, the
    test sets the real ones from the data root), at this file's budget. The check's summary
    reads the rows (CI's own run of the GPU check leaves this step to this fixture)."""
    check = tmp_path_factory.mktemp("gpu_check")
    run_cli("bash", ROOT / "scripts" / "gpu_check.sh", "--cpu", "--steps", "table3", "--out", check,
            "--pairs", NMT_TRAIN_PAIRS, "--updates", "24", "--max-eval-lines", "40", "--data-root", corpus_root,
            timeout=2400)
    out = (check / "table3.log").read_text(encoding="utf-8")
    assert f"train {NMT_TRAIN_PAIRS:9d} pairs" in out
    return check / "table3", out  # the recipe's runs/ and data/


def test_the_gpu_checks_summary_reads_the_recipes_rows(nmt_run):
    work, _ = nmt_run
    summary = json.loads((work.parent / "summary.json").read_text())
    assert summary["passed"] is True and summary["numbers_missing"] == []
    table3 = summary["numbers"]["table3"]
    assert (table3["updates"], table3["max_eval_lines"], table3["train_pairs"]) == (24, 40, NMT_TRAIN_PAIRS)
    assert set(table3["rows"]) == {"transformer", "transformer_define"}
    for name, row in table3["rows"].items():
        result = json.loads((work / "runs" / name / "result.json").read_text())
        assert row["train_wps"] > 0 and row["metrics"] == result["metrics"], (name, row)
        assert row["params_total"] == result["params"]["total"]


def test_nmt_recipe_prepares_real_wmt_text(nmt_run, corpus_root):
    work, _ = nmt_run
    data = work / "data" / "wmt_news_proxy-eval40"
    # raw test references are the untokenized newstest2014 lines, in order
    refs = (data / "raw" / "test.de").read_text(encoding="utf-8").splitlines()
    full = (corpus_root / "wmt14_en_de" / "test" / "newstest2014.de").read_text(encoding="utf-8").splitlines()
    assert refs == full[:40]
    assert (data / "splits.txt").read_text().split() == ["valid", "newstest2013", "40", "test", "newstest2014", "40"]
    bpe = (data / "bpe" / "train.en").read_text(encoding="utf-8")
    assert "@@ " in bpe and " @-@ " in (data / "tok" / "train.en").read_text(encoding="utf-8")
    assert (data / "bin" / "dict.en.txt").read_text() == (data / "bin" / "dict.de.txt").read_text()


def test_nmt_recipe_scores_best_and_averaged_checkpoints_both_ways(nmt_run):
    work, out = nmt_run
    for row in ("transformer", "transformer_define"):
        d = work / "runs" / row
        assert (d / "averaged.pt").is_file()
        for ckpt in ("checkpoint_best", "averaged"):
            scores = dict(line.split(" ", 1) for line in (d / f"test.{ckpt}.scores").read_text().splitlines())
            # the recorded scores are sacreBLEU of the written hypotheses against the raw
            # references, and BLEU of their compound-split forms (recomputed here)
            hyp = (d / f"test.{ckpt}.hyp").read_text(encoding="utf-8").splitlines()
            refs = (
                (work / "data" / "wmt_news_proxy-eval40" / "raw" / "test.de").read_text(encoding="utf-8").splitlines()
            )
            assert abs(float(scores["sacrebleu"]) - sacrebleu.corpus_bleu(hyp, [refs]).score) <= 0.006
            hyp_cs, ref_cs = (
                (d / f"test.{ckpt}.{x}.cs").read_text(encoding="utf-8").splitlines() for x in ("hyp", "ref")
            )
            tok = sacrebleu.corpus_bleu(hyp_cs, [ref_cs], tokenize="none", force=True).score
            assert abs(float(scores["tok_bleu"]) - tok) <= 0.006
            assert "nrefs:1" in scores["signature"]
            assert len((d / f"test.{ckpt}.hyp").read_text(encoding="utf-8").splitlines()) == 40
        # the tokenized score splits hyphenated compounds of the real references
        assert "##AT##-##AT##" in (d / "test.checkpoint_best.ref.cs").read_text(encoding="utf-8")
        result = json.loads((d / "result.json").read_text())
        assert result["mode"] == "small" and result["updates"] == 24
        assert set(result["metrics"]) == {"bleu_newstest2014", "tok_bleu_newstest2014",
                                          "avg_bleu_newstest2014", "avg_tok_bleu_newstest2014"}
    base = json.loads((work / "runs" / "transformer" / "result.json").read_text())
    ours = json.loads((work / "runs" / "transformer_define" / "result.json").read_text())
    assert ours["params"]["total"] < base["params"]["total"]  # DeFINE's point: fewer parameters
    assert "sacreBLEU" in out and "tok-BLEU (compound split)" in out


def test_nmt_recipe_scores_match_recomputation_where_bleu_is_not_zero(nmt_run, tmp_path):
    """After 24 updates the rows score about 0 BLEU, as a wrong reference or hypothesis would:
    the recipe's scoring (evaluate_nmt.sh) runs again with every hypothesis starting with 8
    reference tokens (--prefix-size 8), and both its scores are recomputed here from the
    raw references, the compound split with sacremoses (tensor2tensor's get_ende_bleu.sh)."""
    from sacremoses import MosesTokenizer

    work, _ = nmt_run
    data = work / "data" / "wmt_news_proxy-eval40"
    run_cli("bash", RUN_SCRIPTS / "evaluate_nmt.sh", "--data", data, "--subset", "test", "--out", tmp_path / "p8",
            "--checkpoint", work / "runs" / "transformer_define" / "averaged.pt", "--cpu", "--", "--prefix-size", "8")
    scores = dict(line.split(" ", 1) for line in (tmp_path / "p8.scores").read_text().splitlines())
    hyp = (tmp_path / "p8.hyp").read_text(encoding="utf-8").splitlines()
    refs = (data / "raw" / "test.de").read_text(encoding="utf-8").splitlines()
    moses = MosesTokenizer(lang="de")

    def split(line):  # Moses tokens (XML-escaped, as sacremoses tokenize -x), hyphens split
        return re.sub(r"([^ ])-([^ ])", r"\1 ##AT##-##AT## \2", moses.tokenize(line, escape=True, return_str=True))

    sacre = sacrebleu.corpus_bleu(hyp, [refs]).score
    tok = sacrebleu.corpus_bleu([split(h) for h in hyp], [[split(r) for r in refs]], tokenize="none", force=True).score
    assert len(hyp) == 40 and sacre > 0.5 and tok > 0.5, (sacre, tok)  # measured 1.77 and 1.80
    assert abs(float(scores["sacrebleu"]) - sacre) <= 0.006 and abs(float(scores["tok_bleu"]) - tok) <= 0.006


def test_nmt_recipe_writes_the_results_table_and_curves(nmt_run):
    work, _ = nmt_run
    md = (work / "runs" / "results.md").read_text()
    assert "| Transformer | " in md and "| Transformer + DeFINE | " in md
    assert "25.01" in md and "28.25" in md  # the paper's numbers beside ours
    assert "not run" not in md.split("| Transformer + DeFINE |")[1].split("\n")[0].split("|")[1]
    assert_png(work / "runs" / "valid_curves.png")


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory, corpus_root):
    work = tmp_path_factory.mktemp("table1c")
    # --minutes: the small mode's time cap would cut the 30 updates short on a loaded machine
    args = ("--small", "--updates", "30", "--minutes", "60", "--max-eval-lines", "150", "--workdir", work / "runs",
            "--prepared-dir", work / "data", "--data-root", corpus_root)
    out = recipe("table1c_awd_lstm_ptb.sh", *args).stdout
    return work, args, out


def test_lm_recipe_records_perplexities_beside_the_paper(lm_run):
    work, _, _ = lm_run
    for row in ("awd_lstm", "awd_lstm_define"):
        result = json.loads((work / "runs" / row / "result.json").read_text())
        assert result["updates"] == 30
        for split in ("valid", "test"):
            # what fairseq-eval-lm gives the evaluated checkpoint (batch 1: the state carried
            # through the split), 2 ** its base-2 loss; trained 30 updates: far from good
            out = run_cli(
                "fairseq-eval-lm",
                work / "data" / "ptb-eval150" / "bin",
                "--user-dir",
                ROOT / "fairseq_define",
                "--task",
                "contiguous_lm",
                "--gen-subset",
                split,
                "--batch-size",
                "1",
                "--cpu",
                "--path",
                work / "runs" / row / "checkpoint_best.pt",
            ).stdout
            loss = float(re.search(r"Loss \(base 2\): ([0-9.]+)", out).group(1))
            ppl = result["metrics"][f"{split}_ppl"]
            assert ppl == float(re.search(r"Perplexity: ([0-9.]+)", out).group(1))
            assert abs(ppl - 2 ** loss) <= 1e-3 * ppl and 100 < ppl < 10000
    md = (work / "runs" / "results.md").read_text()
    assert "AWD-LSTM + DeFINE" in md and "54.20" in md and "58.80" in md
    assert_png(work / "runs" / "valid_curves.png")


def test_lm_recipe_resumes_an_interrupted_row(lm_run):
    work, args, _ = lm_run
    row = work / "runs" / "awd_lstm"
    other = work / "runs" / "awd_lstm_define" / "result.json"
    before = other.read_text(), other.stat().st_mtime_ns
    (row / "done").unlink()
    (row / "result.json").unlink()
    args = list(args)
    args[args.index("--updates") + 1] = "40"
    out = recipe("table1c_awd_lstm_ptb.sh", *args, "--rows", "awd_lstm").stdout
    assert "resuming from checkpoint_last.pt" in out
    assert (
        "@ 30 updates)" in (row / "train.log").read_text()
    )  # fairseq's "Loaded checkpoint ... (epoch 1 @ 30 updates)"
    assert json.loads((row / "result.json").read_text())["updates"] == 40
    assert (other.read_text(), other.stat().st_mtime_ns) == before  # the other row was left alone


def test_correlation_maps_of_a_trained_recipe_model(lm_run, tmp_path):
    work, _, _ = lm_run
    out = tmp_path / "corr.png"
    run_cli("fairseq-define-results", "correlations", "--path",
            work / "runs" / "awd_lstm_define" / "checkpoint_best.pt", "--output", out)
    img = assert_png(out)
    # map, N=7 Expand layers and e_o side by side: a wide figure
    assert img.shape[1] > 5 * img.shape[0]
    assert np.isfinite(img).all()


def test_prepare_lm_refuses_a_changed_file(tmp_path, corpus_root):
    local = tmp_path / "ptb"
    shutil.copytree(corpus_root / "ptb", local)
    with open(local / "ptb.valid.txt", "a") as f:
        f.write(" extra line\n")
    out = run_cli("bash", RUN_SCRIPTS / "prepare_lm.sh", "--dataset", "ptb", "--local", local,
                  "--out", tmp_path / "out", check=False)
    assert out.returncode == 2
    assert "checksum mismatch" in out.stdout and "ptb.valid.txt" in out.stdout
    assert not (tmp_path / "out" / "bin").exists()


def test_recipes_use_the_active_environment_with_the_package():
    """lib.sh puts the checkout's .venv first only where the Python on the PATH has no
    fairseq_define of its own: an environment that runs the tests (another Python's venv of
    this checkout too) keeps its own tools, and the checkout's folder is not taken for an
    installed package."""
    import os

    found = run_cli("bash", "-c", f'source "{RUN_SCRIPTS}/lib.sh"; command -v fairseq-train', cwd=ROOT,
                    env={"PATH": f"{BIN}:{os.environ.get('PATH', '')}"}).stdout.strip()
    assert found == str(BIN / "fairseq-train")
    # no environment's tools on the PATH: the checkout's .venv is taken
    bare = ":".join(
        p for p in os.environ.get("PATH", "").split(":") if not os.path.exists(os.path.join(p, "fairseq-train"))
    )
    if not (ROOT / ".venv" / "bin" / "fairseq-train").exists():
        pytest.skip("no .venv in this checkout")
    found = run_cli("bash", "-c", f'source "{RUN_SCRIPTS}/lib.sh"; command -v fairseq-train', cwd=ROOT,
                    env={"PATH": bare}).stdout.strip()
    assert found == str(ROOT / ".venv" / "bin" / "fairseq-train")


@pytest.mark.parametrize("updates, interval", [("", 4000), ("300", 300), ("5000", 4000), ("0", 1)])
def test_within_budget_keeps_an_interval_inside_the_updates(updates, interval):
    out = run_cli("bash", "-c", f'source "{RUN_SCRIPTS}/lib.sh"; UPDATES="{updates}"; within_budget 4000').stdout
    assert out.split() == [str(interval)]


def test_table3_full_scale_short_budget_saves_within_the_budget(tmp_path, shared_data):
    """Full scale with --updates below the 1000-update save interval: the interval shrinks to
    the budget, so the run has an update checkpoint to average. A stand-in fairseq-train
    records its arguments (and a stand-in python3 reports one GPU) on the WMT news slices."""
    stubs, local = tmp_path / "stubs", tmp_path / "local"
    stubs.mkdir()
    local.mkdir()
    for name, split in (("train", "train"), ("newstest2014", "valid"), ("newstest2017", "test")):
        for lang in ("en", "de"):  # 200 training pairs: the full-scale preparation (40K BPE merges) runs on them
            head(shared_data / "wmt_news" / f"{split}.{lang}", local / f"{name}.{lang}", 0, 200)
    (stubs / "fairseq-train").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path}/args.$$"\nexit 1\n')
    (stubs / "python3").write_text(
        f'#!/bin/sh\ncase "$2" in *torch.cuda.device_count*) echo 1; exit 0 ;; esac\nexec "{sys.executable}" "$@"\n')
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    out = run_cli("bash", RUN_SCRIPTS / "table3_transformer_wmt14.sh", "--local", local, "--updates", "7",
                  "--rows", "transformer_define", "--workdir", tmp_path / "runs", "--prepared-dir", tmp_path / "data",
                  check=False, env={"PATH": f"{stubs}:{BIN}:{os.environ['PATH']}"})
    assert out.returncode == 2 and "fairseq-train failed for transformer_define" in out.stdout, out.stdout[-3000:]
    (args_file,) = tmp_path.glob("args.*")
    args = args_file.read_text().splitlines()

    def last(flag):
        return args[len(args) - 1 - args[::-1].index(flag) + 1]

    assert last("--max-update") == "7" and last("--save-interval-updates") == "7"
    assert "--fp16" in args and last("--arch") == "define_transformer_wmt_en_de"


@pytest.mark.parametrize(
    "script, args, message",
    [
        ("prepare_lm.sh", ["--dataset", "wikitext-3", "--out", "X"], "--dataset must be"),
        (
            "prepare_lm.sh",
            ["--dataset", "ptb", "--local", "/nonexistent", "--out", "X"],
            "missing or empty /nonexistent/ptb.train.txt",
        ),
        (
            "prepare_wmt14_en_de.sh",
            ["--out", "X", "--train", "/nonexistent/train"],
            "--train, --valid and --test go together",
        ),
        ("prepare_wmt14_en_de.sh", ["--out", "X", "--bpe", "wordpiece"], "--bpe must be"),
        (
            "table6_transformations.sh",
            ["--small", "--rows", "hgt nosuchrow", "--workdir", "W"],
            "Table 6 has no row 'nosuchrow'",
        ),
        (
            "transformer_lm_wt103.sh",
            ["--small", "--rows", "nosuchrow", "--workdir", "W"],
            "Table tlm has no row 'nosuchrow'",
        ),
        pytest.param(
            "table3_transformer_wmt14.sh",
            ["--workdir", "W"],
            "needs CUDA GPUs",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="would start the full-scale run"),
        ),
    ],
)
def test_recipe_input_errors_are_clear(script, args, message, tmp_path):
    args = [str(tmp_path / a) if a in ("X", "W") else a for a in args]
    out = run_cli("bash", RUN_SCRIPTS / script, *args, check=False)
    assert out.returncode == 2, out.stdout
    assert message in out.stdout


def test_every_recipe_documents_command_hardware_and_paper_number():
    scripts = sorted(RUN_SCRIPTS.glob("table*.sh"))
    assert {s.name.split("_")[0] for s in scripts} == {"table1a", "table1c", "table2", "table3", "table5",
                                                        "table6", "table7", "table8"}
    for s in scripts + [RUN_SCRIPTS / "transformer_lm_wt103.sh"]:  # and fairseq's transformer_lm, not a paper table
        head = s.read_text().split("set -euo pipefail")[0]
        for word in ("Command:", "Hardware:", "Paper:", "Expected:", "--small"):
            assert word in head, f"{s.name} does not state {word}"


SCRIPTS = sorted(p.relative_to(ROOT) for p in [*RUN_SCRIPTS.glob("*.sh"), *(ROOT / "examples").glob("*/*.sh")]
                 if p.name != "lib.sh")


@pytest.mark.parametrize("script", SCRIPTS, ids=str)
def test_help_prints_the_whole_header_and_nothing_after_it(script):
    """--help prints the header comment from its second line to its last, however long it grows."""
    header = []
    for line in (ROOT / script).read_text().splitlines()[1:]:
        if not line.startswith("#"):
            break
        header.append(line[2:] if line.startswith("# ") else line[1:])
    out = run_cli("bash", ROOT / script, "--help", check=False)
    assert out.returncode == 0, out.stdout[-2000:]
    printed = out.stdout.splitlines()
    assert printed[:len(header)] == header, out.stdout[:3000]
    assert "set -euo pipefail" not in out.stdout
