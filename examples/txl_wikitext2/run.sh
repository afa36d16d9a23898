#!/usr/bin/env bash
# Transformer-XL on WikiText-2, on a CPU: the projective input-output layer against DeFINE at
# the same n (the comparison of Table 2, at small scale).
#
#   Command:   bash examples/txl_wikitext2/run.sh        (after `make setup`; options below)
#   Hardware:  2 CPU cores, no GPU: about 1 update (16 x 64 tokens) a second on an idle
#              machine; each model trains --updates (default 4000) capped by --minutes
#              (default 30), plus 2-3 minutes of data preparation and evaluation.
#   Expected:  a table of parameters and validation/test perplexity (fairseq-eval-lm with
#              segment memory) for define_txl_small with a projective map and with DeFINE,
#              n=128 -> d=256; docs/language_models.md lists what it printed here.
#   Paper:     Table 2 (WikiText-103, 16-layer Transformer-XL, 200K steps on GPUs), its
#              projective and DeFINE rows at n=128: fairseq-define-results paper --table 2.
#   Data:      WikiText-2 (wikitext-2/wiki.{train,valid,test}.tokens) in the data root
#              (--data-root, else $FAIRSEQ_DEFINE_DATA, else run_scripts/corpora.py's
#              defaults); --download fetches the published zip and checks it. Prepared by
#              run_scripts/prepare_lm.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../run_scripts/lib.sh"

WORKDIR="$ROOT/work/txl_wikitext2" UPDATES=4000 SCHEDULE=4000 MINUTES=30
while [[ $# -gt 0 ]]; do
  shared_option "$@"
  if [[ $SHIFT_BY -gt 0 ]]; then shift "$SHIFT_BY"; continue; fi
  case "$1" in
    --schedule) SCHEDULE="$2"; shift 2 ;;
    -h|--help)
      script_header
      printf '%s\n' "Options:" \
        "  --workdir DIR      outputs (default work/txl_wikitext2); reruns reuse finished steps" \
        "  --updates U        training updates per model (default 4000)" \
        "  --schedule S       length of the cosine schedule in updates (default 4000), fixed so that" \
        "                     runs stopped at different points follow the same learning rates" \
        "  --minutes M        training time cap per model (default 30)"
      echo "$DATA_USAGE"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
LIMIT_ARGS=(--max-update "$UPDATES" --stop-time-hours "$(minutes_to_hours "$MINUTES")")
DEVICE_ARGS=(--cpu)
EVAL_ARGS=(--batch-size 10)

DATA_DIR="$WORKDIR/data" PREP_ARGS=(--dataset wikitext-2)
prep_data_args
step "data: WikiText-2"
bash "$RUN_SCRIPTS/prepare_lm.sh" --out "$DATA_DIR" "${PREP_ARGS[@]}"

for name in projective define; do
  step "train define_txl_small --define-transform $name"
  train_run "$WORKDIR/$name" "$DATA_DIR/bin" define_txl_small --define-transform "$name" \
    --task contiguous_lm --tokens-per-sample 64 --batch-size 16 --criterion projected_adaptive_loss \
    --optimizer adam --lr 1e-3 --lr-scheduler cosine --warmup-updates 200 --warmup-init-lr 1e-7 \
    --lr-period-updates "$((SCHEDULE - 200))" --clip-norm 0.25 --no-epoch-checkpoints
done

step "evaluate (fairseq-eval-lm, checkpoint_last.pt: the end of the cosine schedule)"
printf '\n%-12s %10s %10s %10s %10s %8s %10s\n' "input" "DeFINE" "context" "in-out" "total" "updates" "val/test"
for name in projective define; do
  log="$WORKDIR/$name/train.log" ckpt="$WORKDIR/$name/checkpoint_last.pt"
  dist=$(grep -m1 "paper's distribution" "$log" \
    | sed 's/.*DeFINE \([0-9.]*M\) | context model \([0-9.]*M\) | input-output \([0-9.]*M\) | total \([0-9.]*M\).*/\1 \2 \3 \4/')
  updates=$(grep -oE 'num_updates": "?[0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  # shellcheck disable=SC2086  # dist: four words
  printf '%-12s %10s %10s %10s %10s %8s %10s\n' "$name" $dist "$updates" \
    "$(perplexity "$ckpt" valid) / $(perplexity "$ckpt" test)"
done
