"""benchmarks/gpu_probe.py without a GPU: --device cpu --quick runs every section and writes
probe.json in the form the GPU run's readers take (the ratios of every family at the paper's
and a large batch, every arm, projective 1.0); a budget of a few seconds still writes a valid
probe.json that lists what it skipped; a bad option stops with one line and writes nothing."""

import json
import math
import re
import sys

import pytest
import torch

from .helpers import ROOT, run_cli

pytestmark = pytest.mark.cli  # starts the probe, a script that builds the benchmark's models

PROBE = ROOT / "benchmarks" / "gpu_probe.py"
SECTIONS = ("machine", "ratios", "host_bound", "profile", "unit_fraction", "alignment")
FAMILIES = ("nmt", "awd_lstm", "txl")
ARMS = ("projective", "define", "define_aa", "define_unique", "define_graphed")
WIDTHS = {27, 70, 91, 101, 250, 357, 810}  # the unit's per-group widths (docs/benchmarks.md)


def probe(out, *args):
    return run_cli(sys.executable, PROBE, "--out", out, "--device", "cpu", *args, check=False, timeout=600,
                   env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})


def positive(v) -> bool:
    return isinstance(v, float) and math.isfinite(v) and v > 0


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("probe")
    proc = probe(out, "--quick")
    assert proc.returncode == 0, proc.stdout[-3000:]
    return json.loads((out / "probe.json").read_text()), (out / "probe.md").read_text()


def test_every_section_ran(quick):
    data, md = quick
    assert data["probe"]["finished"] is True and data["probe"]["quick"] is True
    assert {s: e["status"] for s, e in data["sections"].items()} == {s: "done" for s in SECTIONS}
    assert data["skipped"] == []
    assert "no kernel times" in data["sections"]["profile"]["note"]
    assert data["machine"]["torch"] == torch.__version__ and positive(data["machine"]["host"]["small_op_us"])
    assert "| family batch | projective ms |" in md


def test_ratios_of_every_family_batch_and_arm(quick):
    data, _ = quick
    ratios = data["ratios"]
    assert all(re.fullmatch(r"(nmt|awd_lstm|txl) \d+x\d+", key) for key in ratios), list(ratios)
    kinds = {(data["steps"][key]["family"], data["steps"][key]["kind"]) for key in ratios}
    assert kinds == {(f, k) for f in FAMILIES for k in ("paper", "large")}
    for key, arms in ratios.items():
        assert set(arms) == set(ARMS), key
        assert arms["projective"] == 1.0, key
        for arm, v in arms.items():  # every arm runs on the CPU, the graphed one through its eager replay
            assert positive(v), (key, arm, v)
        steps = data["steps"][key]["arms"]
        assert all(positive(steps[a]["median_ms"]) for a in ARMS), key
        assert positive(data["steps"][key]["aa_over_define"])


def test_host_bound_profile_unit_and_alignment(quick):
    data, _ = quick
    for family in FAMILIES:
        h = data["host_bound"][family]
        assert all(positive(h[s]["median_ms"]) for s in ("0.5x", "1x", "2x")) and isinstance(h["host_bound"], bool)
        for arm in ARMS:
            p = data["profile"][f"{family} {arm}"]
            assert p["top_host_ops"] and p["host_ops_per_step"] > 0, (family, arm)
            assert "no kernel times" in p["top_kernels"]["skipped"]
            # the NMT model's encoder and decoder share one embedding: two calls a step
            assert p["embedding_range"]["calls_per_step"] == (2 if family == "nmt" else 1), (family, arm)
        u = data["unit_fraction"][family]
        assert positive(u["eager"]["fraction_of_matmul"]) and positive(u["graphed"]["fraction_of_matmul"])
        assert positive(u["matmul"]["tflops"])
        assert "no CUDA graphs" in u["captured"]["skipped"]
    layers = data["alignment"].values()
    assert WIDTHS <= {w for a in layers for w in (a["in"], a["out"])}
    for a in layers:
        assert all(positive(a[how]["median_ms"]) for how in ("strided", "contiguous", "padded_to_8", "block_diagonal"))
        assert a["fastest"] in a


def test_a_short_budget_still_writes_what_it_skipped(tmp_path):
    proc = probe(tmp_path, "--quick", "--budget", "3")
    assert proc.returncode == 0, proc.stdout[-3000:]
    data = json.loads((tmp_path / "probe.json").read_text())
    assert data["probe"]["finished"] is True and data["skipped"]
    assert all(s["section"] in SECTIONS and s["item"] and s["reason"] for s in data["skipped"])
    assert set(data["sections"]) == set(SECTIONS)
    for section, entry in data["sections"].items():
        assert entry["status"] in ("done", "partial", "skipped"), section
        assert entry["status"] == "done" or entry["reason"], section
    assert data["sections"]["machine"]["status"] == "done"
    assert data["sections"]["ratios"]["status"] in ("partial", "skipped")
    assert "budget" in data["sections"]["ratios"]["reason"]
    assert "Skipped (" in (tmp_path / "probe.md").read_text()


@pytest.mark.parametrize("args, message", [
    (["--budget", "0"], "--budget takes a positive number of seconds"),
    (["--device", "gpu"], "argument --device: invalid choice: 'gpu'"),
    pytest.param(["--device", "cuda"], "no CUDA GPU visible",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")),
])
def test_bad_options_stop_with_one_line(args, message, tmp_path):
    out = tmp_path / "o"
    proc = run_cli(sys.executable, PROBE, "--out", out, *args, check=False, env={"PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2
    assert proc.stdout.strip().splitlines() == [proc.stdout.strip()] and message in proc.stdout, proc.stdout
    assert proc.stdout.startswith("gpu_probe.py: error: ")
    assert not out.exists()
