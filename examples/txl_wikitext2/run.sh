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
#   Paper:     Table 2 (WikiText-103, 16-layer Transformer-XL, 200K steps on GPUs): at
#              n=128, projective 28.06 / 29.16 and DeFINE 25.43 / 26.33 (val / test ppl).
#
# Data: ../shared/data/wikitext-2 when present, else --data DIR (wiki.{train,valid,test}.tokens),
# else downloaded from the WikiText site (needs a network).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DATA="$ROOT/../shared/data/wikitext-2"
WORKDIR="$ROOT/work/txl_wikitext2"
UPDATES=4000
SCHEDULE=4000
MINUTES=30
URL="https://wikitext.smerity.com/wikitext-2-v1.zip"

usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  cat <<EOF
Options:
  --data DIR        folder with wiki.{train,valid,test}.tokens
  --workdir DIR     outputs (default work/txl_wikitext2); reruns reuse finished steps
  --updates U       training updates per model (default 4000)
  --schedule S      length of the cosine schedule in updates (default 4000), fixed so that
                    runs stopped at different points follow the same learning rates
  --minutes M       training time cap per model (default 30)
EOF
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --data) DATA="$2"; shift 2 ;;
    --workdir) WORKDIR="$2"; shift 2 ;;
    --updates) UPDATES="$2"; shift 2 ;;
    --schedule) SCHEDULE="$2"; shift 2 ;;
    --minutes) MINUTES="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

mkdir -p "$WORKDIR"
if [[ ! -f "$DATA/wiki.train.tokens" ]]; then
  echo "WikiText-2 not found in $DATA: downloading $URL"
  DATA="$WORKDIR/wikitext-2"
  if [[ ! -f "$DATA/wiki.train.tokens" ]]; then
    curl -fL "$URL" -o "$WORKDIR/wikitext-2-v1.zip"
    unzip -q -o "$WORKDIR/wikitext-2-v1.zip" -d "$WORKDIR"
  fi
fi

BIN="$WORKDIR/bin"
if [[ ! -f "$BIN/test.bin" ]]; then
  fairseq-preprocess --only-source --trainpref "$DATA/wiki.train.tokens" \
    --validpref "$DATA/wiki.valid.tokens" --testpref "$DATA/wiki.test.tokens" \
    --destdir "$BIN.tmp" --workers 2
  rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
fi

USER_DIR="$ROOT/fairseq_define"
train() {  # name, extra args...
  local name="$1"; shift
  local dir="$WORKDIR/$name"
  if [[ -f "$dir/done" ]]; then return; fi
  mkdir -p "$dir"
  fairseq-train "$BIN" --user-dir "$USER_DIR" --task contiguous_lm --arch define_txl_small "$@" \
    --tokens-per-sample 64 --batch-size 16 --criterion projected_adaptive_loss \
    --optimizer adam --lr 1e-3 --lr-scheduler cosine --warmup-updates 200 --warmup-init-lr 1e-7 \
    --lr-period-updates "$((SCHEDULE - 200))" \
    --clip-norm 0.25 --max-update "$UPDATES" --stop-time-hours "$(python3 -c "print($MINUTES/60)")" \
    --cpu --save-dir "$dir" --no-epoch-checkpoints --log-format simple --log-interval 200 \
    --seed 1 2>&1 | tee "$dir/train.log"
  touch "$dir/done"
}

evaluate() {  # name, split -> perplexity
  fairseq-eval-lm "$BIN" --user-dir "$USER_DIR" --task contiguous_lm --gen-subset "$2" \
    --path "$WORKDIR/$1/checkpoint_last.pt" --batch-size 10 --cpu 2>&1 \
    | sed -n 's/.*Perplexity: \([0-9.]*\).*/\1/p'
}

train projective
train define --define-transform define

printf '\n%-12s %10s %10s %10s %10s %8s %10s\n' "input" "DeFINE" "context" "in-out" "total" "updates" "val/test"
for name in projective define; do
  dist=$(grep -m1 "paper's distribution" "$WORKDIR/$name/train.log" \
    | sed 's/.*DeFINE \([0-9.]*M\) | context model \([0-9.]*M\) | input-output \([0-9.]*M\) | total \([0-9.]*M\).*/\1 \2 \3 \4/')
  updates=$(grep -o "num_updates [0-9]*" "$WORKDIR/$name/train.log" | tail -1 | cut -d' ' -f2)
  printf '%-12s %10s %10s %10s %10s %8s %10s\n' "$name" $dist "$updates" \
    "$(evaluate "$name" valid) / $(evaluate "$name" test)"
done
