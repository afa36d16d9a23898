#!/usr/bin/env bash
# Table 5 at small scale: the WikiText-2 Transformer-XL models of run.sh with their lookup
# tables as 32 x 16 compositional codes (Shu & Nakayama 2018), test perplexity before/after.
#
#   Command:   bash examples/txl_wikitext2/compress.sh   (after run.sh; same --workdir)
#   Hardware:  2 CPU cores: about a minute of code learning per model and 2-3 minutes per
#              evaluation.
#   Expected:  look-up table sizes (MB) and test perplexity with and without compression for
#              the projective and the DeFINE model (DeFINE cached into a table first).
#   Paper:     Table 5 (WikiText-103, n=128): projective 127 MB / 29.16 -> 21 MB / 29.82,
#              DeFINE 127 MB / 26.33 -> 21 MB / 26.03 (test ppl).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
WORKDIR="$ROOT/work/txl_wikitext2"
CODE_ARGS=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --workdir) WORKDIR="$2"; shift 2 ;;
    --init|--refine-rounds|--steps) CODE_ARGS+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
               echo "Options: --workdir DIR (run.sh's); --init random|autoencoder, --refine-rounds N, --steps N"
               echo "         (passed to fairseq-define-compress: code start, refinement rounds, autoencoder steps)"; exit 0 ;;
    *) echo "compress.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

BIN="$WORKDIR/bin"
USER_DIR="$ROOT/fairseq_define"
test_ppl() {  # checkpoint -> test perplexity
  fairseq-eval-lm "$BIN" --user-dir "$USER_DIR" --task contiguous_lm --gen-subset test \
    --path "$1" --batch-size 10 --cpu 2>&1 | sed -n 's/.*Perplexity: \([0-9.]*\).*/\1/p'
}

printf '\n%-12s %-12s %12s %12s\n' "model" "compression" "tables (MB)" "test ppl"
for name in projective define; do
  ckpt="$WORKDIR/$name/checkpoint_last.pt"
  out="$WORKDIR/$name/compressed.pt"
  extra=()
  [[ "$name" == define ]] && extra=(--cache-define)
  if [[ ! -f "$out" ]]; then
    fairseq-define-compress --path "$ckpt" --output "$out.tmp" ${CODE_ARGS[@]+"${CODE_ARGS[@]}"} "${extra[@]}" \
      2> "$WORKDIR/$name/compress.log"
    mv "$out.tmp" "$out"
  fi
  sizes=$(sed -n 's/.*look-up tables \([0-9.]*\) MB -> \([0-9.]*\) MB.*/\1 \2/p' "$WORKDIR/$name/compress.log")
  printf '%-12s %-12s %12s %12s\n' "$name" "none" "${sizes% *}" "$(test_ppl "$ckpt")"
  printf '%-12s %-12s %12s %12s\n' "$name" "32 x 16" "${sizes#* }" "$(test_ppl "$out")"
done
