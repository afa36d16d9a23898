"""scripts/run_fairseq_tests.sh (make fairseq-tests) on a small stand-in for fairseq's tests
archive: the files and tests it names are left out (and listed with their reasons), the rest
runs, and a source without tests/ is refused with one line."""

import io
import os
import signal
import subprocess
import sys
import tarfile

import pytest

from .helpers import ROOT

pytestmark = pytest.mark.cli  # a pytest run in a subprocess each: out of make test-fast

SCRIPT = ROOT / "scripts" / "run_fairseq_tests.sh"

FILES = {
    "tests/__init__.py": "",
    # left out as a whole: would fail at import, as the real one does under Python 3.11
    "tests/test_dataclass_utils.py": "raise ValueError('mutable default')\n",
    "tests/test_multihead_attention.py": (
        "def test_xformers_single_forward_parity():\n    raise AssertionError('Please install xFormers')\n\n"
        "def test_mask_for_xformers():\n    pass\n"),
    "tests/test_binaries.py": (
        "import unittest\n\nclass TestTranslation(unittest.TestCase):\n"
        "    def test_insertion_transformer(self):\n        self.fail('libnat')\n\n"
        "    def test_transformer(self):\n        pass\n"),
    # fairseq's timeout wrapper test expects Ctrl-C's KeyboardInterrupt
    "tests/distributed/__init__.py": "",
    "tests/distributed/test_distributed_timeout_wrapper.py": (
        "import signal\n\ndef test_timeout_killed():\n"
        "    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"),
}


def archive(path, files):
    with tarfile.open(path, "w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"fairseq-0.12.2/{name}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def run(src, *args):
    """The script started as a background job is: SIGINT ignored."""
    env = {**os.environ, "FAIRSEQ_SRC": str(src), "PYTHON": sys.executable, "TEST_WORKERS": "0"}
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, env=env, timeout=300,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))


def test_named_tests_are_left_out_with_their_reasons_and_the_rest_runs(tmp_path):
    proc = run(archive(tmp_path / "fs.tar.gz", FILES), "-rA")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "tests/test_dataclass_utils.py: invalid under Python 3.11" in out
    assert "test_xformers_single_forward_parity: xFormers is not installed" in out
    assert "test_insertion_transformer: needs fairseq's libnat" in out
    assert "PASSED tests/test_multihead_attention.py::test_mask_for_xformers" in out
    assert "PASSED tests/test_binaries.py::TestTranslation::test_transformer" in out
    assert "PASSED tests/distributed/test_distributed_timeout_wrapper.py::test_timeout_killed" in out
    assert "3 passed" in out and "failed" not in out


def test_a_failing_kept_test_fails_the_run(tmp_path):
    files = {**FILES, "tests/test_binaries.py": FILES["tests/test_binaries.py"].replace(
        "def test_transformer(self):\n        pass", "def test_transformer(self):\n        self.fail('broken')")}
    proc = run(archive(tmp_path / "fs.tar.gz", files))
    assert proc.returncode == 1 and "1 failed" in proc.stdout


def test_a_source_without_tests_is_refused_with_one_line(tmp_path):
    proc = run(archive(tmp_path / "sdist.tar.gz", {"fairseq/__init__.py": ""}))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "has no tests/ folder" in proc.stderr and "Traceback" not in proc.stderr
