#!/usr/bin/env bash
# Every paper recipe in its small mode, then the figures: the whole pipeline of the paper
# (data preparation, training, evaluation, results tables, plots) on slices of real corpora
# with tiny models, on a CPU.
#
#   Command:   bash run_scripts/run_all_small.sh [--workdir DIR] [--updates U] [--data-root R] [--download]
#   Hardware:  2 CPU cores, about 80 minutes in all (docs/recipes.md lists each recipe's time).
#   Output:    DIR/RESULTS.md (every table, ours beside the paper's), DIR/table*/valid_curves.png
#              (validation perplexity against updates, paper Figure 6), DIR/figures/
#              correlations_*.png (the correlation maps of paper Figures 4 and 7-11, from the
#              small Table 2 models). DIR defaults to work/paper_small.
#   Data:      PTB, WikiText-2, the WMT test sets and the WMT news proxy corpus in the data root
#              (--data-root, else $FAIRSEQ_DEFINE_DATA, else run_scripts/corpora.py's defaults);
#              --download fetches the public ones.
set -euo pipefail
TABLE=all
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
OUT="$ROOT/work/paper_small" PASS=()
while [[ $# -gt 0 ]]; do
  data_option "$@"  # --data-root reaches the recipes through FAIRSEQ_DEFINE_DATA
  if [[ $SHIFT_BY -gt 0 ]]; then shift "$SHIFT_BY"; continue; fi
  case "$1" in
    --workdir) OUT="$2"; shift 2 ;;
    --updates|--minutes|--max-eval-lines) PASS+=("$1" "$2"); shift 2 ;;
    -h|--help) script_header; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
mkdir -p "$OUT/figures"
failed=()

for recipe in table3_transformer_wmt14 table1c_awd_lstm_ptb table2_txl_wt103 table5_compression \
              table1a_lstm_wt103 table6_transformations table7_depth_width table8_connections \
              transformer_lm_wt103; do
  t=${recipe#table}; t=${t%%_*}
  [[ $recipe == transformer_lm_wt103 ]] && t=tlm  # fairseq's transformer_lm, not a paper table
  step "$recipe --small"
  start=$SECONDS
  extra=()
  [[ $t == 5 ]] && extra=(--table2-workdir "$OUT/table2")
  # one failing recipe does not stop the others; the failures are listed at the end
  bash "$RUN_SCRIPTS/$recipe.sh" --small --workdir "$OUT/table$t" --prepared-dir "$OUT/data" \
    ${extra[@]+"${extra[@]}"} ${PASS[@]+"${PASS[@]}"} ${CORPORA_ARGS[@]+"${CORPORA_ARGS[@]}"} < /dev/null \
    || failed+=("$recipe")
  echo "  $recipe: $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s" | tee -a "$OUT/timings.txt"
done

step "figures: correlation maps (paper Figures 4, 7-11) of the small Table 2 models"
for row in standard_d384 projective_n128 define_n128; do
  fairseq-define-results correlations --path "$OUT/table2/$row/checkpoint_last.pt" \
    --output "$OUT/figures/correlations_$row.png" --overwrite || failed+=("correlations_$row")
done

{
  echo "# Paper tables, small mode ($(date -u +%Y-%m-%d), $(nproc) CPU cores)"
  echo
  echo "Tiny models on slices of real data: a check of the pipeline, not a reproduction."
  for t in 1a 1c 2 3 5 6 7 8 tlm; do
    echo; cat "$OUT/table$t/results.md" 2>/dev/null || echo "Table $t: no results (the recipe failed)"
  done
} > "$OUT/RESULTS.md"
echo; echo "written: $OUT/RESULTS.md, $OUT/table*/valid_curves.png, $OUT/figures/"
[[ ${#failed[@]} == 0 ]] || die "failed: ${failed[*]} (their logs are under $OUT)"
