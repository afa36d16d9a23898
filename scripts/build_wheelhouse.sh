#!/usr/bin/env bash
# Every dependency of this package as a wheel for one Python, so that a machine with no
# network (a GPU box, often) installs it from a folder: fairseq 0.12.2 built from its sdist
# with its compiled parts, this package, hydra-core, omegaconf, sacrebleu, sentencepiece,
# subword-nmt, sacremoses, matplotlib, tqdm, torchaudio (fairseq requires it), the test
# extras (pytest, pytest-xdist, hypothesis, filelock: scripts/gpu_check.sh runs the tests),
# their own dependencies, and a pip older than 24.1 (newer ones refuse omegaconf 2.0.6's
# metadata). Not torch: the target machine has its own (CUDA) build.
#
#   Command:   bash scripts/build_wheelhouse.sh --python python3.11 --out wheelhouse
#   Hardware:  a machine with a network (or a package index), the chosen Python, a C++
#              compiler; 2 cores: about 5 minutes, most of it building fairseq.
#   Needs:     torch for the chosen Python in the build environment, a CPU build by choice:
#              fairseq's setup.py compiles its C++ extensions against the torch it imports
#              (--no-build-isolation). Its torch extensions (libbase, libnat) are tied to
#              that torch version; nothing in this package imports them, the other compiled
#              parts (libbleu, the Cython data utilities) depend on numpy only. Give
#              --torch 'torch==X' matching the target's torch to have those two usable too.
#              Python 3.12 and newer: PyPI's default torch for Linux is a CUDA build
#              (gigabytes with its nvidia packages); pass --torch-index with a CPU wheel index.
#   Then, on the target (its CUDA torch already installed, Python of the same minor version):
#              python -m pip install --no-index --find-links wheelhouse 'pip<24.1'
#              python -m pip install --no-index --find-links wheelhouse 'fairseq-define[test]'
#              fairseq-define-patch-fairseq --apply
#              bash scripts/gpu_check.sh --out gpu-check    (in a checkout, with the data root)
#   Output:    OUT/*.whl and OUT/requirements.txt (the versions resolved for that Python).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT_NAME="$(basename "$0")"
die() { echo "$SCRIPT_NAME: error: $*" >&2; exit 2; }
script_header() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }

PY="" OUT="" TORCH="torch==$(sed -n 's/^torch==//p' "$ROOT/constraints.txt")" TORCH_INDEX="" KEEP=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --python) PY="${2:-}"; shift 2 ;;
    --out) OUT="${2:-}"; shift 2 ;;
    --torch) TORCH="${2:-}"; shift 2 ;;
    --torch-index) TORCH_INDEX="${2:-}"; shift 2 ;;
    --keep-build-env) KEEP=1; shift ;;
    -h|--help) script_header
      printf '%s\n' "Options:" \
        "  --python PY        the Python to build for (a command or a path; required)" \
        "  --out DIR          where the wheels go (required; created)" \
        "  --torch SPEC       the torch that fairseq's build imports (default: constraints.txt's, $TORCH)" \
        "  --torch-index URL  the index to take that torch from (e.g. a CPU wheel index)" \
        "  --keep-build-env   keep the temporary build environment (its path is printed)"
      exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ -n "$PY" ]] || die "--python PY is required (see --help)"
[[ -n "$OUT" ]] || die "--out DIR is required (see --help)"
command -v "$PY" > /dev/null || die "no Python '$PY' found"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 8) else 1)' || die "$PY is older than Python 3.8"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

BUILD="$(mktemp -d)"
if [[ $KEEP == 1 ]]; then echo "build environment: $BUILD/venv"; else trap 'rm -rf "$BUILD"' EXIT; fi
"$PY" -m venv "$BUILD/venv"
VPY="$BUILD/venv/bin/python"
# the venv's own pip stays: pip >= 24.1 refuses omegaconf 2.0.6 (the one fairseq 0.12.2 takes)
pip_() { "$VPY" -m pip --disable-pip-version-check "$@"; }
echo "==> build environment: $("$VPY" --version), pip $(pip_ --version | cut -d' ' -f2)"
[[ "$(pip_ --version | cut -d' ' -f2 | cut -d. -f1)" -lt 24 ]] || pip_ install 'pip<24.1'

echo "==> torch for fairseq's build: $TORCH${TORCH_INDEX:+ from $TORCH_INDEX}"
if [[ -n "$TORCH_INDEX" ]]; then pip_ install --index-url "$TORCH_INDEX" "$TORCH"; else pip_ install "$TORCH"; fi
# fairseq's build requirements; Python 3.12 venvs come without setuptools
pip_ install setuptools wheel cython numpy

echo "==> fairseq 0.12.2 from its sdist (compiled against this numpy and torch)"
# --no-binary: a prebuilt fairseq wheel found on an index or in PIP_FIND_LINKS would not be
# built against the torch above
pip_ wheel --no-deps --no-build-isolation --no-binary fairseq -w "$OUT" fairseq==0.12.2
echo "==> this package"
pip_ wheel --no-deps -w "$OUT" "$ROOT"

echo "==> the dependencies, resolved for $("$VPY" --version)"
# installing both wheels (torch is there) resolves every other requirement for this Python;
# the frozen list, less torch and the two wheels above, is what the target needs
pip_ install --find-links "$OUT" "fairseq-define[test]"
pip_ freeze --all | grep -v -i -E '^(torch|fairseq|fairseq-define|fairseq_define|nvidia-.*|triton)([=@ ]|$)' \
  | grep -v -E '^-e ' > "$OUT/requirements.txt"
pip_ wheel --no-deps -w "$OUT" -r "$OUT/requirements.txt"

# a check that the folder is complete: a fresh venv with only this torch installs everything offline
echo "==> check: an offline install from $OUT into a fresh environment"
"$PY" -m venv "$BUILD/check"
CPY="$BUILD/check/bin/python"
"$CPY" -m pip --disable-pip-version-check install --no-index --find-links "$OUT" 'pip<24.1' > /dev/null
if [[ -n "$TORCH_INDEX" ]]; then "$CPY" -m pip install -q --index-url "$TORCH_INDEX" "$TORCH"; else "$CPY" -m pip install -q "$TORCH"; fi
"$CPY" -m pip --disable-pip-version-check install --no-index --find-links "$OUT" 'fairseq-define[test]' > "$BUILD/check.log" 2>&1 \
  || { tail -20 "$BUILD/check.log" >&2; die "the wheelhouse does not install offline (log above)"; }
"$BUILD/check/bin/fairseq-define-patch-fairseq" --apply > /dev/null
"$CPY" -c "import fairseq_define, fairseq.libbleu, fairseq.data.data_utils_fast" \
  || die "fairseq_define does not import in the checked environment"
echo "wheelhouse: $OUT ($(ls "$OUT"/*.whl | wc -l) wheels, $(du -sh "$OUT" | cut -f1)); offline install checked"
