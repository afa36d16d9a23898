#!/usr/bin/env bash
# DeFINE Transformer NMT demo: English -> German on real text, end to end on a CPU.
#
#   Command:   make demo            (or: bash examples/nmt_demo/run.sh [options])
#   Hardware:  2 CPU cores, no GPU; under 10 minutes in all (1000 updates, about 6 minutes of
#              training here; an 8-minute cap stops slower machines early and says so).
#   Expected:  sacreBLEU on 502 held-out Tatoeba sentences about 8, well above copying the source
#              (README "Quick start" shows what this printed here), and the parameter
#              distribution of define_transformer_tiny next to the same-size Transformer.
#   Paper:     Table 3 (WMT14 EN-DE, GPUs): Transformer 25.81 vs + DeFINE 28.25 BLEU on
#              newstest2017, 92M vs 68M parameters. This demo is a pipeline check at toy
#              scale, not a reproduction (run_scripts/ holds the paper recipes).
#
# Pipeline: split -> sacremoses tokenization -> subword-nmt joint BPE -> fairseq-preprocess
# -> fairseq-train (define_transformer_tiny, 1000 updates) -> fairseq-generate (beam 4, lenpen 0.6)
# -> detokenize -> sacreBLEU against the untokenized references.
#
# Your own data: --src-file/--tgt-file (line-aligned, untokenized), split here; or
# --train/--valid/--test PREFIX (PREFIX.$SRC and PREFIX.$TGT files); --also-test PREFIX
# (repeatable) scores more test sets.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../run_scripts/lib.sh"  # ROOT, die, step, the environment

SRC=en
TGT=de
SRC_FILE="$ROOT/examples/data/tatoeba_de_en/tatoeba.en.gz"
TGT_FILE="$ROOT/examples/data/tatoeba_de_en/tatoeba.de.gz"
TRAIN="" VALID="" TEST=""
ALSO_TEST=()
WORKDIR="$ROOT/work/nmt_demo"
MINUTES=8
UPDATES=1000
BPE_OPS=4000
ARCH=define_transformer_tiny
EXTRA_TRAIN_ARGS=()

usage() {
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  cat <<EOF
Options:
  --src LANG / --tgt LANG       language codes (default en / de)
  --src-file F --tgt-file F     parallel corpus (.gz allowed), split 16:1:1 by line number
  --train P --valid P --test P  ready splits: P.LANG files
  --also-test P                 one more test set (P.LANG files), scored too; repeatable
  --workdir DIR                 outputs (default work/nmt_demo); reruns reuse tokenization and
                                BPE when their inputs are unchanged, and redo them otherwise
  --updates U                   training updates (default 1000, about 6 min here)
  --minutes M                   training time cap (default 8; 0: none); a run it cuts short
                                is reported as such
  --bpe-ops N                   joint BPE merges (default 4000)
  --arch A                      architecture (default define_transformer_tiny)
  -- ARGS                       extra fairseq-train arguments
EOF
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --src) SRC="$2"; shift 2 ;;
    --tgt) TGT="$2"; shift 2 ;;
    --src-file) SRC_FILE="$2"; shift 2 ;;
    --tgt-file) TGT_FILE="$2"; shift 2 ;;
    --train) TRAIN="$2"; shift 2 ;;
    --valid) VALID="$2"; shift 2 ;;
    --test) TEST="$2"; shift 2 ;;
    --also-test) ALSO_TEST+=("$2"); shift 2 ;;
    --workdir) WORKDIR="$2"; shift 2 ;;
    --minutes) MINUTES="$2"; shift 2 ;;
    --updates) UPDATES="$2"; shift 2 ;;
    --bpe-ops) BPE_OPS="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA_TRAIN_ARGS=("$@"); break ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

cat_any() { if [[ "$1" == *.gz ]]; then gzip -dc "$1"; else cat "$1"; fi; }

RAW="$WORKDIR/raw"; TOK="$WORKDIR/tok"; BIN="$WORKDIR/data-bin"; CKPT="$WORKDIR/checkpoints"
mkdir -p "$RAW" "$TOK"

step "1/7 data ($SRC -> $TGT)"
if [[ -n "$TRAIN$VALID$TEST" ]]; then
  [[ -n "$TRAIN" && -n "$VALID" && -n "$TEST" ]] || die "--train, --valid and --test go together"
  for split in train valid test; do
    prefix=${split^^}; prefix=${!prefix}
    for l in "$SRC" "$TGT"; do
      [[ -s "$prefix.$l" ]] || die "missing or empty file $prefix.$l"
      cp "$prefix.$l" "$RAW/$split.$l"
    done
  done
else
  [[ -s "$SRC_FILE" ]] || die "missing or empty source file $SRC_FILE (--src-file)"
  [[ -s "$TGT_FILE" ]] || die "missing or empty target file $TGT_FILE (--tgt-file)"
  ns=$(cat_any "$SRC_FILE" | wc -l); nt=$(cat_any "$TGT_FILE" | wc -l)
  [[ "$ns" == "$nt" ]] || die "$SRC_FILE has $ns lines but $TGT_FILE has $nt: the files must be line-aligned"
  for pair in "$SRC:$SRC_FILE" "$TGT:$TGT_FILE"; do
    l=${pair%%:*}; f=${pair#*:}
    # every 35th line -> valid, the line after it -> test, the rest -> train
    cat_any "$f" | awk -v r="$RAW" -v l="$l" \
      '{ m = (NR-1) % 35; out = (m == 0) ? "valid" : (m == 1) ? "test" : "train"; print > (r "/" out "." l) }'
  done
fi
TEST_SPLITS=(test)
for i in "${!ALSO_TEST[@]}"; do
  prefix=${ALSO_TEST[$i]}; split="test$((i + 1))"
  for l in "$SRC" "$TGT"; do
    [[ -s "$prefix.$l" ]] || die "missing or empty file $prefix.$l (--also-test)"
    cp "$prefix.$l" "$RAW/$split.$l"
  done
  [[ $(wc -l < "$RAW/$split.$SRC") == $(wc -l < "$RAW/$split.$TGT") ]] \
    || die "$prefix.$SRC and $prefix.$TGT differ in line count: the files must be line-aligned"
  TEST_SPLITS+=("$split")
done
SPLITS=(train valid "${TEST_SPLITS[@]}")
for split in "${SPLITS[@]}"; do
  printf "  %-5s %6d pairs\n" "$split" "$(wc -l < "$RAW/$split.$SRC")"
done

step "2/7 tokenize (sacremoses) and learn joint BPE (subword-nmt, $BPE_OPS merges)"
# what the tokenized files and BPE codes were made from: reuse them only for the same inputs
KEY=$( { echo "$SRC $TGT $BPE_OPS"; for split in "${SPLITS[@]}"; do
          echo "$split"; cat "$RAW/$split.$SRC" "$RAW/$split.$TGT"; done; } | sha256sum | cut -d' ' -f1)
if [[ -s "$TOK/bpe.codes" && "$(cat "$TOK/inputs.key" 2>/dev/null)" != "$KEY" ]]; then
  echo "  the data or --bpe-ops changed since $TOK was made: tokenizing and learning BPE again"
  rm -rf "$TOK"; mkdir -p "$TOK"
fi
if [[ ! -s "$TOK/bpe.codes" ]]; then
  for split in "${SPLITS[@]}"; do
    for l in "$SRC" "$TGT"; do
      sacremoses -l "$l" -j 2 tokenize -x < "$RAW/$split.$l" > "$TOK/$split.tok.$l"
    done
  done
  subword-nmt learn-joint-bpe-and-vocab --input "$TOK/train.tok.$SRC" "$TOK/train.tok.$TGT" \
    -s "$BPE_OPS" -o "$TOK/bpe.codes.tmp" --write-vocabulary "$TOK/vocab.$SRC" "$TOK/vocab.$TGT"
  echo "$KEY" > "$TOK/inputs.key"
  mv "$TOK/bpe.codes.tmp" "$TOK/bpe.codes"
else
  echo "  reusing $TOK (same data and --bpe-ops)"
fi
for split in "${SPLITS[@]}"; do
  for l in "$SRC" "$TGT"; do
    subword-nmt apply-bpe -c "$TOK/bpe.codes" --vocabulary "$TOK/vocab.$l" --vocabulary-threshold 1 \
      < "$TOK/$split.tok.$l" > "$TOK/$split.bpe.$l"
  done
done

step "3/7 binarize (fairseq-preprocess, joined dictionary)"
TESTPREF=$(printf "$TOK/%s.bpe," "${TEST_SPLITS[@]}"); TESTPREF=${TESTPREF%,}
rm -rf "$BIN"
fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" \
  --trainpref "$TOK/train.bpe" --validpref "$TOK/valid.bpe" \
  --testpref "$TESTPREF" \
  --destdir "$BIN" --joined-dictionary --workers 2 > "$WORKDIR/preprocess.log" 2>&1 \
  || die "fairseq-preprocess failed; see $WORKDIR/preprocess.log"
VOCAB=$(( $(wc -l < "$BIN/dict.$SRC.txt") + 4 ))
echo "  joined vocabulary: $VOCAB types"

step "4/7 train $ARCH: $UPDATES updates$( ((MINUTES > 0)) && echo ", at most $MINUTES minutes") (fairseq-train)"
STOP_ARGS=()
((MINUTES > 0)) && STOP_ARGS=(--stop-time-hours "$(python -c "print($MINUTES / 60)")")
rm -rf "$CKPT"  # a fresh run each time: the result should not depend on earlier runs
fairseq-train "$BIN" --user-dir "$ROOT/fairseq_define" --arch "$ARCH" \
  --task translation --source-lang "$SRC" --target-lang "$TGT" --share-all-embeddings \
  --optimizer adam --adam-betas '(0.9, 0.98)' --clip-norm 0.0 \
  --lr 1.5e-3 --lr-scheduler inverse_sqrt --warmup-updates 200 \
  --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --dropout 0.1 \
  --max-tokens 2048 --max-update "$UPDATES" "${STOP_ARGS[@]}" \
  --save-dir "$CKPT" --no-epoch-checkpoints --seed 1 --cpu \
  --log-format simple --log-interval 20 "${EXTRA_TRAIN_ARGS[@]}" 2>&1 | tee "$WORKDIR/train.log" | \
  grep --line-buffered -E "\| (train_inner|train|valid) \||parameters \(paper|done training" | \
  sed -u -E 's/^[0-9-]+ [0-9:]+ \| INFO \| //' || true
[[ -s "$CKPT/checkpoint_best.pt" ]] || die "training wrote no checkpoint; see $WORKDIR/train.log"
UPDATES_DONE=$(grep -oE "num_updates [0-9]+" "$WORKDIR/train.log" | tail -1 | cut -d' ' -f2)
CUT=""
if (( ${UPDATES_DONE:-0} < UPDATES )); then
  CUT="WARNING: the ${MINUTES}-minute cap stopped training at $UPDATES_DONE of $UPDATES updates, so BLEU is below what the full run gives; rerun with --minutes 0 (no cap)"
  echo "  $CUT" >&2
fi

step "5/7 translate the test set$( ((${#TEST_SPLITS[@]} > 1)) && echo "s") (fairseq-generate, beam 4, lenpen 0.6)"
for split in "${TEST_SPLITS[@]}"; do
  fairseq-generate "$BIN" --user-dir "$ROOT/fairseq_define" --path "$CKPT/checkpoint_best.pt" \
    --gen-subset "$split" --beam 4 --lenpen 0.6 --max-tokens 4096 --remove-bpe --cpu \
    > "$WORKDIR/generate.$split.log" 2> "$WORKDIR/generate.$split.err" \
    || die "fairseq-generate failed; see $WORKDIR/generate.$split.err"
  grep '^H-' "$WORKDIR/generate.$split.log" | sed 's/^H-//' | sort -n -k1,1 | cut -f3 \
    | sacremoses -l "$TGT" -j 2 detokenize > "$WORKDIR/$split.hyp.$TGT"
  [[ $(wc -l < "$WORKDIR/$split.hyp.$TGT") == $(wc -l < "$RAW/$split.$TGT") ]] \
    || die "fairseq-generate returned fewer hypotheses than $split sentences; see $WORKDIR/generate.$split.log"
done

step "6/7 score (sacreBLEU and chrF, detokenized, against the untokenized references)"
declare -A BLEU CHRF COPY
for split in "${TEST_SPLITS[@]}"; do
  BLEU[$split]=$(sacrebleu "$RAW/$split.$TGT" -i "$WORKDIR/$split.hyp.$TGT" -m bleu -b -w 2)
  CHRF[$split]=$(sacrebleu "$RAW/$split.$TGT" -i "$WORKDIR/$split.hyp.$TGT" -m chrf -b -w 2)
  COPY[$split]=$(sacrebleu "$RAW/$split.$TGT" -i "$RAW/$split.$SRC" -b -w 2)
done

step "7/7 parameters of the trained model and of fairseq's transformer at the same sizes"
python - "$CKPT/checkpoint_best.pt" "$VOCAB" > "$WORKDIR/params.txt" <<'PY' || die "counting parameters failed"
import sys
from fairseq import checkpoint_utils
from fairseq_define.param_report import format_distribution, parameter_distribution
from fairseq_define.tools.params import build_arch, define_units, same_size_flags
from fairseq_define.tools.result_records import load_model

path, vocab = sys.argv[1], int(sys.argv[2])
model = load_model(path)
cfg = checkpoint_utils.safe_torch_load(path, map_location="cpu")["cfg"]["model"]
counts = parameter_distribution(model)
print(format_distribution(counts, cfg.arch))
if define_units(model):  # the same Transformer with plain tables
    base, _ = build_arch("transformer", vocab, None, same_size_flags(cfg))
    base_counts = parameter_distribution(base)
    print(format_distribution(base_counts, "transformer (same sizes)"))
    print(f"  ratio {cfg.arch} / transformer = {counts['total'] / base_counts['total']:.3f}")
PY

echo
echo "=================== DeFINE NMT demo: $SRC -> $TGT, $(wc -l < "$RAW/test.$SRC") test sentences ==================="
for split in "${TEST_SPLITS[@]}"; do
  label="$split"; [[ "$split" == test ]] || label="$split (${ALSO_TEST[$(( ${split#test} - 1 ))]##*/})"
  ((${#TEST_SPLITS[@]} > 1)) && echo "  $label, $(wc -l < "$RAW/$split.$SRC") sentences:"
  printf "  %-44s sacreBLEU %6s  chrF %6s\n" "$ARCH ($UPDATES_DONE updates on CPU)" "${BLEU[$split]}" "${CHRF[$split]}"
  printf "  %-44s sacreBLEU %6s\n" "copy the source sentence (baseline)" "${COPY[$split]}"
done
echo "  parameters:"
sed 's/^/    /' "$WORKDIR/params.txt"
[[ -z "$CUT" ]] || echo "  $CUT"
python -c "import sys; b, c = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if b > c else 1)" "${BLEU[test]}" "${COPY[test]}" \
  || die "BLEU ${BLEU[test]} is not above the copy baseline ${COPY[test]}: training failed to learn"
