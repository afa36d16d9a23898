#!/usr/bin/env bash
# Language-model data: WikiText-103 (Tables 1a, 2, 5-8), WikiText-2 (its small stand-in) or
# Penn Treebank (Table 1c), binarized with `fairseq-preprocess --only-source` (one dictionary
# from the training split, as fairseq's language-model examples do).
#
#   Command:   bash run_scripts/prepare_lm.sh --dataset ptb --out DIR [--data-root R] [--download]
#              bash run_scripts/prepare_lm.sh --dataset wikitext-103 --local DIR --out DIR
#   Hardware:  any machine; WikiText-103 needs ~1 GB of disk and 10-20 minutes to binarize.
#   Result:    DIR/bin (fairseq data: dict.txt, {train,valid,test}.{bin,idx}) and DIR/raw.
#
# The split files come from the data root (--data-root, else $FAIRSEQ_DEFINE_DATA, else the
# default locations of run_scripts/corpora.py), or from --local DIR (wiki.{train,valid,test}.tokens
# or ptb.{train,valid,test}.txt); --download fetches a missing set into the data root. Either
# way they are checked against the published files' checksums (run_scripts/corpora.tsv)
# unless --no-verify: a changed file stops with an error.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DATASET="" OUT="" LOCAL="" HEAD_TRAIN=0 HEAD_EVAL=0 VERIFY=() WORKERS="$(nproc 2>/dev/null || echo 2)"
while [[ $# -gt 0 ]]; do
  data_option "$@"
  if [[ $SHIFT_BY -gt 0 ]]; then shift "$SHIFT_BY"; continue; fi
  case "$1" in
    --dataset) DATASET="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --local) LOCAL="$2"; shift 2 ;;
    --head-train) HEAD_TRAIN="$2"; shift 2 ;;
    --head-eval) HEAD_EVAL="$2"; shift 2 ;;
    --no-verify) VERIFY=(--no-verify); shift ;;
    --workers) WORKERS="$2"; shift 2 ;;
    -h|--help) script_header
      printf '%s\n' "Options:" \
        "  --dataset wikitext-103|wikitext-2|ptb" \
        "  --out DIR          where raw/ and bin/ go" \
        "  --data-root DIR    the corpora (default \$FAIRSEQ_DEFINE_DATA, else shared/data next to the checkout, else work/data)" \
        "  --download         download a missing set into the data root" \
        "  --local DIR        use the split files in DIR instead" \
        "  --head-train N     keep the first N training lines (small mode; 0 = all)" \
        "  --head-eval N      keep the first N validation/test lines (small mode; 0 = all)" \
        "  --no-verify        skip the checksums (your own, different files)" \
        "  --workers N        fairseq-preprocess workers"
      exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ -n "$OUT" ]] || die "--out DIR is required"

case "$DATASET" in
  wikitext-103|wikitext-2) FILES=(wiki.train.tokens wiki.valid.tokens wiki.test.tokens) ;;
  ptb) FILES=(ptb.train.txt ptb.valid.txt ptb.test.txt) ;;
  *) die "--dataset must be wikitext-103, wikitext-2 or ptb (got '${DATASET}')" ;;
esac

RAW="$OUT/raw" BIN="$OUT/bin"
if [[ -f "$BIN/done" ]]; then echo "  $BIN: prepared"; exit 0; fi

step "$DATASET: source files"
if [[ -n "$LOCAL" ]]; then
  python3 "$RUN_SCRIPTS/corpora.py" verify "$DATASET" "$LOCAL" ${VERIFY[@]+"${VERIFY[@]}"} || exit 2
  SRC_DIR="$LOCAL"
else
  SRC_DIR=$(python3 "$RUN_SCRIPTS/corpora.py" path "$DATASET" ${VERIFY[@]+"${VERIFY[@]}"} \
            ${CORPORA_ARGS[@]+"${CORPORA_ARGS[@]}"}) || exit 2
fi
echo "  $SRC_DIR${VERIFY[*]+ (not verified)}"
[[ ${#VERIFY[@]} == 0 ]] && echo "  checksums verified"
mkdir -p "$RAW"

# small mode keeps the head of each split (whole lines: WikiText articles start at the top)
take() {  # file, n
  if [[ "$2" -gt 0 ]]; then head -n "$2" "$1"; else cat "$1"; fi
}
take "$SRC_DIR/${FILES[0]}" "$HEAD_TRAIN" > "$RAW/train.txt"
take "$SRC_DIR/${FILES[1]}" "$HEAD_EVAL" > "$RAW/valid.txt"
take "$SRC_DIR/${FILES[2]}" "$HEAD_EVAL" > "$RAW/test.txt"
for s in train valid test; do printf '  %-5s %9d lines %11d tokens\n' "$s" "$(wc -l < "$RAW/$s.txt")" "$(wc -w < "$RAW/$s.txt")"; done

step "$DATASET: fairseq-preprocess --only-source"
bin_tmp="$(fresh_tmpdir "$BIN")"
fairseq-preprocess --only-source --trainpref "$RAW/train.txt" --validpref "$RAW/valid.txt" \
  --testpref "$RAW/test.txt" --destdir "$bin_tmp" --workers "$WORKERS" > "$OUT/preprocess.log" 2>&1 \
  || die "fairseq-preprocess failed; see $OUT/preprocess.log"
rm -rf "$BIN" && mv -T "$bin_tmp" "$BIN"
echo "  dictionary: $(wc -l < "$BIN/dict.txt") types (+4 specials) -> $BIN"
touch "$BIN/done"
