#!/usr/bin/env bash
# CI on a Python other than the suite's 3.11 (3.12, 3.13). First the patch alone, as a user of
# stock fairseq installs it with the newest pip: a fresh venv, pip upgraded, torch, the patch
# (patch/), fairseq 0.12.2 with --no-deps, --apply, then the patch's own suite (patch/tests:
# stock fairseq-preprocess, -train, -generate with a stock transformer; no plugin installed) and
# fairseq's own tests (94 s on 2 idle cores).
# Then, in that venv, the plugin's set-up through make (torch from PyPI there, its CUDA build),
# the patch's check, the in-process tests (pytest -m "not cli")
# and one translation and one language model through the stock CLIs with --user-dir on the
# shipped slices (tests/data): fairseq-preprocess, -train, -generate and -eval-lm, whose output
# must hold no traceback and no SyntaxWarning. Every module is compiled afresh for them
# (an empty PYTHONPYCACHEPREFIX), so a warning at compile time cannot hide behind a cached .pyc.
#
#   scripts/ci_other_python.sh PYTHON [VENV]    e.g. scripts/ci_other_python.sh python3.12
#
# VENV (default .venv-ci-pyX.Y) is removed first: the set-up is always a fresh one.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

die() { echo "ci_other_python.sh: error: $*" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: scripts/ci_other_python.sh PYTHON [VENV]"
PY=$1
command -v "$PY" >/dev/null 2>&1 || die "no Python interpreter '$PY'"
VER=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || die "'$PY' is not a Python"
VENV=${2:-.venv-ci-py$VER}
BIN=$ROOT/$VENV/bin
start=$SECONDS
step() { echo "== [$((SECONDS - start)) s] $*"; }

step "the patch alone, newest pip: $VENV (Python $VER)"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$BIN/python" -m pip install -q --disable-pip-version-check --upgrade pip
echo "   $("$BIN/python" -m pip --version | cut -d' ' -f1-2)"
# torch as make setup pins it (constraints.txt), so that the plugin's set-up below keeps it
PIP_CONSTRAINT=$ROOT/constraints.txt "$BIN/python" -m pip install -q "torch==$(sed -n 's/^torch==//p' constraints.txt)"
PIP_CONSTRAINT=$ROOT/constraints.txt "$BIN/python" -m pip install -q "./patch[test]"
"$BIN/python" -m pip install -q --no-deps fairseq==0.12.2
"$BIN/python" -m fairseq_define_patch --apply >/dev/null
"$BIN/python" -I -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("fairseq_define") is not None)' \
    || die "the plugin is installed in the patch-alone venv"
step "the patch's suite on Python $VER (stock fairseq CLIs, no plugin)"
(cd patch && PATH="$BIN:$PATH" "$BIN/python" -m pytest tests -q -p no:cacheprovider -n 2 --dist loadfile)
# fairseq's own tests on the patch alone (the v0.12.2 tag's: FAIRSEQ_SRC, else ../shared's archive)
if [ -n "${FAIRSEQ_SRC:-}" ] || [ -f "$ROOT/../shared/fairseq/fairseq-v0.12.2-tests.tar.gz" ]; then
    step "fairseq 0.12.2's own tests on Python $VER, the patch alone (scripts/run_fairseq_tests.sh)"
    PYTHON="$BIN/python" bash scripts/run_fairseq_tests.sh
else
    step "fairseq's own tests: skipped (no FAIRSEQ_SRC and no ../shared/fairseq archive)"
fi

step "set-up: make setup PYTHON=$PY VENV=$VENV (Python $VER), in that venv"
make setup PYTHON="$PY" VENV="$VENV"
"$BIN/python" -m fairseq_define_patch --check >/dev/null
du -sh "$VENV"

# the fresh-machine case, as .ci/run's first step: no data root, so the corpus tests skip
NO_DATA=$(mktemp -d)
WORK=$(mktemp -d)
trap 'rm -rf "$NO_DATA" "$WORK"' EXIT
step "in-process tests on Python $VER"
t0=$SECONDS
FAIRSEQ_DEFINE_DATA=$NO_DATA make test-fast VENV="$VENV" PYTEST_ARGS="-q"
echo "   make test-fast on Python $VER: $(((SECONDS - t0) / 60)) min $(((SECONDS - t0) % 60)) s (goal: at most 3 min)"

step "fairseq CLIs with --user-dir on Python $VER"
export PATH="$BIN:$PATH" PYTHONPYCACHEPREFIX=$WORK/pycache
USER_DIR=$ROOT/fairseq_define
run() {  # run a CLI, its output to $WORK/NAME.log; fail on a non-zero exit, a traceback or a SyntaxWarning
    local name=$1 t0=$SECONDS; shift
    if ! "$@" >"$WORK/$name.log" 2>&1; then
        tail -n 30 "$WORK/$name.log"; die "$name failed: $*"
    fi
    if grep -n -E "Traceback|SyntaxWarning" "$WORK/$name.log"; then
        die "$name printed a traceback or a SyntaxWarning (above)"
    fi
    echo "   $name: $((SECONDS - t0)) s"
}
TINY=(--encoder-embed-dim 64 --decoder-embed-dim 64 --encoder-ffn-embed-dim 128 --decoder-ffn-embed-dim 128
      --encoder-layers 2 --decoder-layers 2 --define-map-dim 32 --define-expand-dim 128)
run nmt-preprocess fairseq-preprocess -s en -t de --trainpref tests/data/wmt_news/train \
    --validpref tests/data/wmt_news/valid --testpref tests/data/wmt_news/test --destdir "$WORK/wmt" \
    --joined-dictionary --nwordssrc 3000 --workers 1
run nmt-train fairseq-train "$WORK/wmt" --user-dir "$USER_DIR" --arch define_transformer_tiny "${TINY[@]}" \
    --optimizer adam --lr 1e-3 --max-tokens 1500 --max-update 8 --save-dir "$WORK/nmt-ckpt" --cpu \
    --no-epoch-checkpoints --log-format simple --seed 3
run nmt-generate fairseq-generate "$WORK/wmt" --user-dir "$USER_DIR" --path "$WORK/nmt-ckpt/checkpoint_last.pt" \
    --gen-subset test --beam 2 --max-len-b 20 --batch-size 20 --cpu
[ "$(grep -c '^H-' "$WORK/nmt-generate.log")" = 40 ] && grep -q "BLEU4 = " "$WORK/nmt-generate.log" \
    || die "fairseq-generate did not translate the 40 test sentences"

for split in train valid test; do head -n 600 "tests/data/ptb_style/$split.txt" >"$WORK/ptb.$split"; done
run lm-preprocess fairseq-preprocess --only-source --trainpref "$WORK/ptb.train" --validpref "$WORK/ptb.valid" \
    --testpref "$WORK/ptb.test" --destdir "$WORK/ptb" --workers 1
run lm-train fairseq-train "$WORK/ptb" --user-dir "$USER_DIR" --task contiguous_lm --arch define_lstm_tiny \
    --tokens-per-sample 20 --optimizer adam --lr 1e-3 --batch-size 8 --max-update 20 --save-dir "$WORK/lm-ckpt" \
    --cpu --no-epoch-checkpoints --log-format simple --seed 3
run lm-eval fairseq-eval-lm "$WORK/ptb" --user-dir "$USER_DIR" --task contiguous_lm --cpu \
    --path "$WORK/lm-ckpt/checkpoint_last.pt" --gen-subset test
grep -q "Perplexity: " "$WORK/lm-eval.log" || die "fairseq-eval-lm printed no perplexity"

step "Python $VER: done"
