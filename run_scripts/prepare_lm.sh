#!/usr/bin/env bash
# Language-model data: WikiText-103 (Tables 1a, 2, 5-8), WikiText-2 (its small stand-in) or
# Penn Treebank (Table 1c), binarized with `fairseq-preprocess --only-source` (one dictionary
# from the training split, as fairseq's language-model examples do).
#
#   Command:   bash run_scripts/prepare_lm.sh --dataset wikitext-103 --out DIR
#              bash run_scripts/prepare_lm.sh --dataset ptb --local ../shared/data/ptb --out DIR
#   Hardware:  any machine; WikiText-103 needs ~1 GB of disk and 10-20 minutes to binarize.
#   Result:    DIR/bin (fairseq data: dict.txt, {train,valid,test}.{bin,idx}) and DIR/raw.
#
# Downloads are checked against the published files' checksums (sha1 of the extracted token
# files for WikiText, md5 for PTB); a broken link or a corrupt file stops with an error.
# --local DIR takes the split files from DIR instead (wiki.{train,valid,test}.tokens or
# ptb.{train,valid,test}.txt), checked the same way unless --no-verify.
set -euo pipefail

DATASET="" OUT="" LOCAL="" HEAD_TRAIN=0 HEAD_EVAL=0 VERIFY=1 WORKERS="$(nproc 2>/dev/null || echo 2)"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dataset) DATASET="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --local) LOCAL="$2"; shift 2 ;;
    --head-train) HEAD_TRAIN="$2"; shift 2 ;;
    --head-eval) HEAD_EVAL="$2"; shift 2 ;;
    --no-verify) VERIFY=0; shift ;;
    --workers) WORKERS="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
      printf '%s\n' "Options:" \
        "  --dataset wikitext-103|wikitext-2|ptb" \
        "  --out DIR          where raw/ and bin/ go" \
        "  --local DIR        use the split files in DIR instead of downloading" \
        "  --head-train N     keep the first N training lines (small mode; 0 = all)" \
        "  --head-eval N      keep the first N validation/test lines (small mode; 0 = all)" \
        "  --no-verify        skip the checksums (your own, different files)" \
        "  --workers N        fairseq-preprocess workers"
      exit 0 ;;
    *) echo "prepare_lm.sh: error: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ -n "$OUT" ]] || die "--out DIR is required"

case "$DATASET" in
  wikitext-103)
    URLS=("https://wikitext.smerity.com/wikitext-103-v1.zip"
          "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-103-v1.zip")
    ARCHIVE=wikitext-103-v1.zip MEMBER=wikitext-103
    FILES=(wiki.train.tokens wiki.valid.tokens wiki.test.tokens)
    # sha1 of the token files of wikitext-103-v1.zip (as published by Salesforce Research)
    SUMS=(sha1:b7497e2dfe77e72cfef5e3dbc61b7b53712ac211 sha1:c326ac59dc587676d58c422eb8a03e119582f92b
          sha1:8a5befc548865cec54ed4273cf87dbbad60d1e47) ;;
  wikitext-2)
    URLS=("https://wikitext.smerity.com/wikitext-2-v1.zip"
          "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip")
    ARCHIVE=wikitext-2-v1.zip MEMBER=wikitext-2
    FILES=(wiki.train.tokens wiki.valid.tokens wiki.test.tokens)
    SUMS=(sha1:863f29c46ef9d167fff4940ec821195882fe29d1 sha1:0418625c8b4da6e4b5c7a0b9e78d4ae8f7ee5422
          sha1:c7b8ce0aa086fb34dab808c5c49224211eb2b172) ;;
  ptb)
    URLS=("http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz")
    ARCHIVE=simple-examples.tgz MEMBER=simple-examples/data
    FILES=(ptb.train.txt ptb.valid.txt ptb.test.txt)
    # Mikolov's processed PTB (10K vocabulary)
    SUMS=(md5:f26c4b92c5fdc7b3f8c7cdcb991d8420 md5:aa0affc06ff7c36e977d7cd49e3839bf
          md5:8b80168b89c18661a38ef683c0dc3721) ;;
  *) die "--dataset must be wikitext-103, wikitext-2 or ptb (got '${DATASET}')" ;;
esac

RAW="$OUT/raw" BIN="$OUT/bin"
if [[ -f "$BIN/done" ]]; then echo "  $BIN: prepared"; exit 0; fi
mkdir -p "$RAW"

step "$DATASET: source files"
if [[ -n "$LOCAL" ]]; then
  SRC_DIR="$LOCAL"
else
  SRC_DIR="$OUT/download/$MEMBER"
  if [[ ! -f "$SRC_DIR/${FILES[0]}" ]]; then
    ok=0
    for url in "${URLS[@]}"; do
      if curl -fsIL --max-time 20 "$url" > /dev/null 2>&1; then fetch "$url" "$OUT/download/$ARCHIVE"; ok=1; break; fi
      echo "  unreachable: $url"
    done
    [[ $ok == 1 ]] || die "could not download $DATASET (no network, or every link is broken: ${URLS[*]}). Download $ARCHIVE yourself, unpack it and pass --local DIR"
    case "$ARCHIVE" in
      *.zip) python3 -m zipfile -e "$OUT/download/$ARCHIVE" "$OUT/download" ;;
      *.tgz) tar -xzf "$OUT/download/$ARCHIVE" -C "$OUT/download" ;;
    esac
  fi
fi
for i in 0 1 2; do
  f="$SRC_DIR/${FILES[$i]}"
  [[ -s "$f" ]] || die "missing or empty $f (expected ${FILES[*]} in $SRC_DIR)"
  if [[ $VERIFY == 1 ]]; then check_sum "$f" "${SUMS[$i]}"; fi
done
[[ $VERIFY == 1 ]] && echo "  checksums verified"

# small mode keeps the head of each split (whole lines: WikiText articles start at the top)
take() {  # file, n
  if [[ "$2" -gt 0 ]]; then head -n "$2" "$1"; else cat "$1"; fi
}
take "$SRC_DIR/${FILES[0]}" "$HEAD_TRAIN" > "$RAW/train.txt"
take "$SRC_DIR/${FILES[1]}" "$HEAD_EVAL" > "$RAW/valid.txt"
take "$SRC_DIR/${FILES[2]}" "$HEAD_EVAL" > "$RAW/test.txt"
for s in train valid test; do printf '  %-5s %9d lines %11d tokens\n' "$s" "$(wc -l < "$RAW/$s.txt")" "$(wc -w < "$RAW/$s.txt")"; done

step "$DATASET: fairseq-preprocess --only-source"
rm -rf "$BIN.tmp"
fairseq-preprocess --only-source --trainpref "$RAW/train.txt" --validpref "$RAW/valid.txt" \
  --testpref "$RAW/test.txt" --destdir "$BIN.tmp" --workers "$WORKERS" > "$OUT/preprocess.log" 2>&1 \
  || die "fairseq-preprocess failed; see $OUT/preprocess.log"
rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
echo "  dictionary: $(wc -l < "$BIN/dict.txt") types (+4 specials) -> $BIN"
touch "$BIN/done"
