#!/usr/bin/env bash
# Table 5 at small scale: the WikiText-2 Transformer-XL models of run.sh with their lookup
# tables as 32 x 16 compositional codes (Shu & Nakayama 2018), test perplexity before/after.
#
#   Command:   bash examples/txl_wikitext2/compress.sh   (after run.sh; same --workdir, --max-eval-lines)
#   Hardware:  2 CPU cores: about a minute of code learning per model and 2-3 minutes per
#              evaluation.
#   Expected:  look-up table sizes (MB) and test perplexity with and without compression for
#              the projective and the DeFINE model (DeFINE cached into a table first).
#   Paper:     Table 5 (WikiText-103, n=128): projective 127 MB / 29.16 -> 21 MB / 29.82,
#              DeFINE 127 MB / 26.33 -> 21 MB / 26.03 (test ppl).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../run_scripts/lib.sh"

WORKDIR="$ROOT/work/txl_wikitext2"
CODE_ARGS=()
while [[ $# -gt 0 ]]; do
  shared_option "$@"  # --workdir and --max-eval-lines: run.sh's
  if [[ $SHIFT_BY -gt 0 ]]; then shift "$SHIFT_BY"; continue; fi
  case "$1" in
    --init|--refine-rounds|--steps) CODE_ARGS+=("$1" "$2"); shift 2 ;;
    -h|--help) script_header
               echo "Options: --workdir DIR, --max-eval-lines N (run.sh's); --init random|autoencoder, --refine-rounds N, --steps N"
               echo "         (passed to fairseq-define-compress: code start, refinement rounds, autoencoder steps)"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
DATA_DIR="$WORKDIR/data" PREP_ARGS=()
prep_data_args  # run.sh's data folder
[[ -f "$DATA_DIR/bin/done" ]] || die "no prepared data in $DATA_DIR: run examples/txl_wikitext2/run.sh (same --workdir and --max-eval-lines) first"
DEVICE_ARGS=(--cpu)
EVAL_ARGS=(--batch-size 10)
test_ppl() { perplexity "$1" test; }

printf '\n%-12s %-12s %12s %12s\n' "model" "compression" "tables (MB)" "test ppl"
for name in projective define; do
  ckpt="$WORKDIR/$name/checkpoint_last.pt"
  out="$WORKDIR/$name/compressed.pt"
  extra=()
  [[ "$name" == define ]] && extra=(--cache-define)
  if [[ ! -f "$out" ]]; then
    # the tool writes --output through a fresh temporary file itself, all or nothing
    fairseq-define-compress --path "$ckpt" --output "$out" ${CODE_ARGS[@]+"${CODE_ARGS[@]}"} "${extra[@]}" \
      2> "$WORKDIR/$name/compress.log"
  fi
  sizes=$(sed -n 's/.*look-up tables \([0-9.]*\) MB -> \([0-9.]*\) MB.*/\1 \2/p' "$WORKDIR/$name/compress.log")
  printf '%-12s %-12s %12s %12s\n' "$name" "none" "${sizes% *}" "$(test_ppl "$ckpt")"
  printf '%-12s %-12s %12s %12s\n' "$name" "32 x 16" "${sizes#* }" "$(test_ppl "$out")"
done
