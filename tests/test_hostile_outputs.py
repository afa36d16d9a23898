"""One rule for outputs: an existing file is replaced only with --overwrite (the results tool's
tables and figures, a study's report)."""

import subprocess
from pathlib import Path

import pytest

from .helpers import BIN

OUTPUT_COMMANDS = {
    "correlations": ["correlations", "--path", "missing.pt", "--output", "{out}.png"],
    "curves": ["curves", "--output", "{out}.png", "a=missing.log"],
    "table": ["table", "--table", "1a", "--workdir", "{dir}", "--output", "{out}.md"],
}


@pytest.mark.parametrize("command", sorted(OUTPUT_COMMANDS))
def test_results_outputs_are_not_overwritten_unless_asked(tmp_path, capsys, command):
    from fairseq_define.tools import results

    args = [a.format(out=tmp_path / "out", dir=tmp_path) for a in OUTPUT_COMMANDS[command]]
    existing = Path(args[args.index("--output") + 1])
    existing.write_text("mine\n")
    assert results.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists; choose a new file name, or pass --overwrite" in err, err
    assert existing.read_text() == "mine\n"
    if command == "table":  # asked: replaced
        assert results.main(args + ["--overwrite"]) == 0 and existing.read_text() != "mine\n"


def test_a_study_refuses_an_existing_report(tmp_path):
    import argparse

    from fairseq_define.errors import UserError
    from studies.common import resolve_dirs

    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "results.md").write_text("published\n")
    args = argparse.Namespace(quick=False, workdir=str(tmp_path / "w"), out=str(tmp_path / "report"), overwrite=False)
    with pytest.raises(UserError, match="results.md exists .*--overwrite"):
        resolve_dirs(args, "lm_ptb")
    args.overwrite = True
    assert resolve_dirs(args, "lm_ptb")[1] == tmp_path / "report"
    quick = argparse.Namespace(quick=True, workdir=str(tmp_path / "w"), out=None, overwrite=False)
    (tmp_path / "w" / "report").mkdir(parents=True)
    (tmp_path / "w" / "report" / "results.md").write_text("quick\n")
    assert resolve_dirs(quick, "lm_ptb")[1] == tmp_path / "w" / "report"  # its own work folder: resumed


@pytest.mark.cli  # starts a command
def test_results_cli_refuses_an_existing_figure(tmp_path):
    (tmp_path / "corr.png").write_bytes(b"mine")
    proc = subprocess.run([str(BIN / "fairseq-define-results"), "correlations", "--path", str(tmp_path / "x.pt"),
                           "--output", str(tmp_path / "corr.png")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "corr.png exists; choose a new file name, or pass --overwrite" in proc.stderr
    assert (tmp_path / "corr.png").read_bytes() == b"mine"
