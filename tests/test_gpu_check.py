"""scripts/gpu_check.sh without a GPU: its CPU mode writes the summary, a failed step is
recorded and the next one still runs, a step whose log lacks its numbers fails the check, bad
options stop with one line. These run a step or two on a few tests; .ci/run runs the --cpu
check's probe and tests steps, and the corpus tests run its bench step (test_benchmarks.py) and
its table3 step (test_recipes.py) and read the summary they write."""

import json

import pytest

from .helpers import ROOT, run_cli

pytestmark = pytest.mark.cli  # starts a script that starts fairseq's CLIs

SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def gpu_check(*args, check=False):
    return run_cli("bash", SCRIPT, *map(str, args), check=check, timeout=900)


def test_cpu_mode_writes_the_summary(tmp_path):
    out = gpu_check(
        "--cpu", "--out", tmp_path, "--steps", "tests", "--workers", "0", "--pytest-args", "-k unit_in_bf16"
    )
    assert out.returncode == 0, out.stdout[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["mode"] == "cpu" and summary["passed"] is True
    assert [s["step"] for s in summary["steps"]] == ["tests"] and summary["steps"][0]["status"] == "pass"
    assert summary["numbers"]["tests"]["result"].startswith("4 passed")
    assert summary["machine"]["torch"] and summary["machine"]["device"] == "cpu"
    md = (tmp_path / "summary.md").read_text()
    assert "all steps passed" in md and "| tests | pass |" in md
    assert "4 passed" in (tmp_path / "tests.log").read_text()


def test_the_probe_step_summarises_probe_json(tmp_path):
    # a budget of seconds: the probe measures the machine, skips the rest and lists it
    out = gpu_check("--cpu", "--out", tmp_path, "--steps", "probe", "--probe-budget", "3")
    assert out.returncode == 0, out.stdout[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(s["step"], s["status"]) for s in summary["steps"]] == [("probe", "pass")] and summary["passed"] is True
    probe = summary["numbers"]["probe"]
    assert probe["finished"] is True and probe["skipped"] > 0 and probe["sections"]["machine"] == "done"
    assert json.loads((tmp_path / "probe" / "probe.json").read_text())["probe"]["budget_s"] == 3
    assert "Probe (probe/probe.md" in (tmp_path / "summary.md").read_text()


def test_a_failed_step_is_recorded_and_the_next_one_runs(tmp_path):
    empty = tmp_path / "no_data"
    empty.mkdir()
    out = gpu_check("--cpu", "--out", tmp_path / "out", "--steps", "tests bench", "--workers", "0",
                    "--pytest-args", "-k no_such_test", "--data-root", empty)
    assert out.returncode == 1, out.stdout[-3000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [(s["step"], s["status"]) for s in summary["steps"]] == [("tests", "fail"), ("bench", "fail")]
    assert summary["steps"][0]["exit"] == 5  # pytest: no test collected
    assert summary["passed"] is False and "FAILED" in (tmp_path / "out" / "summary.md").read_text()
    assert "corpora.py: error: wmt14-test not found under" in (tmp_path / "out" / "bench.log").read_text()


def test_a_step_that_passed_without_its_numbers_fails_the_check(tmp_path):
    # pytest --co passes without a result line, as a step whose output format changed would
    out = gpu_check(
        "--cpu", "--out", tmp_path, "--steps", "tests", "--workers", "0", "--pytest-args", "--co -k unit_in_bf16"
    )
    assert out.returncode == 1, out.stdout[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"][0]["status"] == "pass" and summary["numbers_missing"] == ["tests"]
    assert summary["passed"] is False
    assert "Numbers not found in the logs of: tests" in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bogus"], "unknown option '--bogus'"),
        (["--cpu"], "--out DIR is required"),
        (
            ["--cpu", "--out", "O", "--steps", "tests nope"],
            "--steps takes probe, tests, bench, graphs and table3 (got 'nope')",
        ),
        (["--cpu", "--out", "O", "--probe-budget", "0"], "--probe-budget takes a whole number of seconds (got '0')"),
        (["--cpu", "--out", "O", "--updates", "ten"], "take a whole number (got 'ten')"),
    ],
)
def test_bad_options_stop_with_one_line(args, message, tmp_path):
    out = gpu_check(*[tmp_path / "o" if a == "O" else a for a in args])
    assert out.returncode == 2
    errors = [line for line in out.stdout.splitlines() if line.startswith("gpu_check.sh: error:")]
    assert len(errors) == 1 and message in errors[0], out.stdout
    assert not (tmp_path / "o" / "summary.json").exists()


@pytest.mark.parametrize("script", ["gpu_check.sh", "build_wheelhouse.sh"])
def test_help_prints_the_header(script):
    path = ROOT / "scripts" / script
    header = []
    for line in path.read_text().splitlines()[1:]:
        if not line.startswith("#"):
            break
        header.append(line[2:] if line.startswith("# ") else line[1:])
    out = run_cli("bash", path, "--help")
    assert out.stdout.splitlines()[:len(header)] == header
    for word in ("Command:", "Hardware:"):
        assert word in out.stdout
