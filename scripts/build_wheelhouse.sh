#!/usr/bin/env bash
# Every dependency of this package as a wheel for one Python, so that a machine with no
# network (a GPU box, often) installs it from a folder: fairseq 0.12.2 built from its sdist
# with its compiled parts, this package and its requirements (fairseq's run-time ones among
# them: hydra-core, omegaconf, sacrebleu, bitarray, regex, tqdm; then sentencepiece,
# subword-nmt, sacremoses, matplotlib), the test extras (pytest, pytest-xdist, hypothesis,
# filelock: scripts/gpu_check.sh runs the tests) and their own dependencies. Not fairseq's own
# pins (hydra-core 1.0, omegaconf 2.0: fairseq goes in with --no-deps, docs/install.md), not
# torch: the target machine has its own (CUDA) build.
#
#   Command:   bash scripts/build_wheelhouse.sh --python python3.11 --out wheelhouse
#   Hardware:  a machine with a package index, the chosen Python and a C++ compiler; on 2
#              busy cores 5 min for Python 3.11 with the check (41 wheels, 65 MB), 3 min
#              20 s for 3.12 with --no-check (47 wheels, 71 MB, before hydra-core 1.3).
#   Build:     fairseq's compiled parts are libbleu and two Cython data utilities (numpy's
#              ABI). Its setup.py also compiles torch extensions (libbase, libnat) whenever it
#              can import torch, but the 0.12.2 sdist lacks their sources, so such a build
#              fails (ninja: fairseq/clib/libbase/balanced_assignment.cpp missing): fairseq is
#              built here with --no-build-isolation in an environment with setuptools, wheel,
#              Cython and numpy and without torch, and the other requirements are read from
#              this package's wheel metadata, so no torch is downloaded to build.
#   Check:     the end installs the folder offline into a fresh environment that first gets
#              torch (--torch SPEC, default constraints.txt's; --torch-index URL for a CPU
#              index) and imports the package; --no-check skips it. Python 3.12 and newer:
#              PyPI's Linux torch is a CUDA build of gigabytes: give a CPU --torch-index or
#              --no-check.
#   Then, on the target (its CUDA torch already installed, Python of the same minor version):
#              python -m pip install --no-index --find-links wheelhouse 'fairseq-define[test]'
#              python -m pip install --no-index --find-links wheelhouse --no-deps fairseq==0.12.2
#              python -m fairseq_define_patch --apply
#              bash scripts/gpu_check.sh --out gpu-check    (in a checkout, with the data root)
#   Output:    OUT/*.whl and OUT/requirements.txt (the versions resolved for that Python).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT_NAME="$(basename "$0")"
die() { echo "$SCRIPT_NAME: error: $*" >&2; exit 2; }
script_header() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }

PY="" OUT="" TORCH="torch==$(sed -n 's/^torch==//p' "$ROOT/constraints.txt")" TORCH_INDEX="" KEEP=0 CHECK=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --python) PY="${2:-}"; shift 2 ;;
    --out) OUT="${2:-}"; shift 2 ;;
    --torch) TORCH="${2:-}"; shift 2 ;;
    --torch-index) TORCH_INDEX="${2:-}"; shift 2 ;;
    --keep-build-env) KEEP=1; shift ;;
    --no-check) CHECK=0; shift ;;
    -h|--help) script_header
      printf '%s\n' "Options:" \
        "  --python PY        the Python to build for (a command or a path; required)" \
        "  --out DIR          where the wheels go (required; created)" \
        "  --torch SPEC       the torch of the offline-install check (default: constraints.txt's, $TORCH)" \
        "  --torch-index URL  the index to take that torch from (e.g. a CPU wheel index)" \
        "  --no-check         skip the check (no torch is downloaded at all)" \
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
pip_() { "$VPY" -m pip --disable-pip-version-check "$@"; }
echo "==> build environment: $("$VPY" --version), pip $(pip_ --version | cut -d' ' -f2)"

# fairseq's build requirements (Python 3.12 venvs come without setuptools); no torch: above
pip_ install setuptools wheel cython numpy

echo "==> fairseq 0.12.2 from its sdist"
# --no-binary, --no-cache-dir: not a prebuilt fairseq wheel (an index, PIP_FIND_LINKS, or pip's
# cache of the wheels it built before)
pip_ wheel --no-deps --no-build-isolation --no-binary fairseq --no-cache-dir -w "$OUT" fairseq==0.12.2
echo "==> this package and the patch (patch/, a distribution of its own)"
pip_ wheel --no-deps -w "$OUT" "$ROOT/patch" "$ROOT"

echo "==> the dependencies, resolved for $("$VPY" --version)"
# this package's and the patch's requirements (with the test extra), less torch: the patch's hold
# fairseq's run-time ones, not fairseq's stale pins; pip wheel resolves them and their own dependencies here
"$VPY" - "$OUT" > "$BUILD/requirements.in" <<'PYEOF'
import sys, zipfile
from pathlib import Path
from pip._vendor.packaging.requirements import Requirement

skip = {"torch", "fairseq", "fairseq-define", "fairseq-define-patch"}
for wheel in sorted(Path(sys.argv[1]).glob("*.whl")):
    if not wheel.name.startswith(("fairseq_define-", "fairseq_define_patch-")):
        continue
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        for line in z.read(meta).decode().splitlines():
            if line.startswith("Requires-Dist:"):
                req = Requirement(line.split(":", 1)[1].strip())
                if req.name.lower().replace("_", "-") in skip:
                    continue
                if req.marker is None or req.marker.evaluate({"extra": "test"}):
                    req.marker = None
                    print(req)
PYEOF
pip_ wheel -w "$OUT" -r "$BUILD/requirements.in"
ls "$OUT"/*.whl | grep -i -E '/(torch|nvidia_|triton)-' && die "a wheel above requires torch: the target's own torch must serve it, remove it and its requirement"
"$VPY" -c "
import sys
from pathlib import Path
for w in sorted(Path(sys.argv[1]).glob('*.whl')):
    name, version = w.name.split('-')[:2]
    print(f'{name}=={version}')" "$OUT" > "$OUT/requirements.txt"

if [[ $CHECK == 0 ]]; then
  echo "wheelhouse: $OUT ($(ls "$OUT"/*.whl | wc -l) wheels, $(du -sh "$OUT" | cut -f1)); not checked (--no-check)"
  exit 0
fi
# a check that the folder is complete: a fresh venv with only this torch installs everything offline
echo "==> check: an offline install from $OUT into a fresh environment"
"$PY" -m venv "$BUILD/check"
CPY="$BUILD/check/bin/python"
if [[ -n "$TORCH_INDEX" ]]; then "$CPY" -m pip install -q --index-url "$TORCH_INDEX" "$TORCH"; else "$CPY" -m pip install -q "$TORCH"; fi
{ "$CPY" -m pip --disable-pip-version-check install --no-index --find-links "$OUT" 'fairseq-define[test]' &&
  "$CPY" -m pip --disable-pip-version-check install --no-index --find-links "$OUT" --no-deps fairseq==0.12.2; } \
  > "$BUILD/check.log" 2>&1 || { tail -20 "$BUILD/check.log" >&2; die "the wheelhouse does not install offline (log above)"; }
"$CPY" -m fairseq_define_patch --apply > /dev/null
"$CPY" -c "import fairseq_define, fairseq.libbleu, fairseq.data.data_utils_fast" \
  || die "fairseq_define does not import in the checked environment"
echo "wheelhouse: $OUT ($(ls "$OUT"/*.whl | wc -l) wheels, $(du -sh "$OUT" | cut -f1)); offline install checked"
