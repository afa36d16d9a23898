#!/usr/bin/env bash
# fairseq 0.12.2's own tests (tag v0.12.2) against the patched fairseq installed in .venv.
#
#   make fairseq-tests                                      # the archive below, else GitHub's
#   FAIRSEQ_SRC=/path/to/fairseq-0.12.2[.tar.gz] make fairseq-tests   # a checkout or archive
#
# The test suite is not in fairseq's source distribution on PyPI (fairseq-0.12.2.tar.gz holds
# fairseq/, fairseq_cli/ and fairseq/examples/ only), so the tests come from the v0.12.2 tag:
# FAIRSEQ_SRC, else fairseq-v0.12.2-tests.tar.gz in ../shared/fairseq beside the checkout when
# it is there (the tag's tests/ and the examples/ modules they import), else the tag's archive
# from GitHub. They are unpacked into a temporary folder, never into this repository, and run
# from a folder that holds only tests/ and examples/, so `import fairseq` finds the installed,
# patched package. patch/README.md gives the counts.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
URL=${FAIRSEQ_TESTS_URL:-https://github.com/facebookresearch/fairseq/archive/refs/tags/v0.12.2.tar.gz}
LOCAL_ARCHIVE=$ROOT/../shared/fairseq/fairseq-v0.12.2-tests.tar.gz
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

"$PY" -m fairseq_define_patch --check >/dev/null 2>&1 || { echo "$0: error: fairseq is not patched: run make setup" >&2; exit 2; }
if [ -z "${FAIRSEQ_SRC:-}" ] && [ -f "$LOCAL_ARCHIVE" ]; then
  FAIRSEQ_SRC=$LOCAL_ARCHIVE
fi
if [ -n "${FAIRSEQ_SRC:-}" ] && [ -d "$FAIRSEQ_SRC" ]; then
  SRC=$FAIRSEQ_SRC
else
  ARCHIVE=${FAIRSEQ_SRC:-$TMP/fairseq-v0.12.2.tar.gz}
  if [ -z "${FAIRSEQ_SRC:-}" ]; then
    "$PY" - "$URL" "$ARCHIVE" <<'PYEOF' || { echo "$0: error: cannot download $URL; set FAIRSEQ_SRC to a fairseq v0.12.2 checkout or archive" >&2; exit 2; }
import sys, urllib.request
try:
    urllib.request.urlretrieve(sys.argv[1], sys.argv[2])
except OSError:
    sys.exit(1)
PYEOF
  fi
  [ -f "$ARCHIVE" ] || { echo "$0: error: FAIRSEQ_SRC=$ARCHIVE is neither a folder nor an archive" >&2; exit 2; }
  mkdir "$TMP/src"
  tar xzf "$ARCHIVE" -C "$TMP/src" --strip-components=1 2>/dev/null || { echo "$0: error: cannot unpack $ARCHIVE (a .tar.gz of fairseq v0.12.2 expected)" >&2; exit 2; }
  SRC=$TMP/src
fi
[ -d "$SRC/tests" ] || { echo "$0: error: $SRC has no tests/ folder (the PyPI sdist has none: use the v0.12.2 tag)" >&2; exit 2; }
mkdir "$TMP/run"
cp -r "$SRC/tests" "$TMP/run/tests"
cp -r "$SRC/examples" "$TMP/run/examples" 2>/dev/null || true

# What runs: every test of the archive's tests/ folder but those named below, each with its
# reason: the CPU tests of fairseq's modules, and the end-to-end tests of the CLIs the patch
# rewrites (test_binaries.py: train, generate, interactive, validate and eval-lm on tiny
# synthetic data; test_train.py: checkpoint loading).
# Folders and files left out as a whole:
LEFT_OUT_FILES=(
  "tests/test_dataclass_utils.py|invalid under Python 3.11: its own dataclasses have mutable defaults (ValueError at import)"
  "tests/test_average_checkpoints.py|imports fairseq's scripts/ package, which neither the pip package nor the tag's tests archive holds"
  "tests/speech|network: 5 tests download pretrained speech checkpoints (the others need a GPU)"
)
# Single tests left out (node ids: a prefix deselects every parametrization):
DESELECT=(
  "tests/test_multihead_attention.py::test_xformers_blocksparse_parity|xFormers is not installed (0.12.2 does not skip these without it)"
  "tests/test_multihead_attention.py::test_xformers_single_forward_parity|xFormers is not installed (0.12.2 does not skip these without it)"
  "tests/test_file_io.py::TestFileIO::test_file_io_async|iopath is not installed (asynchronous checkpoint writes only)"
  "tests/test_binaries.py::TestTranslation::test_insertion_transformer|needs fairseq's libnat C++ extension, which a pip install does not build"
)
# test_binaries.py tests left out for time, each training 15-160 s on 2 loaded cores (a node id
# deselects every test it begins, so test_translation_multi_simple_epoch takes its variants
# along). The kept ones run train, generate, interactive, validate and eval-lm on translation
# (transformer with its encoder fast path and cross-self-attention, LSTM, fconv, lightconv,
# dynamicconv, alignment, mixture of experts), language models (transformer with and without
# adaptive softmax, LSTM) and masked LMs; these run the same CLIs on other models.
FOR_TIME="left out for time: the kept test_binaries.py tests run the same CLIs on other models"
for t in TestTranslation::test_multilingual_transformer TestTranslation::test_multilingual_translation_latent_depth \
    TestTranslation::test_translation_multi_simple_epoch TestTranslation::test_transformer_pointer_generator \
    TestTranslation::test_cmlm_transformer TestTranslation::test_nonautoregressive_transformer \
    TestTranslation::test_iterative_nonautoregressive_transformer TestTranslation::test_laser_lstm \
    TestTranslation::test_laser_transformer TestTranslation::test_transformer_layerdrop TestStories::test_fconv_self_att_wp \
    TestLanguageModeling::test_fconv_lm TestLanguageModeling::test_normformer_lm TestLanguageModeling::test_lightconv_lm \
    TestLanguageModeling::test_lstm_lm_residuals TestMaskedLanguageModel::test_roberta_masked_lm \
    TestMaskedLanguageModel::test_roberta_regression_single TestMaskedLanguageModel::test_roberta_regression_multiple \
    TestMaskedLanguageModel::test_linformer_roberta_masked_lm TestMaskedLanguageModel::test_linformer_roberta_sentence_prediction \
    TestMaskedLanguageModel::test_linformer_roberta_regression_single \
    TestMaskedLanguageModel::test_linformer_roberta_regression_multiple \
    TestMaskedLanguageModel::test_pretrained_masked_lm_for_translation_learned_pos_emb \
    TestMaskedLanguageModel::test_pretrained_masked_lm_for_translation_sinusoidal_pos_emb \
    TestMaskedLanguageModel::test_pretrained_masked_lm_for_translation_encoder_only TestMaskedLanguageModel::test_r4f_roberta \
    TestOptimizers::test_optimizers TestActivationCheckpointing; do
  DESELECT+=("tests/test_binaries.py::$t|$FOR_TIME")
done
ARGS=()
echo "fairseq 0.12.2 tests from $SRC: tests/ but these:"
for entry in "${LEFT_OUT_FILES[@]}"; do
  ARGS+=(--ignore "${entry%%|*}")
  echo "  ${entry%%|*}: ${entry#*|}"
done
for entry in "${DESELECT[@]}"; do
  ARGS+=(--deselect "${entry%%|*}")
  echo "  ${entry%%|*}: ${entry#*|}"
done
cd "$TMP/run"
start=$(date +%s)
status=0
# pytest-xdist workers as in make test (TEST_WORKERS=0: one process), one torch thread each
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
# with Ctrl-C's KeyboardInterrupt: a run started in the background (`make fairseq-tests &`, a
# job runner) inherits SIGINT ignored, and fairseq's distributed timeout wrapper test then
# never sees the KeyboardInterrupt it expects (its workers inherit the handler as the default)
"$PY" -c 'import signal, sys, pytest; signal.signal(signal.SIGINT, signal.default_int_handler); sys.exit(pytest.main(sys.argv[1:]))' \
  -q -p no:cacheprovider -n "${TEST_WORKERS:-2}" tests "${ARGS[@]}" "$@" || status=$?
echo "fairseq 0.12.2 tests: $(( $(date +%s) - start )) s (exit $status)"
exit $status
