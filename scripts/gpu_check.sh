#!/usr/bin/env bash
# The GPU check: what users run on a GPU, in one command, with one summary. Four steps, each
# run whatever the others did, the probe first (a run cut short by a device's time limit still
# has its numbers):
#   probe   benchmarks/gpu_probe.py in bfloat16 within --probe-budget seconds: the training
#           step of each family against the projective map with an A/A arm, whether the step is
#           host-bound, kernel profiles, the unit's fraction of a matmul, the grouped matmuls'
#           alignment (DIR/probe/probe.json, probe.md)
#   tests   tests/test_gpu.py: every model family trains in fp32, fp16 and bf16; generate,
#           interactive, eval-lm, cached tables, the hub, the unique-token path, GPU <-> CPU
#           checkpoints, each against the CPU
#   bench   benchmarks 1-3 of benchmarks/bench_define.py on cuda in bfloat16
#   graphs  (only when asked for: --steps) benchmark 2 again with the units compiled in
#           reduce-overhead mode, rows padded to multiples of 512: the unit as CUDA graphs
#           (bench_define.py --compile reduce-overhead --row-bucket 512), then benchmark 1
#           with each unit compiled the same way; compiling takes a minute or more a model
#           and half a minute or more a unit
#   table3  run_scripts/table3_transformer_wmt14.sh at full-scale settings (both rows,
#           define_transformer_wmt_en_de and its baseline, fp16, --max-tokens 4096 x 8) for a
#           short budget, trained on the WMT news proxy corpus, evaluation capped
#
#   Command:   bash scripts/gpu_check.sh --out DIR           (make gpu-check ARGS="--out DIR")
#              bash scripts/gpu_check.sh --cpu --out DIR     (CI: the same steps at tiny budgets on a CPU)
#   Hardware:  a machine with a CUDA build of torch, this package installed (make setup, or
#              offline from a wheelhouse: scripts/build_wheelhouse.sh) and the data root
#              (--data-root or FAIRSEQ_DEFINE_DATA: PTB, WikiText-2, the WMT news proxy corpus
#              and newstest2013/2014). Target: under 8 minutes on one H100 (not yet measured).
#              --cpu: the probe's --device cpu --quick, the tests' device forced to the CPU
#              (fp16 skips; a subset unless --all-tests), the benchmarks' --quick mode, the
#              recipe's small mode for a few updates.
#   Expected:  every step "pass". The Table 3 rows train a few hundred updates: BLEU is near
#              zero and means nothing; the words/s of each row and the benchmark ratios are
#              the numbers to read. The test column is newstest2013 under the recipe's name
#              newstest2017 (newstest2017 is not in the data root).
#   Output:    DIR/summary.md and DIR/summary.json (each step's status, time and key
#              numbers, the machine), DIR/<step>.log, DIR/probe/ (probe.json, probe.md),
#              DIR/table3/ (the recipe's runs).
#   Exit:      0 when every step passed, 1 when one failed (or passed without the numbers its
#              summary reads: a changed output format), 2 for a bad option.
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/run_scripts/lib.sh"

OUT="" CPU=0 STEPS="probe tests bench table3" PROBE_BUDGET=420 T3_UPDATES="" EVAL_LINES="" PAIRS="" PYTEST_ARGS="" ALL_TESTS=0
WORKERS="${TEST_WORKERS:-}"
usage() {
  script_header
  cat <<EOF
Options:
  --out DIR          where the summary, the logs and the recipe's runs go (required)
  --cpu              the same steps at tiny budgets on the CPU (no GPU needed)
  --steps "S ..."    run these of: probe tests bench graphs table3 (default: probe tests bench table3)
  --probe-budget S   the probe's seconds, imports included (default 420; what would overrun is skipped)
  --updates U        Table 3: training updates per row (default 150; --cpu 6)
  --max-eval-lines N Table 3: evaluate on the first N lines of each split (default 200; --cpu 10)
  --pairs P          Table 3: train on the first P pairs of the proxy corpus (default all 23,739; --cpu 2,000)
  --workers N        pytest-xdist workers of the tests step (default 4; --cpu 2; 0: one process)
  --pytest-args "A"  more pytest arguments for the tests step (e.g. "-k fp32")
  --all-tests        --cpu: every test of the file (default: the LSTM families, the unit and the
                     unique-token path, a few minutes; the whole file takes several times that)
$DATA_USAGE
EOF
}
while [[ $# -gt 0 ]]; do
  data_option "$@"
  if [[ $SHIFT_BY -gt 0 ]]; then shift "$SHIFT_BY"; continue; fi
  case "$1" in
    --out) [[ -n "${2:-}" ]] || die "--out needs a folder"; OUT="$2"; shift 2 ;;
    --cpu) CPU=1; shift ;;
    --steps) STEPS="${2:-}"; shift 2 ;;
    --probe-budget) PROBE_BUDGET="${2:-}"; shift 2 ;;
    --updates) T3_UPDATES="${2:-}"; shift 2 ;;
    --max-eval-lines) EVAL_LINES="${2:-}"; shift 2 ;;
    --pairs) PAIRS="${2:-}"; shift 2 ;;
    --workers) WORKERS="${2:-}"; shift 2 ;;
    --pytest-args) PYTEST_ARGS="${2:-}"; shift 2 ;;
    --all-tests) ALL_TESTS=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ -n "$OUT" ]] || die "--out DIR is required (see --help)"
for s in $STEPS; do
  [[ " probe tests bench graphs table3 " == *" $s "* ]] || die "--steps takes probe, tests, bench, graphs and table3 (got '$s')"
done
[[ -n "$STEPS" ]] || die "--steps needs at least one of: probe tests bench graphs table3"
for v in "$T3_UPDATES" "$EVAL_LINES" "$PAIRS" "$WORKERS"; do
  [[ -z "$v" || "$v" =~ ^[0-9]+$ ]] || die "--updates, --max-eval-lines, --pairs and --workers take a whole number (got '$v')"
done
[[ "$PROBE_BUDGET" =~ ^[1-9][0-9]*$ ]] || die "--probe-budget takes a whole number of seconds (got '$PROBE_BUDGET')"
if [[ $CPU == 1 ]]; then
  T3_UPDATES="${T3_UPDATES:-6}" EVAL_LINES="${EVAL_LINES:-10}" PAIRS="${PAIRS:-2000}" WORKERS="${WORKERS:-2}"
else
  python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
    || die "no CUDA GPU visible to torch $(python3 -c 'import torch; print(torch.__version__)'); run with --cpu for the CPU check"
  T3_UPDATES="${T3_UPDATES:-150}" EVAL_LINES="${EVAL_LINES:-200}" PAIRS="${PAIRS:-0}" WORKERS="${WORKERS:-4}"
fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
STEPS_TSV="$OUT/steps.tsv"
: > "$STEPS_TSV"

# run_step NAME CMD...: runs CMD with its output in OUT/NAME.log, records pass/fail and seconds;
# never stops the script (a failed step is recorded and the next one runs)
run_step() {
  local name="$1" start status rc; shift
  step "$name"
  start=$(date +%s)
  set +e
  ( set -e; "$@" ) > "$OUT/$name.log" 2>&1 < /dev/null
  rc=$?
  set -e
  if [[ $rc == 0 ]]; then status=pass; else status=fail; fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$(( $(date +%s) - start ))" "$rc" >> "$STEPS_TSV"
  echo "  $name: $status (exit $rc) in $(( $(date +%s) - start )) s; log: $OUT/$name.log"
  [[ $status == pass ]] || tail -5 "$OUT/$name.log" | sed 's/^/    /'
}

# the probe (docs/benchmarks.md, "The GPU probe"): its own folder; it writes probe.json after
# every measurement and skips what would overrun its budget
step_probe() {
  local args=(--out "$OUT/probe" --budget "$PROBE_BUDGET")
  if [[ $CPU == 1 ]]; then args+=(--device cpu --quick); else args+=(--device cuda); fi
  python3 "$ROOT/benchmarks/gpu_probe.py" "${args[@]}"
}

step_tests() {
  local device=() xdist=()
  local subset=()
  if [[ $CPU == 1 ]]; then
    device=(env FAIRSEQ_DEFINE_TEST_DEVICE=cpu)
    # on 2 CPU cores the whole file takes many minutes: CI keeps the script working with a few
    # of each kind (training CLIs, eval-lm, in-process) unless --all-tests
    if [[ $ALL_TESTS == 0 ]]; then subset=(-k "lstm or unique or unit_in_bf16"); fi
  fi
  if [[ "$WORKERS" -gt 0 ]]; then xdist=(-n "$WORKERS" --dist load); fi
  cd "$ROOT"
  # -v: each result on its own line as it comes (with xdist a failure's name otherwise waits for
  # the final report, which a run cut off by a device's time limit never prints)
  # shellcheck disable=SC2086  # --pytest-args: space-separated words
  ${device[@]+"${device[@]}"} python3 -m pytest tests/test_gpu.py -v -rfs -p no:cacheprovider --durations=10 \
    --basetemp "$OUT/tests.tmp" ${xdist[@]+"${xdist[@]}"} ${subset[@]+"${subset[@]}"} $PYTEST_ARGS
}

step_bench() {
  local root args
  root="$(data_root)"  # (apart: a failed substitution inside `local x=(...)` would not stop the step)
  args=(--data-root "$root")
  # --cpu: every benchmark in one process (the quick mode's run that tests/test_benchmarks.py
  # makes through this step); on a GPU benchmarks 1-3, each in its own process
  if [[ $CPU == 1 ]]; then
    python3 "$ROOT/benchmarks/bench_define.py" "${args[@]}" --quick --device cpu --dtype float32
    return
  fi
  args+=(--device cuda --dtype bfloat16 --min-run-time 0.5)  # GPU timings settle in far less than the CPU's 2 s
  for b in 1 2 3; do
    python3 "$ROOT/benchmarks/bench_define.py" --only "$b" "${args[@]}" || return
  done
}

step_graphs() {
  local root args
  root="$(data_root)"
  args=(--only 2 --data-root "$root")
  if [[ $CPU == 1 ]]; then args+=(--quick --device cpu --dtype float32 --compile default --row-bucket 16)
  else args+=(--device cuda --dtype bfloat16 --min-run-time 0.5 --compile reduce-overhead --row-bucket 512); fi
  python3 "$ROOT/benchmarks/bench_define.py" "${args[@]}" || return
  # benchmark 1 with each unit compiled: its fraction of the matmul rate once the compiler
  # fuses the elementwise work (on CUDA, reduce-overhead: also replayed as a CUDA graph)
  args=(--only 1)
  if [[ $CPU == 1 ]]; then args+=(--quick --device cpu --dtype float32 --compile default)
  else args+=(--device cuda --dtype bfloat16 --min-run-time 0.5 --compile reduce-overhead); fi
  python3 "$ROOT/benchmarks/bench_define.py" "${args[@]}"
}

# the data root the corpora checks use (--data-root, FAIRSEQ_DEFINE_DATA or the defaults)
data_root() {
  local tests
  tests="$(python3 "$RUN_SCRIPTS/corpora.py" path wmt14-test ${CORPORA_ARGS[@]+"${CORPORA_ARGS[@]}"})" || return
  dirname "$(dirname "$tests")"
}

step_table3() {
  local proxy tests local_dir="$OUT/table3/local" mode=() l
  proxy="$(python3 "$RUN_SCRIPTS/corpora.py" path wmt-news-proxy ${CORPORA_ARGS[@]+"${CORPORA_ARGS[@]}"})"
  tests="$(python3 "$RUN_SCRIPTS/corpora.py" path wmt14-test ${CORPORA_ARGS[@]+"${CORPORA_ARGS[@]}"})"
  mkdir -p "$local_dir"
  for l in en de; do
    if [[ "$PAIRS" -gt 0 ]]; then head -n "$PAIRS" "$proxy/train.$l" > "$local_dir/train.$l"
    else cp "$proxy/train.$l" "$local_dir/train.$l"; fi
    cp "$tests/newstest2014.$l" "$local_dir/newstest2014.$l"
    cp "$tests/newstest2013.$l" "$local_dir/newstest2017.$l"  # the recipe's test name; see the header
  done
  if [[ $CPU == 1 ]]; then local root; root="$(data_root)"; mode=(--small --data-root "$root"); fi
  # the recipe resumes finished rows; a check measures them again (the prepared data is kept)
  rm -rf "$OUT/table3/runs"
  bash "$RUN_SCRIPTS/table3_transformer_wmt14.sh" ${mode[@]+"${mode[@]}"} --local "$local_dir" --updates "$T3_UPDATES" \
    --max-eval-lines "$EVAL_LINES" --minutes 30 --workdir "$OUT/table3/runs" --prepared-dir "$OUT/table3/data"
}

echo "GPU check ($([[ $CPU == 1 ]] && echo "CPU mode" || echo GPU)): steps $STEPS -> $OUT"
for s in $STEPS; do run_step "$s" "step_$s"; done

# the summary: each step's status and time, and the numbers its log holds
SUMMARY_RC=0
python3 - "$OUT" "$ROOT" "$CPU" "$T3_UPDATES" "$EVAL_LINES" "$PAIRS" <<'EOF' || SUMMARY_RC=$?
import json, platform, re, subprocess, sys
from pathlib import Path

out, root, cpu, updates, eval_lines, pairs = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", *map(int, sys.argv[4:])
steps = []
for line in (out / "steps.tsv").read_text().splitlines():
    name, status, seconds, rc = line.split("\t")
    steps.append({"step": name, "status": status, "seconds": int(seconds), "exit": int(rc), "log": f"{name}.log"})


def read(name):
    p = out / f"{name}.log"
    return p.read_text(errors="replace") if p.is_file() else ""


numbers = {}
probe = out / "probe" / "probe.json"
if probe.is_file():
    try:
        p = json.loads(probe.read_text())
    except ValueError:
        p = {}
    if "ratios" in p and "sections" in p:
        numbers["probe"] = {"finished": p["probe"]["finished"], "ratios": p["ratios"],
                            "aa_over_define": {k: s.get("aa_over_define") for k, s in p.get("steps", {}).items()},
                            "host_bound": {f: h.get("host_bound") for f, h in p.get("host_bound", {}).items()},
                            "sections": {s: e["status"] for s, e in p["sections"].items()},
                            "skipped": len(p.get("skipped", []))}
tests = read("tests")
m = re.findall(r"^=*\s*(.*\b(?:passed|failed|error|skipped)\b.*?) in [0-9.]+s", tests, re.M)
if m:
    numbers["tests"] = {"result": m[-1].strip("= ")}
    numbers["tests"]["failed"] = re.findall(r"^FAILED (\S+)", tests, re.M)
    numbers["tests"]["skipped"] = sorted(set(re.findall(r"^SKIPPED \[\d+\] \S+: (.*)$", tests, re.M)))

def train_ratios(log):
    """Benchmark 2's ratios to projective: {section: {variant: ratio}}."""
    ratios, section = {}, None
    for line in log.splitlines():
        if re.match(r"\d+[a-z]?\. ", line):  # a benchmark's heading: benchmark 2's sections, and none after them
            section = line[3:].strip() if line.startswith("2. training step") else None
        m2 = re.match(r"\s+(define\S*)\s+[0-9.]+ ms/step\s+\d+ tokens/s\s+ratio to projective ([0-9.]+)", line)
        if section and m2:
            ratios.setdefault(section, {})[m2.group(1)] = float(m2.group(2))
    return ratios


def unit_fractions(log):
    """Benchmark 1a's rows: the unit's fraction of the matmul rate, its operators, and (where
    measured, else None) the compiled unit's and the CUDA graph's fractions."""
    number = lambda v: None if v == "-" else float(v)
    return [{"style": s, "shape": shape.strip(), "rows": int(r), "fraction": float(f), "ops": int(ops),
             "compiled": number(c), "graph": number(g)}
            for s, shape, r, f, ops, c, g in re.findall(
                r"^(paper|authors)\s+(.+?)\s+(\d+)\s+\d+\s+[0-9.]+\s+[0-9.]+\s+([0-9.]+)\s+(\d+)\s+([0-9.]+|-)\s+([0-9.]+|-)$",
                log, re.M)]


bench = read("bench")
if bench:
    b = numbers["bench"] = {"machine": next(iter(re.findall(r"^machine: (.*)$", bench, re.M)), "")}
    b["1a_unit_fraction_of_matmul"] = unit_fractions(bench)
    b["1b_ours_over_authors_code"] = [float(x) for x in re.findall(r"ms, ratio ([0-9.]+); every token", bench)]
    b["2_train_step_ratio_to_projective"] = train_ratios(bench)
    b["3_cached_over_plain"] = [float(x) for x in re.findall(r"^\s+cached .* ratio ([0-9.]+)$", bench, re.M)]
graphs = read("graphs")
if graphs:
    numbers["graphs"] = {"2_train_step_ratio_to_projective": train_ratios(graphs),
                         "1a_unit_fraction_of_matmul": unit_fractions(graphs),
                         "compile": re.findall(r"torch.compile of the units \((.*)\): first step (\d+) s", graphs)}

runs = out / "table3" / "runs"
if runs.is_dir():
    t3 = numbers["table3"] = {"updates": updates, "max_eval_lines": eval_lines, "train_pairs": pairs or "all", "rows": {}}
    for row in sorted(p for p in runs.iterdir() if p.is_dir()):
        entry = t3["rows"][row.name] = {}
        log = row / "train.log"
        stats = []
        if log.is_file():
            for line in log.read_text(errors="replace").splitlines():
                j = line[line.find("{"):] if "{" in line else ""
                try:
                    rec = json.loads(j) if j else None
                except ValueError:
                    rec = None
                if isinstance(rec, dict) and "train_wps" in rec:
                    stats.append(rec)
        if stats:  # the end-of-training summary: words per second over the whole run
            entry["train_wps"] = float(stats[-1]["train_wps"])
            entry["train_loss"] = float(stats[-1].get("train_loss", "nan"))
        res = row / "result.json"
        if res.is_file():
            r = json.loads(res.read_text())
            entry["metrics"] = r.get("metrics", {})
            entry["params_total"] = r.get("params", {}).get("total")


def version(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout.strip()
    except Exception as e:  # the summary must still be written
        return f"unknown ({e})"


machine = {
    "python": platform.python_version(), "host": platform.node(),
    "torch": version([sys.executable, "-c", "import torch; print(torch.__version__)"]),
    "device": "cpu" if cpu else version([sys.executable, "-c", "import torch; print(torch.cuda.get_device_name())"]),
    "commit": version(["git", "-C", root, "rev-parse", "HEAD"]),
}
# a step that passed but whose log no longer holds its numbers (a changed output format) fails
# the check, so CI sees it
expected = {
    "probe": lambda: numbers["probe"]["finished"],
    "tests": lambda: numbers["tests"]["result"],
    "bench": lambda: all([numbers["bench"]["1a_unit_fraction_of_matmul"], numbers["bench"]["1b_ours_over_authors_code"],
                          numbers["bench"]["2_train_step_ratio_to_projective"], numbers["bench"]["3_cached_over_plain"]]),
    "graphs": lambda: numbers["graphs"]["compile"] and all(
        "define-compiled" in r for r in numbers["graphs"]["2_train_step_ratio_to_projective"].values()) and all(
        u["compiled"] is not None for u in numbers["graphs"]["1a_unit_fraction_of_matmul"] or [{"compiled": None}]),
    "table3": lambda: numbers["table3"]["rows"] and all("train_wps" in e for e in numbers["table3"]["rows"].values()),
}
missing = []
for s in steps:
    try:
        found = s["status"] != "pass" or expected[s["step"]]()
    except KeyError:
        found = False
    if not found:
        missing.append(s["step"])
summary = {"mode": "cpu" if cpu else "gpu", "machine": machine, "steps": steps, "numbers": numbers,
           "numbers_missing": missing, "passed": all(s["status"] == "pass" for s in steps) and not missing}
(out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

def unit_line(u):
    """A benchmark 1a row of the summary: the fractions of the matmul rate it measured."""
    return (f"- 1a {u['style']} unit, {u['shape']}, {u['rows']} rows, fraction of the matmul rate: eager {u['fraction']:.2f} "
            f"({u['ops']} operators)" + "".join(f", {how} {u[key]:.2f}" for how, key in (
                ("compiled", "compiled"), ("eager as a CUDA graph", "graph")) if u[key] is not None))


md = [f"# GPU check ({summary['mode']} mode): {'all steps passed' if summary['passed'] else 'FAILED'}", "",
      f"Machine: {machine['device']}, torch {machine['torch']}, Python {machine['python']}.", "",
      "| step | status | seconds |", "|---|---|---|"]
md += [f"| {s['step']} | {s['status']} | {s['seconds']} |" for s in steps]
if missing:
    md += ["", "Numbers not found in the logs of: " + ", ".join(missing) + " (their output format changed?)."]
if "probe" in numbers:
    pr = numbers["probe"]
    md += ["", "Probe (probe/probe.md; step / projective step, A/A: define_aa / define): "
           + ", ".join(f"{s} {st}" for s, st in pr["sections"].items()) + f"; {pr['skipped']} items skipped."]
    for key, ratios in pr["ratios"].items():
        md.append(f"- {key}: " + ", ".join(f"{a} {v:.3f}" if isinstance(v, float) else f"{a} error" for a, v in ratios.items())
                  + (f"; A/A {pr['aa_over_define'][key]:.3f}" if pr["aa_over_define"].get(key) else ""))
if "tests" in numbers:
    md += ["", f"Tests: {numbers['tests']['result']}."]
    md += [f"- failed: `{t}`" for t in numbers["tests"]["failed"]]
    md += [f"- skipped: {t}" for t in numbers["tests"]["skipped"]]
if "bench" in numbers:
    b = numbers["bench"]
    md += ["", f"Benchmarks ({b['machine']}):"]
    md += [unit_line(u) for u in b["1a_unit_fraction_of_matmul"]]
    md += [f"- 1b ours / the authors' code: {x:.3f}" for x in b["1b_ours_over_authors_code"]]
    for section, ratios in b["2_train_step_ratio_to_projective"].items():
        md += [f"- 2 {section}: " + ", ".join(f"{k} / projective {v:.3f}" for k, v in ratios.items())]
    md += [f"- 3 cached / plain: {x:.3f}" for x in b["3_cached_over_plain"]]
if "graphs" in numbers:
    g = numbers["graphs"]
    md += ["", "Benchmark 2 with the units compiled (" + "; ".join(f"{how}: first step {s} s" for how, s in g["compile"]) + "):"]
    for section, ratios in g["2_train_step_ratio_to_projective"].items():
        md += [f"- 2 {section}: " + ", ".join(f"{k} / projective {v:.3f}" for k, v in ratios.items())]
    md += [unit_line(u) for u in g["1a_unit_fraction_of_matmul"]]
if "table3" in numbers:
    t3 = numbers["table3"]
    md += ["", f"Table 3 recipe, {t3['updates']} updates a row, evaluation on {t3['max_eval_lines']} lines, "
           f"{t3['train_pairs']} training pairs (a pipeline and speed check: BLEU means nothing here):", "",
           "| row | words/s | train loss | metrics |", "|---|---|---|---|"]
    for row, e in t3["rows"].items():
        wps = f"{e['train_wps']:.0f}" if "train_wps" in e else "-"
        loss = f"{e['train_loss']:.3f}" if "train_loss" in e else "-"
        metrics = ", ".join(f"{k} {v}" for k, v in e.get("metrics", {}).items()) or "-"
        md.append(f"| {row} | {wps} | {loss} | {metrics} |")
(out / "summary.md").write_text("\n".join(md) + "\n")
sys.exit(3 if missing else 0)
EOF
echo
cat "$OUT/summary.md"
echo "written: $OUT/summary.md, $OUT/summary.json"
if grep -q $'\tfail\t' "$STEPS_TSV" || [[ $SUMMARY_RC != 0 ]]; then exit 1; fi
