"""benchmarks/: the version of the authors' DeFINE embedding that benchmark 1b times
(benchmarks/their_define_unit.py) computes what the package's authors-style embedding computes,
with the same weights (otherwise 1b would time a different function); and bench_define.py's
quick mode runs every benchmark, so the script keeps working, through the GPU check's bench
step in its CPU mode, whose summary reads the numbers (CI's own GPU check run leaves that
step to this test)."""

import importlib.util
import json

import pytest
import torch

from fairseq_define.modules import DefineEmbedding

from .helpers import ROOT, define_options, run_cli


def load_reference():
    spec = importlib.util.spec_from_file_location("their_define_unit", ROOT / "benchmarks" / "their_define_unit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# (n, k, N, m): the two shapes of benchmark 1's comparison (NMT; n = m = 384, N = 7), small ones
@pytest.mark.parametrize("shape", [(128, 1024, 3, 512), (384, 1024, 7, 384), (16, 64, 3, 32), (32, 128, 4, 64)])
@pytest.mark.parametrize("activation", ["swish", "gelu"])
def test_reference_equals_the_authors_style_embedding(shape, activation):
    n, k, N, m = shape
    torch.manual_seed(sum(shape))
    ours = DefineEmbedding(define_options(define_style="authors", define_max_groups=None, define_map_dim=n,
                                          define_expand_dim=k, define_depth=N, define_activation=activation),
                           200, 1, m).eval()
    with torch.no_grad():  # biases and affines away from their init, so that each is checked
        for p in ours.unit.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    theirs = load_reference().TheirDefineEmbedding.from_ours(ours).eval()
    tokens = torch.randint(0, 200, (3, 7))
    with torch.no_grad():
        torch.testing.assert_close(theirs(tokens), ours(tokens), rtol=1e-5, atol=1e-5)


def test_reference_gradients_equal_ours():
    torch.manual_seed(0)
    ours = DefineEmbedding(define_options(define_style="authors", define_max_groups=None,
                                          define_unit_grad_scale=1.0, define_unit_centring="none"), 50, 1, 32)
    theirs = load_reference().TheirDefineEmbedding.from_ours(ours)
    tokens = torch.randint(0, 50, (2, 5))
    ours(tokens).square().sum().backward()
    theirs(tokens).square().sum().backward()
    torch.testing.assert_close(theirs.map.weight.grad, ours.map.weight.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(theirs.output_layer.weight.grad, ours.unit.output_layer.transform.weight.grad[0].t(),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.cli
def test_every_benchmark_runs_in_quick_mode(corpus_root, tmp_path):
    # scripts/gpu_check.sh --cpu's bench step: bench_define.py --quick, every benchmark in one process
    run_cli("bash", ROOT / "scripts" / "gpu_check.sh", "--cpu", "--steps", "bench", "--out", tmp_path,
            "--data-root", corpus_root, env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}, timeout=900)
    out = (tmp_path / "bench.log").read_text()
    assert out.startswith("machine: ") or "\nmachine: " in out
    for heading in ("1a. DeFINE unit", "1b. authors-style", "2. training step", "3. embedding lookup",
                    "3. LM forward at inference", "4. parameters", "5. training step", "6. host time"):
        assert heading in out, heading
    # 1a: both styles at the three shapes; 2 and 6: three families, each with the unique-token gain
    assert sum(line.startswith(("paper ", "authors ")) for line in out.splitlines()) == 6
    assert out.count("unique-token path gain") == 6
    assert out.count("the embedding's step alone (source side): projective") == 1  # 2, the NMT batch
    pair = out[out.index("Table 1a's R2 against R3"):]  # 2, study 5's LSTM pair beside the paper's times
    from fairseq_define.paper_tables import TABLE_1A

    r2, r3 = (TABLE_1A.row(r).paper["ms_per_batch"] for r in ("r2_adaptive", "r3_define_n256"))
    assert "ratio to adaptive 1.000" in pair and "define " in pair and f"R2 {r2} against R3 {r3} ms a batch" in pair
    host = out[out.index("6. host time"):]
    assert host.count("ratio to projective 1.000") == 3 and host.count("non-view aten operators a step") == 9
    assert out.count("every token through the unit (same work as theirs): ratio") == 2
    # the GPU check's summary read the numbers of benchmarks 1-3, and only theirs
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["passed"] is True and summary["numbers_missing"] == []
    bench = summary["numbers"]["bench"]
    assert len(bench["1a_unit_fraction_of_matmul"]) == 6 and len(bench["1b_ours_over_authors_code"]) == 2
    sections = bench["2_train_step_ratio_to_projective"]
    assert len(sections) == 3 and all(s.startswith("training step") for s in sections), sections
    assert all(set(r) == {"define", "define-plain"} for r in sections.values()), sections
    assert len(bench["3_cached_over_plain"]) == 2


@pytest.mark.cli
def test_denormal_step_times_a_checkpoint_both_ways(trained, wmt_bin):
    """benchmarks/denormal_step.py on a trained checkpoint (any task: its own criterion); a
    missing checkpoint is one line and exit 2."""
    import sys

    out = run_cli(sys.executable, ROOT / "benchmarks" / "denormal_step.py", "--path", trained / "checkpoint_last.pt",
                  "--data", wmt_bin / "bin", "--batches", "1", "--rounds", "1").stdout
    assert "kept / flushed (best of each):" in out and "subnormal values in the modules' outputs" in out
    bad = run_cli(sys.executable, ROOT / "benchmarks" / "denormal_step.py", "--path", trained / "nothing.pt",
                  "--data", wmt_bin / "bin", check=False)
    assert bad.returncode == 2 and "nothing.pt not found" in bad.stdout and "Traceback" not in bad.stdout


@pytest.mark.parametrize("rows", ["nmt,bogus", ""])
def test_an_unknown_row_of_benchmark_2_is_one_line_and_exit_2(rows):
    import sys

    bad = run_cli(sys.executable, ROOT / "benchmarks" / "bench_define.py", "--only", "2", "--train-rows", rows,
                  check=False)
    assert bad.returncode == 2 and "--train-rows takes nmt, lm and table1a" in bad.stdout
    assert "Traceback" not in bad.stdout


def test_benchmark_2s_table_1a_pair_is_study_5s_lstm_pair():
    """The benchmark times the arms the study trains (it cannot import the study: benchmarks
    run where matplotlib and the studies' tools are not installed). Read from its source, so
    that importing the script changes nothing here."""
    import ast

    from studies.lm_adaptive_define import lstm_pair

    tree = ast.parse((ROOT / "benchmarks" / "bench_define.py").read_text(encoding="utf-8"))
    node = next(n for n in tree.body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "TABLE_1A_PAIR")
    adaptive, define = lstm_pair(False)
    assert ast.literal_eval(node.value) == {"adaptive": (adaptive.arch, list(adaptive.args)),
                                            "define": (define.arch, list(define.args))}
