"""Study 1: BLEU against parameters on Multi30k EN-DE. At equal parameters, which is better:
fairseq's Transformer with plain embedding tables, with DeFINE (paper or authors' unit), or
with the projective map (one Linear n -> d)? And with which output layer: the paper's Table 3
model keeps a d-wide untied output layer and a table per side (its baseline too); fairseq's
usual setup shares one table between both sides and the output (--share-all-embeddings).

  Command:   make study-nmt       (python -m studies.nmt_multi30k [--find-budget [--budgets "B1 B2"]] [--grid full]
                                   [--arms "A B"] [EXTRA_TEST_PREFIX ...]; --help)
  Hardware:  2 CPU cores, no GPU. Default grid: 10 arms + 3 second seeds + 3 third seeds, 3,000
             updates an arm of 2,048 tokens (the largest budget --find-budget tried: budget.md),
             two arms at a time (--jobs 2), one thread each: about 30 minutes an arm at d = 128 on
             idle cores, about 4 hours in all. Resumable: each finished arm is recorded in
             docs/studies/nmt_multi30k/runs/ARM.json (committed), and a recorded arm is not
             trained again, on this machine or another.
  Recipe:    one for every arm: prepare_wmt14_en_de.sh on Multi30k raw (train 29,000 pairs
             cleaned by length, val, test_2016_flickr), joint subword-nmt BPE of 8,000 merges,
             3+3 layers, 4 heads, FFN 4d, Adam (0.9, 0.98) lr 1.5e-3, inverse_sqrt with 400
             warmup updates, label smoothing 0.1, dropout 0.1, seed 1; the checkpoint at the
             last update translated with beam 4, lenpen 0.6 (run_scripts/evaluate_nmt.sh);
             detokenized sacreBLEU and chrF. Choices (budget, second seeds) on val only; test
             sets only scored.
  Arms:      --grid deciding (default), at d = 128, k = 2d, N = 3, the paper's unit: DeFINE in the
             paper's form (untied output, a map and unit per side) at n = d/4 and d/2; the
             Transformer in the paper's baseline form (untied, a table per side) at d = 96 and
             128; DeFINE tied to its unit's outputs (tied_unit, shared) at n = d/4; projective in
             the paper's form at n = d/4; the shared Transformer at d = 96 and 128 and DeFINE tied
             at n = d/4 (shared), the earlier grid's arms; the authors' unit in the paper's form at
             n = d/4; a second seed for the best paper-form DeFINE arm (val BLEU), the untied
             Transformer nearest it in parameters and the projective map in the paper's form at its n;
             a third seed for the deciding pairs (issue 52: the authors' unit and the paper's, each
             against the projective map, all untied at n = d/4), each pair then compared by
             sacreBLEU's paired bootstrap (BLEU and chrF) on test_2016_flickr at each seed whose
             hypotheses were kept (docs/studies/nmt_multi30k/hyps/, from the third seed on;
             seeds 1-2 retrained for it: --workdir work/studies/nmt_rehyp --out
             docs/studies/nmt_multi30k/rerun_s12).
             --grid full (about a day here): both Transformer forms at d = 64, 96, 128 and, at
             n = d/4 and d/2, the paper's unit in every output form, the authors' unit and
             projective untied and tied at n.
  Expected:  as measured here (docs/studies.md), test BLEU, the paper's form at n = 32, means
             of three seeds: the authors' unit 34.47 (3.11M; 34.17 / 34.08 / 35.17), the
             paper's unit 34.21 (3.13M; 33.67 / 33.70 / 35.27), the projective map 33.81
             (2.92M; 34.11 / 33.14 / 34.18); the paired bootstrap against the projective
             map, seeds 1 / 2 / 3: the authors' unit p = 0.35 / 0.015 / 0.027 on BLEU, 0.34 /
             0.039 / 0.016 on chrF; the paper's unit behind at seed 1 (p = 0.002 / 0.035), ahead
             at seeds 2 and 3 (0.006 / 0.002, 0.012 / 0.001). Two
             seeds: the untied Transformer at d = 96 32.72 (3.07M); one: the shared Transformer
             at d = 128 35.42 (2.40M). A seed-3 arm: 27-28 minutes on one idle thread.
  Paper:     Table 3 (WMT14 EN-DE, GPUs): Transformer 25.81 (92M) vs + DeFINE 28.25 (68M)
             BLEU on newstest2017.
  Output:    docs/studies/nmt_multi30k/{results.md,params_vs_quality.png,valid_curves.png,runs/,hyps/}
             (budget.md with --find-budget); runs in work/studies/nmt_multi30k/<arm>/.
"""

import json
import logging
import math
import os
import re
import shutil
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_define.errors import UserError
from fairseq_define.output_files import write_text
from fairseq_define.tools.train_log import parse_updates

from .common import (
    WALL_FILE,
    Arm,
    Budget,
    Report,
    base_parser,
    best_per_family,
    corpus,
    each,
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

PROG = "python -m studies.nmt_multi30k"
STUDY = "nmt_multi30k"
logger = logging.getLogger("studies.nmt_multi30k")

WIDTHS = (64, 96, 128)  # --grid full: every family at every width
DECIDING_WIDTH = 128
# the deciding grid's Transformers: those around the DeFINE arms' parameter counts (d=128,
# n=32: 1.75M shared and tied at n, about 3.2M in the paper's form; the shared Transformer at
# d=96 1.55M, d=128 2.4M; the untied one at d=96 about 3.1M, d=128 4.5M)
DECIDING_TRANSFORMERS = (96, 128)
UPDATES, MINUTES = 3000, 45  # the largest budget --find-budget tries (budget.md); the cap scales with it
BPE_OPS = 8000
BUDGETS = (1000, 2000, 3000)
# every arm's recipe; how the embeddings are shared is the arm's (SHARED below)
RECIPE = ["--task", "translation", "--source-lang", "en", "--target-lang", "de",
          "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "0.0", "--lr", "1.5e-3",
          "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "400", "--criterion", "label_smoothed_cross_entropy",
          "--label-smoothing", "0.1", "--dropout", "0.1", "--max-tokens", "2048", "--no-epoch-checkpoints"]
SHARED = ("--share-all-embeddings",)
GEN_ARGS = ["--max-len-a", "1.2", "--max-len-b", "10"]
# quick mode: a pipeline check on slices
QUICK = dict(widths=(32,), updates=12, minutes=2, bpe_ops=300, head=1200, head_eval=24, warmup="4",
             budgets=(4, 8))
# The output forms (--define-output-layer): each arm's id infix and family suffix, and whether
# its embeddings are shared. The paper's Table 3 form (untied) keeps one table (DeFINE map and
# unit) per side and a d-wide output layer, as its baseline Transformer does; the tied forms
# share one embedding between the encoder, the decoder and the output, as fairseq's
# --share-all-embeddings does.
OUTPUT_FORMS = {"tied_map": ("", "", True), "untied": ("untied_", ", untied", False),
                "tied_unit": ("tiedunit_", ", tied_unit", True)}


def sizes(d: int, layers: int = 3, heads: int = 4) -> List[str]:
    """The Transformer's sizes at width d (FFN 4d), for encoder and decoder."""
    return [x for side in ("encoder", "decoder")
            for x in (f"--{side}-layers", str(layers), f"--{side}-attention-heads", str(heads),
                      f"--{side}-embed-dim", str(d), f"--{side}-ffn-embed-dim", str(4 * d))]


def transformer(d: int, untied: bool = False) -> Arm:
    """fairseq's Transformer: shared embeddings (one table for both sides and the output), or
    the paper's baseline form (a table per side and an untied output layer)."""
    if untied:
        return Arm(f"transformer_untied_d{d}", "Transformer, untied", "transformer", tuple(sizes(d)), d, d,
                   sized=len(sizes(d)))
    return Arm(f"transformer_d{d}", "Transformer", "transformer", (*sizes(d), *SHARED), d, d, sized=len(sizes(d)))


def define(d: int, n: int, kind: str, output: str) -> Arm:
    """DeFINE (``kind`` paper or authors: the unit's style; k = 2d, N = 3) or projective
    (``kind`` projective) at map width n, with the output form ``output``."""
    infix, suffix, shared = OUTPUT_FORMS[output]
    unit = (("--define-transform", "projective") if kind == "projective" else
            ("--define-expand-dim", str(2 * d), "--define-depth", "3", "--define-style", kind))
    name = f"projective_{infix}d{d}_n{n}" if kind == "projective" else f"define_{kind}_{infix}d{d}_n{n}"
    family = ("projective" if kind == "projective" else f"DeFINE ({kind})") + suffix
    args = (*sizes(d), "--define-map-dim", str(n), *unit, "--define-output-layer", output, *(SHARED if shared else ()))
    return Arm(name, family, "define_transformer", args, d, n, sized=len(sizes(d)))


def budget_arms(d: int) -> List[Arm]:
    """The arms --find-budget trained (at n = d/4, tied at n as it then was)."""
    return [transformer(d), *(define(d, d // 4, k, "tied_map") for k in ("paper", "authors", "projective"))]


def arms_for(widths: Sequence[int], full: bool) -> List[Arm]:
    """The grid. Deciding (the default, at d = 128, about 2.5 hours here), in the order that
    answers first what decides: DeFINE in the paper's form (untied, n = d/4) and the paper's
    baseline at its size; the unit-tied form; the shared Transformer at d; DeFINE's paper form
    at n = d/2 and projective's at n = d/4; the larger untied Transformer; then the two arms of
    the earlier grid (the shared Transformer at d = 96, DeFINE tied at n); the authors' unit in
    the paper's form at n = d/4 (does the unit matter, or only the factorization?). Full: at every
    width the Transformer in both forms and, at n = d/4 and d/2, DeFINE's paper unit in every
    output form, the authors' unit and projective untied and tied at n."""
    if not full:
        d = DECIDING_WIDTH if DECIDING_WIDTH in widths else widths[0]
        small = min(DECIDING_TRANSFORMERS) if d == DECIDING_WIDTH else d
        return [define(d, d // 4, "paper", "untied"), transformer(small, untied=True),
                define(d, d // 4, "paper", "tied_unit"), transformer(d),
                define(d, d // 2, "paper", "untied"), define(d, d // 4, "projective", "untied"),
                *([transformer(d, untied=True)] if small != d else []),
                *([transformer(small)] if small != d else []), define(d, d // 4, "paper", "tied_map"),
                define(d, d // 4, "authors", "untied")]
    arms = [a for d in widths for a in (transformer(d), transformer(d, untied=True))]
    for d in widths:
        for n in (d // 4, d // 2):
            arms += [define(d, n, "paper", form) for form in ("tied_map", "untied", "tied_unit")]
            arms += [define(d, n, kind, form) for kind in ("authors", "projective") for form in ("tied_map", "untied")]
    return arms


def second_seeds(arms: Sequence[Arm], results: Dict[str, dict], width: int) -> List[Arm]:
    """Seed 2 for the points that decide the paper's claim, picked on val BLEU: the best
    DeFINE arm in the paper's form (untied, either unit) at the deciding width, the
    Transformer of the paper's baseline form (untied, any width) whose total parameters are
    nearest its, and the projective map in the paper's form at the same n (the factorization
    without the unit)."""
    paper_form = [
        a for a in arms if a.width == width and a.family.startswith("DeFINE") and a.family.endswith(", untied")
    ]
    best = best_per_family(paper_form, results, ("DeFINE",), "valid_bleu", True)
    rivals = [a for a in arms if a.family == "Transformer, untied" and a.id in results]
    if best and rivals:
        total = lambda a: results[a.id]["params"]["total"]  # noqa: E731
        best.insert(0, min(rivals, key=lambda a: abs(total(a) - total(best[-1]))))
    if best:
        best += [a for a in arms if a.family == "projective, untied" and a.width == width and a.n == best[-1].n
                 and a.id in results]
    return [a.with_seed(2) for a in best]


def deciding_pairs(width: int) -> List[Tuple[Arm, Arm]]:
    """The comparisons two seeds left inside their spread (issue 52), each decided by a paired
    bootstrap on test_2016_flickr: DeFINE in the paper's form at n = d/4, the authors' unit and
    the paper's, each against the projective map there (the factorization without the unit)."""
    n = width // 4
    projective = define(width, n, "projective", "untied")
    return [(define(width, n, kind, "untied"), projective) for kind in ("authors", "paper")]


def third_seeds(arms: Sequence[Arm], results: Dict[str, dict], width: int) -> List[Arm]:
    """Seed 3 of the deciding pairs' arms whose first seed finished."""
    ids = {a.id for pair in deciding_pairs(width) for a in pair}
    return [a.with_seed(3) for a in arms if a.id in ids and a.id in results]


# ---------------------------------------------------------------------------- data


def prepare(m: Path, data_dir: Path, quick: bool, log: Path) -> None:
    """BPE and binarize Multi30k (``m``: the folder of its raw files)."""
    args = ["--out", data_dir, "--train", m / "train", "--valid", m / "val", "--test", m / "test_2016_flickr",
            "--valid-name", "val", "--test-name", "test_2016_flickr", "--workers", "2"]
    if quick:
        args += ["--bpe-ops", QUICK["bpe_ops"], "--head", QUICK["head"], "--head-eval", QUICK["head_eval"]]
    else:
        args += ["--bpe-ops", BPE_OPS]
    logger.info("data: Multi30k from %s -> %s (log %s)", m, data_dir, log)
    run_script("prepare_wmt14_en_de.sh", args, log)


def prepare_extra(prefix: str, data_dir: Path, quick: bool, log: Path) -> Path:
    """An extra test set, tokenized and BPE'd as the main data: prepare_wmt14_en_de.sh in its
    own folder, seeded with the main folder's tokenized training text and BPE codes (which the
    script then reuses), so that its dictionary is the main one (checked)."""
    name = Path(prefix).name
    for l in ("en", "de"):
        if not Path(f"{prefix}.{l}").is_file():
            raise UserError(f"extra test set {prefix}: no {prefix}.{l}; give PREFIX with PREFIX.en and PREFIX.de")
    out = data_dir / "extra" / name
    if not (out / "bin" / "done").is_file():
        for sub, names in (("tok", ["train.en", "train.de", "valid.en", "valid.de"]), ("bpe", ["codes"])):
            (out / sub).mkdir(parents=True, exist_ok=True)
            for f in names:
                shutil.copyfile(data_dir / sub / f, out / sub / f)
        args = ["--out", out, "--train", data_dir / "raw" / "train", "--valid", data_dir / "raw" / "valid",
                "--test", prefix, "--valid-name", "val", "--test-name", name, "--workers", "2",
                "--bpe-ops", QUICK["bpe_ops"] if quick else BPE_OPS]
        if quick:
            args += ["--head-eval", QUICK["head_eval"]]
        logger.info("data: extra test set %s -> %s", prefix, out)
        run_script("prepare_wmt14_en_de.sh", args, log)
    if (out / "bin" / "dict.en.txt").read_text() != (data_dir / "bin" / "dict.en.txt").read_text():
        raise UserError(f"{out}/bin has another dictionary than {data_dir}/bin; delete {out} and run again")
    return out


# ---------------------------------------------------------------------------- evaluation


def score(data: Path, checkpoint: Path, subset: str, prefix: Path, log: Path) -> Dict[str, float]:
    """run_scripts/evaluate_nmt.sh (beam 4, lenpen 0.6, detokenized sacreBLEU), plus chrF on
    the same detokenized hypotheses."""
    import sacrebleu

    if not Path(f"{prefix}.scores").is_file():
        run_script("evaluate_nmt.sh", ["--data", data, "--checkpoint", checkpoint, "--subset", subset,
                                       "--out", prefix, "--cpu", "--", *GEN_ARGS], log)
    scores = dict(line.split(None, 1) for line in Path(f"{prefix}.scores").read_text().splitlines())
    hyps = Path(f"{prefix}.hyp").read_text(encoding="utf-8").splitlines()
    refs = (data / "raw" / f"{subset}.de").read_text(encoding="utf-8").splitlines()
    chrf = sacrebleu.corpus_chrf(hyps, [refs]).score
    return {"bleu": float(scores["sacrebleu"]), "chrf": round(chrf, 2), "tok_bleu": float(scores["tok_bleu"])}


def evaluate(run_dir: Path, checkpoint: Path, data_dir: Path, extras: Dict[str, Path]) -> Dict[str, float]:
    log = run_dir / "evaluate.log"
    metrics = {}
    for key, data, subset in [("valid", data_dir, "valid"), ("test", data_dir, "test"),
                              *[(f"test_{name}", d, "test") for name, d in extras.items()]]:
        for k, v in score(data, checkpoint, subset, run_dir / f"{key}.{checkpoint.stem}", log).items():
            metrics[f"{key}_{k}"] = v
    return metrics


HYPS = "hyps"  # beside runs/ (committed): each arm's detokenized test_2016_flickr hypotheses
BOOTSTRAP_SAMPLES = 1000  # sacreBLEU's --paired-bs default (its seed: SACREBLEU_SEED, else 12345)


def hypotheses_file(out_dir: Path, arm_id: str) -> Path:
    return out_dir / HYPS / f"{arm_id}.test_2016_flickr.hyp"


def keep_hypotheses(run_dir: Path, checkpoint: Path, out_dir: Path, arm: Arm) -> None:
    """Copy the arm's detokenized test hypotheses beside its record: the paired bootstrap
    reads them on any machine, after the work folder (and its checkpoints) is gone."""
    src = run_dir / f"test.{checkpoint.stem}.hyp"
    if src.is_file():
        dst = hypotheses_file(out_dir, arm.id)
        dst.parent.mkdir(parents=True, exist_ok=True)
        write_text(dst, src.read_text(encoding="utf-8"))


def paired_bootstrap(system: Sequence[str], baseline: Sequence[str], refs: Sequence[str]) -> Dict[str, dict]:
    """sacreBLEU's paired bootstrap resampling (``sacrebleu --paired-bs``: BOOTSTRAP_SAMPLES
    resamples, two-sided p of the difference) of SYSTEM against BASELINE, BLEU and chrF:
    {metric: {system, baseline, p}}."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    test = PairedTest([("baseline", list(baseline)), ("system", list(system))], {"BLEU": BLEU(), "chrF": CHRF()},
                      [list(refs)], test_type="bs", n_samples=BOOTSTRAP_SAMPLES)
    _, scores = test()  # keyed by the metrics' own names (chrF2 for chrF)
    bleu, chrf = (next(k for k in scores if k.startswith(m)) for m in ("BLEU", "chrF"))
    return {m: {"baseline": scores[k][0].score, "system": scores[k][1].score, "p": scores[k][1].p_value}
            for m, k in (("BLEU", bleu), ("chrF", chrf))}


def bootstrap_section(pairs: Sequence[Tuple[Arm, Arm]], seeds: Sequence[int], out_dir: Path, refs: Path) -> str:
    """The report's paired-bootstrap table: each deciding pair at each seed, from the kept
    hypotheses; a pair whose hypotheses were not kept is named, not scored."""
    lines = ["", "## Paired bootstrap on test_2016_flickr", "",
             f"sacreBLEU's paired bootstrap resampling ({BOOTSTRAP_SAMPLES} resamples, as `sacrebleu --paired-bs`) "
             "of each DeFINE arm against the projective map at the same n and seed, on the detokenized "
             f"hypotheses kept in {HYPS}/; p: the chance of a difference this large were the two systems alike "
             "(two-sided)."]
    rows, missing = [], []
    references = refs.read_text(encoding="utf-8").splitlines() if refs.is_file() else None
    for seed in seeds:
        for system, baseline in pairs:
            a, b = system.with_seed(seed), baseline.with_seed(seed)
            files = [hypotheses_file(out_dir, x.id) for x in (a, b)]
            if references is None or not all(f.is_file() for f in files):
                missing.append(f"{a.id} vs {b.id}")
                continue
            hyps = [f.read_text(encoding="utf-8").splitlines() for f in files]
            r = paired_bootstrap(hyps[0], hyps[1], references)
            rows.append(f"| {seed} | {system.name} | {baseline.name} | {r['BLEU']['system']:.2f} | "
                         f"{r['BLEU']['baseline']:.2f} | {r['BLEU']['p']:.4f} | {r['chrF']['system']:.2f} | "
                         f"{r['chrF']['baseline']:.2f} | {r['chrF']['p']:.4f} |")
    if rows:
        lines += [
            "",
            "| seed | system | baseline | BLEU system | BLEU baseline | p (BLEU) | chrF system | chrF baseline "
            "| p (chrF) |",
            "|---:|---|---|---:|---:|---:|---:|---:|---:|",
            *rows,
        ]
    if missing:
        lines += ["", "Not bootstrapped (hypotheses not kept: run before the study kept them, or not run yet): "
                  + ", ".join(missing) + "."]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- budget finding


def ranking(values: Dict[str, float]) -> List[str]:
    return sorted(values, key=lambda a: -values[a])


def find_budget(arms: Sequence[Arm], budgets: Sequence[int], workdir: Path, data_dir: Path, recipe: List[str],
                minutes: float, out_dir: Path, jobs: int = 1) -> int:
    """Train ARMS once to the largest budget, saving a checkpoint at every budget (inverse_sqrt
    does not depend on the run's length, so the checkpoint at B is the run of B updates); score
    each on val; the budget is the smallest from which the ranking no longer changes."""
    step = math.gcd(*budgets)
    budget = Budget(max(budgets), minutes)
    extra = ["--save-interval-updates", str(step), "--keep-interval-updates", "-1"]
    table: Dict[int, Dict[str, float]] = {b: {} for b in budgets}

    def one(arm: Arm) -> Dict[int, float]:
        run_dir = workdir / "budget" / arm.id
        done = run_dir / "budget.json"
        if done.is_file():
            logger.info("budget %s: done, skipped", arm.id)
            return {int(k): v for k, v in json.loads(done.read_text())["valid_bleu"].items()}
        logger.info("budget %s: training to %d updates, checkpoints every %d", arm.id, budget.updates, step)
        train_arm(arm, run_dir, data_dir / "bin", recipe, budget, extra)
        scores = {}
        for b in budgets:
            found = sorted(run_dir.glob(f"checkpoint_*_{b}.pt"))
            if found:
                scores[b] = score(data_dir, found[0], "valid", run_dir / f"valid.u{b}", run_dir / "evaluate.log")[
                    "bleu"
                ]
        write_text(done, json.dumps({"valid_bleu": scores}, indent=2) + "\n")
        return scores

    for arm, scores in zip(arms, each(list(arms), one, jobs, desc="budget arms", name=lambda a: a.id)):
        for b, v in scores.items():
            table[int(b)][arm.id] = v
    complete = [b for b in budgets if len(table[b]) == len(arms)]
    if not complete:
        raise UserError("no budget was reached by every arm (the time cap stopped them); raise --minutes")
    final = ranking(table[complete[-1]])
    chosen = complete[-1]
    for b in reversed(complete):
        if ranking(table[b]) != final:
            break
        chosen = b
    lines = ["# Study 1: the update budget at which the ranking stops changing", "",
             "Val BLEU (detokenized sacreBLEU, beam 4) of each arm's checkpoint at each budget; one run an "
             "arm (seed 1, inverse_sqrt: the checkpoint at B is the run of B updates).", "",
             "| updates | " + " | ".join(a.id for a in arms) + " | ranking (best first) |",
             "|---:|" + "---:|" * len(arms) + "---|"]
    for b in budgets:
        lines.append(f"| {b} | " + " | ".join(f"{table[b][a.id]:.2f}" if a.id in table[b] else "-" for a in arms)
                     + f" | {' > '.join(ranking(table[b])) if b in complete else '-'} |")
    if chosen < complete[-1]:
        verdict = (f"The ranking stops changing at **{chosen} updates** (unchanged from there to {complete[-1]}); "
                   "the main study uses it unless --updates says otherwise.")
    else:  # it changed between the last two budgets: no budget tried settles it
        settled = [a for a in final if all(ranking(table[b]).index(a) == final.index(a) for b in complete)]
        verdict = (f"The ranking changes up to the last budget tried, so none of them settles it; the main study "
                   f"uses the largest, **{chosen} updates**, unless --updates says otherwise. "
                   + (f"Places held at every budget: {', '.join(f'{a} ({final.index(a) + 1})' for a in settled)}; "
                      "the other arms swap places." if settled else "No arm holds its place at every budget."))
    lines += ["", verdict]
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text(out_dir / "budget.md", "\n".join(lines) + "\n")
    write_text(
        workdir / "budget.json",
        json.dumps(
            {"updates": chosen, "budgets": list(budgets), "valid_bleu": {str(b): table[b] for b in budgets}}, indent=2
        )
        + "\n",
    )
    logger.info("budget: %d updates (%s)", chosen, out_dir / "budget.md")
    return chosen


def reuse_budget_run(arm: Arm, budget_dir: Path, run_dir: Path, updates: int) -> Optional[str]:
    """An arm that --find-budget trained (same recipe, seed and data order) past UPDATES
    already holds the run of UPDATES updates: its checkpoint at UPDATES (the schedule does not
    depend on the run's length, and fairseq seeds each update by its number, so the extra
    validations do not change it). Link it in as the arm's checkpoint_last.pt, with the log
    up to that update and the wall time fairseq logged there (else the run's share); returns what was reused."""
    found = sorted(budget_dir.glob(f"checkpoint_*_{updates}.pt"))
    if (run_dir / "done").is_file() or not found or not (budget_dir / "train.log").is_file():
        return None
    kept, wall = [], None
    lines = (budget_dir / "train.log").read_text(encoding="utf-8", errors="replace").splitlines()
    for line in lines:
        done = parse_updates([line])
        if done is not None and done > updates:
            break
        kept.append(line)
        m = re.search(r'"(?:valid_)?wall": "?([0-9.]+)', line)
        wall = float(m.group(1)) if m else wall
    run_dir.mkdir(parents=True, exist_ok=True)
    target = run_dir / "checkpoint_last.pt"
    if target.exists():
        target.unlink()
    os.link(found[0], target)
    write_text(run_dir / "train.log", "\n".join(kept) + "\n")
    total = budget_dir / WALL_FILE
    if wall is None and total.is_file():  # no progress line before UPDATES: the run's share of it
        last = parse_updates(lines)
        wall = float(total.read_text()) * updates / last if last else None
    if wall is not None:
        write_text(run_dir / WALL_FILE, f"{wall:.1f}\n")
    write_text(run_dir / "done", f"reused {found[0]}\n")
    logger.info("%s: the budget run's checkpoint at %d updates is this arm's run (%s)", arm.id, updates, found[0])
    return str(found[0])


# ---------------------------------------------------------------------------- main


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = base_parser(PROG, __doc__, UPDATES, MINUTES, f" per {UPDATES} updates, scaled with the budget when not given")
    p.add_argument("extra_tests", nargs="*", metavar="EXTRA_TEST_PREFIX",
                   help="more test sets to score (PREFIX.en, PREFIX.de, untokenized), e.g. "
                   "DATA/wmt14_en_de/test/newstest2014 (DATA: the data root)")
    p.add_argument("--grid", choices=("deciding", "full"), default="deciding",
                   help="deciding (default): at d=128 DeFINE in the paper's form (untied) at n=d/4, d/2, tied to "
                   "its unit and tied at n; projective untied; the Transformers untied and shared at d=96, 128; "
                   "full: every family and output form at d=64, 96, 128 and n=d/4, d/2")
    p.add_argument("--find-budget", action="store_true",
                   help="first find the budget on the Transformer, DeFINE (both styles) and projective at d=128, "
                   "n=d/4 (one run each to the largest of --budgets, scored on val at each, its time cap --minutes "
                   "scaled by the largest budget / the default updates), then run the study with it")
    p.add_argument("--budgets", default=" ".join(map(str, BUDGETS)), metavar='"B1 B2 .."',
                   help=f"the update counts --find-budget compares (default {' '.join(map(str, BUDGETS))})")
    args = p.parse_args(argv)
    set_jobs(args.jobs)

    widths = QUICK["widths"] if args.quick else WIDTHS
    # quick mode takes the full grid for an arm at n = d/2, one the budget runs did not train
    grid = arms_for(widths, args.grid == "full" or args.quick)
    if args.list:
        print_arms(grid)
        return 0
    try:
        budgets = sorted({int(b) for b in args.budgets.split()})
    except ValueError:
        raise UserError(f'--budgets "{args.budgets}": give update counts, e.g. --budgets "1000 2000 4000"') from None
    if args.quick and args.budgets == " ".join(map(str, BUDGETS)):
        budgets = list(QUICK["budgets"])
    multi30k = corpus("multi30k", args)
    workdir, out_dir = resolve_dirs(args, STUDY)
    recipe = list(RECIPE)
    if args.quick:
        i = recipe.index("--warmup-updates")
        recipe[i + 1] = QUICK["warmup"]
    data_dir = workdir / "data"
    prepare(multi30k, data_dir, args.quick, workdir / "prepare.log")
    extras = {Path(x).name: prepare_extra(x, data_dir, args.quick, workdir / "prepare.log") for x in args.extra_tests}
    minutes = args.minutes if args.minutes is not None else (QUICK["minutes"] if args.quick else MINUTES)

    budget_file = workdir / "budget.json"
    if args.find_budget:
        deciding = budget_arms(widths[0] if args.quick else DECIDING_WIDTH)
        # the cap is per --updates' worth of training; the budget runs go to the largest budget
        cap = minutes * max(budgets) / (QUICK["updates"] if args.quick else UPDATES)
        find_budget(deciding, budgets, workdir, data_dir, recipe, cap, out_dir, args.jobs)
    if args.updates:
        updates, source = args.updates, "--updates"
    elif budget_file.is_file():
        updates, source = json.loads(budget_file.read_text())["updates"], "found by --find-budget, budget.md"
    else:
        updates, source = (QUICK["updates"] if args.quick else UPDATES), "the script's default"
    if args.minutes is None:  # the default cap is per the default updates; scale it with the budget
        minutes = minutes * updates / (QUICK["updates"] if args.quick else UPDATES)
    budget = Budget(updates, minutes)
    logger.info("budget: %d updates an arm (%s), at most %g minutes", updates, source, minutes)

    def run_one(arm: Arm, run_dir: Path) -> dict:
        reused = reuse_budget_run(arm, workdir / "budget" / arm.id, run_dir, updates)
        if not reused:
            train_arm(arm, run_dir, data_dir / "bin", recipe, budget)
        ckpt = run_dir / "checkpoint_last.pt"
        metrics = evaluate(run_dir, ckpt, data_dir, extras)
        keep_hypotheses(run_dir, ckpt, out_dir, arm)
        extra = {"checkpoint": ckpt.name, "updates_source": source}
        if reused:
            extra["reused"] = reused
        return record_arm(run_dir, STUDY, arm, recipe, budget, metrics, "valid_loss", extra=extra)

    arms = select_arms(grid, args.arms)
    if args.quick and not args.arms:
        # the Transformer (reused from the budget runs with --find-budget) and a DeFINE arm it did not train
        arms = [arms[0], [a for a in arms if a.family == "DeFINE (paper)"][-1]]
    records = out_dir / "runs"  # each arm's result, committed with the report: the study resumes anywhere
    train = not args.report_only
    results = run_arms(arms, workdir, run_one, budget, args.jobs, records, train)
    if not args.no_second_seed and not args.quick:
        seeds = second_seeds(arms, results, DECIDING_WIDTH)
        seeds += third_seeds(arms, results, DECIDING_WIDTH)
        seeds += recorded_seeds(arms, seeds, records)
        results.update(run_arms(seeds, workdir, run_one, budget, args.jobs, records, train))
        arms = arms + seeds
    arms = [a for a in arms if a.id in results]
    for arm in arms:  # extra test sets given after an arm finished: scored now
        r = results[arm.id]
        run_dir = workdir / arm.id
        if not hypotheses_file(out_dir, arm.id).is_file():  # finished before the study kept them
            keep_hypotheses(run_dir, run_dir / r["checkpoint"], out_dir, arm)
        if any(f"test_{name}_bleu" not in r["metrics"] for name in extras):
            if not (run_dir / r["checkpoint"]).is_file():
                logger.warning("%s: recorded without its checkpoint here; extra test sets not scored", arm.id)
                continue
            r["metrics"].update(evaluate(run_dir, run_dir / r["checkpoint"], data_dir, extras))
            write_text(run_dir / "result.json", json.dumps(r, indent=2) + "\n")

    test_names = ["test_2016_flickr", *extras]
    columns = [("valid_bleu", "val BLEU")]
    for i, name in enumerate(test_names):
        key = "test" if i == 0 else f"test_{name}"
        columns += [(f"{key}_bleu", f"{name} BLEU"), (f"{key}_chrf", f"{name} chrF")]
    report = Report(
        title="Study 1: Multi30k EN-DE, BLEU against parameters"
        + (" (quick mode: not a result)" if args.quick else ""),
        metric="test_bleu",
        metric_label="test_2016_flickr BLEU (detokenized sacreBLEU)",
        higher_is_better=True,
        columns=columns,
        header_lines=[
            f"Recipe (every arm): `{' '.join(recipe)}`, seed 1 unless the seed column says otherwise; "
            f"{updates} updates ({source}); the checkpoint at the last update, beam 4, lenpen 0.6.",
            "Sizes at width d (every arm, `sizes(d)`): 3+3 layers, 4 heads, embeddings d, FFN 4d; "
            "the arm's args (among them `--share-all-embeddings` for the shared forms and "
            "`--define-output-layer`) are its only other difference from the recipe. Params: the paper's "
            "distribution (fairseq-define-results). Val chooses; test sets are only scored.",
        ],
    )
    pairs = deciding_pairs(widths[0] if args.quick else DECIDING_WIDTH)
    deciding = {a.name for pair in pairs for a in pair}
    seeds_run = sorted({a.seed for a in arms if a.name in deciding})
    section = bootstrap_section(pairs, seeds_run, out_dir, data_dir / "raw" / "test.de") if seeds_run else ""
    written = write_report(report, arms, results, budget, out_dir, "valid_loss", workdir, extra_md=section)
    logger.info("written: %s", ", ".join(map(str, written)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main_wrapper(PROG, main))
