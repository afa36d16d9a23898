"""The studies (studies/, docs/studies.md) in their quick mode: two arms, a few updates, tiny
slices of the real corpora. Each must write its table and plots, record every arm, and skip
finished arms when invoked again (a study cut short continues where it stopped)."""

import json
import math
import shutil
import sys

import pytest

from fairseq_define.errors import UserError

from .helpers import ROOT, assert_png, run_cli

pytestmark = pytest.mark.cli  # starts fairseq's command-line tools or a recipe

STUDIES = ("nmt_multi30k", "lm_ptb", "lm_wikitext2", "lm_transformer_wikitext2")


def study(name, *args, check=True):
    return run_cli(sys.executable, "-m", f"studies.{name}", *args, cwd=ROOT, check=check, timeout=600,
                   env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})


@pytest.fixture(scope="module", params=STUDIES)
def quick_run(request, tmp_path_factory, corpus_root):
    work = tmp_path_factory.mktemp(request.param)
    args = ("--quick", "--workdir", work, "--data-root", corpus_root, "--jobs", "2")
    if request.param == "nmt_multi30k":
        args += ("--find-budget",)
    first = study(request.param, *args).stdout
    return request.param, work, args, first


def arm_dirs(work):
    return sorted(p.parent for p in work.glob("*/result.json"))


def test_quick_mode_records_two_arms(quick_run):
    name, work, _, _ = quick_run
    dirs = arm_dirs(work)
    assert len(dirs) == 2, f"expected two arms with result.json in {work}, got {dirs}"
    for d in dirs:
        r = json.loads((d / "result.json").read_text())
        assert r["study"] == name and r["arm"] == d.name
        assert r["params"]["total"] > 0 and set(r["params"]) == {"define", "context", "input_output", "total"}
        assert r["updates"] == r["budget"]["updates"]
        assert r["wall_minutes"] is not None and r["wall_minutes"] > 0
        assert r["valid_curve"]["points"], "no validation curve recorded"
        metrics = r["metrics"]
        keys = ("valid_bleu", "test_bleu", "test_chrf") if name == "nmt_multi30k" else ("valid_ppl", "test_ppl")
        for k in keys:
            assert k in metrics and math.isfinite(metrics[k]), (k, metrics)
    # the DeFINE arm has a unit, the baseline none
    define = [json.loads((d / "result.json").read_text())["params"]["define"] for d in dirs]
    assert sorted(v > 0 for v in define) == [False, True], define
    if name != "nmt_multi30k":  # the LM recipes validate every so many updates: a checkpoint there, the newest kept
        for d in dirs:
            updates = json.loads((d / "result.json").read_text())["updates"]
            saved = sorted(p.name for p in d.glob("checkpoint_*_*.pt"))
            assert saved == [f"checkpoint_1_{updates}.pt"], (d, saved)
            assert f"Saved checkpoint {d / f'checkpoint_1_{updates // 2}.pt'}" in (d / "train.log").read_text()


def test_quick_mode_writes_table_and_plots(quick_run):
    name, work, _, _ = quick_run
    report = work / "report"
    table = (report / "results.md").read_text()
    assert "quick mode: not a result" in table
    for d in arm_dirs(work):
        row = next(line for line in table.splitlines() if line.startswith(f"| {d.name} |"))
        assert "not run" not in row
    assert_png(report / "params_vs_quality.png")
    assert_png(report / "valid_curves.png")


def test_second_invocation_skips_finished_arms(quick_run):
    name, work, args, _ = quick_run
    before = {
        d.name: ((d / "result.json").stat().st_mtime_ns, (d / "train.log").stat().st_size) for d in arm_dirs(work)
    }
    out = study(name, *args).stdout
    for arm, stamp in before.items():
        assert f"{arm}: done" in out, out[-3000:]
        d = work / arm
        assert ((d / "result.json").stat().st_mtime_ns, (d / "train.log").stat().st_size) == stamp, f"{arm} was redone"
    assert "training" not in " ".join(l for l in out.splitlines() if "| studies |" in l)


def test_a_recorded_arm_is_done_without_its_work_folder(quick_run):
    """Each finished arm's result is copied beside the report (committed): a study resumed on
    another machine, whose work folder is gone, does not train it again."""
    name, work, args, _ = quick_run
    arm = arm_dirs(work)[0]
    record = json.loads((work / "report" / "runs" / f"{arm.name}.json").read_text())
    assert record == json.loads((arm / "result.json").read_text())
    aside = work.parent / f"{work.name}-{arm.name}-aside"
    arm.rename(aside)
    try:
        out = study(name, *args).stdout
        assert f"{arm.name}: done (recorded in" in out, out[-3000:]
        assert not (work / arm.name / "train.log").exists()
        table = (work / "report" / "results.md").read_text()
        assert next(l for l in table.splitlines() if l.startswith(f"| {arm.name} |"))
    finally:
        shutil.rmtree(work / arm.name, ignore_errors=True)
        aside.rename(arm)


def test_report_only_trains_nothing_and_leaves_out_an_arm_not_run(quick_run):
    """--report-only writes the report from the recorded arms: one whose record and work
    folder are gone is left out (named on the log), and nothing trains."""
    name, work, args, _ = quick_run
    arm = arm_dirs(work)[0]
    record = work / "report" / "runs" / f"{arm.name}.json"
    aside = work.parent / f"{work.name}-{arm.name}-aside"
    saved = record.read_text()
    arm.rename(aside)
    record.unlink()
    try:
        out = study(name, *args, "--report-only").stdout
        assert f"{arm.name}: not run yet, left out of the report (--report-only)" in out, out[-3000:]
        assert not (work / arm.name).exists()  # not trained again
        table = (work / "report" / "results.md").read_text()
        assert f"| {arm.name} |" not in table
        assert any(f"| {other.name} |" in table for other in arm_dirs(work))
    finally:
        shutil.rmtree(work / arm.name, ignore_errors=True)
        aside.rename(arm)
        record.write_text(saved)


def test_nmt_quick_mode_finds_the_budget_and_trains_with_it(quick_run):
    name, work, _, first = quick_run
    if name != "nmt_multi30k":
        pytest.skip("--find-budget is the NMT study's")
    from studies.nmt_multi30k import QUICK

    found = json.loads((work / "budget.json").read_text())
    assert found["budgets"] == list(QUICK["budgets"]) and found["updates"] in QUICK["budgets"]
    for budget in QUICK["budgets"]:  # every deciding arm scored at every budget
        assert len(found["valid_bleu"][str(budget)]) == 4, found
    verdict = (work / "report" / "budget.md").read_text()
    if found["updates"] < max(QUICK["budgets"]):
        assert f"stops changing at **{found['updates']} updates**" in verdict
    else:
        assert "changes up to the last budget tried" in verdict
    reused = {}
    for d in arm_dirs(work):
        r = json.loads((d / "result.json").read_text())
        assert r["budget"]["updates"] == found["updates"] and r["updates"] == found["updates"], r
        reused[d.name] = r.get("reused")
    # the Transformer's budget run is its run at that budget; the DeFINE arm at n=d/2 had none
    assert reused[f"transformer_d{QUICK['widths'][0]}"].endswith(f"_{found['updates']}.pt"), reused
    assert [v for v in reused.values() if v is None] and len(reused) == 2, reused
    assert "--jobs 2: 2 arms at a time" in first


def test_each_keeps_order_and_runs_jobs_at_a_time():
    import threading
    import time

    from studies.common import each

    running, peak, lock = [0], [0], threading.Lock()

    def slow_square(x):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05 * (5 - x))  # later items finish first
        with lock:
            running[0] -= 1
        return x * x

    assert each(list(range(5)), slow_square, jobs=2) == [0, 1, 4, 9, 16]
    assert peak[0] == 2
    assert each(list(range(5)), slow_square, jobs=1) == [0, 1, 4, 9, 16]


@pytest.mark.parametrize("omp,expected", [("1", 1), ("3", 3), (None, None), ("", None)])
def test_a_record_names_the_threads_its_training_ran_on(monkeypatch, omp, expected):
    """The threads a study records are its training subprocesses' (OMP_NUM_THREADS, as
    --jobs sets it), not this process's: torch read the variable at its first use, before
    --jobs set it (stop 64's records said 2 for trainings that ran on one thread each)."""
    import torch

    from studies.common import set_jobs, training_threads

    if omp is None:  # set first, so that the teardown restores what --jobs sets below
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        monkeypatch.delenv("OMP_NUM_THREADS")
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    monkeypatch.setenv("MKL_NUM_THREADS", "1")
    assert training_threads() == (torch.get_num_threads() if expected is None else expected)
    if omp is None:  # --jobs N sets it for the subprocesses, whatever this process computes on
        monkeypatch.setattr("os.cpu_count", lambda: 4)
        set_jobs(2)
        assert training_threads() == 2


def test_each_raises_the_first_error_and_starts_nothing_after_it():
    from studies.common import each

    started = []

    def fail_on_one(x):
        started.append(x)
        if x == 1:
            raise UserError("arm 1 failed")
        return x

    with pytest.raises(UserError, match="arm 1 failed"):
        each(list(range(6)), fail_on_one, jobs=1)
    assert started == [0, 1]
    with pytest.raises(UserError, match="arm 1 failed"):
        each(list(range(6)), fail_on_one, jobs=2)


def test_missing_data_root_is_one_line_error(tmp_path):
    proc = study("lm_ptb", "--quick", "--workdir", tmp_path / "w", "--data-root", tmp_path / "nowhere", check=False)
    assert proc.returncode == 2
    assert "ptb not found under" in proc.stdout and "--data-root" in proc.stdout and "--download" in proc.stdout
    assert "Traceback" not in proc.stdout


@pytest.mark.parametrize("recipe, extra, expected", [
    (["--lr", "1e-3", "--validate-interval-updates", "200"], [], ["--save-interval-updates", "200",
                                                                   "--keep-interval-updates", "1"]),
    (["--validate-interval-updates", "200"], ["--validate-interval-updates", "6"], ["--save-interval-updates", "6",
                                                                                   "--keep-interval-updates", "1"]),
    (["--lr", "1e-3"], [], []),  # validations at epoch ends only: epoch checkpoints as before
    (["--validate-interval-updates", "200"], ["--save-interval-updates", "50", "--keep-interval-updates", "-1"], []),
])
def test_a_study_run_saves_at_its_validations_so_a_cut_run_resumes_there(recipe, extra, expected):
    from studies.common import resume_points

    assert resume_points(recipe, extra) == expected


@pytest.mark.parametrize("settings, throughout", [
    (["1"], True), (["1", "1"], True), (["0", "1"], False), (["1", "0", "1"], False), (["0"], False)])
def test_a_record_says_flushed_only_if_every_training_invocation_flushed(tmp_path, monkeypatch, settings,
                                                                        throughout):
    """An arm cut and resumed under another FAIRSEQ_DEFINE_FLUSH_DENORMAL: its record's
    flush_denormal holds for the whole run, not only for the invocation that finished it
    (study 5's seed 1 DeFINE arm said true after 1,492 updates with subnormals kept)."""
    from studies.common import FLUSH_ENV, flushed_throughout, note_flush

    for setting in settings:
        monkeypatch.setenv(FLUSH_ENV, setting)
        note_flush(tmp_path)
    monkeypatch.setenv(FLUSH_ENV, "1")  # the invocation that records: not what decides
    assert flushed_throughout(tmp_path) is throughout
    assert flushed_throughout(tmp_path / "before_the_file") is True  # an older run: as records said then
    monkeypatch.setenv(FLUSH_ENV, "0")
    assert flushed_throughout(tmp_path / "before_the_file") is False


@pytest.mark.parametrize("higher_is_better", [False, True])
def test_second_seeds_go_to_the_best_finished_arm_of_each_family(higher_is_better):
    from studies.common import Arm, best_per_family
    from studies.lm_ptb import STUDY

    arms = STUDY.arms(False)
    scores = {"standard_n256": 180.0, "standard_n128": 200.0, "define_paper_n128": 179.0, "define_paper_n64": 208.0,
              "define_authors_n128": 213.0, "projective_n128": 194.0}  # projective_n64 not finished
    results = {a: {"metrics": {"valid_ppl": v}} for a, v in scores.items()}
    picks = best_per_family(arms, results, STUDY.second_seed_families, "valid_ppl", higher_is_better)
    if higher_is_better:
        assert [a.id for a in picks] == ["standard_n128", "define_paper_n64", "projective_n128"]
    else:
        assert [a.id for a in picks] == ["standard_n256", "define_paper_n128", "projective_n128"]
    assert [a.with_seed(2).id for a in picks][0].endswith("_s2")
    assert isinstance(picks[0], Arm)


@pytest.mark.parametrize("names, ids", [
    ("define_paper_d128_n32 transformer_d96", ["transformer_d96", "define_paper_d128_n32"]),
    ("define_paper_d128_n32_s2", ["define_paper_d128_n32_s2"]),
    ("transformer_d96_s2 transformer_d96", ["transformer_d96", "transformer_d96_s2"]),
    ("transformer_d96_s3 define_paper_d128_n32_s2 transformer_d96_s2",
     ["transformer_d96_s2", "define_paper_d128_n32_s2", "transformer_d96_s3"]),
])
def test_arms_selects_main_arms_and_second_seeds_by_id(names, ids):
    from studies import nmt_multi30k as nmt
    from studies.common import select_arms

    picked = select_arms(nmt.arms_for(nmt.WIDTHS, False), names)
    assert [a.id for a in picked] == ids
    assert all(a.id == (a.name if a.seed == 1 else f"{a.name}_s{a.seed}") for a in picked)
    for wrong in ("transformer_d96_s1", "transformer_d97_s3", "transformer_d96_sx"):
        with pytest.raises(UserError, match=f"unknown arm {wrong}"):
            select_arms(nmt.arms_for(nmt.WIDTHS, False), wrong)


def test_nmt_deciding_grid_is_in_the_full_grid_and_holds_the_budget_arms():
    from studies import nmt_multi30k as nmt

    deciding, full = ([a.id for a in nmt.arms_for(nmt.WIDTHS, f)] for f in (False, True))
    assert deciding == ["define_paper_untied_d128_n32", "transformer_untied_d96", "define_paper_tiedunit_d128_n32",
                        "transformer_d128", "define_paper_untied_d128_n64", "projective_untied_d128_n32",
                        "transformer_untied_d128", "transformer_d96", "define_paper_d128_n32",
                        "define_authors_untied_d128_n32"]
    # per width: the Transformer in 2 forms; per n: the paper's unit in 3 output forms, authors' and projective in 2
    assert set(deciding) < set(full) and len(full) == 3 * (2 + 2 * (3 + 2 + 2))
    assert {"transformer_d64", "define_authors_untied_d64_n32", "projective_d128_n64"} <= set(full)
    budget = [a.id for a in nmt.budget_arms(128)]  # the earlier budget search's arms, tied at n
    assert budget == ["transformer_d128", "define_paper_d128_n32", "define_authors_d128_n32", "projective_d128_n32"]
    assert set(budget) <= set(full)


@pytest.mark.parametrize("form, shared", [("untied", False), ("tied_map", True), ("tied_unit", True)])
def test_nmt_arms_share_embeddings_as_their_output_form_says(form, shared):
    from studies import nmt_multi30k as nmt

    arm = nmt.define(128, 32, "paper", form)
    assert ("--share-all-embeddings" in arm.args) == shared
    assert arm.args[arm.args.index("--define-output-layer") + 1] == form
    assert ("--share-all-embeddings" in nmt.transformer(96, untied=not shared).args) == shared


@pytest.mark.parametrize("define_total, rival", [(3.2, "transformer_untied_d96"), (4.4, "transformer_untied_d128"),
                                                 (1.8, "transformer_untied_d64")])
def test_nmt_second_seeds_take_the_best_paper_form_define_and_its_equal_size_transformer(define_total, rival):
    from studies import nmt_multi30k as nmt

    arms = nmt.arms_for(nmt.WIDTHS, True)
    best = {"define_authors_untied_d128_n64": 20.0, "define_paper_d128_n32": 25.0, "transformer_d128": 21.0}
    totals = {"transformer_untied_d64": 1.9, "transformer_untied_d96": 3.1, "transformer_untied_d128": 4.5,
              "transformer_d96": define_total, "define_authors_untied_d128_n64": define_total}
    results = {a.id: {"metrics": {"valid_bleu": best.get(a.id, 1.0)}, "params": {"total": totals.get(a.id, 1.7)}}
               for a in arms}
    # and the projective map in the paper's form at the best arm's n: the factorization without the unit
    assert [a.id for a in nmt.second_seeds(arms, results, 128)] == [f"{rival}_s2", "define_authors_untied_d128_n64_s2",
                                                                     "projective_untied_d128_n64_s2"]


def test_a_recorded_second_seed_stays_when_another_arm_now_leads(tmp_path):
    from studies import nmt_multi30k as nmt
    from studies.common import recorded_seeds

    arms = nmt.arms_for(nmt.WIDTHS, False)
    chosen = [a.with_seed(2) for a in arms if a.id == "define_authors_untied_d128_n32"]
    (tmp_path / "define_paper_untied_d128_n32_s2.json").write_text("{}")
    (tmp_path / "define_authors_untied_d128_n32_s2.json").write_text("{}")
    (tmp_path / "projective_untied_d128_n32_s3.json").write_text("{}")
    (tmp_path / "define_paper_untied_d128_n32_s3.json").write_text("{}")
    (tmp_path / "transformer_d97_s2.json").write_text("{}")  # no such arm in the grid
    assert [a.id for a in recorded_seeds(arms, chosen, tmp_path)] == [
        "define_paper_untied_d128_n32_s2", "define_paper_untied_d128_n32_s3", "projective_untied_d128_n32_s3"]


def test_nmt_third_seeds_are_the_deciding_pairs_arms_that_finished():
    from studies import nmt_multi30k as nmt

    arms = nmt.arms_for(nmt.WIDTHS, False)
    pairs = nmt.deciding_pairs(128)
    assert [(a.id, b.id) for a, b in pairs] == [("define_authors_untied_d128_n32", "projective_untied_d128_n32"),
                                                ("define_paper_untied_d128_n32", "projective_untied_d128_n32")]
    grid = {a.id for a in arms}
    assert {a.id for pair in pairs for a in pair} <= grid
    results = {a.id: {} for a in arms if a.id != "define_authors_untied_d128_n32"}
    assert [a.id for a in nmt.third_seeds(arms, results, 128)] == ["define_paper_untied_d128_n32_s3",
                                                                   "projective_untied_d128_n32_s3"]


def _sentences(seed, count=120):
    import random

    rng = random.Random(seed)
    words = "der die das ein eine mann frau hund katze haus auf dem im wasser spielt rennt".split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) for _ in range(count)]


def test_nmt_paired_bootstrap_scores_as_sacrebleu_and_separates_a_clearly_better_system():
    import sacrebleu

    from studies import nmt_multi30k as nmt

    refs = _sentences(0)
    noise = _sentences(1)
    better = [r if i % 4 else n for i, (r, n) in enumerate(zip(refs, noise))]  # 3 of 4 sentences right
    worse = [r if i % 4 == 0 else n for i, (r, n) in enumerate(zip(refs, noise))]  # 1 of 4
    r = nmt.paired_bootstrap(better, worse, refs)
    assert r["BLEU"]["system"] == pytest.approx(sacrebleu.corpus_bleu(better, [refs]).score)
    assert r["BLEU"]["baseline"] == pytest.approx(sacrebleu.corpus_bleu(worse, [refs]).score)
    assert r["chrF"]["system"] == pytest.approx(sacrebleu.corpus_chrf(better, [refs]).score)
    assert r["BLEU"]["p"] < 0.01 and r["chrF"]["p"] < 0.01
    near = better[:-1] + [worse[-1]]  # one sentence apart: no evidence of a difference
    assert nmt.paired_bootstrap(near, better, refs)["BLEU"]["p"] > 0.05


def test_nmt_bootstrap_section_scores_kept_pairs_and_names_the_rest(tmp_path):
    from studies import nmt_multi30k as nmt

    refs = _sentences(0)
    (tmp_path / "test.de").write_text("\n".join(refs) + "\n")
    pairs = nmt.deciding_pairs(128)
    for arm, sents in ((pairs[0][0].with_seed(3), refs), (pairs[0][1].with_seed(3), _sentences(1))):
        path = nmt.hypotheses_file(tmp_path, arm.id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(sents) + "\n")
    text = nmt.bootstrap_section(pairs, [1, 3], tmp_path, tmp_path / "test.de")
    rows = [l for l in text.splitlines() if l.startswith("| 3 |")]
    assert len(rows) == 1
    assert rows[0].startswith("| 3 | define_authors_untied_d128_n32 | projective_untied_d128_n32 | 100.00 |")
    assert ("define_authors_untied_d128_n32 vs projective_untied_d128_n32, define_paper_untied_d128_n32 vs "
            "projective_untied_d128_n32, define_paper_untied_d128_n32_s3 vs projective_untied_d128_n32_s3.") in text


def test_nmt_keeps_each_arms_test_hypotheses_beside_its_record(tmp_path):
    from studies import nmt_multi30k as nmt

    arm = nmt.deciding_pairs(128)[0][0].with_seed(3)
    run_dir = tmp_path / "work" / arm.id
    run_dir.mkdir(parents=True)
    (run_dir / "test.checkpoint_last.hyp").write_text("ein hund rennt .\n")
    nmt.keep_hypotheses(run_dir, run_dir / "checkpoint_last.pt", tmp_path / "out", arm)
    assert nmt.hypotheses_file(tmp_path / "out", arm.id).read_text() == "ein hund rennt .\n"
    assert nmt.hypotheses_file(tmp_path / "out", arm.id).parent == tmp_path / "out" / nmt.HYPS


def test_tlm_equal_size_arms_are_within_3_percent_of_the_arm_they_match():
    """Study 4's equal-size pairs (issue 52), built as the study trains them (fairseq's
    argument parser, the paper's parameter distribution) at WikiText-2's vocabulary: each
    within 3% of the arm it matches, the context model the same, only the input-output
    layers (and DeFINE's unit) apart."""
    from fairseq_define.param_report import parameter_distribution
    from fairseq_define.tools.params import build_arch
    from studies import lm_transformer_wikitext2 as tlm

    arms = {a.id: a for a in tlm.arms(False)}
    assert len(tlm.EQUAL_SIZE_PAIRS) == 2
    for pair in tlm.EQUAL_SIZE_PAIRS:
        counts = [parameter_distribution(build_arch(arms[a].arch, tlm.VOCAB, extra=list(arms[a].args))[0])
                  for a in pair]
        assert counts[0]["total"] == pytest.approx(counts[1]["total"], rel=0.03), (pair, counts)
        assert counts[0]["context"] == pytest.approx(counts[1]["context"], rel=0.001), (pair, counts)


def test_tlm_equal_size_section_gives_each_pairs_gap_over_training_from_the_seeds_means():
    from studies import lm_transformer_wikitext2 as tlm

    arms = tlm.arms(False)
    first, second = tlm.EQUAL_SIZE_PAIRS[0]
    curves = {first: [[100, 400.0], [200, 300.0], [300, 200.0]],
              f"{first}_s2": [[100, 600.0], [200, 500.0], [300, 400.0]],
              second: [[100, 450.0], [200, 360.0], [300, 270.0]]}
    results = {k: {"valid_curve": {"metric": "valid_ppl", "points": v}} for k, v in curves.items()}
    text = tlm.equal_size_section(arms + [a.with_seed(2) for a in arms], results)
    assert f"| update | {first} (seeds: 2) | {second} (seeds: 1) | gap |" in text
    assert "| 100 | 500.0 | 450.0 | -10.0% |" in text and "| 300 | 300.0 | 270.0 | -10.0% |" in text
    assert f"{first} 25.0% over the last 100" in text  # 400 -> 300
    assert f"{second} 25.0% over the last 100" in text and f"{second} 40.0% over the last 300" not in text
    first2, second2 = tlm.EQUAL_SIZE_PAIRS[1]
    assert f"{first2} against {second2}: not both recorded yet." in text
