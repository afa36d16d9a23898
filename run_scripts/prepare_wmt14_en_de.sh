#!/usr/bin/env bash
# WMT14 English-German for Table 3, prepared as fairseq's prepare-wmt14en2de.sh does it:
# Europarl v7 + Common Crawl + News Commentary v9 for training; the paper validates on
# newstest2014 and tests on newstest2017 (Section 4.2). Punctuation normalised and tokenized
# with sacremoses (aggressive hyphen splitting, Moses' escaping), training pairs cleaned by length (1-250
# tokens) and length ratio (1.5), joint BPE learned with subword-nmt (or a joint
# sentencepiece model), then `fairseq-preprocess --joined-dictionary`.
#
#   Command:   bash run_scripts/prepare_wmt14_en_de.sh --out work/paper/data/wmt14_en_de
#   Hardware:  any machine with ~10 GB of disk; 1-3 hours on 8 cores (tokenizing 4.5M pairs).
#   Result:    OUT/raw (untokenized valid/test, the references of detokenized sacreBLEU),
#              OUT/tok (tokenized), OUT/bpe, OUT/bin (fairseq data) and OUT/bin/splits.txt.
#
# Downloads: the training archives from statmt.org (checked as gzip archives holding the
# expected files; statmt.org publishes no checksums), the test sets through sacreBLEU, which
# verifies its own downloads (newstest2014 is its 3,003-line `wmt14/full`, not the filtered
# `wmt14`). Without a network, give the files: --train PREFIX --valid PREFIX --test PREFIX
# (PREFIX.en and PREFIX.de, untokenized, line-aligned), with --valid-name/--test-name.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OUT="" TRAIN="" VALID="" TEST="" VALID_NAME=newstest2014 TEST_NAME=newstest2017
BPE=subword-nmt BPE_OPS=40000 HEAD=0 HEAD_EVAL=0 HEAD_VALID=0 WORKERS="$(nproc 2>/dev/null || echo 2)"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --train) TRAIN="$2"; shift 2 ;;
    --valid) VALID="$2"; shift 2 ;;
    --test) TEST="$2"; shift 2 ;;
    --valid-name) VALID_NAME="$2"; shift 2 ;;
    --test-name) TEST_NAME="$2"; shift 2 ;;
    --bpe) BPE="$2"; shift 2 ;;
    --bpe-ops) BPE_OPS="$2"; shift 2 ;;
    --head) HEAD="$2"; shift 2 ;;
    --head-eval) HEAD_EVAL="$2"; shift 2 ;;
    --head-valid) HEAD_VALID="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    -h|--help) script_header
      printf '%s\n' "Options:" \
        "  --out DIR                  output folder (required)" \
        "  --train/--valid/--test P   local untokenized files P.en, P.de instead of downloading" \
        "  --valid-name/--test-name   names of those sets in the results (default newstest2014/newstest2017)" \
        "  --bpe subword-nmt|sentencepiece   joint subword model (default subword-nmt)" \
        "  --bpe-ops N                merges (subword-nmt) or vocabulary size (sentencepiece); default 40000" \
        "  --head N                   keep the first N training pairs (small mode; 0 = all)" \
        "  --head-eval N              keep the first N valid/test pairs (quick checks only; 0 = all)" \
        "  --head-valid N             keep the first N validation pairs (0 = all; --head-eval wins if smaller)" \
        "  --workers N                parallel processes"
      exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
require_commands sacremoses subword-nmt sacrebleu
[[ -n "$OUT" ]] || die "--out DIR is required"
[[ "$BPE" == subword-nmt || "$BPE" == sentencepiece ]] || die "--bpe must be subword-nmt or sentencepiece (got '$BPE')"
if [[ -n "$TRAIN$VALID$TEST" ]]; then
  [[ -n "$TRAIN" && -n "$VALID" && -n "$TEST" ]] || die "--train, --valid and --test go together"
fi

RAW="$OUT/raw" TOK="$OUT/tok" SUB="$OUT/bpe" BIN="$OUT/bin"
if [[ -f "$BIN/done" ]]; then echo "  $BIN: prepared"; exit 0; fi
mkdir -p "$RAW" "$TOK" "$SUB"

step "1/5 corpora"
if [[ -n "$TRAIN" ]]; then
  for pair in "train:$TRAIN" "valid:$VALID" "test:$TEST"; do
    split=${pair%%:*} prefix=${pair#*:}
    for l in en de; do
      [[ -s "$prefix.$l" ]] || die "missing or empty file $prefix.$l"
      cp "$prefix.$l" "$RAW/$split.$l"
    done
    [[ $(wc -l < "$RAW/$split.en") == $(wc -l < "$RAW/$split.de") ]] \
      || die "$prefix.en and $prefix.de differ in line count: the files must be line-aligned"
  done
else
  DL="$OUT/download"
  declare -A CORPORA=(
    [http://statmt.org/wmt13/training-parallel-europarl-v7.tgz]="training/europarl-v7.de-en"
    [http://statmt.org/wmt13/training-parallel-commoncrawl.tgz]="commoncrawl.de-en"
    [http://statmt.org/wmt14/training-parallel-nc-v9.tgz]="training/news-commentary-v9.de-en"
  )
  train_en="$(fresh_tmp "$RAW/train.en")"; train_de="$(fresh_tmp "$RAW/train.de")"
  for url in "${!CORPORA[@]}"; do
    archive="$DL/$(basename "$url")" member="${CORPORA[$url]}"
    fetch "$url" "$archive"
    gzip -t "$archive" 2>/dev/null || die "$archive is not a complete gzip archive (interrupted or broken download); delete it and run again"
    tar -xzf "$archive" -C "$DL" "$member.en" "$member.de" 2>/dev/null \
      || die "$archive does not hold $member.{en,de}: not the WMT14 archive this script expects"
    [[ $(wc -l < "$DL/$member.en") == $(wc -l < "$DL/$member.de") ]] || die "$member.en and .de are not line-aligned"
    cat "$DL/$member.en" >> "$train_en"; cat "$DL/$member.de" >> "$train_de"
  done
  mv -f "$train_en" "$RAW/train.en"; mv -f "$train_de" "$RAW/train.de"
  # sacreBLEU downloads and checks the official test sets itself
  sacrebleu -t wmt14/full -l en-de --echo src > "$RAW/valid.en" && sacrebleu -t wmt14/full -l en-de --echo ref > "$RAW/valid.de" \
    && sacrebleu -t wmt17 -l en-de --echo src > "$RAW/test.en" && sacrebleu -t wmt17 -l en-de --echo ref > "$RAW/test.de" \
    || die "sacrebleu could not fetch newstest2014/newstest2017 (no network?); pass --valid/--test with local files"
fi
keep_head() {  # split, n
  [[ "$2" -gt 0 ]] || return 0
  for l in en de; do head -n "$2" "$RAW/$1.$l" > "$RAW/$1.$l.head"; mv "$RAW/$1.$l.head" "$RAW/$1.$l"; done
}
keep_head train "$HEAD"; keep_head valid "$HEAD_VALID"; keep_head valid "$HEAD_EVAL"; keep_head test "$HEAD_EVAL"
printf 'valid\t%s\t%s\ntest\t%s\t%s\n' "$VALID_NAME" "$(wc -l < "$RAW/valid.de")" "$TEST_NAME" "$(wc -l < "$RAW/test.de")" > "$OUT/splits.txt"
for s in train valid test; do printf '  %-5s %9d pairs\n' "$s" "$(wc -l < "$RAW/$s.en")"; done

step "2/5 normalize punctuation and tokenize (sacremoses: -a aggressive hyphen splitting, -x XML escaping as Moses does)"
for s in train valid test; do
  for l in en de; do
    [[ -s "$TOK/$s.$l" ]] && continue
    tok_tmp="$(fresh_tmp "$TOK/$s.$l")"
    # control characters become spaces, as Moses' remove-non-printing-char.perl does
    # (sacremoses' own -c would glue the words either side of a tab together)
    python3 -c "import re, sys; [sys.stdout.write(re.sub(r'[\x00-\x1f\x7f-\x9f\u200b-\u200f\ufeff]', ' ', l.rstrip('\n')) + '\n') for l in sys.stdin]" < "$RAW/$s.$l" \
      | sacremoses -q -l "$l" -j "$WORKERS" normalize \
      | sacremoses -q -l "$l" -j "$WORKERS" tokenize -a -x > "$tok_tmp"
    mv -f "$tok_tmp" "$TOK/$s.$l"
  done
done

# fairseq's script cleans after BPE; here the limits apply to Moses tokens (before BPE)
step "3/5 clean training pairs: 1-250 tokens, length ratio <= 1.5"
python3 - "$TOK/train" <<'EOF'
import sys
prefix = sys.argv[1]
kept = total = 0
with open(f"{prefix}.en", encoding="utf-8") as fe, open(f"{prefix}.de", encoding="utf-8") as fd, \
     open(f"{prefix}.clean.en", "w", encoding="utf-8") as oe, open(f"{prefix}.clean.de", "w", encoding="utf-8") as od:
    for e, d in zip(fe, fd):
        total += 1
        ne, nd = len(e.split()), len(d.split())
        if 1 <= ne <= 250 and 1 <= nd <= 250 and max(ne, nd) <= 1.5 * min(ne, nd):
            oe.write(e); od.write(d); kept += 1
print(f"  kept {kept} of {total} pairs")
EOF

step "4/5 joint subword model ($BPE, $BPE_OPS)"
if [[ "$BPE" == subword-nmt ]]; then
  if [[ ! -s "$SUB/codes" ]]; then
    codes="$(fresh_tmp "$SUB/codes")"
    cat "$TOK/train.clean.en" "$TOK/train.clean.de" | subword-nmt learn-bpe -s "$BPE_OPS" > "$codes" 2> "$SUB/learn-bpe.log" \
      || die "subword-nmt learn-bpe failed; see $SUB/learn-bpe.log"
    mv -f "$codes" "$SUB/codes"
  fi
  for s in train valid test; do
    for l in en de; do
      in="$TOK/$s.$l"; [[ $s == train ]] && in="$TOK/train.clean.$l"
      subword-nmt apply-bpe -c "$SUB/codes" --num-workers "$WORKERS" < "$in" > "$SUB/$s.$l"
    done
  done
  REMOVE_BPE=subword_nmt
else
  if [[ ! -s "$SUB/spm.model" ]]; then
    python3 - "$TOK/train.clean.en" "$TOK/train.clean.de" "$SUB/spm" "$BPE_OPS" <<'EOF'
import sys
import sentencepiece as spm
en, de, prefix, size = sys.argv[1:]
spm.SentencePieceTrainer.train(input=f"{en},{de}", model_prefix=prefix, vocab_size=int(size),
                               model_type="bpe", character_coverage=1.0, input_sentence_size=10_000_000,
                               shuffle_input_sentence=True, minloglevel=2)
EOF
  fi
  for s in train valid test; do
    for l in en de; do
      in="$TOK/$s.$l"; [[ $s == train ]] && in="$TOK/train.clean.$l"
      python3 -c "import sys, sentencepiece as spm; sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
for line in sys.stdin: print(' '.join(sp.encode(line.strip(), out_type=str)))" "$SUB/spm.model" < "$in" > "$SUB/$s.$l"
    done
  done
  REMOVE_BPE=sentencepiece
fi

step "5/5 fairseq-preprocess --joined-dictionary"
bin_tmp="$(fresh_tmpdir "$BIN")"
fairseq-preprocess --source-lang en --target-lang de --trainpref "$SUB/train" --validpref "$SUB/valid" \
  --testpref "$SUB/test" --destdir "$bin_tmp" --joined-dictionary --workers "$WORKERS" > "$OUT/preprocess.log" 2>&1 \
  || die "fairseq-preprocess failed; see $OUT/preprocess.log"
rm -rf "$BIN" && mv -T "$bin_tmp" "$BIN"
cp "$OUT/splits.txt" "$BIN/splits.txt"
echo "$REMOVE_BPE" > "$BIN/remove_bpe.txt"
echo "  joined dictionary: $(wc -l < "$BIN/dict.en.txt") types (+4 specials) -> $BIN"
touch "$BIN/done"
