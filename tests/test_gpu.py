"""What users run on a GPU, run on a GPU: every model family trains 50 updates in float32,
fp16 and bf16 with a finite, falling loss; fairseq-generate, fairseq-interactive and
fairseq-eval-lm; cached DeFINE tables against the live unit; the hub interface; the
unique-token path against the plain one; a checkpoint saved on the GPU loaded on the CPU and
back. Each device result is compared with the same computation on the CPU.

Skipped on machines without CUDA (CI). ``FAIRSEQ_DEFINE_TEST_DEVICE=cpu`` runs the same
tests with the CPU as the device, so that their logic is checked where there is no GPU
(``scripts/gpu_check.sh --cpu``): fp16 skips there, bf16 runs where ``fairseq-train --bf16
--cpu`` works. ``scripts/gpu_check.sh`` runs this file on a GPU machine (docs/testing.md)."""

import math
import os
import re
from pathlib import Path

import pytest
import torch

from fairseq_define.modules import DefineEmbedding, DefineUnit, build_schedule, cache_define_tables
from fairseq_define.modules.define.embedding import set_unit_run

from .helpers import (
    TINY,
    TINY_TIED,
    USER_DIR,
    binarize_ptb_slice,
    define_options,
    made_once,
    result,
    run_cli,
    subprocess_run_interactive,
)

DEVICE_ENV = "FAIRSEQ_DEFINE_TEST_DEVICE"
_forced = os.environ.get(DEVICE_ENV, "")
if _forced not in ("", "cpu", "cuda"):
    raise ValueError(f"{DEVICE_ENV} must be cpu or cuda (got {_forced!r})")
DEVICE = _forced or ("cuda" if torch.cuda.is_available() else "")
ON_GPU = DEVICE == "cuda"
# what the CLIs need to run on DEVICE (fairseq uses the GPU unless told --cpu)
DEVICE_ARGS = [] if ON_GPU else ["--cpu"]

pytestmark = pytest.mark.skipif(not DEVICE, reason=f"needs a CUDA GPU ({DEVICE_ENV}=cpu checks these tests on the CPU)")
cli = pytest.mark.cli  # a test that starts fairseq's CLIs (the in-process ones are not marked)


def train_losses(output):
    return [float(x) for x in re.findall(r"train_inner \| .*? loss=([0-9.]+|nan|inf)", output)]


def hypotheses(output):
    return {int(i): (float(s), h) for i, s, h in re.findall(r"^H-(\d+)\t([-0-9.e]+)\t(.*)$", output, re.M)}


def assert_mostly_same_hypotheses(got, want, atol=1e-4):
    """Beam search on another device: float sums in another order can flip a near tie between
    two hypotheses, so all but one in twenty must agree, each agreeing one within ``atol``."""
    assert got.keys() == want.keys() and want
    same = [i for i in want if got[i][1] == want[i][1]]
    assert len(same) >= len(want) - len(want) // 20, (len(same), len(want))
    for i in same:
        assert abs(got[i][0] - want[i][0]) <= atol, (i, got[i], want[i])


# -- every family trains on the device in each precision -------------------------------------

@pytest.fixture(scope="session")
def ptb_bin(tmp_path_factory):
    """The first 600 train and 80 valid lines of the PTB-format slice, binarized."""
    return made_once(tmp_path_factory, "gpu_ptb", lambda d: binarize_ptb_slice(d, 600, 80))


LM_COMMON = ["--user-dir", USER_DIR, "--optimizer", "adam", "--batch-size", "8"]
AWD = ["--criterion", "awd_lm_loss", "--clip-norm", "0.25", "--dropout", "0.2", "--dropout-hidden", "0.1",
       "--dropout-input", "0.2", "--dropout-embedding", "0.05", "--weight-drop", "0.2"]
# family: (data: "wmt", "wt2" or "ptb", fairseq-train arguments); the NMT model in each output form
FAMILIES = {
    "transformer_untied": ("wmt", ["--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
                                   "--define-output-layer", "untied", "--optimizer", "adam", "--lr", "1e-3",
                                   "--max-tokens", "2000"]),
    "transformer_tied_map": ("wmt", ["--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY, *TINY_TIED,
                                     "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "2000"]),
    "transformer_tied_unit": ("wmt", ["--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
                                      "--share-all-embeddings", "--define-output-layer", "tied_unit",
                                      "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "2000"]),
    "transformer_lm": ("wt2", [*LM_COMMON, "--task", "language_modeling", "--arch", "define_transformer_lm_tiny",
                               "--tokens-per-sample", "32", "--lr", "2e-3"]),
    "transformer_xl": ("wt2", [*LM_COMMON, "--task", "contiguous_lm", "--arch", "define_txl_tiny",
                               "--define-map-dim", "16", "--adaptive-cutoff", "1000,4000", "--tokens-per-sample", "8",
                               "--criterion", "projected_adaptive_loss", "--lr", "2e-3"]),
    "lstm": ("ptb", [*LM_COMMON, "--task", "contiguous_lm", "--arch", "define_lstm_tiny", "--tokens-per-sample", "20",
                     "--criterion", "projected_adaptive_loss", "--lr", "2e-3"]),
    # AWD-LSTM's loss (AR, TAR) and dropouts; its optimizer is below
    "awd_lstm": ("ptb", ["--user-dir", USER_DIR, "--task", "contiguous_lm", "--arch", "define_lstm_tiny",
                         "--tokens-per-sample", "20", "--batch-size", "8", "--define-transform", "define", *AWD]),
}
# NT-ASGD trains in float32 only (it refuses --fp16/--bf16): the half-precision runs use Adam
AWD_OPTIMIZER = {"fp32": ["--optimizer", "nt_asgd", "--lr-scheduler", "nt_asgd", "--lr", "5", "--nonmono", "0"],
                 "half": ["--optimizer", "adam", "--lr", "2e-3"]}
PRECISIONS = {"fp32": [], "fp16": ["--fp16"], "bf16": ["--bf16"]}


def precision_args(precision):
    if not ON_GPU and precision == "fp16":
        pytest.skip("fp16 training needs CUDA")
    return PRECISIONS[precision]  # bf16 trains on the CPU too (the patch's bf16_without_tpu.py)


@cli
@pytest.mark.parametrize("precision", list(PRECISIONS))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_trains_50_updates_with_a_falling_loss(family, precision, request, tmp_path):
    data, args = FAMILIES[family]
    flags = precision_args(precision)
    if family == "awd_lstm":
        args = [*args, *AWD_OPTIMIZER["fp32" if precision == "fp32" else "half"]]
    bin_dir = {
        "wmt": lambda: request.getfixturevalue("wmt_bin") / "bin",
        "wt2": lambda: request.getfixturevalue("wt2_bin"),
        "ptb": lambda: request.getfixturevalue("ptb_bin"),
    }[data]()
    out = run_cli("fairseq-train", bin_dir, *args, *flags, *DEVICE_ARGS, "--max-update", "50", "--no-save",
                  "--disable-validation", "--save-dir", tmp_path / "ck", "--log-format", "simple",
                  "--log-interval", "10", "--seed", "3").stdout
    loss = train_losses(out)
    assert len(loss) >= 4 and all(math.isfinite(x) for x in loss), loss
    assert loss[-1] < loss[0], loss
    assert "num_updates=50" in out
    # fairseq's trainer prints the CUDA devices it trains on (and nothing on the CPU)
    assert ("CUDA enviroments for all 1 workers" in out) == ON_GPU


@cli
@pytest.mark.parametrize("precision", ["--fp16", "--bf16", "--amp"])
def test_mixed_precision_training_stays_finite(wmt_bin, tmp_path, precision):
    """300 updates of the shared-embedding NMT model in fp16 / bf16, and under autocast with
    float32 weights (--amp: the unit's parameters cast in one, fused_unit.in_dtype), a longer
    run than above."""
    if precision == "--amp" and not ON_GPU:
        pytest.skip("--amp trains under CUDA's autocast")
    precision_args(precision[2:] if precision != "--amp" else "fp32")
    out = run_cli("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
                  "--share-all-embeddings", "--optimizer", "adam", "--lr", "5e-4", "--max-tokens", "2000",
                  "--max-update", "300", "--save-dir", tmp_path / "ck", "--no-save", precision, *DEVICE_ARGS,
                  "--log-format", "simple", "--log-interval", "50", "--disable-validation").stdout
    loss = train_losses(out)
    assert len(loss) >= 5 and all(math.isfinite(l) for l in loss), loss
    assert loss[-1] < loss[0]


@pytest.mark.parametrize("transform", ["define", "hgt", "glt_shuffle", "define_residual"])
def test_define_unit_in_bf16_is_close_to_float32(transform):
    torch.manual_seed(0)
    unit = DefineUnit(build_schedule(128, 1024, 3, 512, transform, max_groups=8)).to(DEVICE)
    x = torch.randn(64, 128, device=DEVICE)
    ref = unit(x)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        low = unit(x)
    assert low.dtype == torch.bfloat16
    rel = (low.float() - ref).norm() / ref.norm()
    assert rel < 2e-2, rel


# -- the unique-token path on the device --------------------------------------------------

def steps_on_the_device(embeddings, tokens, weight):
    """name -> (output, {parameter: gradient}), on the CPU, of one training step of each
    embedding moved to the device, on ``tokens`` with the loss sum(out * weight)."""
    results = {}
    for name, module in embeddings.items():
        module = module.to(DEVICE).train()
        module.zero_grad()
        out = module(tokens.to(DEVICE))
        (out * weight.to(DEVICE)).sum().backward()
        results[name] = out.detach().cpu(), {n: p.grad.cpu() for n, p in module.named_parameters()}
    return results


@pytest.mark.parametrize("style, transform", [("paper", "define"), ("paper", "hgt"), ("paper", "glt_shuffle"),
                                              ("paper", "projective"), ("authors", "define")])
def test_unique_token_path_equals_plain_path_on_the_device(style, transform):
    """torch.unique on the device (its order and inverse) and the gather's backward: outputs and
    gradients equal to running every token through the unit, and to the CPU's."""
    torch.manual_seed(0)
    emb = {
        path: set_unit_run(
            DefineEmbedding(define_options(define_transform=transform, define_style=style), 300, 1, 48), token_path=path
        )
        for path in ("plain", "unique")
    }
    emb["unique"].load_state_dict(emb["plain"].state_dict())
    tokens = torch.randint(2, 300, (16, 40))  # 640 tokens, many repeated, no padding row
    weight = torch.randn(16, 40, 48)
    ref = emb["plain"](tokens)
    results = steps_on_the_device(emb, tokens, weight)
    (out_p, g_p), (out_u, g_u) = results["plain"], results["unique"]
    torch.testing.assert_close(out_u, out_p, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out_p, ref.detach(), atol=1e-4, rtol=1e-4)  # the device agrees with the CPU
    for name in g_p:
        torch.testing.assert_close(g_u[name], g_p[name], atol=1e-4, rtol=1e-4, msg=name)


# -- the fused unit on the device: the modules' function, no host sync, a CUDA graph -------------

@pytest.mark.parametrize("style", ["paper", "authors"])
def test_fused_unit_equals_the_modules_on_the_device(style):
    """The fused path (on CUDA its matmuls write strided layouts) against the layers' modules
    with the stability hooks, on the device, and against the CPU."""
    from .test_fused_unit import module_path

    torch.manual_seed(0)
    options = define_options(define_style=style, define_max_groups=None)
    emb = {"fused": DefineEmbedding(options, 300, 1, 48)}
    emb["modules"] = module_path(DefineEmbedding(options, 300, 1, 48), options)
    emb["modules"].load_state_dict(emb["fused"].state_dict())
    tokens, weight = torch.randint(2, 300, (16, 40)), torch.randn(16, 40, 48)
    cpu = emb["fused"](tokens).detach()
    results = steps_on_the_device(emb, tokens, weight)
    torch.testing.assert_close(results["fused"][0], results["modules"][0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(results["fused"][0], cpu, atol=1e-4, rtol=1e-4)
    for name, grad in results["modules"][1].items():
        torch.testing.assert_close(results["fused"][1][name], grad, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize("style", ["paper", "authors"])
@pytest.mark.parametrize("activation", ["swish", "gelu"])
def test_the_fused_activation_and_dropout_on_the_device_train_as_the_reference(style, activation, monkeypatch):
    """On CUDA a layer's activation and dropout are one Triton kernel a direction
    (act_dropout.py): the Function's output and gradients equal autograd through the
    reference with the masks the kernels drew (float32, on the device), about 1 - p kept."""
    if not ON_GPU:
        pytest.skip("the kernels are CUDA's (tests/test_act_dropout.py runs them in Triton's interpreter)")
    from fairseq_define.modules.define import act_dropout

    from .test_fused_unit import through_drawn_masks

    if not act_dropout.triton_available():
        pytest.skip("Triton is not installed beside this CUDA torch")
    assert act_dropout.FAILED == [], act_dropout.FAILED  # else the aten pair would pass for the kernels
    torch.manual_seed(0)
    options = define_options(define_style=style, define_max_groups=None, define_dropout=0.2,
                             define_activation=activation)
    emb = DefineEmbedding(options, 300, 1, 48)
    drawn, fast, ref = through_drawn_masks(emb, monkeypatch, torch.device(DEVICE), shape=(16, 40), e_scale=1.0)
    assert 0.75 < torch.cat([m.reshape(-1) for m in drawn]).float().mean().item() < 0.85
    for i, (a, b) in enumerate(zip(fast, ref)):  # float32 sums over 640 rows in another order
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4, msg=f"tensor {i}")
    assert act_dropout.FAILED == [], act_dropout.FAILED


@pytest.mark.parametrize("case", ["swish float64", "swish float32", "swish bfloat16", "gelu float64", "gelu float32",
                                  "gelu bfloat16", "partial block"])
def test_the_compiled_kernels_compute_the_reference(case):
    """The interpreter's cases (tests/act_dropout_interpreter.py) on CUDA's compiled kernels,
    called directly so that a compile or launch error fails here rather than falling back, at
    p = 0.1 (a float32 scale would be 5e-8 off in float64)."""
    if not ON_GPU:
        pytest.skip("the compiled kernels are CUDA's (tests/test_act_dropout.py interprets and compiles them)")
    from fairseq_define.modules.define import act_dropout

    from .act_dropout_interpreter import P_COMPILED, check_kernels, check_partial_block

    if not act_dropout.triton_available():
        pytest.skip("Triton is not installed beside this CUDA torch")
    if case == "partial block":
        check_partial_block(act_dropout.cuda_kernels(), device=DEVICE)
    else:
        activation, dtype = case.split()
        check_kernels(act_dropout.cuda_kernels(), activation, dtype, device=DEVICE, p=P_COMPILED)


def test_a_captured_step_with_dropout_draws_new_masks_at_each_replay():
    """CUDA graphs with --define-dropout: the unit's seeds come from torch's generator, whose
    offset advances at each replay, so two replays drop different entries (without dropout two
    replays add the same gradient: the test above)."""
    if not ON_GPU:
        pytest.skip("CUDA graphs are CUDA's")
    from fairseq_define.modules.define import act_dropout

    emb, step = device_step(dropout=0.1)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    before = [p.grad.clone() for p in emb.parameters()]
    graph.replay()
    first = [p.grad - b for p, b in zip(emb.parameters(), before)]
    after = [p.grad.clone() for p in emb.parameters()]
    graph.replay()
    second = [p.grad - a for p, a in zip(emb.parameters(), after)]
    torch.cuda.synchronize()
    assert all(torch.isfinite(g).all() for g in first + second)
    assert not all(torch.equal(a, b) for a, b in zip(first, second)), "two replays drew one set of masks"
    assert act_dropout.FAILED == [], act_dropout.FAILED


def device_step(style="paper", dropout=0.0):
    torch.manual_seed(0)
    options = define_options(define_style=style, define_max_groups=None, define_dropout=dropout)
    emb = DefineEmbedding(options, 300, 1, 48).to(DEVICE).train()
    tokens, weight = torch.randint(2, 300, (16, 40), device=DEVICE), torch.randn(16, 40, 48, device=DEVICE)

    def step():
        (emb(tokens) * weight).sum().backward()

    return emb, step


@pytest.mark.parametrize("style", ["paper", "authors"])
def test_a_training_step_of_the_embedding_never_waits_for_the_device(style):
    """The default token path (``auto``) on CUDA: no operator of the step makes the host wait
    (CUDA's sync debug mode raises on any)."""
    if not ON_GPU:
        pytest.skip("the sync debug mode is CUDA's (tests/test_op_count.py checks the operators on the CPU)")
    _, step = device_step(style)
    step()  # warm-up: cuBLAS handles, the allocator
    torch.cuda.set_sync_debug_mode("error")
    try:
        step()
    finally:
        torch.cuda.set_sync_debug_mode(0)


def test_the_embeddings_training_step_replays_as_a_cuda_graph():
    """Captured once, the step's replay accumulates the gradients an eager step does."""
    if not ON_GPU:
        pytest.skip("CUDA graphs are CUDA's")
    emb, step = device_step()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # warm-up, which also creates the gradients the graph accumulates into
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    grads = {n: p.grad.clone() for n, p in emb.named_parameters()}  # warm-up + capture (capture ran nothing)
    graph.replay()
    torch.cuda.synchronize()
    for n, p in emb.named_parameters():
        torch.testing.assert_close(p.grad, 2 * grads[n], atol=1e-5, rtol=1e-4, msg=n)


@pytest.mark.parametrize("how", ["graphed", "compiled"])
def test_the_unit_replays_cuda_graphs_twice_a_step(how):
    """The unit runs as CUDA graphs, twice a step as a shared NMT embedding runs (source and
    target), and each step's gradients are the eager unit's: ``graphed``, the package's
    graphed unit (``set_unit_run(graphs="cuda")``, graphed_unit.py); ``compiled``, the
    benchmarks' torch.compile in reduce-overhead mode on rows padded to a bucket
    (benchmarks/unit_run.py; no skip)."""
    if not ON_GPU:
        pytest.skip("CUDA graphs are CUDA's (tests/test_graphed_unit.py and tests/test_row_bucket.py check the "
                    "logic on the CPU)")
    from torch._dynamo.utils import counters

    from .helpers import benchmark_module

    options = define_options(define_style="paper", define_max_groups=None)
    torch.manual_seed(0)
    graphed = DefineEmbedding(options, 300, 1, 48)
    if how == "graphed":
        set_unit_run(graphed, token_path="plain", graphs="cuda")
    else:
        benchmark_module("unit_run").set_bench_run(graphed, compile_mode="reduce-overhead", row_bucket=256)
    graphed = graphed.to(DEVICE).train()
    eager = set_unit_run(DefineEmbedding(options, 300, 1, 48), token_path="plain").to(DEVICE).train()
    eager.load_state_dict(graphed.state_dict())
    counters.clear()
    for i, shapes in enumerate([((12, 20), (11, 22)), ((16, 15), (10, 25)), ((12, 20), (12, 20)), ((8, 30), (9, 26))]):
        g = torch.Generator().manual_seed(i)
        batch = [(torch.randint(2, 300, s, generator=g).to(DEVICE), torch.randn(*s, 48, generator=g).to(DEVICE))
                 for s in shapes]
        for emb in (graphed, eager):
            emb.zero_grad(set_to_none=True)
            sum((emb(tokens) * weight).sum() for tokens, weight in batch).backward()
        for (name, p), q in zip(graphed.named_parameters(), eager.parameters()):
            torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4, msg=f"step {i}: {name}")
    if how == "graphed":
        assert graphed.graphs.captures == 2  # two slots (source, target), one bucket (256 rows)
    else:
        assert not counters["inductor"]["cudagraph_skips"], dict(counters["inductor"])


# -- a checkpoint trained on the device: generation, caching, the hub, device moves -------------

@pytest.fixture(scope="session")
def dev_nmt(wmt_bin, tmp_path_factory):
    """define_transformer_tiny (shared embedding, tied at the map) trained 20 updates on the
    device: its checkpoint folder."""
    def train(folder):
        run_cli("fairseq-train", wmt_bin / "bin", *NMT_TIED, *DEVICE_ARGS, "--max-update", "20", "--save-dir", folder)
        return str(folder)

    return Path(made_once(tmp_path_factory, "gpu_nmt", train))


NMT_TIED = [*FAMILIES["transformer_tied_map"][1], "--no-epoch-checkpoints", "--log-format", "simple",
            "--log-interval", "5", "--seed", "3"]


def generate(wmt_bin, path, *extra):
    return run_cli("fairseq-generate", wmt_bin / "bin", "--user-dir", USER_DIR, "--path", path, "--gen-subset", "test",
                   "--beam", "3", "--max-len-b", "20", "--batch-size", "16", *extra).stdout


@cli
def test_generate_on_the_device_matches_the_cpu(wmt_bin, dev_nmt):
    ckpt = dev_nmt / "checkpoint_last.pt"
    on_device = generate(wmt_bin, ckpt, *DEVICE_ARGS)
    assert_mostly_same_hypotheses(hypotheses(on_device), hypotheses(generate(wmt_bin, ckpt, "--cpu")))
    assert len(hypotheses(on_device)) == 40
    # --score-reference scores given targets: no search, so every score agrees
    ref_dev = hypotheses(generate(wmt_bin, ckpt, "--score-reference", *DEVICE_ARGS))
    ref_cpu = hypotheses(generate(wmt_bin, ckpt, "--score-reference", "--cpu"))
    assert ref_dev.keys() == ref_cpu.keys() and len(ref_dev) == 40
    for i in ref_cpu:
        assert ref_dev[i][1] == ref_cpu[i][1] and abs(ref_dev[i][0] - ref_cpu[i][0]) <= 1e-4


@cli
def test_interactive_on_the_device_matches_the_cpu(wmt_bin, dev_nmt):
    lines = "".join(wmt_bin.joinpath("test.bpe.en").read_text(encoding="utf-8").splitlines(True)[:20])
    got = hypotheses(subprocess_run_interactive(wmt_bin, dev_nmt, lines, device_args=DEVICE_ARGS).stdout)
    want = hypotheses(subprocess_run_interactive(wmt_bin, dev_nmt, lines).stdout)
    assert len(got) == 20
    assert_mostly_same_hypotheses(got, want)


@cli
def test_cached_tables_on_the_device_equal_the_live_unit(wmt_bin, dev_nmt, tmp_path):
    """fairseq-define-cache-tables' checkpoint and define_cache_on_load generate on the device
    what the live unit generates there; in process, the cached rows equal the unit's outputs."""
    from fairseq_define.models.define_transformer import DefineTransformerModel

    ckpt = dev_nmt / "checkpoint_last.pt"
    cached = tmp_path / "cached.pt"
    run_cli("fairseq-define-cache-tables", "--path", ckpt, "--output", cached, "--data", wmt_bin / "bin")
    live = hypotheses(generate(wmt_bin, ckpt, *DEVICE_ARGS))
    for out in (generate(wmt_bin, cached, *DEVICE_ARGS),
                generate(wmt_bin, ckpt, *DEVICE_ARGS, "--model-overrides", "{'define_cache_on_load': True}")):
        assert_mostly_same_hypotheses(hypotheses(out), live, atol=1e-4)

    model = DefineTransformerModel.from_pretrained(str(dev_nmt), "checkpoint_last.pt",
                                                   data_name_or_path=str(wmt_bin / "bin")).models[0]
    model.to(DEVICE)
    model.eval()
    emb = model.encoder.embed_tokens
    tokens = torch.arange(emb.num_embeddings, device=DEVICE)[None]  # every row of the table
    with torch.no_grad():
        want = emb(tokens)
        cache_define_tables(model)
        assert emb.unit is None and emb.cached_table.weight.device.type == DEVICE
        torch.testing.assert_close(emb(tokens), want, atol=1e-5, rtol=1e-5)


@cli
def test_hub_interface_on_the_device(wmt_bin, dev_nmt):
    from fairseq_define.models.define_transformer import DefineTransformerModel

    kw = dict(data_name_or_path=str(wmt_bin / "bin"), bpe="subword_nmt", bpe_codes=str(wmt_bin / "codes"))
    cpu = DefineTransformerModel.from_pretrained(str(dev_nmt), "checkpoint_last.pt", **kw)
    dev = DefineTransformerModel.from_pretrained(str(dev_nmt), "checkpoint_last.pt", **kw).to(DEVICE)
    assert all(p.device.type == DEVICE for p in dev.parameters())
    sources = wmt_bin.joinpath("test.tok.en").read_text(encoding="utf-8").splitlines()[:20]
    targets = wmt_bin.joinpath("test.tok.de").read_text(encoding="utf-8").splitlines()[:20]
    got, want = dev.translate(sources, beam=2, max_len_b=15), cpu.translate(sources, beam=2, max_len_b=15)
    assert len(got) == 20 and sum(a == b for a, b in zip(got, want)) >= 19, (got, want)
    for a, b in zip(dev.score(sources, targets=targets), cpu.score(sources, targets=targets)):
        assert torch.equal(a["tokens"].cpu(), b["tokens"])
        torch.testing.assert_close(a["positional_scores"].cpu(), b["positional_scores"], atol=1e-4, rtol=0)


@cli
def test_a_device_checkpoint_resumes_on_the_cpu_and_back(wmt_bin, dev_nmt, tmp_path):
    """The device's checkpoint (weights and Adam's state) resumes training with --cpu; the CPU's
    checkpoint resumes on the device; both runs continue the update count."""
    cpu_run = run_cli(
        "fairseq-train",
        wmt_bin / "bin",
        *NMT_TIED,
        "--cpu",
        "--restore-file",
        dev_nmt / "checkpoint_last.pt",
        "--max-update",
        "24",
        "--save-dir",
        tmp_path / "cpu",
    ).stdout
    assert "@ 20 updates)" in cpu_run  # fairseq's "Loaded checkpoint ... (epoch 1 @ 20 updates)"
    back = run_cli(
        "fairseq-train",
        wmt_bin / "bin",
        *NMT_TIED,
        *DEVICE_ARGS,
        "--restore-file",
        tmp_path / "cpu" / "checkpoint_last.pt",
        "--max-update",
        "28",
        "--save-dir",
        tmp_path / "back",
    ).stdout
    assert "@ 24 updates)" in back
    losses = [float(x) for x in re.findall(r"\| train \|.*?\| loss ([0-9.]+)", back)]
    assert losses and all(math.isfinite(x) for x in losses)
    from fairseq.checkpoint_utils import safe_torch_load

    state = safe_torch_load(str(tmp_path / "back" / "checkpoint_last.pt"))
    assert state["optimizer_history"][-1]["num_updates"] == 28
    assert len(hypotheses(generate(wmt_bin, tmp_path / "back" / "checkpoint_last.pt", *DEVICE_ARGS))) == 40


# -- language models on the device: fairseq-eval-lm, live and cached ---------------------------

LM_EVAL = {  # family: (data, fairseq-eval-lm arguments beyond the checkpoint)
    "transformer_lm": ("wt2", ["--task", "language_modeling", "--tokens-per-sample", "32", "--batch-size", "4"]),
    "transformer_xl": ("wt2", ["--task", "contiguous_lm", "--batch-size", "4"]),
    "lstm": ("ptb", ["--task", "contiguous_lm", "--batch-size", "1"]),
}


@pytest.fixture(scope="module", params=list(LM_EVAL))
def dev_lm(request, tmp_path_factory):
    """(family, data folder, checkpoint) of the family trained 20 updates on the device."""
    family = request.param
    data, args = FAMILIES[family]
    bin_dir = request.getfixturevalue("wt2_bin" if data == "wt2" else "ptb_bin")

    def train(folder):
        run_cli("fairseq-train", bin_dir, *args, *DEVICE_ARGS, "--max-update", "20", "--save-dir", folder,
                "--no-epoch-checkpoints", "--disable-validation", "--seed", "3")
        return str(folder / "checkpoint_last.pt")

    return family, bin_dir, Path(made_once(tmp_path_factory, f"gpu_lm_{family}", train))


@cli
def test_eval_lm_on_the_device_matches_the_cpu_live_and_cached(dev_lm):
    family, bin_dir, ckpt = dev_lm
    args = [
        "fairseq-eval-lm",
        bin_dir,
        "--user-dir",
        USER_DIR,
        "--path",
        ckpt,
        "--gen-subset",
        "valid",
        *LM_EVAL[family][1],
    ]
    tokens, loss = result(run_cli(*args, *DEVICE_ARGS).stdout)
    tokens_cpu, loss_cpu = result(run_cli(*args, "--cpu").stdout)
    assert tokens == tokens_cpu > 0 and abs(loss - loss_cpu) <= 1e-4 * loss_cpu, (loss, loss_cpu)
    tokens_c, loss_c = result(
        run_cli(*args, *DEVICE_ARGS, "--model-overrides", "{'define_cache_on_load': True}").stdout
    )
    assert tokens_c == tokens and abs(loss_c - loss) <= 1e-4 * loss, (loss_c, loss)
