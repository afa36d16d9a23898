# Shared by the paper recipes in run_scripts/ and the examples in examples/: options, the
# corpora (run_scripts/corpora.py: the data root, checksums, downloads), and the
# train -> evaluate -> record loop over a table's rows. Sourced, not run.
#
# A recipe's rows, their architectures and the paper's numbers come from
# fairseq_define/paper_tables.py (`fairseq-define-results rows --table T [--small]`).
set -euo pipefail

RUN_SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$RUN_SCRIPTS/.." && pwd)"
USER_DIR="$ROOT/fairseq_define"
# the project's environment (make setup), when there is one, it is not already active, and
# the Python first on the PATH has no fairseq_define of its own (an active environment that
# has the package, such as another Python's venv of this checkout, keeps its tools; the
# checkout's folder itself is not looked at)
if [[ -x "$ROOT/.venv/bin/fairseq-train" && ":$PATH:" != *":$ROOT/.venv/bin:"* ]] && ! python3 -c '
import importlib.util, sys
sys.path = [p for p in sys.path if p not in ("", ".")]
sys.exit(importlib.util.find_spec("fairseq_define") is None)' 2>/dev/null; then
  PATH="$ROOT/.venv/bin:$PATH"
fi

SCRIPT_NAME="$(basename "$0")"
die() { echo "$SCRIPT_NAME: error: $*" >&2; exit 2; }
step() { echo; echo "==> $*"; }
# the script's header comment (its lines 2.. up to the first line that is not a comment): --help
script_header() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }

# fresh_tmp DEST / fresh_tmpdir DEST: a new file (folder) next to DEST, created exclusively
# under a unique name (never a fixed DEST.tmp that a planted link could redirect) and removed
# when the script exits; write it, then `mv -f` it over DEST (mv -T for a folder)
FRESH_TMPS=()
trap 'rm -rf ${FRESH_TMPS[@]+"${FRESH_TMPS[@]}"}' EXIT
fresh_tmp() {
  local d t
  d="$(dirname "$1")"; mkdir -p "$d"
  t="$(mktemp "$d/.$(basename "$1").XXXXXX")" || die "cannot write into $d"
  chmod 0644 "$t"; FRESH_TMPS+=("$t"); echo "$t"
}
fresh_tmpdir() {
  local d t
  d="$(dirname "$1")"; mkdir -p "$d"
  t="$(mktemp -d "$d/.$(basename "$1").XXXXXX")" || die "cannot write into $d"
  chmod 0755 "$t"; FRESH_TMPS+=("$t"); echo "$t"
}
# within_budget N: N updates, or the --updates budget where that is shorter (and at least 1):
# a save or validation interval longer than the budget leaves a short run of a full-scale
# recipe with no update checkpoint to average and no validation
within_budget() {
  local n="$1"
  if [[ -n "${UPDATES:-}" && "$UPDATES" -lt "$n" ]]; then n="$UPDATES"; fi
  if [[ "$n" -lt 1 ]]; then n=1; fi
  echo "$n"
}
minutes_to_hours() { python3 -c "import sys; print(float(sys.argv[1]) / 60)" "$1"; }

require_commands() {
  local c
  for c in "$@"; do
    command -v "$c" > /dev/null || die "command '$c' not found: run 'make setup' in $ROOT (or install this package) first"
  done
}
require_commands fairseq-train fairseq-preprocess fairseq-define-results python3

# fetch URL DEST: download once, through a fresh temporary file, failing clearly on a broken link
fetch() {
  local url="$1" dest="$2" part
  [[ -s "$dest" ]] && return 0
  part="$(fresh_tmp "$dest")"
  echo "  downloading $url"
  curl -fL --retry 3 --retry-delay 5 -o "$part" "$url" \
    || die "download of $url failed (no network, or the link is broken). Fetch the file yourself into $dest, or pass the local files (see --help)"
  mv -f "$part" "$dest"
}

# corpus_dir SET: the folder of a corpus of run_scripts/corpora.tsv in the data root, checked
# (downloaded with --download); stops with corpora.py's one-line error when it is not there
corpus_dir() {
  python3 "$RUN_SCRIPTS/corpora.py" path "$1" ${CORPORA_ARGS[@]+"${CORPORA_ARGS[@]}"} || exit 2
}

# -- options shared by the table recipes and the examples -------------------------------
SMALL=0
WORKDIR=""
ROWS=""
UPDATES=""
MINUTES=""
LOCAL_DATA=""
PREP_ROOT=""
MAX_EVAL_LINES=0
EXTRA_TRAIN=()
CORPORA_ARGS=()

DATA_USAGE='  --data-root DIR    the corpora (ptb/, wikitext-2/, ...: run_scripts/corpora.tsv); default
                     $FAIRSEQ_DEFINE_DATA, else shared/data next to the checkout, else work/data
  --download         download a missing public corpus into the data root, checked against
                     the published checksums
  --max-eval-lines N evaluate on the first N lines of each split only (quick checks; the
                     result is then not the paper'"'"'s test set)'

# data_option ARGS...: --data-root DIR or --download, the corpora options of every script;
# sets SHIFT_BY to the words it used (0: not one of them)
data_option() {
  SHIFT_BY=2
  case "$1" in
    --data-root) [[ -n "${2:-}" ]] || die "--data-root needs a folder"
                 export FAIRSEQ_DEFINE_DATA="$2"
                 [[ "$2" == /* ]] || FAIRSEQ_DEFINE_DATA="$PWD/$2" ;;
    --download) CORPORA_ARGS=(--download); SHIFT_BY=1 ;;
    *) SHIFT_BY=0 ;;
  esac
}

# shared_option ARGS...: one option that the recipes and the examples share (the corpora
# options, outputs, training length, evaluation slice); sets SHIFT_BY as data_option does
shared_option() {
  data_option "$@"
  [[ $SHIFT_BY -gt 0 ]] && return 0
  SHIFT_BY=2
  case "$1" in
    --workdir) WORKDIR="$2" ;;
    --updates) UPDATES="$2" ;;
    --minutes) MINUTES="$2" ;;
    --max-eval-lines) MAX_EVAL_LINES="$2" ;;
    *) SHIFT_BY=0 ;;
  esac
}

recipe_usage() {
  script_header
  echo "The paper's numbers (fairseq_define/paper_tables.py):"
  fairseq-define-results paper --table "$TABLE" | sed 's/^/  /'
  cat <<EOF
Options:
  --small            the same pipeline on slices of real corpora with tiny models on a CPU
  --rows "A B"       only these rows (ids: fairseq-define-results rows --table $TABLE)
  --workdir DIR      outputs (default work/paper[_small]/table$TABLE); a rerun resumes training
                     from checkpoint_last.pt and skips finished steps
  --local DIR        full scale: the data set's files already on disk (see the data script's --help)
  --prepared-dir DIR where prepared data goes (default work/paper[_small]/data), shared by recipes
  --updates U        training updates per row (small mode default: ${SMALL_UPDATES:-see script})
  --minutes M        training time cap per row (small mode default: ${SMALL_MINUTES:-see script})
$DATA_USAGE
  -- ARGS            extra fairseq-train arguments for every row
EOF
}

parse_recipe_args() {
  while [[ $# -gt 0 ]]; do
    shared_option "$@"
    if [[ $SHIFT_BY -gt 0 ]]; then shift "$SHIFT_BY"; continue; fi
    case "$1" in
      --small) SMALL=1; shift ;;
      --rows) ROWS="$2"; shift 2 ;;
      --local) LOCAL_DATA="$2"; shift 2 ;;
      --prepared-dir) PREP_ROOT="$2"; shift 2 ;;
      -h|--help) recipe_usage; exit 0 ;;
      --) shift; EXTRA_TRAIN=("$@"); break ;;
      *) die "unknown option '$1' (see --help)" ;;
    esac
  done
  # (an `if`, not `$([[ ... ]] && echo)`: an assignment takes a failed substitution's status,
  # which `set -e` turns into a silent exit)
  if [[ $SMALL == 1 ]]; then MODE=small PAPER_DIR="$ROOT/work/paper_small"; else MODE=full PAPER_DIR="$ROOT/work/paper"; fi
  if [[ -z "$WORKDIR" ]]; then
    WORKDIR="$PAPER_DIR/table$TABLE"
  fi
  mkdir -p "$WORKDIR"
  WORKDIR="$(cd "$WORKDIR" && pwd)"
  PREP_ROOT="${PREP_ROOT:-$PAPER_DIR/data}"
  if [[ $SMALL == 1 ]]; then
    UPDATES="${UPDATES:-$SMALL_UPDATES}"
    MINUTES="${MINUTES:-$SMALL_MINUTES}"
    DEVICE_ARGS=(--cpu)
    NUM_GPUS=1
  else
    NUM_GPUS=$(python3 -c "import torch; print(torch.cuda.device_count())")
    [[ "$NUM_GPUS" -gt 0 ]] || die "the full-scale recipe needs CUDA GPUs (none visible); run with --small for the CPU check"
    DEVICE_ARGS=()
    CORPORA_ARGS=(--download)  # full scale fetches what is not in the data root
  fi
  LIMIT_ARGS=()
  [[ -n "$UPDATES" ]] && LIMIT_ARGS+=(--max-update "$UPDATES")
  [[ -n "$MINUTES" ]] && LIMIT_ARGS+=(--stop-time-hours "$(minutes_to_hours "$MINUTES")")
  return 0
}

# table_rows: "id|arch|args|source|compressed" for the selected rows; read them with
# `while IFS='|' read -r id arch args source compressed` ('|' because a tab-separated empty
# field would vanish in `read`)
table_rows() {
  local small=() line
  [[ $SMALL == 1 ]] && small=(--small)
  fairseq-define-results rows --table "$TABLE" "${small[@]}" | tr '\t' '|' | while IFS= read -r line; do
    if [[ -z "$ROWS" || " $ROWS " == *" ${line%%|*} "* ]]; then printf '%s\n' "$line"; fi
  done
}

check_rows_exist() {
  local r ids
  ids=$(fairseq-define-results rows --table "$TABLE" | cut -f1 | tr '\n' ' ')
  for r in $ROWS; do
    [[ " $ids " == *" $r "* ]] || die "Table $TABLE has no row '$r'; its rows: $ids"
  done
}

# train_run DIR DATA_BIN ARCH [fairseq-train args...]: resumable; DIR/done marks a finished run
train_run() {
  local dir="$1" bin="$2" arch="$3"; shift 3
  if [[ -f "$dir/done" ]]; then echo "  $(basename "$dir"): trained (delete $dir/done to train further)"; return 0; fi
  mkdir -p "$dir"
  [[ -f "$dir/checkpoint_last.pt" ]] && echo "  $(basename "$dir"): resuming from checkpoint_last.pt"
  # json logs feed the results tool (curves); a rerun appends to the same log
  fairseq-train "$bin" --user-dir "$USER_DIR" --arch "$arch" "$@" ${LIMIT_ARGS[@]+"${LIMIT_ARGS[@]}"} \
    ${DEVICE_ARGS[@]+"${DEVICE_ARGS[@]}"} --save-dir "$dir" --log-format json --log-interval 100 --seed 1 \
    ${EXTRA_TRAIN[@]+"${EXTRA_TRAIN[@]}"} < /dev/null >> "$dir/train.log" 2>&1 || die "fairseq-train failed for $(basename "$dir"); see $dir/train.log"
  [[ -f "$dir/checkpoint_last.pt" ]] || die "fairseq-train wrote no checkpoint for $(basename "$dir"); see $dir/train.log"
  grep -E '"valid_ppl"' "$dir/train.log" | tail -1 | sed 's/^/  last validation: /' | cut -c1-160 || true
  touch "$dir/done"
}

# record DIR ROW METRIC=VALUE...: the row's result.json, read by `fairseq-define-results table`
record() {
  local dir="$1" row="$2"; shift 2
  local metrics=() m
  for m in "$@"; do metrics+=(--metric "$m"); done
  fairseq-define-results record --table "$TABLE" --row "$row" --run-dir "$dir" --mode "$MODE" "${metrics[@]}"
}

# results: the markdown table (ours beside the paper's) and the validation curves (Figure 6)
results() {
  local curves=() id
  while IFS='|' read -r id _ <&3; do
    [[ -f "$WORKDIR/$id/train.log" ]] && grep -q '"valid_' "$WORKDIR/$id/train.log" && curves+=("$id=$WORKDIR/$id/train.log")
  done 3< <(table_rows)
  step "results (Table $TABLE, $MODE mode)"
  # the run's own report, rebuilt from its rows on every (resumed) run: replaced, as asked
  fairseq-define-results table --table "$TABLE" --workdir "$WORKDIR" --output "$WORKDIR/results.md" --overwrite
  if [[ ${#curves[@]} -gt 0 && -n "${CURVE_METRIC:-}" ]]; then
    fairseq-define-results curves --metric "$CURVE_METRIC" --title "Table $TABLE ($MODE): validation" \
      --output "$WORKDIR/valid_curves.png" --overwrite "${curves[@]}"
  fi
  echo "  written: $WORKDIR/results.md${CURVE_METRIC:+, $WORKDIR/valid_curves.png}"
}

# -- language-model tables -----------------------------------------------------------------
# lm_family NAME: sets DATASET, DATA_DIR, PREP_ARGS, TRAIN_ARGS, EVAL_ARGS and CURVE_METRIC for
# one model family, full scale or small (the hyper-parameters of the paper and its baselines;
# small runs use Adam and short segments: a pipeline check, not a reproduction).
lm_family() {
  local gpus="$NUM_GPUS"
  # a global batch of 60 sequences split over the GPUs (rounded up when it does not divide)
  local per_gpu=$(( (60 + gpus - 1) / gpus ))
  [[ $SMALL == 1 || $(( 60 % gpus )) == 0 ]] || echo "  note: $gpus GPUs x $per_gpu sequences = $(( gpus * per_gpu )) a batch, not 60"
  CURVE_METRIC=valid_ppl
  EVAL_CHECKPOINT=checkpoint_best.pt  # the LSTMs: the best validated (NT-ASGD: averaged) weights
  case "$1" in
    lstm_wt103)  # Table 9: SGD lr 20, BPTT 140, batch 60, 20 epochs, lr / 10 after epoch 15
      DATASET=wikitext-103
      local lrs; lrs="$(printf '20,%.0s' $(seq 15))2"  # fixed schedule: one lr per epoch, the last repeats
      TRAIN_ARGS=(--task contiguous_lm --criterion projected_adaptive_loss --clip-norm 0.25 --no-epoch-checkpoints)
      if [[ $SMALL == 1 ]]; then
        TRAIN_ARGS+=(--tokens-per-sample 35 --batch-size 20 --optimizer adam --lr 2e-3
                     --validate-interval-updates "$(within_budget $(( UPDATES / 5 )))")
      else
        TRAIN_ARGS+=(--tokens-per-sample 140 --batch-size "$per_gpu" --optimizer sgd --lr "$lrs"
                     --lr-scheduler fixed --max-epoch 20)
      fi
      EVAL_ARGS=(--batch-size 1) ;;  # the hidden state carried through the whole split
    txl_wt103)  # Dai et al.'s base: Adam 2.5e-4, cosine over 200K steps, batch 60, tgt = mem = 150
      DATASET=wikitext-103
      EVAL_CHECKPOINT=checkpoint_last.pt  # the end of the cosine schedule, as Dai et al. evaluate
      TRAIN_ARGS=(--task contiguous_lm --criterion projected_adaptive_loss --clip-norm 0.25 --no-epoch-checkpoints)
      if [[ $SMALL == 1 ]]; then
        TRAIN_ARGS+=(--tokens-per-sample 32 --batch-size 16 --optimizer adam --lr 1e-3
                     --validate-interval-updates "$(within_budget $(( UPDATES / 5 )))")
        EVAL_ARGS=(--batch-size 10 --model-overrides "{'tgt_len': 32, 'mem_len': 96, 'clamp_len': 96, 'same_length': True}")
      else
        TRAIN_ARGS+=(--tokens-per-sample 150 --batch-size "$per_gpu" --optimizer adam --lr 2.5e-4
                     --lr-scheduler cosine --max-update 200000 --validate-interval-updates "$(within_budget 4000)"
                     --save-interval-updates "$(within_budget 4000)" --keep-interval-updates 1)
        # Dai et al.'s evaluation: segments of 64, memory 640, clamp 400, same length
        EVAL_ARGS=(--batch-size 10 --model-overrides "{'tgt_len': 64, 'mem_len': 640, 'clamp_len': 400, 'same_length': True}")
      fi ;;
    tlm_wt103)  # fairseq's transformer_lm_wiki103 recipe (README.adaptive_inputs.md): NAG, cosine, 286K updates
      DATASET=wikitext-103
      # fairseq's own task and loss; perplexity's --task contiguous_lm is overridden by EVAL_ARGS' (the last wins)
      TRAIN_ARGS=(--task language_modeling --criterion adaptive_loss --ddp-backend legacy_ddp --sample-break-mode none
                  --no-epoch-checkpoints)
      if [[ $SMALL == 1 ]]; then
        TRAIN_ARGS+=(--tokens-per-sample 64 --batch-size 16 --optimizer adam --lr 1e-3
                     --validate-interval-updates "$(within_budget $(( UPDATES / 5 )))")
        EVAL_ARGS=(--task language_modeling --tokens-per-sample 64 --context-window 32 --batch-size 8)
      else
        # 3072 tokens x 3 accumulated on each of 8 GPUs: --update-freq keeps that batch on fewer
        TRAIN_ARGS+=(--tokens-per-sample 3072 --max-tokens 3072 --update-freq $(( (24 + gpus - 1) / gpus ))
                     --max-update 286000 --lr 1.0 --t-mult 2 --lr-period-updates 270000 --lr-scheduler cosine
                     --lr-shrink 0.75 --warmup-updates 16000 --warmup-init-lr 1e-07 --stop-min-lr 1e-09
                     --optimizer nag --min-lr 0.0001 --clip-norm 0.1 --skip-invalid-size-inputs-valid-test)
        # Baevski & Auli's evaluation: blocks of 3072 tokens, each scored after 2560 of context
        EVAL_ARGS=(--task language_modeling --tokens-per-sample 3072 --context-window 2560 --batch-size 1
                   --softmax-batch 1024)
      fi ;;
    awd_ptb)  # AWD-LSTM: NT-ASGD at lr 30, BPTT 70, batch 20, clip 0.25, AR 2 / TAR 1, 500 epochs
      DATASET=ptb
      TRAIN_ARGS=(--task contiguous_lm --criterion awd_lm_loss --batch-size 20 --clip-norm 0.25 --no-epoch-checkpoints)
      if [[ $SMALL == 1 ]]; then
        # Adam, as every small mode (a pipeline check of 300 updates); the full recipe's NT-ASGD at
        # lr 30 trains DeFINE through --define-unit-grad-scale (docs/stability.md)
        TRAIN_ARGS+=(--tokens-per-sample 35 --optimizer adam --lr 2e-3 --validate-interval-updates "$(within_budget $(( UPDATES / 5 )))")
      else
        TRAIN_ARGS+=(--tokens-per-sample 70 --optimizer nt_asgd --lr-scheduler nt_asgd --lr 30 --nonmono 5
                     --max-epoch 500 --distributed-world-size 1)
      fi
      EVAL_ARGS=(--batch-size 1) ;;
    *) die "unknown model family $1" ;;
  esac
  if [[ $SMALL == 1 ]]; then
    case "$DATASET" in
      wikitext-103) DATA_DIR="$PREP_ROOT/wikitext-2-head"
                    PREP_ARGS=(--dataset wikitext-2 --head-train 6000 --head-eval "${HEAD_EVAL:-400}") ;;
      ptb) DATA_DIR="$PREP_ROOT/ptb"
           PREP_ARGS=(--dataset ptb --head-eval "${HEAD_EVAL:-600}") ;;
    esac
  else
    DATA_DIR="$PREP_ROOT/$DATASET"
    PREP_ARGS=(--dataset "$DATASET")
    [[ -n "$LOCAL_DATA" ]] && PREP_ARGS+=(--local "$LOCAL_DATA")
  fi
  prep_data_args
  return 0
}

# prep_data_args: PREP_ARGS (of prepare_lm.sh) and DATA_DIR for --max-eval-lines and the corpora options
prep_data_args() {
  if [[ $MAX_EVAL_LINES -gt 0 ]]; then DATA_DIR="$DATA_DIR-eval$MAX_EVAL_LINES"; PREP_ARGS+=(--head-eval "$MAX_EVAL_LINES"); fi
  PREP_ARGS+=(${CORPORA_ARGS[@]+"${CORPORA_ARGS[@]}"})
}

# perplexity CKPT SPLIT: fairseq-eval-lm's perplexity of one split; with EVAL_LOG set, its
# whole output is kept there too (e.g. --output-word-probs' scores, for a paired test)
perplexity() {
  local out
  out=$(fairseq-eval-lm "$DATA_DIR/bin" --user-dir "$USER_DIR" --task contiguous_lm --gen-subset "$2" \
        --path "$1" "${EVAL_ARGS[@]}" ${DEVICE_ARGS[@]+"${DEVICE_ARGS[@]}"} 2>&1 < /dev/null) || { echo "$out" | tail -20 >&2; die "fairseq-eval-lm failed on $1"; }
  if [[ -n "${EVAL_LOG:-}" ]]; then printf '%s\n' "$out" > "$EVAL_LOG" || die "cannot write $EVAL_LOG"; fi
  # no token scored (every block longer than the model's positions) prints perplexity 1.00
  if echo "$out" | grep -q "Evaluated 0 tokens"; then die "fairseq-eval-lm scored no token of $2 with $1 (blocks longer than the model's positions?)"; fi
  echo "$out" | sed -n 's/.*Perplexity: \([0-9.]*\).*/\1/p' | tail -1
}

# run_lm_table FAMILY: prepare the data, then train -> evaluate -> record every selected row
run_lm_table() {
  lm_family "$1"
  check_rows_exist
  step "Table $TABLE ($MODE): data ($DATASET${LOCAL_DATA:+, from $LOCAL_DATA})"
  bash "$RUN_SCRIPTS/prepare_lm.sh" --out "$DATA_DIR" "${PREP_ARGS[@]}"
  local id arch args _src _comp dir valid test ckpt
  # the rows come on fd 3: the commands in the loop must not read them from stdin
  while IFS='|' read -r id arch args _src _comp <&3; do
    dir="$WORKDIR/$id"
    step "Table $TABLE row $id: train $arch${args:+ $args}"
    # shellcheck disable=SC2086  # the row's arguments are space-separated words
    train_run "$dir" "$DATA_DIR/bin" "$arch" "${TRAIN_ARGS[@]}" $args
    if [[ ! -f "$dir/result.json" ]]; then
      ckpt="$dir/$EVAL_CHECKPOINT"
      [[ -f "$ckpt" ]] || ckpt="$dir/checkpoint_last.pt"  # a run stopped before its first validation
      valid=$(perplexity "$ckpt" valid)
      test=$(perplexity "$ckpt" test)
      echo "  perplexity: valid $valid, test $test"
      record "$dir" "$id" "valid_ppl=$valid" "test_ppl=$test"
    fi
  done 3< <(table_rows)
  results
}
