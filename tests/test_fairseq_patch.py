"""The plugin's side of the fairseq patch (patch/, a distribution of its own, tested by
patch/tests/): the plugin requires it, refuses to import on an unpatched fairseq with the
command that fixes it, and shares its one error class and excepthook."""

import importlib.metadata
import shutil
import subprocess
import sys

import pytest

import fairseq_define_patch as fp

from .helpers import ROOT


def test_the_plugin_requires_the_patch_at_its_version():
    from packaging.requirements import Requirement

    required = {r.name: r.specifier for r in map(Requirement, importlib.metadata.requires("fairseq-define"))}
    assert required["fairseq-define-patch"] == Requirement(f"x=={fp.__version__}").specifier
    assert "fairseq" not in required  # its metadata pins hydra-core 1.0 / omegaconf 2.0


def test_import_fails_with_the_fix_command_when_unpatched(tmp_path):
    """A Python that finds an unpatched fairseq first gets one clear ImportError."""
    site = tmp_path / "site"
    tops = {"fairseq": "fairseq", "fairseq_cli": "fairseq"}
    for top, dist in tops.items():
        shutil.copytree(fp.site_root(dist) / top, site / top, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    fp.apply({dist: site for dist in tops.values()}, reverse=True)
    proc = subprocess.run(
        [sys.executable, "-c", "import fairseq_define"],
        capture_output=True, text=True, cwd=tmp_path,
        env={"PYTHONPATH": f"{site}:{ROOT}", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: fairseq_define:") and fp.APPLY_COMMAND in last


@pytest.mark.parametrize(
    "raised, line",
    [
        ("UserError('bad setting: fix it')", "fairseq-x: error: bad setting: fix it"),
        # a fairseq exception that the plugin's reader knows, printed by the same hook
        (
            "FileNotFoundError('Dataset not found: valid (data-bin)')",
            "fairseq-x: error: no binarized 'valid' split in data-bin",
        ),
    ],
)
def test_one_user_error_class_and_one_hook(tmp_path, raised, line):
    """The plugin's UserError is fairseq's, and loading the plugin installs no second hook."""
    script = (
        "import sys\n"
        "sys.argv[0] = 'fairseq-x'\n"
        "import fairseq\n"
        "hook = sys.excepthook\n"
        "import fairseq_define\n"
        "from fairseq_define.errors import UserError\n"
        "assert UserError is fairseq.UserError and sys.excepthook is hook, 'two classes or two hooks'\n"
        f"raise {raised}\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith(line)
    assert "Traceback" not in proc.stderr
