"""Study 5 (studies/lm_adaptive_define.py, issue 59): DeFINE added on an adaptive input
against that adaptive input. Its pairs are built as the study trains them (the DeFINE arm at
most 6% larger, the context model the same), its quick mode records every field a later check
reads, and the test blocks' scores it keeps give back the perplexity fairseq-eval-lm printed."""

import json
import math
import sys

import pytest

from .helpers import ROOT, run_cli


def built(arm, vocab):
    from fairseq_define.param_report import parameter_distribution
    from fairseq_define.tools.params import build_arch

    return parameter_distribution(build_arch(arm.arch, vocab, extra=list(arm.args))[0])


@pytest.mark.parametrize("model", ["LSTM", "transformer_lm"])
def test_each_pair_is_the_same_model_with_a_unit_at_most_6_percent_larger(model):
    """Built at WikiText-2's dictionary with the study's arguments: the pair differs by the
    unit (and, for transformer_lm, fairseq's own band-0 projection of its adaptive input)."""
    from studies import lm_adaptive_define as s5
    from studies import lm_transformer_wikitext2 as study4

    adaptive, define = next(m for m in s5.MODELS if m.label == model).pair(False)
    assert (adaptive.family, define.family) == (s5.ADAPTIVE, s5.DEFINE) and adaptive.n == define.n == s5.N
    a, b = built(adaptive, study4.VOCAB), built(define, study4.VOCAB)
    assert a["define"] == 0 and b["define"] > 0
    assert 1 < b["total"] / a["total"] <= 1 + s5.MAX_GROWTH, (a, b)
    assert b["context"] == pytest.approx(a["context"], rel=1e-3), (a, b)


def test_the_transformer_pair_sets_study_4s_adaptive_arm_against_define():
    from studies import lm_adaptive_define as s5
    from studies import lm_transformer_wikitext2 as study4

    adaptive, _ = s5.tlm_pair(False)
    theirs = next(a for a in study4.arms(False) if a.name == "adaptive_d256")
    assert (adaptive.arch, adaptive.args, adaptive.family) == (theirs.arch, theirs.args, theirs.family)


def test_the_lstm_presets_are_table_1a_r2_and_r3_scaled_down():
    """R3's preset is R2's with the unit (transform, depth, width) and nothing else apart,
    as Table 1a's rows; both keep Table 1a's adaptive map and softmax (factor 4, no bias)."""
    from fairseq_define.models.named_architectures import preset

    r2, r3 = dict(preset("define_lstm_wt2_r2_adaptive")), dict(preset("define_lstm_wt2_r3_define_n256"))
    apart = {k for k in r2.keys() | r3.keys() if r2.get(k) != r3.get(k)}
    assert apart == {"define_transform", "define_depth", "define_expand_dim"}
    assert (r3["define_transform"], r3["define_depth"]) == ("define", 3)
    full = dict(preset("define_lstm_wt103_r2_adaptive"))
    assert {k: r2[k] for k in ("div_val", "no_softmax_bias", "define_map_dim")} == \
        {k: full[k] for k in ("div_val", "no_softmax_bias", "define_map_dim")}


@pytest.mark.parametrize("line, block", [
    ("2026-11-28 08:45:30 | INFO | fairseq_cli.eval_lm | 0 = [-5.25]\tRobert [-14.5]\t</s> [-0.25]", (0, 3, -20.0)),
    ("x | INFO | fairseq_cli.eval_lm | 12 [ [-1.5]\t] [-inf]", (12, 2, -math.inf)),
])
def test_block_scores_read_fairseq_eval_lms_word_probabilities(tmp_path, line, block):
    from studies.lm_adaptive_define import block_scores

    log = tmp_path / "eval.log"
    log.write_text("x | INFO | fairseq_cli.eval_lm | Evaluated 3 tokens in 0.1s\n" + line + "\n" + line + "\n")
    assert block_scores(log) == [block, block]  # one a line, in order (an LSTM's segments share an id)


@pytest.mark.parametrize("points, fall", [([(100, 200.0), (400, 150.0), (500, 120.0)], 0.2),
                                          ([(100, 200.0), (500, 120.0)], 0.4), ([(500, 120.0)], None)])
def test_the_fall_over_the_last_fifth(points, fall):
    from studies.lm_adaptive_define import last_fifth_fall

    assert last_fifth_fall(points) == (fall if fall is None else pytest.approx(fall))


def test_the_gap_course_reads_both_curves_at_the_same_fractions():
    from studies.lm_adaptive_define import GAP_AT, gap_course, value_at

    adaptive = [(100, 400.0), (200, 300.0), (400, 200.0), (500, 180.0)]
    define = [(100, 360.0), (200, 330.0), (400, 220.0), (500, 198.0)]
    assert GAP_AT == (0.5, 0.8, 1.0)
    assert value_at(adaptive, 0.5) == 300.0 and value_at(adaptive, 0.1) is None and value_at([], 1.0) is None
    assert gap_course(adaptive, define) == pytest.approx([0.1, 0.1, 0.1])
    assert gap_course(adaptive, []) is None


def test_the_paired_bootstrap_reads_the_perplexity_ratio_and_how_sure_it_is(tmp_path):
    """Over the same test blocks: a DeFINE arm lower on every block is lower beyond the test
    set's noise; arms that differ by a block-to-block coin flip are not; blocks that are not
    the same test blocks are no pair. The difference is the whole test set's perplexity ratio."""
    from studies.lm_adaptive_define import BOOTSTRAP, paired_bootstrap, read_scores

    adaptive = [(100, -500.0 - i) for i in range(60)]
    better = [(t, lp + 5.0 + (i % 3)) for i, (t, lp) in enumerate(adaptive)]
    ratio, p = paired_bootstrap(adaptive, better)
    ppl = [math.exp(-sum(lp for _, lp in x) / sum(t for t, _ in x)) for x in (adaptive, better)]
    assert ratio == pytest.approx(ppl[1] / ppl[0] - 1) and ratio < 0
    assert p == pytest.approx(1 / (1 + BOOTSTRAP))
    coin = [(t, lp + (1.0 if i % 2 else -1.0)) for i, (t, lp) in enumerate(adaptive)]
    ratio, p = paired_bootstrap(adaptive, coin)
    assert abs(ratio) < 1e-12 and p > 0.5
    assert paired_bootstrap(adaptive, adaptive[1:]) is None
    assert paired_bootstrap(adaptive, [(101, lp) for _, lp in adaptive]) is None
    kept = tmp_path / "arm.test.tsv"  # keep_scores' format
    kept.write_text("sample\ttokens\tlogprob\n0\t1024\t-4795.5137\n0\t1024\t-5155.8821\n")
    assert read_scores(kept) == [(1024, -4795.5137), (1024, -5155.8821)]


@pytest.mark.parametrize("argv, study", [
    ([], "lm_adaptive_define_lstm"), (["--updates", "3000"], "lm_adaptive_define_lstm"),
    (["--updates", "6000"], "lm_adaptive_define_lstm_u6000"),
    (["--quick", "--updates", "6"], "lm_adaptive_define_lstm"),
])
def test_another_budget_is_a_study_of_its_own(argv, study):
    """Every study's records share one budget: a check pairing a study's records by seed and n
    never pairs a 3,000-update arm with a 6,000-update one."""
    from studies import lm_adaptive_define as s5
    from studies.common import base_parser

    args = base_parser("prog", "doc", s5.UPDATES, s5.MINUTES).parse_args(argv)
    lstm = s5.budgeted(s5.MODELS[0], args)
    assert lstm.study == study and lstm.pair is s5.MODELS[0].pair


def _timed(arm, ms, flushed):
    return {"arm": arm.id, "ms_per_update": ms, **({} if flushed is None else {"flush_denormal": flushed})}


@pytest.mark.parametrize("flushed, mean, starred", [
    # seed 1's DeFINE arm kept subnormals in a part: the mean is seed 2's alone, seed 1 starred
    ({"lstm_define_n256": False}, "mean of the seeds whose arms flushed subnormal floats throughout 800 ms "
                                  "against 900 ms (+12.5%)", ["lstm_define_n256"]),
    ({}, "mean of the seeds whose arms flushed subnormal floats throughout 900 ms against 1350 ms (+50.0%)", []),
    # records from before the field: every arm kept them, the mean is of every seed
    ({a: None for a in ("lstm_adaptive_n256", "lstm_define_n256", "lstm_adaptive_n256_s2", "lstm_define_n256_s2")},
     "mean of the seeds 900 ms against 1350 ms (+50.0%)",
     ["lstm_adaptive_n256", "lstm_define_n256", "lstm_adaptive_n256_s2", "lstm_define_n256_s2"]),
])
def test_the_time_line_means_only_pairs_that_flushed_subnormals_throughout(flushed, mean, starred):
    from studies import lm_adaptive_define as s5

    adaptive, define = s5.lstm_pair(False)
    pair = [adaptive, define, adaptive.with_seed(2), define.with_seed(2)]
    ms = {"lstm_adaptive_n256": 1000.0, "lstm_define_n256": 1800.0, "lstm_adaptive_n256_s2": 800.0,
          "lstm_define_n256_s2": 900.0}
    results = {a.id: _timed(a, ms[a.id], flushed.get(a.id, True)) for a in pair}
    line = s5.time_line(pair, results, [1, 2])
    assert mean in line
    assert ("seed 1 1000 against 1800 ms (+80.0%" + ("*" if "lstm_define_n256" in starred else "") + ")") in line
    if starred:
        assert f"kept in some invocation of {', '.join(starred)}:" in line
    else:
        assert "*" not in line
    del results["lstm_define_n256_s2"]["ms_per_update"]  # a seed without a time leaves the mean
    assert "seed 2" not in s5.time_line(pair, results, [1, 2])
    assert "not measured" in s5.time_line(pair, results, [2])


@pytest.mark.cli
def test_quick_mode_records_both_pairs_with_the_fields_a_check_reads(tmp_path, corpus_root):
    from studies import lm_adaptive_define as s5

    work = tmp_path / "work"
    proc = run_cli(
        sys.executable,
        "-m",
        "studies.lm_adaptive_define",
        "--quick",
        "--workdir",
        work,
        "--data-root",
        corpus_root,
        "--jobs",
        "2",
        cwd=ROOT,
        timeout=600,
        env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    )
    assert [m.study for m in s5.MODELS] == ["lm_adaptive_define_lstm", "lm_adaptive_define_transformer_lm"]
    for model in s5.MODELS:  # a study of its own a family: its own records and report
        report = work / model.study / "report"
        records = {p.stem: json.loads(p.read_text()) for p in (report / "runs").glob("*.json")}
        assert sorted(records) == sorted(a.id for a in model.pair(True)), proc.stdout[-3000:]
        pair = {r["family"]: r for r in records.values()}
        assert set(pair) == {s5.ADAPTIVE, s5.DEFINE}
        a, b = pair[s5.ADAPTIVE], pair[s5.DEFINE]
        for r in (a, b):
            assert r["study"] == model.study and r["model"] == model.label
            assert r["seed"] == 1 and r["updates"] == r["budget"]["updates"] == 12
            assert set(r["params"]) == {"define", "context", "input_output", "total"}
            # quick mode's 12 updates may fall below fairseq's one-second log resolution: unmeasured
            # (None), never a time of 0 (tests/test_results_tool.py holds the reader to both)
            assert r["ms_per_update"] is None or r["ms_per_update"] > 0
            assert "ms_per_update" in r and r["threads"] == 1
            assert all(math.isfinite(r["metrics"][k]) for k in ("valid_ppl", "test_ppl"))
            rows = [l.split("\t") for l in (report / r["test_scores"]).read_text().splitlines()[1:]]
            tokens, logprob = sum(int(t) for _, t, _ in rows), sum(float(s) for _, _, s in rows)
            assert math.exp(-logprob / tokens) == pytest.approx(r["metrics"]["test_ppl"], rel=1e-3)
        assert (a["n"], a["seed"]) == (b["n"], b["seed"])
        assert a["params"]["define"] == 0 < b["params"]["define"]
        assert b["params"]["total"] <= (1 + s5.MAX_GROWTH) * a["params"]["total"], (a["params"], b["params"])
        table = (report / "results.md").read_text()
        assert f"### {model.label}" in table and "| 1 |" in table
        assert "Every seed agrees" in table and "the paper 297 against 298 ms" in table
        assert "against the adaptive input's at 0.5, 0.8, 1 of the updates: seed 1 " in table
