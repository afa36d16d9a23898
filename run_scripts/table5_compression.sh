#!/usr/bin/env bash
# Table 5: Transformer-XL's look-up tables stored as Shu & Nakayama's compositional codes
# (32 codebooks x 16 codes), for Table 2's standard n=384, projective n=128 and DeFINE n=128
# models: table size and test perplexity before and after. The DeFINE model keeps its unit;
# its n-dim map table is what is coded, as in the paper (127 MB -> 21 MB for every n=128 row).
#
#   Command:   bash run_scripts/table5_compression.sh            (after table2_txl_wt103.sh)
#              bash run_scripts/table5_compression.sh --small    (CPU check, ~5 minutes; trains
#                                                                 the three small Table 2 rows
#                                                                 first if they are missing)
#   Hardware:  full: one GPU, 10-30 minutes of code learning per model plus evaluation.
#              Small: 2 CPU cores.
#   Paper:     fairseq-define-results paper --table 5 (also printed by --help).
#   Expected:  full: sizes 15-20x smaller, perplexity within a point. Small: sizes as expected;
#              undertrained tables compress badly (docs/inference.md, "Compression"), so the small
#              perplexities after compression are much worse: a pipeline check.
#   Output:    WORKDIR/results.md, WORKDIR/<row>/{compress.log,compressed.pt,result.json}.
#   Extra:     --table2-workdir DIR (default Table 2's); --init random|autoencoder, --refine-rounds N,
#              --steps N go to fairseq-define-compress (code start, refinement rounds, autoencoder steps).
set -euo pipefail
TABLE=5 SMALL_UPDATES=300 SMALL_MINUTES=4
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
T2DIR="" CODE_ARGS=() ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --table2-workdir) T2DIR="$2"; shift 2 ;;
    --init|--refine-rounds|--steps) CODE_ARGS+=("$1" "$2"); shift 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
parse_recipe_args "${ARGS[@]+"${ARGS[@]}"}"
check_rows_exist
T2DIR="${T2DIR:-$PAPER_DIR/table2}"
lm_family txl_wt103

sources=()
while IFS='|' read -r _id _arch _args src _comp <&3; do
  [[ " ${sources[*]-} " == *" $src "* ]] || sources+=("$src")
done 3< <(table_rows)
missing=()
for src in "${sources[@]}"; do [[ -f "$T2DIR/$src/done" ]] || missing+=("$src"); done
if [[ ${#missing[@]} -gt 0 ]]; then
  step "Table 5 needs Table 2's ${missing[*]}: training them"
  t2=(--rows "${missing[*]}" --workdir "$T2DIR" --prepared-dir "$PREP_ROOT")
  [[ $SMALL == 1 ]] && t2+=(--small)
  [[ -n "$UPDATES" ]] && t2+=(--updates "$UPDATES")
  [[ -n "$MINUTES" ]] && t2+=(--minutes "$MINUTES")
  [[ $MAX_EVAL_LINES -gt 0 ]] && t2+=(--max-eval-lines "$MAX_EVAL_LINES")
  t2+=(${CORPORA_ARGS[@]+"${CORPORA_ARGS[@]}"})  # --download; the data root is in the environment
  bash "$RUN_SCRIPTS/table2_txl_wt103.sh" "${t2[@]}" -- ${EXTRA_TRAIN[@]+"${EXTRA_TRAIN[@]}"}
fi

while IFS='|' read -r id _arch _args src comp <&3; do
  dir="$WORKDIR/$id" ckpt="$T2DIR/$src/$EVAL_CHECKPOINT"
  [[ -f "$dir/result.json" ]] && continue
  mkdir -p "$dir"
  cp "$T2DIR/$src/train.log" "$dir/train.log"  # the model's parameters and updates, for the record
  log="$WORKDIR/$src.compress.log" out="$WORKDIR/$src.compressed.pt"
  if [[ ! -f "$out" ]]; then
    step "Table 5: compress $src (32 x 16 codes${CODE_ARGS[*]+, ${CODE_ARGS[*]}})"
    # the tool writes atomically: $out exists only once it is complete
    fairseq-define-compress --path "$ckpt" --output "$out" ${CODE_ARGS[@]+"${CODE_ARGS[@]}"} > "$log" 2>&1 < /dev/null \
      || die "fairseq-define-compress failed; see $log"
  fi
  sizes=$(sed -n 's/.*look-up tables \([0-9.]*\) MB -> \([0-9.]*\) MB.*/\1 \2/p' "$log" | tail -1)
  [[ -n "$sizes" ]] || die "no table sizes in $log"
  if [[ $comp == 1 ]]; then mb=${sizes#* }; path="$out"; else mb=${sizes% *}; path="$ckpt"; fi
  ppl=$(perplexity "$path" test)
  echo "  $id: look-up tables $mb MB, test perplexity $ppl"
  record "$dir" "$id" "table_mb=$mb" "test_ppl=$ppl"
done 3< <(table_rows)
results
