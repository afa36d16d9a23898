#!/usr/bin/env bash
# LSTM language model on Penn Treebank, on a CPU: the same small AWD-LSTM-style model with a
# projective map, with HGT and with DeFINE at equal n (the comparison of Tables 1 and 6, at
# small scale), trained with AWD-LSTM's loss (AR/TAR) and optimizer (NT-ASGD, SGD at lr 30),
# or with Adam (--optimizer adam).
#
#   Command:   bash examples/lstm_ptb/run.sh         (after `make setup`; options below)
#   Hardware:  2 CPU cores, no GPU: --updates per model (default 2000, 1.5 epochs of 20 x 35
#              tokens; about 0.3 s each on an idle machine), capped by --minutes (default 30),
#              plus a minute or two of data preparation and evaluation each.
#   Expected:  a table of parameters and validation/test perplexity (fairseq-eval-lm, hidden
#              state carried through the whole split) for define_lstm_small, n=128 -> m=256,
#              2 LSTM layers of 512; docs/language_models.md lists what it printed here.
#   Paper:     Table 1c (AWD-LSTM on PTB, 3 x 1150, 1000 epochs on a GPU): AWD-LSTM 61.2 / 58.8,
#              AWD-LSTM + DeFINE 56.5 / 54.2 (val / test ppl); Table 6 (WikiText-103 LSTM):
#              HGT 39.79 / 40.92, DeFINE 36.95 / 38.01.
#
# Data: ../shared/data/ptb when present, else --data DIR (ptb.{train,valid,test}.txt), else
# downloaded from Mikolov's site (needs a network).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DATA="$ROOT/../shared/data/ptb"
WORKDIR="$ROOT/work/lstm_ptb"
MINUTES=30
UPDATES=2000
OPTIMIZER=nt_asgd
URL="http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz"

usage() {
  sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
  printf '%s\n' "Options:" \
    "  --data DIR        folder with ptb.{train,valid,test}.txt" \
    "  --workdir DIR     outputs (default work/lstm_ptb); reruns reuse finished steps" \
    "  --updates U       training updates per model (default 2000)" \
    "  --minutes M       training time cap per model (default 30)" \
    "  --optimizer O     nt_asgd (AWD-LSTM: SGD lr 30, then averaging; default) or adam (lr 2e-3)"
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --data) DATA="$2"; shift 2 ;;
    --workdir) WORKDIR="$2"; shift 2 ;;
    --minutes) MINUTES="$2"; shift 2 ;;
    --updates) UPDATES="$2"; shift 2 ;;
    --optimizer) OPTIMIZER="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

mkdir -p "$WORKDIR"
if [[ ! -f "$DATA/ptb.train.txt" ]]; then
  echo "PTB not found in $DATA: downloading $URL"
  DATA="$WORKDIR/ptb"
  if [[ ! -f "$DATA/ptb.train.txt" ]]; then
    curl -fL "$URL" -o "$WORKDIR/simple-examples.tgz"
    mkdir -p "$DATA"
    tar -xzf "$WORKDIR/simple-examples.tgz" -C "$WORKDIR"
    cp "$WORKDIR"/simple-examples/data/ptb.{train,valid,test}.txt "$DATA/"
  fi
fi

BIN="$WORKDIR/bin"
if [[ ! -f "$BIN/test.bin" ]]; then
  fairseq-preprocess --only-source --trainpref "$DATA/ptb.train.txt" --validpref "$DATA/ptb.valid.txt" \
    --testpref "$DATA/ptb.test.txt" --destdir "$BIN.tmp" --workers 2
  rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
fi

case "$OPTIMIZER" in
  nt_asgd) OPTIM_ARGS=(--optimizer nt_asgd --lr-scheduler nt_asgd --lr 30 --clip-norm 0.25 --nonmono 5) ;;
  adam) OPTIM_ARGS=(--optimizer adam --lr 2e-3 --clip-norm 0.25) ;;
  *) echo "run.sh: --optimizer must be nt_asgd or adam, got $OPTIMIZER" >&2; exit 2 ;;
esac

USER_DIR="$ROOT/fairseq_define"
train() {  # name, transform
  local name="$1" dir="$WORKDIR/$1"
  if [[ -f "$dir/done" ]]; then return; fi
  mkdir -p "$dir"
  # AWD-LSTM's recipe (clip 0.25, BPTT 35, batch 20, AR 2 / TAR 1, NT-ASGD at lr 30), shortened;
  # a rerun resumes from checkpoint_last.pt
  fairseq-train "$BIN" --user-dir "$USER_DIR" --task contiguous_lm --arch define_lstm_small \
    --define-transform "$2" --tokens-per-sample 35 --batch-size 20 --criterion awd_lm_loss \
    "${OPTIM_ARGS[@]}" \
    --max-update "$UPDATES" --stop-time-hours "$(python3 -c "print($MINUTES/60)")" \
    --cpu --save-dir "$dir" --no-epoch-checkpoints --log-format simple --log-interval 200 \
    --seed 1 2>&1 | tee "$dir/train.log"
  touch "$dir/done"
}

evaluate() {  # name, split -> perplexity (batch size 1: one stream, state carried throughout)
  fairseq-eval-lm "$BIN" --user-dir "$USER_DIR" --task contiguous_lm --gen-subset "$2" \
    --path "$WORKDIR/$1/checkpoint_best.pt" --batch-size 1 --cpu 2>&1 \
    | sed -n 's/.*Perplexity: \([0-9.]*\).*/\1/p'
}

train projective projective
train hgt hgt
train define define

printf '\n%-12s %10s %10s %10s %10s %8s %16s\n' "map" "DeFINE" "context" "in-out" "total" "updates" "val / test ppl"
for name in projective hgt define; do
  dist=$(grep -m1 "paper's distribution" "$WORKDIR/$name/train.log" \
    | sed 's/.*DeFINE \([0-9.]*M\) | context model \([0-9.]*M\) | input-output \([0-9.]*M\) | total \([0-9.]*M\).*/\1 \2 \3 \4/')
  updates=$(grep -o "num_updates [0-9]*" "$WORKDIR/$name/train.log" | tail -1 | cut -d' ' -f2)
  printf '%-12s %10s %10s %10s %10s %8s %16s\n' "$name" $dist "$updates" \
    "$(evaluate "$name" valid) / $(evaluate "$name" test)"
done
