#!/usr/bin/env bash
# LSTM language model on Penn Treebank, on a CPU: the same small AWD-LSTM-style model with a
# projective map, with HGT and with DeFINE at equal n (the comparison of Tables 1 and 6, at
# small scale), trained with AWD-LSTM's loss (AR/TAR) and Adam (the recipes' small mode), or
# AWD-LSTM's NT-ASGD at lr 30 (--optimizer nt_asgd).
#
#   Command:   bash examples/lstm_ptb/run.sh         (after `make setup`; options below)
#   Hardware:  2 CPU cores, no GPU: --updates per model (default 2000, 1.5 epochs of 20 x 35
#              tokens; about 0.3 s each on an idle machine), capped by --minutes (default 30),
#              plus a minute or two of data preparation and evaluation each.
#   Expected:  a table of parameters and validation/test perplexity (fairseq-eval-lm, hidden
#              state carried through the whole split) for define_lstm_small, n=128 -> m=256,
#              2 LSTM layers of 512; docs/language_models.md lists what it printed here.
#   Paper:     Table 1c (AWD-LSTM on PTB, 3 x 1150, 1000 epochs on a GPU) and Table 6
#              (WikiText-103 LSTM, HGT and DeFINE rows): fairseq-define-results paper --table 1c
#              (and --table 6) prints the paper's numbers.
#   Data:      PTB (ptb/ptb.{train,valid,test}.txt) in the data root (--data-root, else
#              $FAIRSEQ_DEFINE_DATA, else run_scripts/corpora.py's defaults); --download
#              fetches Mikolov's archive and checks it. Prepared by run_scripts/prepare_lm.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../run_scripts/lib.sh"

WORKDIR="$ROOT/work/lstm_ptb" UPDATES=2000 MINUTES=30 OPTIMIZER=adam
while [[ $# -gt 0 ]]; do
  shared_option "$@"
  if [[ $SHIFT_BY -gt 0 ]]; then shift "$SHIFT_BY"; continue; fi
  case "$1" in
    --optimizer) OPTIMIZER="$2"; shift 2 ;;
    -h|--help)
      script_header
      printf '%s\n' "Options:" \
        "  --workdir DIR      outputs (default work/lstm_ptb); reruns reuse finished steps" \
        "  --updates U        training updates per model (default 2000)" \
        "  --minutes M        training time cap per model (default 30)" \
        "  --optimizer O      adam (lr 2e-3, default) or nt_asgd (AWD-LSTM: SGD lr 30, then averaging)"
      echo "$DATA_USAGE"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
case "$OPTIMIZER" in
  nt_asgd) OPTIM_ARGS=(--optimizer nt_asgd --lr-scheduler nt_asgd --lr 30 --nonmono 5) ;;
  adam) OPTIM_ARGS=(--optimizer adam --lr 2e-3) ;;
  *) die "--optimizer must be adam or nt_asgd (got '$OPTIMIZER')" ;;
esac
LIMIT_ARGS=(--max-update "$UPDATES" --stop-time-hours "$(minutes_to_hours "$MINUTES")")
DEVICE_ARGS=(--cpu)
EVAL_ARGS=(--batch-size 1)  # one stream, the hidden state carried through the whole split

DATA_DIR="$WORKDIR/data" PREP_ARGS=(--dataset ptb)
prep_data_args
step "data: PTB"
bash "$RUN_SCRIPTS/prepare_lm.sh" --out "$DATA_DIR" "${PREP_ARGS[@]}"

for name in projective hgt define; do
  step "train define_lstm_small --define-transform $name"
  # AWD-LSTM's recipe (clip 0.25, BPTT 35, batch 20, AR 2 / TAR 1), shortened; a rerun
  # resumes from checkpoint_last.pt
  train_run "$WORKDIR/$name" "$DATA_DIR/bin" define_lstm_small --define-transform "$name" \
    --task contiguous_lm --tokens-per-sample 35 --batch-size 20 --criterion awd_lm_loss --clip-norm 0.25 \
    "${OPTIM_ARGS[@]}" --no-epoch-checkpoints
done

step "evaluate (fairseq-eval-lm, checkpoint_best.pt)"
printf '\n%-12s %10s %10s %10s %10s %8s %16s\n' "map" "DeFINE" "context" "in-out" "total" "updates" "val / test ppl"
for name in projective hgt define; do
  log="$WORKDIR/$name/train.log" ckpt="$WORKDIR/$name/checkpoint_best.pt"
  dist=$(grep -m1 "paper's distribution" "$log" \
    | sed 's/.*DeFINE \([0-9.]*M\) | context model \([0-9.]*M\) | input-output \([0-9.]*M\) | total \([0-9.]*M\).*/\1 \2 \3 \4/')
  updates=$(grep -oE 'num_updates": "?[0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  # shellcheck disable=SC2086  # dist: four words
  printf '%-12s %10s %10s %10s %10s %8s %16s\n' "$name" $dist "$updates" \
    "$(perplexity "$ckpt" valid) / $(perplexity "$ckpt" test)"
done
