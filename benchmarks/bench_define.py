"""DeFINE performance, measured side by side in one process (docs/benchmarks.md, benchmarks 1-6).

    .venv/bin/python benchmarks/bench_define.py            # all six, CPU float32
    .venv/bin/python benchmarks/bench_define.py --only 2 --compile
    .venv/bin/python benchmarks/bench_define.py --only 1 --device cuda --dtype bfloat16
    .venv/bin/python benchmarks/bench_define.py --only 6 --min-run-time 1   # host time, any CPU

1a. unit: the DeFINE unit of each style (paper, authors) forward+backward at the paper's three
    shapes, as a fraction of the FLOP rate of torch.matmul forward+backward of comparable size
    on the same device (target >= 0.75); with --compile also under torch.compile, and on CUDA
    replayed as a CUDA graph.
1b. against the authors' code: the authors-style embedding (map + unit) forward+backward on
    8192 tokens of real text against the authors' own computation of it
    (benchmarks/their_define_unit.py, written from reading their code; not in the package),
    same weights (target <= 0.50 of their time).
2. train: training step (forward+backward) of define_transformer_wmt_en_de, the AWD-LSTM and
   the Transformer-XL with DeFINE against the same model with a projective map at equal n
   (target overhead <= 3%), at the paper's per-device batch and the CPU recipes' smaller one,
   with the unique-token path's gain (and with --compile, the units under torch.compile; on
   CUDA, each step replayed as a CUDA graph too, where it can be captured), the operators each
   step dispatches; and Table 1a's LSTM with DeFINE added on its adaptive input against that
   adaptive input alone (study 5's pair, at its batch, beside Table 1a's times a batch). On
   batches of real text (WMT news, PTB, WikiText-2 from the data root, --data-root or
   $FAIRSEQ_DEFINE_DATA: run_scripts/corpora.py; words as ids in frequency order, so a
   batch repeats tokens as text does).
3. inference: an embedding lookup through cached DeFINE tables against a plain embedding
   table of the same size, and a whole LSTM LM forward (eval-lm's work) with a cached
   table against the same model with a plain nn.Embedding (target overhead <= 1%).
Benchmarks 1-3 run on ``--device`` in ``--dtype`` and print tokens/s.
4. params: define_transformer_wmt_en_de / transformer_wmt_en_de in Table 3's configuration
   (separate 31,160-token vocabularies, the paper's untied output layer; target <= 0.74, the
   paper's 68M / 92M), and each output form (--define-output-layer).
5. output forms: a training step of define_transformer_wmt_en_de with each output layer
   (untied, tied_unit: the unit over the whole vocabulary every step) against the output tied
   at the map width, on a shared 32K vocabulary.
6. host time: benchmark 2's three families at their layer counts and unit depths but tiny
   widths and batches, so that a step's time is what the host spends issuing its operators
   (Python, dispatch, autograd), not arithmetic: on a GPU, where the paper's per-device
   batches leave a step launch-bound, this is the part of benchmark 2's overhead that the
   host pays, measured on any CPU (docs/benchmarks.md, "Host time").
Every ratio is printed with the machine it ran on.
"""

import argparse
import copy
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from torch.utils import benchmark

import fairseq_define  # noqa: F401
from fairseq_define.modules import (
    AuthorsDefineUnit,
    DefineConfig,
    DefineEmbedding,
    DefineOptions,
    DefineUnit,
    build_authors_schedule,
    build_schedule,
)
from fairseq_define.modules.define.embedding import set_unit_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "run_scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpora  # noqa: E402  (the data root and the checksums of run_scripts/corpora.tsv)
from op_count import OpRecorder, host_syncs  # noqa: E402
from unit_run import COMPILE_MODES, TrainingPath, set_bench_run  # noqa: E402

DATA_ROOT = None  # --data-root
ROW_BUCKET = 0  # --row-bucket


def corpus(dataset: str, name: str) -> Path:
    """One file of a data set of run_scripts/corpora.tsv, found and checked in the data root."""
    try:
        return corpora.locate(dataset, DATA_ROOT) / name
    except corpora.DataError as e:
        raise SystemExit(f"bench_define.py: error: {e}")


def real_token_ids(path: Path, vocab: int, rows: int, length: int) -> torch.Tensor:
    """[rows, length] token ids of the start of a real corpus: words numbered by frequency
    after fairseq's 4 specials (</s> = 2 ends each line), words past the vocabulary <unk> (3).
    The unique-token path's gain depends on how often a batch repeats tokens, so the ids must
    come from text."""
    lines = path.read_text(encoding="utf-8").splitlines()
    counts = Counter(w for line in lines for w in line.split())
    rank = {w: 4 + i for i, (w, _) in enumerate(counts.most_common(vocab - 4))}
    ids = []
    for line in lines:
        ids.extend(rank.get(w, 3) for w in line.split())
        ids.append(2)
        if len(ids) >= rows * length:
            break
    return torch.tensor(ids[: rows * length]).view(rows, length)


def timed(fn, min_run_time):
    # Timer defaults to one thread; measure with the threads the process (and fairseq) uses
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median


def interleaved(fns, rounds, min_run_time):
    """Median time of each function, measured in alternating rounds so that drifts of the
    machine's speed (other processes, frequency) hit all of them alike."""
    samples = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(timed(fn, min_run_time))
    return {name: sorted(v)[len(v) // 2] for name, v in samples.items()}


def unit_flops(unit, tokens):
    """Multiply-adds of the unit's linear maps x 2 (forward) x 3 (forward + backward)."""
    weights = sum(p.numel() for n, p in unit.named_parameters() if n.endswith("weight") and p.dim() == 3)
    return 2 * 3 * tokens * weights


UNIT_SHAPES = [  # (label, n, k, m, N): the paper's three units
    ("NMT n=128 k=1024 m=512 N=3", 128, 1024, 512, 3),
    ("LSTM n=384 k=1024 m=384 N=7", 384, 1024, 384, 7),
    ("TXL 384(from n=128) k=4096 m=384 N=3", 384, 4096, 384, 3),
]


def build_style_unit(style, n, k, m, depth):
    if style == "authors":
        return AuthorsDefineUnit(build_authors_schedule(n, k, depth, m))
    return DefineUnit(build_schedule(n, k, depth, m, "define"))


def bench_unit(device, dtype, min_run_time, token_counts=(8192, 2048), compile_mode=None):
    """At 8192 rows, and at about the rows the unique-token path hands the unit at the paper's
    NMT batch (4096 tokens a side: some 1,500-2,000 distinct). With ``compile_mode`` a copy of
    each unit under torch.compile (as ``unit_run.set_bench_run`` compiles it) joins the rounds; on CUDA another
    copy's step replayed as a CUDA graph: how much of the unit's time is launches."""
    print("\n1a. DeFINE unit fwd+bwd vs torch.matmul fwd+bwd of comparable size (target >= 0.75); ops: the non-view "
          "aten operators of the unit's fwd+bwd on this device (benchmarks/op_count.py); compiled: the fraction "
          "under torch.compile (--compile); graph: replayed as a CUDA graph (on CUDA); -: not measured")
    print(f"{'style':<8} {'shape':<38} {'rows':>5} {'unit tokens/s':>14} {'unit GFLOP/s':>13} {'matmul GFLOP/s':>15} "
          f"{'fraction':>9} {'ops':>4} {'compiled':>9} {'graph':>6}")
    for style in ("paper", "authors"):
        for label, n, k, m, depth in UNIT_SHAPES:
            unit = TrainingPath(build_style_unit(style, n, k, m, depth).to(device, dtype))  # the training path
            compiled = None
            if compile_mode:
                compiled = copy.deepcopy(unit)
                compiled.compile(dynamic=True, mode=None if compile_mode == "default" else compile_mode)
            for tokens in token_counts:
                x = torch.randn(tokens, n, device=device, dtype=dtype, requires_grad=True)

                def step_of(module, inputs):
                    return lambda: module(inputs).sum().backward()

                # the matmul reference: [T, k/2] x [k/2, k/2] (a square layer of the unit's mean width)
                w = k // 2
                a = torch.randn(tokens, w, device=device, dtype=dtype, requires_grad=True)
                b = torch.randn(w, w, device=device, dtype=dtype, requires_grad=True)

                def step_mm():
                    torch.matmul(a, b).sum().backward()

                steps = {"unit": step_of(unit, x), "mm": step_mm}
                if compiled is not None:
                    steps["compiled"] = step_of(compiled, x.detach().clone().requires_grad_())
                    start = time.perf_counter()
                    steps["compiled"]()
                    print(f"  ({style} {label}, {tokens} rows: torch.compile, mode {compile_mode}, first step "
                          f"{time.perf_counter() - start:.0f} s)")
                if x.is_cuda:  # its own copy: a graph replays into the gradients it captured
                    steps["graph"] = cuda_graph(step_of(copy.deepcopy(unit), x.detach().clone().requires_grad_()))
                # the unit's time varies by +-15% between runs on a CPU: medians of 5 alternating rounds
                times = interleaved(steps, rounds=5, min_run_time=min_run_time / 2)
                rate_mm = 2 * 3 * tokens * w * w / times["mm"] / 1e9

                def fraction(name):
                    return (
                        f"{unit_flops(unit.unit, tokens) / times[name] / 1e9 / rate_mm:.2f}" if name in times else "-"
                    )

                unit.zero_grad(set_to_none=True)  # as a training step finds them (fairseq's zero_grad)
                x.grad = None
                with OpRecorder() as ops:
                    steps["unit"]()
                print(
                    f"{style:<8} {label:<38} {tokens:>5} {tokens / times['unit']:>14.0f} "
                    f"{unit_flops(unit.unit, tokens) / times['unit'] / 1e9:>13.1f} {rate_mm:>15.1f} "
                    f"{fraction('unit'):>9} "
                    f"{sum(ops.ops.values()):>4} {fraction('compiled'):>9} {fraction('graph'):>6}"
                )


def bench_vs_authors(device, dtype, min_run_time, rows=64, length=128):  # 8192 tokens
    """Our authors-style embedding (map + unit, the unique-token path) against the authors'
    own computation of it (benchmarks/their_define_unit.py, written from reading their code),
    same weights, same tokens of real text."""
    from their_define_unit import TheirDefineEmbedding

    print(f"\n1b. authors-style DeFINE embedding (map + unit) fwd+bwd, {rows}x{length} tokens of real text: ours / the "
          "authors' code's computation (benchmarks/their_define_unit.py; target <= 0.50)")
    cases = [(UNIT_SHAPES[0], ("wmt-news-proxy", "train.en"), 32000), (UNIT_SHAPES[1], ("ptb", "ptb.train.txt"), 10000)]
    for (label, n, k, m, depth), source, vocab in cases:
        cfg = DefineConfig(define_style="authors", define_map_dim=n, define_expand_dim=k, define_depth=depth,
                           define_max_groups=None)
        torch.manual_seed(0)
        ours = {path: set_unit_run(DefineEmbedding(DefineOptions.from_config(cfg), vocab, 1, m), token_path=path)
                for path in ("unique", "plain")}
        ours["plain"].load_state_dict(ours["unique"].state_dict())
        theirs = TheirDefineEmbedding.from_ours(ours["unique"])
        models = {"theirs": theirs, "ours": ours["unique"], "ours-plain": ours["plain"]}
        models = {name: mod.to(device=device, dtype=dtype).train() for name, mod in models.items()}
        tokens = real_token_ids(corpus(*source), vocab, rows, length).to(device)
        # the same function computed by other kernels: float32 agrees to 1e-4; bfloat16 keeps 8
        # bits of mantissa, so its roundings differ by a step (2^-8) between the two paths
        tol = 1e-4 if dtype == torch.float32 else 3e-2
        with torch.no_grad():
            torch.testing.assert_close(models["ours"](tokens), models["theirs"](tokens), rtol=tol, atol=tol)

        def make_step(mod):
            def step():
                mod(tokens).sum().backward()

            return step

        times = interleaved({name: make_step(mod) for name, mod in models.items()}, rounds=5,
                            min_run_time=min_run_time / 2)
        unique = tokens.unique().numel()
        print(
            f"  {label} ({vocab} vocab, {unique} distinct of {tokens.numel()} tokens): theirs "
            f"{times['theirs'] * 1e3:.1f} ms, ours {times['ours'] * 1e3:.1f} ms, ratio "
            f"{times['ours'] / times['theirs']:.3f}; "
            f"every token through the unit (same work as theirs): ratio {times['ours-plain'] / times['theirs']:.3f}"
        )


PLAIN = "define-plain"  # the variant whose units run once per position (set_unit_run's token path)
# benchmark 2: DeFINE against projective, both tied at the map width (as benchmarked before
# the output forms existed)
NMT_VARIANTS = (("projective", ["--define-transform", "projective", "--define-output-layer", "tied_map"]),
                ("define", ["--define-output-layer", "tied_map"]),
                (PLAIN, ["--define-output-layer", "tied_map"]))
# benchmark 5: the output forms against the map-tied one
OUTPUT_VARIANTS = tuple((form, ["--define-output-layer", form]) for form in ("tied_map", "untied", "tied_unit"))


def build_nmt_variants(layers, variants=NMT_VARIANTS, vocab=32000):
    from fairseq import options
    from fairseq.models import build_model

    from fairseq_define.models.without_data import VocabularyOnlyTask, dictionary_of_size

    models = {}
    for name, extra in variants:
        parser = options.get_training_parser(default_task="translation")
        args = options.parse_args_and_arch(
            parser,
            [
                "-",
                "--task",
                "translation",
                "--arch",
                "define_transformer_wmt_en_de",
                "--encoder-layers",
                str(layers),
                "--decoder-layers",
                str(layers),
                "--dropout",
                "0",
                "--share-all-embeddings",
                *extra,
            ],
        )
        d = dictionary_of_size(vocab)
        torch.manual_seed(0)
        models[name] = plain_if_named(name, build_model(args, VocabularyOnlyTask(d, d)))
    return models



def plain_if_named(name, model):
    return set_unit_run(model, token_path="plain") if name == PLAIN else model


def report(times, tokens, base="projective"):
    for name, t in times.items():
        print(
            f"  {name:<16} {t * 1e3:9.1f} ms/step {tokens / t:11.0f} tokens/s   ratio to {base} {t / times[base]:.3f}"
        )
    if PLAIN in times:
        print(f"  unique-token path gain: plain / unique = {times[PLAIN] / times['define']:.3f}")


def compile_units(model, step, mode="default", bucket=0) -> float:
    """``torch.compile`` the DeFINE units of ``model`` (dynamic row count) in torch.compile's
    ``mode`` (reduce-overhead: CUDA graphs of the compiled units on a GPU), their rows padded
    to a multiple of ``bucket`` (``unit_run.set_bench_run``); returns the seconds of the first
    ``step``, which compiles."""
    set_bench_run(model, compile_mode=mode, row_bucket=bucket)
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def cuda_graph(step):
    """``step`` captured in a CUDA graph (after warm-up steps on a side stream, which also
    create the gradients the graph accumulates into): a function that replays it. Raises
    where the step cannot be captured (a host sync: fairseq's encoder asks whether a batch
    has padding, the unique-token path how many distinct tokens it has)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def timed_variants(models, make_step, rounds, min_run_time, compile_unit):
    """Median step time of every variant in alternating rounds; with ``compile_unit`` a copy
    of the define variant with its units compiled joins them (its compile time printed); on
    CUDA each variant's step replayed as a CUDA graph too, where it can be captured."""
    steps = {name: make_step(m) for name, m in models.items()}
    syncs = {}
    for name, model in models.items():
        model.zero_grad(set_to_none=True)  # as fairseq's zero_grad leaves them
        with OpRecorder() as ops:
            steps[name]()
        syncs[name] = host_syncs(ops.ops)
        print(f"  {name}: {sum(ops.ops.values())} non-view aten operators a step; host syncs: "
              f"{', '.join(syncs[name]) or 'none'}")
    if compile_unit:
        compiled = copy.deepcopy(models["define"])
        steps["define-compiled"] = make_step(compiled)
        seconds = compile_units(compiled, steps["define-compiled"], compile_unit, ROW_BUCKET)
        print(f"  torch.compile of the units (dynamic shapes, mode {compile_unit}, rows padded to a multiple of "
              f"{ROW_BUCKET or 1}): first step {seconds:.0f} s")
    if next(iter(models.values())).parameters().__next__().is_cuda:
        for name in list(models):
            if syncs[name]:  # a capture would fail there
                print(f"  {name}: no CUDA graph (the step waits for the device: {', '.join(syncs[name])})")
                continue
            try:
                steps[f"{name}-graph"] = cuda_graph(make_step(copy.deepcopy(models[name])))
            except Exception as e:  # noqa: BLE001  (what stops the capture is the finding)
                torch.cuda.synchronize()
                print(f"  {name}: no CUDA graph ({type(e).__name__}: {str(e).splitlines()[0][:120]})")
    return interleaved(steps, rounds=rounds, min_run_time=min_run_time)


def nmt_step_maker(device, rows, length, vocab=32000):
    """``make_step(model)``: one training step (forward+backward) of an NMT model on rows x
    length source and target tokens of WMT news text."""
    src = real_token_ids(corpus("wmt-news-proxy", "train.en"), vocab, rows, length).to(device)
    prev = real_token_ids(corpus("wmt-news-proxy", "train.de"), vocab, rows, length).to(device)
    lengths = torch.full((rows,), length, device=device)

    def make_step(model):
        model.train()

        def step():
            out, _ = model(src, lengths, prev)
            out.float().logsumexp(-1).sum().backward()

        return step

    make_step.src = src  # [rows, length]: the source batch
    return make_step


def bench_train(device, dtype, min_run_time, layers, batches, compile_unit):
    models = {name: m.to(device=device, dtype=dtype) for name, m in build_nmt_variants(layers).items()}
    for rows, length in batches:
        print(f"\n2. training step (forward+backward), define_transformer_wmt_en_de with {layers}+{layers} layers, 32K "
              f"vocabulary, {rows}x{length} source and target tokens of WMT news text")
        make_step = nmt_step_maker(device, rows, length)
        # steps of seconds vary by +-15% on a CPU: medians of 9 alternating rounds
        report(timed_variants(models, make_step, 9, min_run_time / 4, compile_unit), rows * length)
        embedding_alone(models, make_step.src, min_run_time)


def embedding_alone(models, src, min_run_time):
    """The shared embedding's training step by itself on the source batch: DeFINE against the
    projective map, and on CUDA the DeFINE step replayed as a CUDA graph (what a graphed unit
    could save where the step is launch-bound)."""
    steps = {}
    for name in ("projective", "define"):
        emb = copy.deepcopy(models[name].encoder.embed_tokens).train()
        steps[name] = lambda emb=emb: emb(src).float().sum().backward()
    if src.is_cuda:
        emb = copy.deepcopy(models["define"].encoder.embed_tokens).train()
        try:
            steps["define-graph"] = cuda_graph(lambda: emb(src).float().sum().backward())
        except Exception as e:  # noqa: BLE001  (what stops the capture is the finding)
            torch.cuda.synchronize()
            print(f"  define embedding: no CUDA graph ({type(e).__name__}: {str(e).splitlines()[0][:120]})")
    times = interleaved(steps, rounds=9, min_run_time=min_run_time / 8)
    print("  the embedding's step alone (source side): " + ", ".join(
        f"{name} {t * 1e3:.3f} ms ({t / times['projective']:.2f} x projective)" for name, t in times.items()))


def bench_output_forms(device, dtype, min_run_time, layers, rows, length, vocab=32000):
    models = {
        name: m.to(device=device, dtype=dtype) for name, m in build_nmt_variants(layers, OUTPUT_VARIANTS, vocab).items()
    }
    print(
        f"\n5. training step (forward+backward) of define_transformer_wmt_en_de with {layers}+{layers} layers, a "
        f"shared {vocab}-token vocabulary, each output layer; {rows}x{length} source and target tokens of WMT news text"
    )
    make_step = nmt_step_maker(device, rows, length, vocab)
    report(
        interleaved({n: make_step(m) for n, m in models.items()}, 5, min_run_time / 2), rows * length, base="tied_map"
    )


def build_lm(arch, vocab, extra=()):
    from fairseq import options
    from fairseq.models import build_model

    from fairseq_define.models.without_data import VocabularyOnlyTask, dictionary_of_size

    parser = options.get_training_parser(default_task="language_modeling")
    args = options.parse_args_and_arch(parser, ["-", "--task", "language_modeling", "--arch", arch, *extra])
    d = dictionary_of_size(vocab)
    torch.manual_seed(0)
    return build_model(args, VocabularyOnlyTask(d, d))


def lm_variants(txl_layers, batch=None):
    """(label, (data set, file), vocabulary, [batch x length, ...], {variant: (arch, extra flags)}): equal n in
    each row; the batches: the paper's per device, then the small one of the CPU recipes where it differs."""
    txl = ["--decoder-layers", str(txl_layers)]
    rows = [
        ("AWD-LSTM (Table 1c sizes), PTB", ("ptb", "ptb.train.txt"), 10000, [(20, 70)], {
            "projective": ("define_awd_lstm_ptb_define", ["--define-transform", "projective"]),
            "define": ("define_awd_lstm_ptb_define", []),
            PLAIN: ("define_awd_lstm_ptb_define", []),
        }),
        (f"Transformer-XL n=128 (Table 2 sizes, {txl_layers} of 16 layers), WT-103 vocabulary, WikiText-2 text",
         ("wikitext-2", "wiki.train.tokens"), 267735, [(15, 150), (8, 64)], {
            "projective": ("define_txl_wt103_projective_n128", txl),
            "define": ("define_txl_wt103_define_n128", txl),
            PLAIN: ("define_txl_wt103_define_n128", txl),
        }),
    ]
    return [(label, source, vocab, [batch] if batch else batches, v) for label, source, vocab, batches, v in rows]


def bench_lm_train(device, dtype, min_run_time, txl_layers, compile_unit, batch=None):
    for label, source, vocab, batches, variants in lm_variants(txl_layers, batch):
        models = {name: plain_if_named(name, build_lm(arch, vocab, extra)).to(device=device, dtype=dtype)
                  for name, (arch, extra) in variants.items()}
        for B, T in batches:
            print(f"\n2. training step (forward+backward through the adaptive softmax), {label}, {B}x{T} tokens")
            make_step = lm_step_maker(corpus(*source), vocab, B, T, device)
            report(timed_variants(models, make_step, 5, min_run_time / 4, compile_unit), B * T)


# Table 1a's R2 against R3 at CPU scale, as study 5 trains them (studies/lm_adaptive_define.py):
# the adaptive input alone, and DeFINE (the paper's style) added on it
TABLE_1A_PAIR = {"adaptive": ("define_lstm_wt2_r2_adaptive", []),
                 "define": ("define_lstm_wt2_r3_define_n256", ["--define-style", "paper"])}


def bench_table_1a_pair(device, dtype, min_run_time, compile_unit, batch=None):
    """Benchmark 2's row for the abstract's headline: a training step of study 5's LSTM pair
    at its batch (20 x 70) on WikiText-2's vocabulary (its training text's words and fairseq's
    4 specials), beside Table 1a's times a batch."""
    from fairseq_define.paper_tables import TABLE_1A

    B, T = batch or (20, 70)
    path = corpus("wikitext-2", "wiki.train.tokens")
    vocab = 4 + len({w for line in path.read_text(encoding="utf-8").splitlines() for w in line.split()})
    print(f"\n2. training step (forward+backward through the adaptive softmax), Table 1a's R2 against R3 at CPU "
          f"scale (study 5's LSTM pair), WikiText-2 ({vocab:,} tokens), {B}x{T} tokens")
    models = {name: build_lm(arch, vocab, extra).to(device=device, dtype=dtype)
              for name, (arch, extra) in TABLE_1A_PAIR.items()}
    make_step = lm_step_maker(path, vocab, B, T, device)
    report(timed_variants(models, make_step, 5, min_run_time / 4, compile_unit), B * T, base="adaptive")
    r2, r3 = (TABLE_1A.row(r).paper["ms_per_batch"] for r in ("r2_adaptive", "r3_define_n256"))
    print(f"  the paper (Table 1a, WikiText-103 on a GPU): R2 {r2} against R3 {r3} ms a batch, ratio {r3 / r2:.3f}")


def lm_step_maker(path, vocab, B, T, device):
    """``make_step(model)``: one training step of a language model (through its adaptive
    softmax) on B x T tokens of the text at ``path``."""
    tokens = real_token_ids(path, vocab, B, T + 1).to(device)

    def make_step(model):
        model.train()
        softmax = model.decoder.adaptive_softmax

        def step():
            x, _ = model(tokens[:, :-1])
            softmax.target_log_prob(x.reshape(-1, x.size(-1)), tokens[:, 1:].reshape(-1)).sum().backward()

        return step

    return make_step


# benchmark 6: the widths that leave only the host's work (each family keeps its layers, its
# unit's depth and grouping, its output layer's form and its vocabulary's bands)
HOST_NMT = ["--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "32",
            "--decoder-ffn-embed-dim", "32", "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
            "--define-map-dim", "16", "--define-expand-dim", "128"]
HOST_LM = {
    "define_awd_lstm_ptb_define": [
        "--define-map-dim",
        "16",
        "--define-expand-dim",
        "64",
        "--define-out-dim",
        "16",
        "--lstm-hidden-dim",
        "32",
    ],
    "define_txl_wt103_define_n128": [
        "--decoder-embed-dim",
        "32",
        "--decoder-ffn-embed-dim",
        "32",
        "--decoder-attention-heads",
        "2",
        "--decoder-head-dim",
        "16",
        "--define-map-dim",
        "16",
        "--define-expand-dim",
        "128",
        "--define-out-dim",
        "32",
        "--mem-len",
        "8",
    ],
}
HOST_LM["define_txl_wt103_projective_n128"] = HOST_LM["define_txl_wt103_define_n128"]


def bench_host(min_run_time, nmt_layers, txl_layers, compile_unit=None):
    """Benchmark 6: benchmark 2's define / projective ratio where only host time is left."""
    torch.set_num_threads(1)  # one thread issues a GPU's operators; more only add pool overhead
    print("\n6. host time of a training step: benchmark 2's models at tiny widths (32) and an 8x8 batch, one "
          "thread, on the CPU (the share of a launch-bound GPU step that the host pays; target <= 1.03)")
    variants = tuple((name, extra + HOST_NMT) for name, extra in NMT_VARIANTS)
    models = build_nmt_variants(nmt_layers, variants, vocab=1000)
    print(f"  define_transformer_wmt_en_de, {nmt_layers}+{nmt_layers} layers")
    report(timed_variants(models, nmt_step_maker("cpu", 8, 8, vocab=1000), 9, min_run_time / 4, compile_unit), 64)
    for label, source, vocab, _, arms in lm_variants(txl_layers):
        print(f"  {label}")
        models = {
            name: plain_if_named(name, build_lm(arch, vocab, extra + HOST_LM[arch]))
            for name, (arch, extra) in arms.items()
        }
        report(timed_variants(models, lm_step_maker(corpus(*source), vocab, 4, 8, "cpu"), 9, min_run_time / 4,
                              compile_unit), 32)


def inference_report(t, tokens):
    print(f"  cached {t['cached'] * 1e3:.3f} ms ({tokens / t['cached']:.0f} tokens/s), plain {t['plain'] * 1e3:.3f} ms "
          f"({tokens / t['plain']:.0f} tokens/s), ratio {t['cached'] / t['plain']:.3f}")


def bench_lm_inference(device, dtype, min_run_time):
    from fairseq_define.modules import cache_define_tables

    print(
        "\n3. LM forward at inference (AWD-LSTM + DeFINE, Table 1c sizes, 10x70 tokens of PTB): cached DeFINE table vs "
        "a plain nn.Embedding"
    )
    cached = build_lm("define_awd_lstm_ptb_define", 10000).eval()
    cache_define_tables(cached)
    plain = build_lm("define_awd_lstm_ptb_define", 10000).eval()
    plain.load_state_dict(cached.state_dict(), strict=False)
    table = torch.nn.Embedding(10000, 400, padding_idx=1)
    table.weight.data.copy_(cached.decoder.embed_tokens.cached_table.weight)
    plain.decoder.embed_tokens = table
    cached, plain = cached.to(device=device, dtype=dtype), plain.to(device=device, dtype=dtype)
    tokens = real_token_ids(corpus("ptb", "ptb.test.txt"), 10000, 10, 70).to(device)
    with torch.no_grad():
        torch.testing.assert_close(cached(tokens)[0], plain(tokens)[0])
        t = interleaved(
            {"cached": lambda: cached(tokens), "plain": lambda: plain(tokens)}, rounds=9, min_run_time=min_run_time / 4
        )
    inference_report(t, tokens.numel())


def bench_inference(device, dtype, min_run_time):
    print(
        "\n3. embedding lookup at inference: cached DeFINE table vs a plain nn.Embedding of the same size (32000 x "
        "512), "
        "64x128 tokens of WMT news text"
    )
    emb = DefineEmbedding(DefineOptions.from_config(DefineConfig()), 32000, 1, 512).eval()
    emb.cache_table()
    plain = torch.nn.Embedding(32000, 512, padding_idx=1).eval()
    plain.weight.data.copy_(emb.cached_table.weight)
    emb, plain = emb.to(device=device, dtype=dtype), plain.to(device=device, dtype=dtype)
    tokens = real_token_ids(corpus("wmt14-test", "newstest2014.en"), 32000, 64, 128).to(device)
    with torch.no_grad():
        t = interleaved(
            {"cached": lambda: emb(tokens), "plain": lambda: plain(tokens)}, rounds=9, min_run_time=min_run_time / 4
        )
    inference_report(t, tokens.numel())


def bench_params():
    from fairseq_define.paper_tables import TABLE3_VOCAB
    from fairseq_define.param_report import parameter_distribution
    from fairseq_define.tools.params import build_arch

    print(f"\n4. parameters in Table 3's configuration (separate {TABLE3_VOCAB:,}-token vocabularies)")
    base = parameter_distribution(build_arch("transformer_wmt_en_de", TABLE3_VOCAB, TABLE3_VOCAB)[0])["total"]
    for form in ("untied", "tied_map", "tied_unit"):
        ours = parameter_distribution(build_arch("define_transformer_wmt_en_de", TABLE3_VOCAB, TABLE3_VOCAB,
                                                 ["--define-output-layer", form])[0])["total"]
        print(f"  define_transformer_wmt_en_de ({form}) {ours / 1e6:.2f}M / transformer_wmt_en_de {base / 1e6:.2f}M "
              f"= {ours / base:.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", type=int, choices=[1, 2, 3, 4, 5, 6], help="run one benchmark")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--min-run-time", type=float, default=2.0, help="seconds per measurement")
    parser.add_argument(
        "--nmt-layers",
        type=int,
        default=6,
        help="encoder and decoder layers of benchmark 2's NMT model (the architecture's 6)",
    )
    parser.add_argument(
        "--txl-layers", type=int, default=16, help="layers of benchmark 2's Transformer-XL (the architecture's 16)"
    )
    parser.add_argument(
        "--nmt-batch",
        default="64x64 32x64",
        help="benchmark 2's NMT batches, sentences x tokens per side "
        "(default: the paper's 4096 tokens a side per device, then the CPU recipes' 2048)",
    )
    parser.add_argument(
        "--compile",
        nargs="?",
        const="default",
        metavar="MODE",
        choices=COMPILE_MODES,
        help="benchmarks 1, 2 and 6 also time the units (2, 6: of the define variant) under torch.compile "
        "(dynamic shapes; MODE: torch.compile's mode, default 'default'), and print the compile time",
    )
    parser.add_argument("--row-bucket", type=int, default=0, metavar="N",
                        help="with --compile: the compiled units' rows padded to a multiple of N (static shapes for "
                        "reduce-overhead's CUDA graphs)")
    parser.add_argument("--train-rows", default="nmt,lm,table1a",
                        help="benchmark 2's rows, comma-separated: nmt (define_transformer_wmt_en_de), lm (the "
                        "AWD-LSTM and the Transformer-XL), table1a (study 5's LSTM pair); default all three")
    parser.add_argument("--quick", action="store_true", help="a check that the benchmarks run: tiny batches, one "
                        "layer, short timings (tests/test_benchmarks.py); its numbers mean nothing")
    parser.add_argument("--data-root", help="folder of the corpora (default $FAIRSEQ_DEFINE_DATA, else the default "
                                            "locations of run_scripts/corpora.py)")
    args = parser.parse_args()
    quick = dict(tokens=256, rows=4, length=64, lm_batch=(2, 16)) if args.quick else {}
    if args.quick:
        args.min_run_time, args.nmt_layers, args.txl_layers, args.nmt_batch = 0.02, 1, 1, "4x16"
    global DATA_ROOT, ROW_BUCKET
    DATA_ROOT, ROW_BUCKET = args.data_root, args.row_bucket
    dtype = getattr(torch, args.dtype)
    allocator = " ".join(
        f"{k}={v}"
        for k, v in sorted(os.environ.items())
        if k.startswith("MALLOC_") or k in ("LD_PRELOAD", "THP_MEM_ALLOC_ENABLE")
    )
    print(
        f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch "
        f"{torch.__version__}, "
        f"device {args.device}{' (' + torch.cuda.get_device_name() + ')' if args.device == 'cuda' else ''}, "
        f"{args.dtype}, "
        f"allocator {allocator or 'default'}"
    )
    if args.only in (None, 1):
        bench_unit(args.device, dtype, args.min_run_time, compile_mode=args.compile,
                   **({"token_counts": (quick["tokens"],)} if quick else {}))
        bench_vs_authors(
            args.device,
            dtype,
            args.min_run_time,
            **({"rows": quick["rows"], "length": quick["length"]} if quick else {}),
        )
    if args.only in (None, 2):
        rows = set(args.train_rows.split(","))
        if not rows or rows - {"nmt", "lm", "table1a"}:
            parser.error(f"--train-rows takes nmt, lm and table1a, comma-separated; got {args.train_rows!r}")
        batches = [tuple(int(v) for v in b.split("x")) for b in args.nmt_batch.split()]
        if "nmt" in rows:
            bench_train(args.device, dtype, args.min_run_time, args.nmt_layers, batches, args.compile)
        if "lm" in rows:
            bench_lm_train(args.device, dtype, args.min_run_time, args.txl_layers, args.compile, quick.get("lm_batch"))
        if "table1a" in rows:
            bench_table_1a_pair(args.device, dtype, args.min_run_time, args.compile, quick.get("lm_batch"))
    if args.only in (None, 3):
        bench_inference(args.device, dtype, args.min_run_time)
        bench_lm_inference(args.device, dtype, args.min_run_time)
    if args.only in (None, 4):
        bench_params()
    if args.only in (None, 5):
        rows, length = [int(v) for v in args.nmt_batch.split()[-1].split("x")]
        bench_output_forms(args.device, dtype, args.min_run_time, args.nmt_layers, rows, length,
                           **({"vocab": 500} if quick else {}))
    if args.only in (None, 6):
        bench_host(args.min_run_time, args.nmt_layers, args.txl_layers, args.compile)


if __name__ == "__main__":
    main()
