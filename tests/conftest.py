import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fairseq_define  # noqa: F401  (registers architectures for in-process tests)

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("FAIRSEQ_DEFINE_SHARED_DATA", ROOT.parent / "shared" / "data"))
BIN = Path(sys.executable).parent  # the CLIs of the environment running the tests


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "README.md").is_file():
        pytest.fail(
            f"real corpora not found at {SHARED_DATA}: clone the project next to shared/ "
            "or set FAIRSEQ_DEFINE_SHARED_DATA"
        )
    return SHARED_DATA


def run_cli(*cmd, cwd=None, check=True, timeout=600, env=None):
    """Run one of the environment's console scripts; return the CompletedProcess, with
    stderr merged into stdout (fairseq logs to stdout, warnings go to stderr)."""
    exe = shutil.which(cmd[0], path=str(BIN)) or cmd[0]
    proc = subprocess.run(
        [exe, *map(str, cmd[1:])], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=timeout,
        env={**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", **(env or {})},
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} exited {proc.returncode}\n--- output\n{proc.stdout[-6000:]}"
        )
    return proc
