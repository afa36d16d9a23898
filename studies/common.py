"""What the three studies share: where the data is, training an arm through the recipes'
library (run_scripts/lib.sh: ``train_run``, ``perplexity``), one result.json an arm, and the
report (a markdown table, quality against parameters per family, validation curves).

An arm is one model trained with the study's common recipe; ``Arm.args`` are its only
differences from the others (the model's sizes), and the report prints them. A finished arm
has ``WORKDIR/<arm>/result.json`` and is skipped by the next invocation; an arm cut short
resumes from fairseq's checkpoint_last.pt (lib.sh's ``train_run``).
"""

import argparse
import json
import logging
import math
import os
import re
import shlex
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from fairseq_define.denormals import ENV as FLUSH_ENV
from fairseq_define.errors import UserError, cli_error
from fairseq_define.output_files import atomic_write, write_text
from fairseq_define.tools.curves import plot_points
from fairseq_define.tools.result_records import checkpoint_params
from fairseq_define.tools.train_log import parse_params, parse_updates, validation_curve

logger = logging.getLogger("studies")

ROOT = Path(__file__).resolve().parent.parent
LIB_SH = ROOT / "run_scripts" / "lib.sh"
sys.path.insert(0, str(ROOT / "run_scripts"))
import corpora  # noqa: E402  (the data root and the corpora's checksums)

RESULT_FILE = "result.json"
WALL_FILE = "wall_seconds"  # training seconds summed over the invocations that trained the arm
# 1 while every invocation that trained the arm flushed subnormal floats, else 0: a time an update
# is the unit's only if none kept them (a saturated LSTM then steps several times slower)
FLUSH_FILE = "flush_denormal"
DPI = 100


def corpus(dataset: str, args) -> Path:
    """The folder holding ``dataset`` (a set of run_scripts/corpora.tsv), checked against its
    published checksums: --data-root, else $FAIRSEQ_DEFINE_DATA, else the default locations;
    fetched into the data root with --download. The one place the studies look for data."""
    try:
        return corpora.locate(dataset, args.data_root, download=args.download)
    except corpora.DataError as e:
        raise UserError(str(e)) from None


@dataclass
class Arm:
    """One model of a study: ``args`` (its sizes) are all that differ from the other arms."""

    name: str  # e.g. define_paper_d128_n32
    family: str  # one curve of the plot, e.g. "DeFINE (paper)"
    arch: str
    args: Tuple[str, ...]
    width: int  # d (model width), for the table
    n: int  # map width n (n = d for a standard table)
    seed: int = 1
    sized: int = 0  # how many leading args are the width's sizes (shown once, above the table)

    @property
    def id(self) -> str:
        return self.name if self.seed == 1 else f"{self.name}_s{self.seed}"

    def with_seed(self, seed: int) -> "Arm":
        return Arm(self.name, self.family, self.arch, self.args, self.width, self.n, seed, self.sized)


SEED_SUFFIX = re.compile(r"^(?P<name>.+)_s(?P<seed>[0-9]+)$")  # an arm's id beyond seed 1: NAME_sN


def select_arms(arms: Sequence[Arm], names: Optional[str]) -> List[Arm]:
    """``--arms "a b"``: only these (by name or id), in the study's order, seed by seed; an
    arm's id with ``_sN`` (N >= 2) names its seed N, so that one can be run on its own (in
    another process)."""
    if not names:
        return list(arms)
    wanted = names.split()
    by_name = {a.name: a for a in arms}
    picked, unknown = {}, []
    for w in wanted:
        m = SEED_SUFFIX.match(w)
        if w in by_name:
            picked[w] = by_name[w]
        elif m and m["name"] in by_name and int(m["seed"]) >= 2:
            picked[w] = by_name[m["name"]].with_seed(int(m["seed"]))
        else:
            unknown.append(w)
    if unknown:
        raise UserError(f"unknown arm {', '.join(unknown)}; this study's arms: {' '.join(a.id for a in arms)} "
                        "(ARM_sN, N >= 2: its seed N)")
    order = {a.name: i for i, a in enumerate(arms)}
    return sorted(picked.values(), key=lambda a: (a.seed, order[a.name]))


# ---------------------------------------------------------------------------- lib.sh bridge


def _bash_array(name: str, values: Sequence[str]) -> str:
    return f"{name}=({' '.join(shlex.quote(str(v)) for v in values)})"


def subprocess_env() -> Dict[str, str]:
    """The environment of a study's subprocesses: the venv's tools first on PATH, and subnormal
    floats flushed to zero unless the caller set FLUSH_ENV (fairseq_define/denormals.py: a CPU
    computes with them many times slower, and an LSTM with saturated gates makes them)."""
    env = dict(os.environ)
    venv_bin = ROOT / ".venv" / "bin"
    if venv_bin.is_dir():
        env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault(FLUSH_ENV, "1")
    return env


def flushing() -> bool:
    """Whether this invocation's training subprocesses flush subnormal floats."""
    return subprocess_env()[FLUSH_ENV] == "1"


def note_flush(run_dir: Path) -> None:
    """FLUSH_FILE after one more training invocation of the arm in ``run_dir``: stays 1 only
    while this one flushes subnormals too."""
    flush = run_dir / FLUSH_FILE
    before = flush.read_text().strip() if flush.is_file() else "1"
    write_text(flush, "1\n" if before == "1" and flushing() else "0\n")


def flushed_throughout(run_dir: Path) -> bool:
    """Whether every training invocation of the arm flushed subnormals (FLUSH_FILE; a run
    trained before that file existed: this invocation's setting, as records said then)."""
    flush = run_dir / FLUSH_FILE
    if flush.is_file():
        return flush.read_text().strip() == "1"
    return flushing()


def lib_sh(function: str, args: Sequence[str], arrays: Dict[str, Sequence[str]], scalars: Dict[str, str] = None,
           capture: bool = False, prog: str = "studies") -> str:
    """Run FUNCTION of run_scripts/lib.sh (sourced, as the recipes do) with its variables set:
    ``arrays`` and ``scalars`` become bash arrays and variables. Returns stdout when captured;
    a failure raises UserError with lib.sh's own message (it names the log to read)."""
    setup = [_bash_array(k, v) for k, v in arrays.items()]
    setup += [f"{k}={shlex.quote(str(v))}" for k, v in (scalars or {}).items()]
    script = 'lib="$1"; shift; source "$lib"; ' + "; ".join(setup) + f'; {function} "$@"'
    proc = subprocess.run(["bash", "-c", script, prog, str(LIB_SH), *map(str, args)], env=subprocess_env(),
                          stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
        raise UserError(lines[-1] if lines else f"lib.sh {function} failed (exit {proc.returncode})")
    if proc.stderr.strip():
        logger.debug(proc.stderr.strip())
    return proc.stdout if capture else ""


def run_script(script: str, args: Sequence[str], log: Path) -> None:
    """One of run_scripts/*.sh (data preparation, evaluation), its output appended to LOG."""
    env = subprocess_env()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as out:
        proc = subprocess.run(["bash", str(ROOT / "run_scripts" / script), *map(str, args)], env=env,
                              stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise UserError(f"run_scripts/{script} failed; see {log}")


@dataclass
class Budget:
    updates: int
    minutes: float  # a cap for slower machines; an arm it stops is reported (updates column)


def resume_points(recipe: Sequence[str], extra: Sequence[str] = ()) -> List[str]:
    """fairseq-train arguments that save checkpoint_last.pt at each of the recipe's validations,
    so a cut run resumes from its last validation, not from its last epoch end (an epoch of
    WikiText-2 is 1,492 LSTM updates, about half an hour on a CPU). Only at the validations'
    own updates: fairseq validates whenever it saves, so a save anywhere else would add
    validations to the curve; there it adds nothing but the files (the newest one kept).
    None where the recipe validates at epoch ends only, or the caller chooses its own saves."""
    args = [*recipe, *extra]
    if "--save-interval-updates" in args or "--validate-interval-updates" not in args:
        return []
    last = max(i for i, a in enumerate(args) if a == "--validate-interval-updates")  # as argparse: the last wins
    every = args[last + 1]
    return ["--save-interval-updates", str(every), "--keep-interval-updates", "1"]


def train_arm(arm: Arm, run_dir: Path, data_bin: Path, recipe: Sequence[str], budget: Budget,
              extra: Sequence[str] = ()) -> None:
    """lib.sh's train_run (resumes from checkpoint_last.pt; run_dir/done marks a finished
    run): the study's recipe, the arm's sizes, its seed; wall time summed into WALL_FILE."""
    if (run_dir / "done").is_file():
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    note_flush(run_dir)
    start = time.monotonic()
    try:
        out = lib_sh(
            "train_run",
            [run_dir, data_bin, arm.arch, *recipe, *arm.args],
            arrays={
                "DEVICE_ARGS": ["--cpu"],
                "LIMIT_ARGS": ["--max-update", str(budget.updates), "--stop-time-hours", f"{budget.minutes / 60:.6f}"],
                # after train_run's own --seed 1 and --log-interval 100: these win
                "EXTRA_TRAIN": ["--seed", str(arm.seed), "--log-interval", "50", *resume_points(recipe, extra),
                                *extra],
            },
            capture=True,
        )
        for line in out.splitlines():  # train_run's notes: resuming, the last validation
            if line.strip():
                logger.info("%s: %s", arm.id, line.strip())
    finally:
        spent = time.monotonic() - start
        wall = run_dir / WALL_FILE
        before = float(wall.read_text()) if wall.is_file() else 0.0
        write_text(wall, f"{before + spent:.1f}\n")


def lm_perplexity(checkpoint: Path, data_dir: Path, split: str, eval_args: Sequence[str],
                  log: Optional[Path] = None) -> float:
    """lib.sh's ``perplexity``: fairseq-eval-lm on one split of DATA_DIR/bin; its whole
    output also goes to ``log`` when given (EVAL_LOG)."""
    scalars = {"DATA_DIR": str(data_dir), **({"EVAL_LOG": str(log)} if log is not None else {})}
    out = lib_sh("perplexity", [checkpoint, split],
                 arrays={"EVAL_ARGS": list(eval_args), "DEVICE_ARGS": ["--cpu"]},
                 scalars=scalars, capture=True)
    try:
        return float(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise UserError(f"fairseq-eval-lm printed no perplexity for {checkpoint} on {split}") from None


# ---------------------------------------------------------------------------- result.json


def arm_params(run_dir: Path) -> Optional[Dict[str, float]]:
    """The paper's distribution (millions): the training log's line, else counted on the
    checkpoint (fairseq's own architectures log none), as fairseq-define-results record does."""
    log = run_dir / "train.log"
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []
    params = parse_params(lines)
    if params is None and (run_dir / "checkpoint_last.pt").is_file():
        params = checkpoint_params(str(run_dir / "checkpoint_last.pt"))
    return params


def record_arm(run_dir: Path, study: str, arm: Arm, recipe: Sequence[str], budget: Budget, metrics: Dict[str, float],
               curve_metric: str, extra: Dict = None) -> dict:
    log = run_dir / "train.log"
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []
    try:
        curve = validation_curve(str(log), curve_metric)
    except UserError:
        curve = []
    wall = run_dir / WALL_FILE
    result = {
        "study": study,
        "arm": arm.id,
        **{k: v for k, v in asdict(arm).items() if k not in ("args", "sized")},
        "args": list(arm.args),
        "recipe": list(recipe),
        "budget": asdict(budget),
        "params": arm_params(run_dir),
        "updates": parse_updates(lines),
        "wall_minutes": round(float(wall.read_text()) / 60, 2) if wall.is_file() else None,
        "valid_curve": {"metric": curve_metric, "points": curve},
        "metrics": metrics,
        "flush_denormal": flushed_throughout(run_dir),
        **(extra or {}),
    }
    write_text(run_dir / RESULT_FILE, json.dumps(result, indent=2) + "\n")
    return result


def load_result(run_dir: Path) -> Optional[dict]:
    path = run_dir / RESULT_FILE
    if not path.is_file():
        return None
    return load_result_file(path)


def load_result_file(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise UserError(f"{path} is not valid JSON ({e}); delete it and run the study again to redo that arm") from None


def best_per_family(arms: Sequence[Arm], results: Dict[str, dict], families: Sequence[str], metric: str,
                    higher_is_better: bool) -> List[Arm]:
    """The best finished arm (on ``metric``, a validation score) of each of ``families`` (a
    family name or its start: "DeFINE" takes both unit styles): the points that decide a
    comparison, which get a second seed."""
    picks = []
    for family in families:
        done = [a for a in arms if a.family.startswith(family) and a.id in results]
        if done:
            score = lambda a: results[a.id]["metrics"][metric]  # noqa: E731
            picks.append(max(done, key=score) if higher_is_better else min(done, key=score))
    return picks


def recorded_seeds(arms: Sequence[Arm], chosen: Sequence[Arm], records: Path) -> List[Arm]:
    """Seeds beyond the first (ARM_sN.json, N >= 2) recorded in ``records`` beyond those
    ``chosen`` now, seed by seed: a seed run when another arm led on validation stays in the
    report (it is a result, whichever arm leads today)."""
    taken = {a.id for a in chosen}
    by_name = {a.name: a for a in arms if a.seed == 1}
    found = []
    for path in sorted(records.glob("*_s*.json")) if records.is_dir() else ():
        m = SEED_SUFFIX.match(path.stem)
        if m and m["name"] in by_name and int(m["seed"]) >= 2 and path.stem not in taken:
            found.append(by_name[m["name"]].with_seed(int(m["seed"])))
    order = {name: i for i, name in enumerate(by_name)}
    return sorted(found, key=lambda a: (a.seed, order[a.name]))


def each(items: Sequence, fn: Callable, jobs: int = 1, desc: str = "arms", name=str) -> List:
    """fn(item) for every item, JOBS at a time (threads waiting on the training subprocesses),
    results in the items' order; a tqdm bar counts the finished ones. The first error stops
    the items not yet started and is raised once the running ones end."""
    from concurrent.futures import ThreadPoolExecutor

    from tqdm import tqdm

    bar = tqdm(total=len(items), desc=desc, unit=desc.rstrip("s") or "item", disable=None)
    if jobs <= 1:
        out = []
        for item in items:
            bar.set_postfix_str(name(item))
            out.append(fn(item))
            bar.update()
        bar.close()
        return out

    def one(item):
        try:
            return fn(item)
        finally:
            bar.update()

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(one, item) for item in items]
        try:
            out = [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        finally:
            bar.close()
    return out


def set_jobs(jobs: int) -> None:
    """--jobs N: N training subprocesses at a time, each given the machine's cores / N threads
    (OMP_NUM_THREADS and MKL_NUM_THREADS, unless already set), so they do not oversubscribe."""
    if jobs < 1:
        raise UserError(f"--jobs {jobs}: give 1 or more")
    if jobs > 1:
        threads = str(max(1, (os.cpu_count() or 1) // jobs))
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, threads)
        logger.info("--jobs %d: %d arms at a time, %s thread(s) each", jobs, jobs, os.environ["OMP_NUM_THREADS"])


def training_threads() -> int:
    """The threads a training subprocess computes on: OMP_NUM_THREADS as :func:`set_jobs` (or
    the caller) set it, else torch's default, which this process shares (its own count may
    differ: torch reads the variable once, at its first use here)."""
    import torch

    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else torch.get_num_threads()


def run_arms(arms: Sequence[Arm], workdir: Path, run_one: Callable[[Arm, Path], dict],
             budget: Optional[Budget] = None, jobs: int = 1, records: Optional[Path] = None,
             train: bool = True) -> Dict[str, dict]:
    """Each arm once: skipped when its result.json exists, else run_one(arm, dir) trains,
    evaluates and records it; JOBS arms at a time. Progress on the log and a tqdm bar.
    ``records``: a folder kept with the report (committed), where each finished arm's result
    is copied as ARM.json; an arm recorded there is done even where its work folder is gone
    (another machine, a wiped work folder), so a long study resumes across sessions.
    ``train`` False (--report-only): an arm without a result is left out, not trained."""

    if records is not None:
        records.mkdir(parents=True, exist_ok=True)

    def one(arm: Arm) -> dict:
        run_dir = workdir / arm.id
        result = load_result(run_dir)
        record = records / f"{arm.id}.json" if records is not None else None
        if result is None and record is not None and record.is_file():
            result = load_result_file(record)
            logger.info("%s: done (recorded in %s), skipped", arm.id, record)
        elif result is not None and record is not None and not record.is_file():
            write_text(record, json.dumps(result, indent=2) + "\n")
        if result is not None:
            logger.info("%s: done (%s), skipped", arm.id, run_dir / RESULT_FILE)
            if budget is not None and result.get("budget") != asdict(budget):
                logger.warning("%s: trained under another budget (%s); delete %s to train it under this one",
                               arm.id, result.get("budget"), run_dir)
            return result
        if not train:
            logger.warning("%s: not run yet, left out of the report (--report-only)", arm.id)
            return None
        logger.info("%s: training %s %s (seed %d; log %s)", arm.id, arm.arch, " ".join(arm.args), arm.seed,
                    run_dir / "train.log")
        result = run_one(arm, run_dir)
        if record is not None:
            write_text(record, json.dumps(result, indent=2) + "\n")
        logger.info("%s: %s", arm.id, ", ".join(f"{k} {v:.2f}" for k, v in result["metrics"].items()))
        return result

    done = zip((a.id for a in arms), each(list(arms), one, jobs, name=lambda a: a.id))
    return {arm_id: result for arm_id, result in done if result is not None}


# ---------------------------------------------------------------------------- report


@dataclass
class Report:
    title: str
    metric: str  # the valid/test metric plotted against parameters, e.g. test_bleu
    metric_label: str
    higher_is_better: bool
    columns: Sequence[Tuple[str, str]]  # (metric key, header)
    header_lines: Sequence[str] = field(default_factory=list)  # recipe, hardware, paper


def _fmt(value, digits=2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def markdown(report: Report, arms: Sequence[Arm], results: Dict[str, dict], budget: Budget) -> str:
    lines = [f"# {report.title}", "", *report.header_lines, ""]
    head = ["arm", "family", "d", "n", "seed", "arm's args", "DeFINE (M)", "context (M)", "input-output (M)",
            "total (M)", "updates", "wall (min)", *[h for _, h in report.columns]]
    lines += ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 6 + ["---:"] * (len(head) - 6)) + "|"]
    short, other = [], []
    for arm in arms:
        r = results.get(arm.id)
        own = " ".join(arm.args[arm.sized:])
        cells = [arm.id, arm.family, str(arm.width), str(arm.n), str(arm.seed), f"`{own}`" if own else "-"]
        if r is None:
            cells += ["not run"] + ["-"] * (len(head) - 7)
        else:
            p = r.get("params") or {}
            cells += [_fmt(p.get(k)) for k in ("define", "context", "input_output", "total")]
            cells += [_fmt(r.get("updates")), _fmt(r.get("wall_minutes"), 1)]
            cells += [_fmt(r["metrics"].get(k)) for k, _ in report.columns]
            if r.get("updates") is not None and r["updates"] < r["budget"]["updates"]:
                short.append(f"{arm.id} ({r['updates']} of {r['budget']['updates']})")
            if r["budget"]["updates"] != budget.updates:
                other.append(f"{arm.id} ({r['budget']['updates']})")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Budget: {budget.updates} updates an arm, capped at {budget.minutes:.3g} minutes of training."]
    if short:
        lines.append("Stopped by the time cap before the budget: " + ", ".join(short) + ".")
    if other:
        lines.append("Trained under another budget (kept from an earlier invocation; delete the arm's folder to "
                     "train it again): " + ", ".join(other) + ".")
    return "\n".join(lines) + "\n"


def pareto_plot(report: Report, arms: Sequence[Arm], results: Dict[str, dict], output: Path) -> None:
    """report.metric against total parameters, one line per family through the seeds' means
    (the Pareto view); each seed's run a dot."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.8), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    families: Dict[str, Dict[str, List[Tuple[float, float]]]] = {}
    for arm in arms:
        r = results.get(arm.id)
        value = None if r is None else r["metrics"].get(report.metric)
        total = None if r is None else (r.get("params") or {}).get("total")
        if value is None or total is None:
            continue
        families.setdefault(arm.family, {}).setdefault(arm.name, []).append((total, value))
    for family, configs in families.items():
        means = sorted(
            (sum(p for p, _ in pts) / len(pts), sum(v for _, v in pts) / len(pts)) for pts in configs.values()
        )
        line, = ax.plot(*zip(*means), marker="o", label=family)
        seeds = [pt for pts in configs.values() if len(pts) > 1 for pt in pts]
        if seeds:
            ax.scatter(*zip(*seeds), s=12, color=line.get_color(), alpha=0.5)
    ax.set_xlabel("parameters (millions, the paper's count)")
    ax.set_ylabel(report.metric_label)
    ax.set_title(textwrap.fill(report.title, 70), fontsize=9)
    ax.grid(True, alpha=0.3)
    if families:
        ax.legend(fontsize=8)
    fig.subplots_adjust(left=0.12, right=0.96, top=0.88, bottom=0.12)
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(output, lambda f: fig.savefig(f, dpi=DPI, format="png"), overwrite=True)


def write_report(report: Report, arms: Sequence[Arm], results: Dict[str, dict], budget: Budget, out_dir: Path,
                 curve_metric: str, workdir: Path, extra_md: str = "") -> List[Path]:
    """OUT_DIR/results.md, OUT_DIR/params_vs_quality.png and OUT_DIR/valid_curves.png."""
    out_dir.mkdir(parents=True, exist_ok=True)
    table = out_dir / "results.md"
    write_text(table, markdown(report, arms, results, budget) + extra_md)
    pareto = out_dir / "params_vs_quality.png"
    pareto_plot(report, arms, results, pareto)
    written = [table, pareto]
    points = {}  # each arm's curve from its train log, else from its record (the log is not committed)
    for arm in arms:
        if arm.id not in results:
            continue
        log = workdir / arm.id / "train.log"
        recorded = results[arm.id].get("valid_curve") or {}
        if log.is_file():
            try:
                points[arm.id] = validation_curve(str(log), curve_metric)
                continue
            except UserError:
                pass
        if recorded.get("metric") == curve_metric and recorded.get("points"):
            points[arm.id] = [tuple(p) for p in recorded["points"]]
    if points:
        curves = out_dir / "valid_curves.png"
        plot_points(points, str(curves), metric=curve_metric, title=textwrap.fill(f"{report.title}: validation", 55),
                    overwrite=True)
        written.append(curves)
    return written


# ---------------------------------------------------------------------------- command line


def base_parser(prog: str, doc: str, default_updates: int, default_minutes: float,
                minutes_note: str = "") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--data-root",
        help=f"folder with the corpora (default ${corpora.ENV}, else the default locations of run_scripts/corpora.py)",
    )
    p.add_argument("--download", action="store_true", help="fetch a missing corpus into the data root, checked against "
                   "run_scripts/corpora.tsv")
    p.add_argument("--workdir", help="runs go to WORKDIR/<arm>; a rerun skips finished arms and resumes a cut one "
                   "(default work/studies/<study>[_quick])")
    p.add_argument("--out", help="where results.md and the plots go (default docs/studies/<study>; "
                   "quick mode: WORKDIR/report)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing report in --out (default: refuse)")
    p.add_argument("--arms", help='only these arms, space-separated names (default: all; the table lists them)')
    p.add_argument("--updates", type=int, help=f"training updates an arm (default {default_updates})")
    p.add_argument("--minutes", type=float, default=None,
                   help=f"training time cap an arm, for slower machines (default {default_minutes:g}{minutes_note})")
    p.add_argument("--no-second-seed", action="store_true",
                   help="skip the second seed of the points that decide the comparison")
    p.add_argument("--report-only", action="store_true",
                   help="train nothing: write the report from the arms already recorded (runs/ or the workdir), "
                   "leaving out those not run yet")
    p.add_argument("--quick", action="store_true",
                   help="a pipeline check: two arms, a few updates, tiny data slices (~1 minute); not a result")
    p.add_argument("--list", action="store_true", help="print the arms and their arguments, then exit")
    p.add_argument("--jobs", type=int, default=1,
                   help="train this many arms at a time, each on the cores / JOBS threads (default 1: one arm on "
                   "all cores); small models use 2 cores better as 2 one-thread runs")
    return p


def resolve_dirs(args, study: str) -> Tuple[Path, Path]:
    suffix = "_quick" if args.quick else ""
    workdir = Path(args.workdir or ROOT / "work" / "studies" / f"{study}{suffix}").resolve()
    out = (
        Path(args.out).resolve()
        if args.out
        else (workdir / "report" if args.quick else ROOT / "docs" / "studies" / study)
    )
    # the one rule for outputs: an existing report is replaced only when asked (the quick mode's
    # report lives in its own work folder and is rebuilt on every resume)
    if (out / "results.md").exists() and not args.overwrite and out != workdir / "report":
        raise UserError(f"{out / 'results.md'} exists (a study report): pass --out DIR for a new one, or --overwrite "
                        "to replace it")
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir, out


def print_arms(arms: Sequence[Arm]) -> None:
    for arm in arms:
        print(f"{arm.id}\t{arm.family}\t{arm.arch} {' '.join(arm.args)}")


def main_wrapper(prog: str, main: Callable[[Optional[Sequence[str]]], int], argv=None) -> int:
    """Logging to stderr; a UserError is one line and exit status 2, no traceback."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(name)s | %(message)s", datefmt="%H:%M:%S",
                        stream=sys.stderr)
    try:
        return main(argv)
    except UserError as e:
        return cli_error(prog, e)
    except KeyboardInterrupt:
        return cli_error(prog, "interrupted; run the same command again to resume")
