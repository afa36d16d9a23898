#!/usr/bin/env bash
# Translate a prepared WMT split with one checkpoint and score it two ways, both printed and
# labelled (Table 3):
#   sacreBLEU  detokenized hypotheses against the untokenized references (for newstest2014 the
#              3,003-line set sacreBLEU calls wmt14/full), with its signature;
#   tok-BLEU   tokenized BLEU with compound splitting ("##AT##-##AT##"), as the Transformer's
#              era reported it (tensor2tensor's get_ende_bleu.sh): hypotheses and references
#              Moses-tokenized, hyphenated compounds split, no further tokenization.
# Decoding as the paper's baselines: beam 4, length penalty 0.6.
#
#   Command:   bash run_scripts/evaluate_nmt.sh --data DIR --checkpoint CKPT --subset test --out PREFIX
#   Result:    PREFIX.gen (fairseq-generate output), PREFIX.hyp (detokenized), PREFIX.scores
#              ("sacrebleu X", "tok_bleu Y", "signature ..."), and the two scores on stdout.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DATA="" CKPT="" SUBSET=test OUT_PREFIX="" CPU=() SRC=en TGT=de GEN_EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --data) DATA="$2"; shift 2 ;;
    --checkpoint) CKPT="$2"; shift 2 ;;
    --subset) SUBSET="$2"; shift 2 ;;
    --out) OUT_PREFIX="$2"; shift 2 ;;
    --cpu) CPU=(--cpu); shift ;;
    --) shift; GEN_EXTRA=("$@"); break ;;
    -h|--help) script_header
      echo "Options: --data DIR (prepare_wmt14_en_de.sh's --out), --checkpoint CKPT, --subset valid|test, --out PREFIX, --cpu,"
      echo "         -- ARGS (extra fairseq-generate arguments, e.g. --max-len-a 1.2 --max-len-b 10)"
      exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
require_commands fairseq-generate sacremoses sacrebleu
[[ -f "$DATA/bin/done" ]] || die "$DATA is not a prepared WMT folder (run prepare_wmt14_en_de.sh --out $DATA first)"
[[ -f "$CKPT" ]] || die "no checkpoint $CKPT"
[[ -n "$OUT_PREFIX" ]] || die "--out PREFIX is required"
REF="$DATA/raw/$SUBSET.$TGT"
[[ -s "$REF" ]] || die "no reference $REF (--subset must be valid or test)"

fairseq-generate "$DATA/bin" --user-dir "$USER_DIR" --path "$CKPT" --gen-subset "$SUBSET" \
  --source-lang "$SRC" --target-lang "$TGT" --beam 4 --lenpen 0.6 --max-tokens 4096 \
  --remove-bpe "$(cat "$DATA/bin/remove_bpe.txt")" "${CPU[@]}" "${GEN_EXTRA[@]}" > "$OUT_PREFIX.gen" 2> "$OUT_PREFIX.gen.err" \
  || die "fairseq-generate failed; see $OUT_PREFIX.gen.err"
grep '^H-' "$OUT_PREFIX.gen" | sed 's/^H-//' | sort -n -k1,1 | cut -f3 > "$OUT_PREFIX.hyp.tok"
[[ $(wc -l < "$OUT_PREFIX.hyp.tok") == $(wc -l < "$REF") ]] \
  || die "fairseq-generate returned $(wc -l < "$OUT_PREFIX.hyp.tok") hypotheses for $(wc -l < "$REF") references; see $OUT_PREFIX.gen"
sacremoses -q -l "$TGT" detokenize < "$OUT_PREFIX.hyp.tok" > "$OUT_PREFIX.hyp"

SACRE=$(sacrebleu "$REF" -i "$OUT_PREFIX.hyp" -b -w 2)
SIG=$(sacrebleu "$REF" -i "$OUT_PREFIX.hyp" -w 2 | python3 -c "import json, sys; print(json.load(sys.stdin)['signature'])")
compound_split() { sacremoses -q -l "$TGT" tokenize -x | sed -E 's/([^ ])-([^ ])/\1 ##AT##-##AT## \2/g'; }
compound_split < "$REF" > "$OUT_PREFIX.ref.cs"
compound_split < "$OUT_PREFIX.hyp" > "$OUT_PREFIX.hyp.cs"
TOKBLEU=$(sacrebleu "$OUT_PREFIX.ref.cs" -i "$OUT_PREFIX.hyp.cs" --tokenize none --force -b -w 2)
printf 'sacrebleu %s\ntok_bleu %s\nsignature %s\n' "$SACRE" "$TOKBLEU" "$SIG" > "$OUT_PREFIX.scores"
printf '  %-8s %-44s sacreBLEU %6s   tok-BLEU (compound split) %6s\n' "$SUBSET" "$(basename "$CKPT")" "$SACRE" "$TOKBLEU"
