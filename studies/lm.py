"""The language-model studies' common loop: prepare_lm.sh's data, each arm trained by
lib.sh's train_run with the study's recipe, checkpoint scored on valid and test by lib.sh's
``perplexity`` (fairseq-eval-lm), the report written by studies.common."""

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from .common import (
    Arm,
    Budget,
    Report,
    base_parser,
    best_per_family,
    corpus,
    lm_perplexity,
    main_wrapper,
    print_arms,
    record_arm,
    recorded_seeds,
    resolve_dirs,
    run_arms,
    run_script,
    select_arms,
    set_jobs,
    train_arm,
    write_report,
)

logger = logging.getLogger("studies.lm")


@dataclass
class LMStudy:
    name: str  # lm_ptb
    title: str
    doc: str
    dataset: str  # prepare_lm.sh --dataset, a set of run_scripts/corpora.tsv
    arms: Callable[[bool], List[Arm]]  # quick -> arms
    recipe: Callable[[int, bool], List[str]]  # (updates, quick) -> fairseq-train args shared by every arm
    eval_args: Sequence[str]  # lib.sh's EVAL_ARGS for fairseq-eval-lm
    checkpoint: str  # the checkpoint scored (chosen on valid, or the schedule's end)
    updates: int
    minutes: float
    quick_updates: int = 12
    quick_minutes: float = 2
    quick_head: Sequence[str] = ("--head-train", "1000", "--head-eval", "40")
    header_lines: Sequence[str] = field(default_factory=list)
    # the families whose best arm (valid ppl) trains again with seed 2: the deciding points
    second_seed_families: Sequence[str] = ()
    # (arms in the report, their results) -> markdown written below the table: a study's own section
    report_extra: Optional[Callable[[Sequence[Arm], Dict[str, dict]], str]] = None


def main(study: LMStudy, argv: Optional[Sequence[str]] = None) -> int:
    prog = f"python -m studies.{study.name}"
    args = base_parser(prog, study.doc, study.updates, study.minutes).parse_args(argv)
    set_jobs(args.jobs)
    grid = study.arms(args.quick)
    if args.list:
        print_arms(grid)
        return 0
    corpus_dir = corpus(study.dataset, args)
    workdir, out_dir = resolve_dirs(args, study.name)
    data_dir = workdir / "data"
    prep = ["--dataset", study.dataset, "--local", corpus_dir, "--out", data_dir, "--workers", "2"]
    if args.quick:
        prep += list(study.quick_head)
    logger.info("data: %s from %s -> %s", study.dataset, corpus_dir, data_dir)
    run_script("prepare_lm.sh", prep, workdir / "prepare.log")

    updates = args.updates or (study.quick_updates if args.quick else study.updates)
    minutes = args.minutes if args.minutes is not None else (study.quick_minutes if args.quick else study.minutes)
    budget = Budget(updates, minutes)
    recipe = study.recipe(updates, args.quick)
    logger.info("budget: %d updates an arm, at most %g minutes", updates, minutes)

    def run_one(arm: Arm, run_dir: Path) -> dict:
        train_arm(arm, run_dir, data_dir / "bin", recipe, budget)
        ckpt = run_dir / study.checkpoint
        if not ckpt.is_file():  # stopped before its first validation
            ckpt = run_dir / "checkpoint_last.pt"
        metrics = {f"{split}_ppl": lm_perplexity(ckpt, data_dir, split, study.eval_args) for split in ("valid", "test")}
        return record_arm(run_dir, study.name, arm, recipe, budget, metrics, "valid_ppl",
                          extra={"checkpoint": ckpt.name, "eval_args": list(study.eval_args)})

    arms = select_arms(grid, args.arms)
    records = out_dir / "runs"  # each arm's result, committed with the report: the study resumes anywhere
    train = not args.report_only
    results = run_arms(arms, workdir, run_one, budget, args.jobs, records, train)
    if not (args.no_second_seed or args.quick or args.arms):
        seeds = [a.with_seed(2) for a in best_per_family(arms, results, study.second_seed_families, "valid_ppl", False)]
        seeds += recorded_seeds(arms, seeds, records)
        results.update(run_arms(seeds, workdir, run_one, budget, args.jobs, records, train))
        arms = list(arms) + seeds
    arms = [a for a in arms if a.id in results]
    report = Report(
        title=study.title + (" (quick mode: not a result)" if args.quick else ""),
        metric="test_ppl", metric_label="test perplexity (fairseq-eval-lm)", higher_is_better=False,
        columns=[("valid_ppl", "valid ppl"), ("test_ppl", "test ppl")],
        header_lines=[f"Recipe (every arm): `{' '.join(recipe)}`, seed 1 unless the seed column says otherwise; "
                      f"{updates} updates; "
                      f"{study.checkpoint} scored with `fairseq-eval-lm {' '.join(study.eval_args)}`.",
                      *(["Quick mode: tiny models (`--quick --list` shows them) on slices of the corpus."]
                        if args.quick else study.header_lines),
                      "The arm's args are its only difference from the recipe. Params: the paper's distribution "
                      "(fairseq-define-results). Valid chooses; test is only scored."])
    extra = study.report_extra(arms, results) if study.report_extra and not args.quick else ""
    written = write_report(report, arms, results, budget, out_dir, "valid_ppl", workdir, extra_md=extra)
    logger.info("written: %s", ", ".join(map(str, written)))
    return 0


def run(study: LMStudy) -> None:
    raise SystemExit(main_wrapper(f"python -m studies.{study.name}", lambda argv: main(study, argv)))
