#!/usr/bin/env bash
# DeFINE Transformer NMT demo: English -> German on real text, end to end on a CPU.
#
#   Command:   make demo            (or: bash examples/nmt_demo/run.sh [options])
#   Hardware:  2 CPU cores, no GPU; about 9 minutes in all (8 min 38 s here with --also-test:
#              1000 updates of the DeFINE model, 3.8 minutes, and 1000 of its baseline; a
#              6-minute cap per model stops slower machines early and says so; --no-baseline
#              halves it).
#   Expected:  sacreBLEU on 502 held-out Tatoeba sentences about 10 for define_transformer_tiny
#              and 13 for the same-size Transformer in the paper's baseline form (2.40M vs
#              2.99M parameters), both well above copying the source (README "Quick start"
#              shows what this printed here); at this scale the same-size Transformer leads,
#              as in docs/studies.md's study 1 at equal d.
#   Paper:     Table 3 (WMT14 EN-DE, GPUs; fairseq-define-results paper --table 3 prints its
#              BLEU and parameters). This demo is a pipeline check at toy scale, not a
#              reproduction (run_scripts/ holds the paper recipes).
#
# Pipeline: split -> sacremoses tokenization -> subword-nmt joint BPE -> fairseq-preprocess
# -> fairseq-train (define_transformer_tiny in Table 3's form: a DeFINE map and unit per side,
# a d-wide untied output layer; 1000 updates) -> the baseline, fairseq's transformer at the
# same sizes in the paper's baseline form (a table per side, an untied output layer) ->
# fairseq-generate (beam 4, lenpen 0.6) -> detokenize -> sacreBLEU and chrF against the
# untokenized references.
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
MINUTES=6
UPDATES=1000
BASELINE=1
BPE_OPS=4000
ARCH=define_transformer_tiny
EXTRA_TRAIN_ARGS=()

usage() {
  script_header
  cat <<EOF

Options:
  --src LANG / --tgt LANG       language codes (default en / de)
  --src-file F --tgt-file F     parallel corpus (.gz allowed), split 16:1:1 by line number
  --train P --valid P --test P  ready splits: P.LANG files
  --also-test P                 one more test set (P.LANG files), scored too; repeatable
  --workdir DIR                 outputs (default work/nmt_demo); reruns reuse tokenization and
                                BPE when their inputs are unchanged, and redo them otherwise
  --updates U                   training updates (default 1000, about 5 min a model here)
  --minutes M                   training time cap per model (default 6; 0: none); a run it
                                cuts short is reported as such
  --no-baseline                 do not train the baseline (fairseq's transformer at the same
                                sizes, with the same recipe and the -- ARGS that are not
                                --define-* settings)
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
    --no-baseline) BASELINE=0; shift ;;
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
  codes="$(fresh_tmp "$TOK/bpe.codes")"
  subword-nmt learn-joint-bpe-and-vocab --input "$TOK/train.tok.$SRC" "$TOK/train.tok.$TGT" \
    -s "$BPE_OPS" -o "$codes" --write-vocabulary "$TOK/vocab.$SRC" "$TOK/vocab.$TGT"
  echo "$KEY" > "$TOK/inputs.key"
  mv -f "$codes" "$TOK/bpe.codes"
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

# train_model ARCH SAVE_DIR LOG [ARGS...]: the demo's recipe (the same for the baseline);
# sets UPDATES_DONE and CUT (a warning when the time cap stopped training early)
train_model() {
  local arch=$1 save=$2 log=$3; shift 3
  local stop=()
  ((MINUTES > 0)) && stop=(--stop-time-hours "$(python -c "print($MINUTES / 60)")")
  rm -rf "$save"  # a fresh run each time: the result should not depend on earlier runs
  fairseq-train "$BIN" --user-dir "$ROOT/fairseq_define" --arch "$arch" \
    --task translation --source-lang "$SRC" --target-lang "$TGT" \
    --optimizer adam --adam-betas '(0.9, 0.98)' --clip-norm 0.0 \
    --lr 1.5e-3 --lr-scheduler inverse_sqrt --warmup-updates 200 \
    --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --dropout 0.1 \
    --max-tokens 2048 --max-update "$UPDATES" "${stop[@]}" \
    --save-dir "$save" --no-epoch-checkpoints --seed 1 --cpu \
    --log-format simple --log-interval 20 "$@" 2>&1 | tee "$log" | \
    grep --line-buffered -E "\| (train_inner|train|valid) \||parameters \(paper|done training" | \
    sed -u -E 's/^[0-9-]+ [0-9:]+ \| INFO \| //' || true
  [[ -s "$save/checkpoint_best.pt" ]] || die "training wrote no checkpoint; see $log"
  UPDATES_DONE=$(grep -oE "num_updates [0-9]+" "$log" | tail -1 | cut -d' ' -f2)
  CUT=""
  if (( ${UPDATES_DONE:-0} < UPDATES )); then
    CUT="WARNING: the ${MINUTES}-minute cap stopped training $arch at $UPDATES_DONE of $UPDATES updates, so its BLEU is below what the full run gives; rerun with --minutes 0 (no cap)"
    echo "  $CUT" >&2
  fi
}

# translate_and_score NAME SAVE_DIR: beam search on every test split, detokenized sacreBLEU
# and chrF into BLEU[NAME/split] and CHRF[NAME/split]
declare -A BLEU CHRF COPY
translate_and_score() {
  local name=$1 save=$2 split
  for split in "${TEST_SPLITS[@]}"; do
    fairseq-generate "$BIN" --user-dir "$ROOT/fairseq_define" --path "$save/checkpoint_best.pt" \
      --gen-subset "$split" --beam 4 --lenpen 0.6 --max-tokens 4096 --remove-bpe --cpu \
      > "$WORKDIR/generate.$name.$split.log" 2> "$WORKDIR/generate.$name.$split.err" \
      || die "fairseq-generate failed; see $WORKDIR/generate.$name.$split.err"
    grep '^H-' "$WORKDIR/generate.$name.$split.log" | sed 's/^H-//' | sort -n -k1,1 | cut -f3 \
      | sacremoses -l "$TGT" -j 2 detokenize > "$WORKDIR/$name.$split.hyp.$TGT"
    [[ $(wc -l < "$WORKDIR/$name.$split.hyp.$TGT") == $(wc -l < "$RAW/$split.$TGT") ]] \
      || die "fairseq-generate returned fewer hypotheses than $split sentences; see $WORKDIR/generate.$name.$split.log"
    BLEU[$name/$split]=$(sacrebleu "$RAW/$split.$TGT" -i "$WORKDIR/$name.$split.hyp.$TGT" -m bleu -b -w 2)
    CHRF[$name/$split]=$(sacrebleu "$RAW/$split.$TGT" -i "$WORKDIR/$name.$split.hyp.$TGT" -m chrf -b -w 2)
  done
}

step "4/7 train $ARCH: $UPDATES updates$( ((MINUTES > 0)) && echo ", at most $MINUTES minutes") (fairseq-train)"
train_model "$ARCH" "$CKPT" "$WORKDIR/train.log" "${EXTRA_TRAIN_ARGS[@]}"
DONE_MAIN=$UPDATES_DONE CUT_MAIN=$CUT

# the baseline: fairseq's transformer at the trained model's sizes, with the -- ARGS that are
# not DeFINE settings
python - "$CKPT/checkpoint_best.pt" > "$WORKDIR/baseline.args" <<'PY' || die "reading the model's sizes failed"
import sys
from fairseq import checkpoint_utils
from fairseq_define.tools.params import same_size_flags

print("\n".join(same_size_flags(checkpoint_utils.safe_torch_load(sys.argv[1], map_location="cpu")["cfg"]["model"])))
PY
mapfile -t BASE_ARGS < "$WORKDIR/baseline.args"
skip_value=0
for a in "${EXTRA_TRAIN_ARGS[@]}"; do
  if [[ "$a" == --define-* ]]; then skip_value=1; continue; fi
  if ((skip_value)) && [[ "$a" != --* ]]; then skip_value=0; continue; fi
  skip_value=0; BASE_ARGS+=("$a")
done
if ((BASELINE)); then
  step "5/7 train the baseline, fairseq's transformer at the same sizes, with the same recipe"
  train_model transformer "$WORKDIR/checkpoints_transformer" "$WORKDIR/train_transformer.log" "${BASE_ARGS[@]}"
  DONE_BASE=$UPDATES_DONE CUT_BASE=$CUT
else
  step "5/7 baseline skipped (--no-baseline)"
fi

step "6/7 translate the test set$( ((${#TEST_SPLITS[@]} > 1)) && echo "s") (fairseq-generate, beam 4, lenpen 0.6) and score (sacreBLEU and chrF, detokenized, against the untokenized references)"
translate_and_score main "$CKPT"
if ((BASELINE)); then translate_and_score transformer "$WORKDIR/checkpoints_transformer"; fi
for split in "${TEST_SPLITS[@]}"; do
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
  printf "  %-44s sacreBLEU %6s  chrF %6s\n" "$ARCH ($DONE_MAIN updates)" "${BLEU[main/$split]}" "${CHRF[main/$split]}"
  if ((BASELINE)); then
    printf "  %-44s sacreBLEU %6s  chrF %6s\n" "transformer, same sizes ($DONE_BASE updates)" \
      "${BLEU[transformer/$split]}" "${CHRF[transformer/$split]}"
  fi
  printf "  %-44s sacreBLEU %6s\n" "copy the source sentence" "${COPY[$split]}"
done
echo "  parameters:"
sed 's/^/    /' "$WORKDIR/params.txt"
[[ -z "$CUT_MAIN" ]] || echo "  $CUT_MAIN"
[[ -z "${CUT_BASE:-}" ]] || echo "  $CUT_BASE"
if (( UPDATES >= 1000 )); then  # a shorter run may not beat copying yet
  python -c "import sys; b, c = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if b > c else 1)" "${BLEU[main/test]}" "${COPY[test]}" \
    || die "BLEU ${BLEU[main/test]} is not above the copy baseline ${COPY[test]}: training failed to learn"
fi
