#!/usr/bin/env bash
# Table 3: Transformer base against Transformer + DeFINE (n=128, k=1024, m=512, N=3) on WMT14
# English-German. The paper's rows use no checkpoint averaging; this recipe scores the best
# checkpoint (the paper's setting) and the average of the last five, both labelled.
#
#   Command:   bash run_scripts/table3_transformer_wmt14.sh            (full scale, 8 GPUs)
#              bash run_scripts/table3_transformer_wmt14.sh --small    (CPU check, ~21 minutes)
#   Hardware:  full: 8 GPUs (fewer: the same batch by --update-freq), 100K updates of 8 x 4096
#              tokens in fp16, about a day on V100-class GPUs; data preparation 1-3 hours.
#              Small: 2 CPU cores; the 23,739-pair WMT news proxy corpus (wmt-news-proxy of
#              run_scripts/corpora.tsv, in the data root: --data-root) (8K BPE merges), 3+3-layer d=128 models, 300 updates each, validated on
#              the first 1,000 lines of newstest2013 and tested on all 3,003 lines of
#              newstest2014 (output length capped at 1.2 x source + 10: an undertrained
#              model otherwise repeats itself to 200 tokens).
#   Paper:     fairseq-define-results paper --table 3 (also printed by --help).
#   Expected:  full: DeFINE on par with or above the baseline with fewer parameters
#              (sacreBLEU is detokenized and about a point below tokenized BLEU). Both rows are
#              built as the paper's: a table (DeFINE map and unit) per side and an untied
#              d-wide output layer, no --share-all-embeddings. The paper's 92M / 68M have
#              separate ~31K vocabularies (fairseq-define-params --paper-table 3 gives 92.00M
#              and 68.07M before the units); this recipe's one joined 40K BPE dictionary makes
#              the rows about 105.6M and 76.6M.
#              Small: BLEU near zero after 300 updates: a pipeline check, the parameter ratio
#              is the meaningful number.
#   Output:    WORKDIR/results.md, WORKDIR/valid_curves.png, WORKDIR/<row>/{train.log,
#              checkpoint_best.pt, averaged.pt, *.scores, result.json}.
#   Local data (no network): --local DIR with DIR/train.{en,de}, DIR/newstest2014.{en,de} and
#              DIR/newstest2017.{en,de}, untokenized; with --small, DIR/train.{en,de} only
#              (in place of the proxy corpus; the test sets still come from the data root).
set -euo pipefail
TABLE=3 SMALL_UPDATES=300 SMALL_MINUTES=10
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
parse_recipe_args "$@"
check_rows_exist
CURVE_METRIC=valid_ppl

PREP_ARGS=()
if [[ $SMALL == 1 ]]; then
  DATA_DIR="$PREP_ROOT/wmt_news_proxy"
  if [[ -n "$LOCAL_DATA" ]]; then TRAIN_PREFIX="$LOCAL_DATA/train"  # your own pairs in place of the proxy
  else TRAIN_PREFIX="$(corpus_dir wmt-news-proxy)/train"; fi
  TESTS=$(corpus_dir wmt14-test)
  PREP_ARGS=(--train "$TRAIN_PREFIX" --valid "$TESTS/newstest2013" --test "$TESTS/newstest2014"
             --valid-name newstest2013 --test-name newstest2014 --bpe-ops 8000 --head-valid 1000)
  TRAIN_ARGS=(--lr 1.5e-3 --warmup-updates 200 --max-tokens 2048
              --save-interval-updates "$(within_budget $(( UPDATES / 3 )))" --keep-interval-updates 5)
  GEN_ARGS=(--max-len-a 1.2 --max-len-b 10)
  SUBSETS=(test)  # newstest2014, the paper's column
else
  DATA_DIR="$PREP_ROOT/wmt14_en_de"
  if [[ -n "$LOCAL_DATA" ]]; then
    PREP_ARGS=(--train "$LOCAL_DATA/train" --valid "$LOCAL_DATA/newstest2014" --test "$LOCAL_DATA/newstest2017")
  fi
  TRAIN_ARGS=(--lr 7e-4 --warmup-updates 4000 --warmup-init-lr 1e-7 --max-tokens 4096
              --update-freq $(( (8 + NUM_GPUS - 1) / NUM_GPUS )) --max-update 100000 --fp16
              --save-interval-updates "$(within_budget 1000)" --keep-interval-updates 5)
  SUBSETS=(valid test)  # newstest2014 and newstest2017
  GEN_ARGS=()
fi
if [[ $MAX_EVAL_LINES -gt 0 ]]; then DATA_DIR="$DATA_DIR-eval$MAX_EVAL_LINES"; PREP_ARGS+=(--head-eval "$MAX_EVAL_LINES"); fi
TRAIN_ARGS+=(--task translation --source-lang en --target-lang de
             --optimizer adam --adam-betas '(0.9, 0.98)' --clip-norm 0.0 --lr-scheduler inverse_sqrt
             --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --dropout 0.1 --no-epoch-checkpoints)

step "Table 3 ($MODE): data"
bash "$RUN_SCRIPTS/prepare_wmt14_en_de.sh" --out "$DATA_DIR" "${PREP_ARGS[@]}"

while IFS='|' read -r id arch args _src _comp <&3; do
  dir="$WORKDIR/$id"
  step "Table 3 row $id: train $arch${args:+ $args}"
  # shellcheck disable=SC2086  # the row's arguments are space-separated words
  train_run "$dir" "$DATA_DIR/bin" "$arch" "${TRAIN_ARGS[@]}" $args
  [[ -f "$dir/result.json" ]] && continue
  step "Table 3 row $id: evaluate (beam 4, length penalty 0.6)"
  if [[ ! -f "$dir/averaged.pt" ]]; then
    n=$(find "$dir" -name 'checkpoint_*_*.pt' | wc -l); n=$(( n < 5 ? n : 5 ))
    # the tool writes atomically: averaged.pt exists only once it is complete
    if [[ $n -gt 0 ]]; then
      fairseq-define-average-checkpoints --inputs "$dir" --num-update-checkpoints "$n" --output "$dir/averaged.pt" \
        > "$dir/average.log" 2>&1 || die "checkpoint averaging failed; see $dir/average.log"
      echo "  averaged the last $n update checkpoints -> $dir/averaged.pt"
    else
      # a time budget (--minutes) can end a run before its first save interval: average what
      # exists, the last checkpoint, rather than stop before the other rows
      [[ -f "$dir/checkpoint_last.pt" ]] || die "no checkpoint in $dir to average"
      fairseq-define-average-checkpoints --inputs "$dir/checkpoint_last.pt" --output "$dir/averaged.pt" \
        > "$dir/average.log" 2>&1 || die "checkpoint averaging failed; see $dir/average.log"
      echo "  no update checkpoint (the run stopped before its first save interval): averaged.pt = checkpoint_last.pt"
    fi
  fi
  metrics=()
  for subset in "${SUBSETS[@]}"; do
    name=$(awk -v s="$subset" '$1 == s { print $2 }' "$DATA_DIR/bin/splits.txt")
    for ckpt in checkpoint_best averaged; do
      bash "$RUN_SCRIPTS/evaluate_nmt.sh" --data "$DATA_DIR" --checkpoint "$dir/$ckpt.pt" --subset "$subset" \
        --out "$dir/$subset.$ckpt" ${DEVICE_ARGS[@]+"${DEVICE_ARGS[@]}"} -- ${GEN_ARGS[@]+"${GEN_ARGS[@]}"} < /dev/null
      prefix=""; [[ $ckpt == averaged ]] && prefix=avg_
      metrics+=("${prefix}bleu_$name=$(awk '$1 == "sacrebleu" { print $2 }' "$dir/$subset.$ckpt.scores")"
                "${prefix}tok_bleu_$name=$(awk '$1 == "tok_bleu" { print $2 }' "$dir/$subset.$ckpt.scores")")
    done
  done
  record "$dir" "$id" "${metrics[@]}"
done 3< <(table_rows)
results
