"""The GPU probe: one short run that says where DeFINE's training step spends its time on a GPU
(issue 61, part 5; docs/benchmarks.md, "The GPU probe").

    python3 benchmarks/gpu_probe.py --out DIR --budget 420          # one GPU, bf16
    python3 benchmarks/gpu_probe.py --out DIR --device cpu --quick  # every section on tiny models

Hardware and time: one CUDA GPU (an H100 or H200), this package installed and patched as
scripts/gpu_check.sh finds it (which runs the probe first); the data root for real text
(--data-root or $FAIRSEQ_DEFINE_DATA; without it the batches are Zipf-distributed ids, and
probe.json says so). Under 8 minutes (--budget, default 420 s, caps the whole run, imports
included: what would overrun it is skipped and listed). --device cpu --quick: tiny models
(benchmark 6's widths of benchmarks/bench_define.py), small batches, about a minute on 2 cores;
its numbers only show that every section runs.

Writes DIR/probe.json, rewritten atomically after every measurement (a run cut short keeps what
it measured), and DIR/probe.md, a short summary. Sections, each "done", "partial" or "skipped"
(with the reason) in probe.json's "sections":

- machine: the GPU (name, driver, clocks and power where nvidia-smi gives them), the CPU, the
  versions; host microseconds per small operator (a one-element add, over many launches) and,
  on CUDA, per CUDA graph replay;
- ratios: one full training step (forward, backward, fairseq's optimizer step: bf16 with fp32
  master weights on CUDA, float32 on the CPU) of each family (nmt: define_transformer_wmt_en_de;
  awd_lstm: the AWD-LSTM of Table 1c; txl: Transformer-XL n=128 of Table 2) at the paper's
  per-device batches and one large batch a family, for the arms projective, define, define_aa
  (an independent copy of define: the measure's own noise), define_unique (the unique-token
  path) and define_graphed (the unit replayed as graphs); CUDA events over interleaved rounds,
  the arms' order rotated each round; "ratios" holds each arm's median step / projective's,
  "steps" the medians and ranges;
- host_bound: the projective step at 0.5x, 1x and 2x the paper's first batch (a step that
  takes about as long at 2x is host-bound);
- profile: each family and arm's step under torch.profiler: the top kernels by device time,
  the embedding's forward inside a named range (DEFINE_RANGE); on the CPU no kernel times
  exist, and the section records the top host operators instead, saying so;
- unit_fraction: the embedding's training call (map + unit, every position through the unit)
  as a fraction of the rate of one dense matmul of about the same FLOPs, eager and graphed
  (and on CUDA, the whole call captured by torch.cuda.graph: the bound a graph can reach);
- alignment: the unit's grouped matmuls at their per-group widths (most not multiples of 8):
  a strided bmm (as the fused unit reads [T, w]), a contiguous one, one padded to multiples of
  8, and one dense block-diagonal matmul.

An arm or measurement that fails becomes {"error": "one line"} in probe.json and the run goes
on. Exit 0 when the run ended (errors and skips recorded), 2 for a bad option.
"""

import time

STARTED = time.monotonic()  # --budget counts the imports too

import argparse  # noqa: E402
import copy  # noqa: E402
import functools  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable, Dict, List, Tuple  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_define as bench  # noqa: E402  (the models, arms and text of benchmark 2)
import corpora  # noqa: E402  (on the path through bench_define: the data root)

from fairseq_define.errors import UserError, cli_error  # noqa: E402
from fairseq_define.modules import DefineEmbedding  # noqa: E402
from fairseq_define.modules.define.embedding import set_unit_run  # noqa: E402
from fairseq_define.output_files import write_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("machine", "ratios", "host_bound", "profile", "unit_fraction", "alignment")
ARMS = ("projective", "define", "define_aa", "define_unique", "define_graphed")
DEFINE_RANGE = "define_embedding"  # the profiler's named range around each embedding's forward
PAD = 1  # fairseq's padding index


@dataclass(frozen=True)
class Family:
    """A model family of benchmark 2 with its batches (rows x tokens) and its recipe's
    optimizer (run_scripts/lib.sh, run_scripts/table3_transformer_wmt14.sh)."""

    name: str
    paper: Tuple[Tuple[int, int], ...]  # the paper's per-device batches
    large: Tuple[int, int]  # enough work that the device, not the host, should decide
    quick_paper: Tuple[Tuple[int, int], ...]
    quick_large: Tuple[int, int]
    optimizer: Tuple[str, ...]  # fairseq-train flags; learning rates small: one batch is stepped many times


FAMILIES = (
    Family("nmt", ((64, 64), (32, 64)), (256, 64), ((8, 16), (4, 16)), (32, 16),
           ("--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "1e-4", "--clip-norm", "0.0")),
    # NT-ASGD (the recipe's) refuses bf16 and is SGD until it triggers: SGD
    Family("awd_lstm", ((20, 70),), (80, 70), ((4, 16),), (16, 16),
           ("--optimizer", "sgd", "--lr", "1.0", "--clip-norm", "0.25")),
    Family("txl", ((15, 150), (8, 64)), (60, 150), ((4, 16), (2, 16)), (8, 16),
           ("--optimizer", "adam", "--lr", "1e-4", "--clip-norm", "0.25")),
)


@dataclass(frozen=True)
class Settings:
    """How long and how much each measurement runs (a GPU run, or --quick)."""

    rounds: int  # interleaved rounds of each timing
    round_s: float  # seconds each arm runs a round (steps a round = this / the projective step)
    warmup: int  # steps before timing (a graphed arm captures here)
    min_rounds: int  # fewer fit in the budget: the measurement is skipped
    unknown_s: float  # the least time left to start an item whose cost is not yet known
    alignment_rows: int
    small_ops: int  # launches timed for the host's microseconds an operator


GPU_SETTINGS = Settings(rounds=9, round_s=0.15, warmup=3, min_rounds=3, unknown_s=20.0, alignment_rows=4096,
                        small_ops=20000)
QUICK_SETTINGS = Settings(rounds=3, round_s=0.01, warmup=2, min_rounds=2, unknown_s=2.0, alignment_rows=32,
                          small_ops=2000)


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200]}" if text else type(e).__name__


class Probe:
    """probe.json as it grows: every measurement lands here and is written at once."""

    def __init__(self, out: Path, args, settings: Settings):
        self.out, self.args, self.settings = out, args, settings
        self.deadline = STARTED + args.budget
        self.done = {s: 0 for s in SECTIONS}
        self.skips = {s: [] for s in SECTIONS}
        self.data = {
            "probe": {"command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), "device": args.device,
                      "dtype": args.dtype, "quick": args.quick, "budget_s": args.budget, "finished": False,
                      "tokens": {}},
            "sections": {},
            "skipped": [],
            "machine": {},
            "ratios": {},
            "steps": {},
            "host_bound": {},
            "profile": {},
            "unit_fraction": {},
            "alignment": {},
        }

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def allows(self, section: str, item: str, seconds: float) -> bool:
        """Whether ``seconds`` of work fit in the budget; if not, the item is skipped and listed."""
        if seconds <= self.left():
            return True
        self.skip(section, item, f"budget: {max(self.left(), 0):.1f} s left of {self.args.budget:.0f}, "
                                 f"needs about {seconds:.1f} s")
        return False

    def skip(self, section: str, item: str, reason: str):
        self.skips[section].append(reason)
        self.data["skipped"].append({"section": section, "item": item, "reason": reason})
        print(f"  skipped {section} {item}: {reason}", flush=True)
        self.save()

    def record(self, section: str, key: str, value):
        self.data[section][key] = value
        self.done[section] += 1
        self.save()

    def save(self):
        for s in SECTIONS:
            entry = {"status": "done" if self.done[s] else "pending"}
            if self.skips[s]:
                entry = {"status": "partial" if self.done[s] else "skipped", "reason": self.skips[s][0]}
            if s == "profile" and self.args.device == "cpu":
                entry["note"] = "no kernel times on the CPU: the top host operators instead"
            self.data["sections"][s] = entry
        self.data["probe"]["elapsed_s"] = round(time.monotonic() - STARTED, 1)
        write_text(self.out / "probe.json", json.dumps(self.data, indent=1) + "\n")
        write_text(self.out / "probe.md", summary(self.data))

    def finish(self, finished: bool):
        for s in SECTIONS:
            if not self.done[s] and not self.skips[s]:
                self.skips[s].append("not reached: the run stopped before it" if not finished else "nothing to measure")
        self.data["probe"]["finished"] = finished
        self.save()


# -- timing ----------------------------------------------------------------------------------------


class Clock:
    """Seconds a call of a function takes, n calls in a row: CUDA events on a GPU (the time the
    stream takes, gaps where it waits for the host included), the wall clock on the CPU."""

    def __init__(self, device: str):
        self.cuda = device == "cuda"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def per_call(self, fn: Callable, n: int) -> float:
        self.sync()
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(n):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / n
        start = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - start) / n


def warm(clock: Clock, fns: Dict[str, Callable], steps: int) -> Dict[str, object]:
    """Run each function ``steps`` times; its last call's seconds, or {"error": ...}."""
    out = {}
    for name, fn in fns.items():
        try:
            for _ in range(steps - 1):
                fn()
            out[name] = clock.per_call(fn, 1)
        except Exception as e:  # noqa: BLE001  (a failing arm is a finding; the others go on)
            out[name] = {"error": one_line(e)}
            release(clock)
    return out


def interleaved(clock: Clock, fns: Dict[str, Callable], rounds: int, n: int) -> Dict[str, object]:
    """Per function: the seconds a call of each round (n calls a round), the order of the
    functions rotated each round so that drifts of the machine hit all alike; a function
    that fails is dropped with its error."""
    samples: Dict[str, object] = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            if isinstance(samples[name], dict):
                continue
            try:
                samples[name].append(clock.per_call(fns[name], n))
            except Exception as e:  # noqa: BLE001
                samples[name] = {"error": one_line(e)}
                release(clock)
    return samples


def stats(samples: List[float]) -> dict:
    s = sorted(samples)
    return {"median_ms": round(s[len(s) // 2] * 1e3, 4), "min_ms": round(s[0] * 1e3, 4),
            "max_ms": round(s[-1] * 1e3, 4), "rounds": len(s)}


def release(clock: Clock):
    """After a failure: wait for the device, free what the failure left."""
    gc.collect()
    if clock.cuda:
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001  (the next measurement says whether the device still works)
            pass


def fit_rounds(probe: Probe, section: str, item: str, round_cost: float) -> int:
    """The rounds that fit in the budget (the settings' number at most), 0 if too few."""
    s = probe.settings
    rounds = min(s.rounds, int(max(probe.left(), 0) * 0.9 / max(round_cost, 1e-9)))
    if rounds < s.min_rounds:
        probe.allows(section, item, s.min_rounds * round_cost)
        return 0
    return rounds


# -- the machine -------------------------------------------------------------------------------------


def run_quiet(cmd: List[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"unavailable ({one_line(e)})"


NVIDIA_SMI_FIELDS = ("name", "driver_version", "pstate", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
                     "clocks.applications.graphics", "power.draw", "power.limit", "temperature.gpu", "memory.total",
                     "persistence_mode", "compute_mode")


def nvidia_smi(fields=NVIDIA_SMI_FIELDS) -> dict:
    """The first GPU's fields as nvidia-smi gives them (a driver that refuses one field refuses
    the query: then the name and the driver alone)."""
    text = run_quiet(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"])
    values = text.splitlines()[0].split(", ") if text and not text.startswith("unavailable") else []
    if len(values) == len(fields):
        return dict(zip(fields, values))
    if len(fields) > 2:
        return {**nvidia_smi(fields[:2]), "error": (text.splitlines() or ["nvidia-smi printed nothing"])[0][:200]}
    return {"error": text[:200] or "nvidia-smi printed nothing"}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_microseconds(clock: Clock, device: str, n: int) -> dict:
    """What the host pays to issue work: a one-element add (the median of 3 runs of n
    launches, wall clock, the device waited for at the end) and, on CUDA, a graph replay of
    one add and of 32."""
    x = torch.zeros(1, device=device)

    def launches(fn, count):
        clock.sync()
        start = time.perf_counter()
        for _ in range(count):
            fn()
        clock.sync()
        return (time.perf_counter() - start) / count * 1e6

    out = {"small_op_us": round(sorted(launches(lambda: x.add_(1), n) for _ in range(3))[1], 3)}
    if not clock.cuda:
        out["graph_replay"] = {"skipped": "no CUDA graphs on the CPU"}
        return out
    for kernels in (1, 32):
        try:
            graph = torch.cuda.CUDAGraph()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                x.add_(1)
            torch.cuda.current_stream().wait_stream(stream)
            with torch.cuda.graph(graph):
                for _ in range(kernels):
                    x.add_(1)
            out[f"graph_replay_{kernels}_kernels_us"] = round(
                sorted(launches(graph.replay, n // 10) for _ in range(3))[1], 3
            )
        except Exception as e:  # noqa: BLE001
            out[f"graph_replay_{kernels}_kernels_us"] = {"error": one_line(e)}
            release(clock)
    return out


def machine(args, clock: Clock, settings: Settings) -> dict:
    import fairseq
    import numpy

    info = {
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "fairseq": fairseq.__version__,
        "numpy": numpy.__version__,
        "hostname": platform.node(),
        "commit": run_quiet(["git", "-C", str(ROOT), "rev-parse", "HEAD"]),
    }
    if clock.cuda:
        props = torch.cuda.get_device_properties(0)
        info["gpu"] = {
            "name": torch.cuda.get_device_name(0),
            "capability": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1),
            "multiprocessors": props.multi_processor_count,
            "nvidia_smi": nvidia_smi(),
        }
    else:
        info["gpu"] = None
    info["host"] = host_microseconds(clock, args.device, settings.small_ops)
    return info


# -- the models and their steps ----------------------------------------------------------------------


def text_ids(dataset: str, name: str, vocab: int, count: int, seed: int) -> Tuple[torch.Tensor, str]:
    """``count`` token ids of a corpus of the data root (bench_define's numbering: words by
    frequency), or, without the corpus, Zipf-distributed ids (a text's repetition of tokens,
    which the unique-token path depends on); and which of the two it is."""
    try:
        path = corpora.locate(dataset, bench.DATA_ROOT) / name
        ids = bench.real_token_ids(path, vocab, 1, count).view(-1)
        if ids.numel() == count:
            return ids, f"{dataset} {name}"
    except corpora.DataError:
        pass
    generator = torch.Generator().manual_seed(seed)
    ranks = torch.arange(1, vocab - 4 + 1, dtype=torch.float64)
    return 4 + torch.multinomial(
        1.0 / ranks, count, replacement=True, generator=generator
    ), "synthetic Zipf ids (no data root)"


class Batches:
    """A family's token streams, cut into [rows, tokens + 1] batches."""

    def __init__(self, family: str, vocab: int, count: int, probe: Probe):
        if family == "nmt":  # the text of bench_define.nmt_step_maker
            self.src, where = text_ids("wmt-news-proxy", "train.en", vocab, count, 0)
            self.tgt, _ = text_ids("wmt-news-proxy", "train.de", vocab, count, 1)
        else:
            self.tgt, where = text_ids(*lm_row(family, True)[0], vocab, count, 2)
            self.src = None
        probe.data["probe"]["tokens"][family] = where

    def get(self, rows: int, length: int, device: str):
        cut = lambda s: s[: rows * (length + 1)].view(rows, length + 1).to(device)  # noqa: E731
        return (cut(self.src)[:, :-1] if self.src is not None else None), cut(self.tgt)


def family_vocab(family: str, quick: bool) -> int:
    if family == "nmt":
        return 1000 if quick else 32000
    return lm_row(family, quick)[1]


def lm_row(family: str, quick: bool) -> Tuple[Tuple[str, str], int, Dict[str, Tuple[str, List[str]]]]:
    """A language model family as benchmark 2 builds it (bench_define.lm_variants): its text
    (data set, file), its vocabulary, and arm -> (arch, fairseq flags) of the projective and
    the DeFINE model (with --quick at benchmark 6's tiny widths, one layer)."""
    for _, source, vocab, _, arms in bench.lm_variants(1 if quick else 16):
        if arms["define"][0].startswith("define_awd_lstm" if family == "awd_lstm" else "define_txl"):
            return source, vocab, {arm: (arch, extra + (bench.HOST_LM[arch] if quick else []))
                                   for arm, (arch, extra) in arms.items() if arm in ("projective", "define")}
    raise KeyError(family)


def build_model(family: str, arm: str, quick: bool):
    """The projective or the DeFINE model of ``family``, built as benchmark 2 builds it (seed 0)."""
    base = "projective" if arm == "projective" else "define"
    if family == "nmt":
        extra = dict(bench.NMT_VARIANTS)[base] + (bench.HOST_NMT if quick else [])
        return bench.build_nmt_variants(1 if quick else 6, ((arm, extra),), family_vocab(family, quick))[arm]
    _, vocab, arms = lm_row(family, quick)
    arch, flags = arms[base]
    return bench.build_lm(arch, vocab, flags)


def configure(model, arm: str, device: str):
    """The arm's way of running its units (set_unit_run)."""
    if arm == "define_unique":
        set_unit_run(model, token_path="unique")
    elif arm == "define_graphed":
        # the graphed unit (issue 61, part 4): CUDA graphs on a GPU, its eager replay on the CPU
        set_unit_run(model, graphs="cuda" if device == "cuda" else "eager")
    return model


@functools.lru_cache(maxsize=None)
def training_config(family: Family, bf16: bool):
    """fairseq-train's configuration with the family's optimizer flags (and --bf16)."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    task = "translation" if family.name == "nmt" else "language_modeling"
    parser = options.get_training_parser(default_task=task)
    args = options.parse_args_and_arch(
        parser,
        [
            "-",
            "--task",
            task,
            "--arch",
            "transformer" if task == "translation" else "transformer_lm",
            *family.optimizer,
            *(["--bf16"] if bf16 else []),
        ],
    )
    return convert_namespace_to_omegaconf(args)


def build_optimizer(family: Family, model, bf16: bool):
    """fairseq's optimizer for ``model`` as fairseq-train builds it: with --bf16 the
    FP16Optimizer (fp32 master weights, grads copied to them every step); and the clip norm."""
    from fairseq import optim
    from fairseq.optim.fp16_optimizer import FP16Optimizer

    cfg = training_config(family, bf16)
    params = [p for p in model.parameters() if p.requires_grad]
    if bf16:
        return FP16Optimizer.build_optimizer(cfg, params), float(cfg.optimization.clip_norm)
    return optim.build_optimizer(cfg.optimizer, params), float(cfg.optimization.clip_norm)


def loss_fn(family: str, model, src, tgt):
    """The training loss of one batch: label-smoothed cross-entropy for NMT (as fairseq's
    label_smoothed_cross_entropy, log-probabilities in float32), the adaptive softmax's
    negative log-likelihood for the language models."""
    if family == "nmt":
        lengths = torch.full((src.size(0),), src.size(1), device=src.device)

        def loss():
            out, _ = model(src, lengths, tgt[:, :-1])  # [B, T, V]
            return F.cross_entropy(out.float().view(-1, out.size(-1)), tgt[:, 1:].reshape(-1), ignore_index=PAD,
                                   label_smoothing=0.1, reduction="sum")

        return loss
    softmax = model.decoder.adaptive_softmax

    def loss():
        x, _ = model(tgt[:, :-1])  # [B, T, d]
        return -softmax.target_log_prob(x.reshape(-1, x.size(-1)), tgt[:, 1:].reshape(-1)).sum()

    return loss


def train_step(loss: Callable, optimizer, clip: float) -> Callable:
    """fairseq's training step (Trainer.train_step): zero the gradients, forward and backward,
    the gradient norm (clipped where the recipe clips), the optimizer's step."""

    def step():
        optimizer.zero_grad()
        optimizer.backward(loss())
        optimizer.clip_grad_norm(clip)
        optimizer.step()

    return step


class Arms:
    """A family's arms: model, optimizer and clip of each, or the error that stopped it."""

    def __init__(self, family: Family, args, dtype):
        self.family, self.device = family, args.device
        self.models, self.errors = {}, {}
        self.optimizers = {}
        built = {}  # projective and define, built; the other define arms are copies of define (the
        # same weights, each its own tensors): a full model takes seconds to build on a CPU
        for arm in ARMS:
            try:
                base = "projective" if arm == "projective" else "define"
                if base not in built:
                    built[base] = build_model(family.name, base, args.quick)
                model = copy.deepcopy(built[base]).to(device=args.device, dtype=dtype).train()
                self.models[arm] = configure(model, arm, args.device)
                self.optimizers[arm] = build_optimizer(family, self.models[arm], dtype == torch.bfloat16)
            except Exception as e:  # noqa: BLE001
                self.models.pop(arm, None)
                self.errors[arm] = {"error": one_line(e)}
                print(f"  {family.name} {arm}: {one_line(e)}", flush=True)
        del built

    def steps(self, src, tgt) -> Dict[str, Callable]:
        out = {}
        for arm, model in self.models.items():
            optimizer, clip = self.optimizers[arm]
            out[arm] = train_step(loss_fn(self.family.name, model, src, tgt), optimizer, clip)
        return out


# -- the sections --------------------------------------------------------------------------------------


def label(rows: int, length: int) -> str:
    return f"{rows}x{length}"


def measure_steps(probe: Probe, clock: Clock, arms: Arms, batches: Batches, rows: int, length: int, kind: str):
    """The ratios of one batch: every arm's step in interleaved rounds."""
    key = f"{arms.family.name} {label(rows, length)}"
    if not probe.allows("ratios", key, probe.settings.unknown_s / 4):
        return
    src, tgt = batches.get(rows, length, arms.device)
    fns = arms.steps(src, tgt)
    warmed = warm(clock, fns, probe.settings.warmup)
    timed = {a: t for a, t in warmed.items() if not isinstance(t, dict)}
    result = {"family": arms.family.name, "batch": label(rows, length), "kind": kind, "tokens": rows * length,
              "arms": {**arms.errors, **{a: t for a, t in warmed.items() if isinstance(t, dict)}}}
    if "projective" in timed:
        result["steps_per_round"] = n = max(1, math.ceil(probe.settings.round_s / timed["projective"]))
        rounds = fit_rounds(probe, "ratios", key, n * sum(timed.values()))
        if not rounds:
            return
        for arm, s in interleaved(clock, {a: fns[a] for a in timed}, rounds, n).items():
            result["arms"][arm] = s if isinstance(s, dict) else stats(s)
    base = result["arms"].get("projective", {"error": "not built"})
    ratios = {}
    for arm in ARMS:
        a = result["arms"].get(arm, {"error": "not built"})
        if "error" in a:
            ratios[arm] = {"error": a["error"]}
        elif "error" in base:
            ratios[arm] = {"error": f"no ratio: the projective arm failed ({base['error']})"}
        else:
            ratios[arm] = round(a["median_ms"] / base["median_ms"], 4)
            a["ratio_range"] = [round(a["min_ms"] / base["median_ms"], 4), round(a["max_ms"] / base["median_ms"], 4)]
    if isinstance(ratios["define"], float) and isinstance(ratios["define_aa"], float):
        result["aa_over_define"] = round(ratios["define_aa"] / ratios["define"], 4)
    probe.data["steps"][key] = result
    probe.record("ratios", key, ratios)
    print(
        f"  {key}: " + ", ".join(f"{a} {r if isinstance(r, float) else 'error'}" for a, r in ratios.items()), flush=True
    )


def measure_host_bound(probe: Probe, clock: Clock, arms: Arms, batches: Batches, rows: int, length: int):
    """The projective step at 0.5x, 1x and 2x the rows: about equal times mean the host decides."""
    name = arms.family.name
    if "projective" not in arms.models:
        probe.record("host_bound", name, {"error": "projective arm failed"})
        return
    model = arms.models["projective"]
    optimizer, clip = arms.optimizers["projective"]
    sizes = {"0.5x": max(1, rows // 2), "1x": rows, "2x": 2 * rows}
    fns = {}
    for scale, r in sizes.items():
        src, tgt = batches.get(r, length, arms.device)
        fns[scale] = train_step(loss_fn(name, model, src, tgt), optimizer, clip)
    warmed = warm(clock, fns, probe.settings.warmup)
    timed = {k: t for k, t in warmed.items() if not isinstance(t, dict)}
    if "1x" not in timed:
        probe.record("host_bound", name, {"error": warmed["1x"]["error"]})
        return
    n = max(1, math.ceil(probe.settings.round_s / timed["1x"]))
    rounds = fit_rounds(probe, "host_bound", name, n * sum(timed.values()))
    if not rounds:
        return
    samples = interleaved(clock, {k: fns[k] for k in timed}, rounds, n)
    result = {"batches": {scale: label(r, length) for scale, r in sizes.items()}, "steps_per_round": n}
    for scale in sizes:
        s = samples.get(scale, warmed[scale])
        result[scale] = s if isinstance(s, dict) else stats(s)
    if all("median_ms" in result[s] for s in sizes):
        one = result["1x"]["median_ms"]
        result["half_over_one"] = round(result["0.5x"]["median_ms"] / one, 4)
        result["double_over_one"] = round(result["2x"]["median_ms"] / one, 4)
        # twice the work in under 1.25x the time: the device waits for the host
        result["host_bound"] = result["double_over_one"] < 1.25
    probe.record("host_bound", name, result)


def named_embeddings(model) -> list:
    """Forward hooks that put the forward of each token embedding (a model's ``embed_tokens``:
    a DefineEmbedding, or the Transformer-XL baseline's projected adaptive input) inside the
    profiler range DEFINE_RANGE."""
    open_ranges = []  # the range of the forward under way (kept off the module: it must stay copyable)

    def enter(_module, _inputs):
        open_ranges.append(torch.autograd.profiler.record_function(DEFINE_RANGE))
        open_ranges[-1].__enter__()

    def leave(_module, _inputs, _output):
        open_ranges.pop().__exit__(None, None, None)

    handles = []
    for name, module in model.named_modules():  # a shared embedding once (named_modules drops repeats)
        if name.split(".")[-1] == "embed_tokens":
            handles += [module.register_forward_pre_hook(enter), module.register_forward_hook(leave)]
    return handles


def device_time(evt, self_only=False) -> float:
    names = (
        ("self_device_time_total", "self_cuda_time_total") if self_only else ("device_time_total", "cuda_time_total")
    )
    for n in names:
        if hasattr(evt, n):
            return float(getattr(evt, n))
    return 0.0


def profile_arm(clock: Clock, model, step: Callable, steps: int = 3, top: int = 15) -> dict:
    """One arm's step under torch.profiler: the top kernels by device time (on CUDA) or the
    top host operators (on the CPU), and the embedding's named range; times a step, µs."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if clock.cuda else [])
    handles = named_embeddings(model)
    try:
        clock.sync()
        with profile(activities=activities) as prof:
            for _ in range(steps):
                step()
            clock.sync()
    finally:
        for h in handles:
            h.remove()
    ranges = [e for e in prof.events() if e.name == DEFINE_RANGE and e.device_type == DeviceType.CPU]
    out = {"steps": steps, "embedding_range": {
        "calls_per_step": len(ranges) / steps,
        "cpu_us": round(sum(e.cpu_time_total for e in ranges) / steps, 1),
        "device_us": round(sum(device_time(e) for e in ranges) / steps, 1) if clock.cuda else None,
        "covers": "each embedding's forward; its backward runs in autograd's nodes (FusedUnitFunctionBackward and "
                  "the like), which the operator tables list"}}
    rows = [e for e in prof.key_averages() if e.key != DEFINE_RANGE]
    if clock.cuda:
        kernels = [e for e in rows if e.device_type == DeviceType.CUDA]
        total = sum(device_time(e, self_only=True) for e in kernels)
        out["device_us"] = round(total / steps, 1)
        out["embedding_share_of_device_time"] = (
            round(out["embedding_range"]["device_us"] / total * steps, 4) if total else None
        )
        out["top_kernels"] = [
            {"name": e.key[:160], "calls": e.count // steps, "device_us": round(device_time(e, True) / steps, 1)}
            for e in sorted(kernels, key=lambda e: -device_time(e, True))[:top]
        ]
        ops = [e for e in rows if e.device_type == DeviceType.CPU]
        out["top_ops_by_device_time"] = [{"name": e.key[:160], "calls": e.count // steps,
                                          "device_us": round(device_time(e) / steps, 1)}
                                         for e in sorted(ops, key=lambda e: -device_time(e))[:top]]
    else:
        out["top_kernels"] = {"skipped": "no kernel times on the CPU"}
    ops = [e for e in rows if e.device_type == DeviceType.CPU]
    out["top_host_ops"] = [
        {"name": e.key[:160], "calls": e.count // steps, "self_cpu_us": round(e.self_cpu_time_total / steps, 1)}
        for e in sorted(ops, key=lambda e: -e.self_cpu_time_total)[:top]
    ]
    out["host_ops_per_step"] = sum(e.count for e in ops) // steps
    return out


def measure_profile(probe: Probe, clock: Clock, arms: Arms, batches: Batches, rows: int, length: int):
    src, tgt = batches.get(rows, length, arms.device)
    for arm in ARMS:
        key = f"{arms.family.name} {arm}"
        if arm in arms.errors:
            probe.record("profile", key, arms.errors[arm])
            continue
        if not probe.allows("profile", key, probe.settings.unknown_s / 4):
            continue
        optimizer, clip = arms.optimizers[arm]
        step = train_step(loss_fn(arms.family.name, arms.models[arm], src, tgt), optimizer, clip)
        try:
            step()  # this batch's warm-up (a graphed arm captures its shapes here)
            result = {"batch": label(rows, length), **profile_arm(clock, arms.models[arm], step)}
        except Exception as e:  # noqa: BLE001
            result = {"error": one_line(e)}
            release(clock)
        probe.record("profile", key, result)


def dense_reference(rows: int, macs: int, device: str, dtype) -> Tuple[Callable, int, int]:
    """One dense matmul fwd+bwd, [rows, w] x [w, w] with w x w about ``macs`` (a multiple of
    64, the width the matmul runs best at): the function, its FLOPs and w."""
    w = max(64, round(math.sqrt(macs) / 64) * 64)
    a = torch.randn(rows, w, device=device, dtype=dtype, requires_grad=True)
    b = torch.randn(w, w, device=device, dtype=dtype, requires_grad=True)
    g = torch.randn(rows, w, device=device, dtype=dtype)
    return (lambda: (a @ b).backward(g)), 6 * rows * w * w, w


def measure_unit_fraction(probe: Probe, clock: Clock, arms: Arms, batches: Batches, rows: int, length: int, dtype):
    """The embedding's training call (every position through the unit) as a fraction of a
    dense matmul's FLOP rate: eager, graphed (set_unit_run's graphs) and, on CUDA, the whole
    call captured as one CUDA graph."""
    name = arms.family.name
    if "define" not in arms.models:
        probe.record("unit_fraction", name, {"error": "define arm failed"})
        return
    if not probe.allows("unit_fraction", name, probe.settings.unknown_s / 4):
        return
    emb = next(m for m in arms.models["define"].modules() if isinstance(m, DefineEmbedding))
    _, tokens = batches.get(rows, length, arms.device)
    tokens = tokens[:, :-1]  # [B, T]
    flops = bench.unit_flops(emb.unit, tokens.numel())
    macs_per_row = flops // (6 * tokens.numel())
    fns, errors = {}, {}
    for how in ("eager", "graphed", "captured"):
        if how == "captured" and not clock.cuda:
            errors[how] = {"skipped": "no CUDA graphs on the CPU"}
            continue
        try:
            copy_ = set_unit_run(copy.deepcopy(emb), token_path="plain").train()
            if how == "graphed":
                set_unit_run(copy_, graphs="cuda" if clock.cuda else "eager")
            grad = torch.randn(*tokens.shape, copy_.embedding_dim, device=arms.device, dtype=dtype)

            def fn(m=copy_, g=grad):
                return m(tokens).backward(g)

            fns[how] = bench.cuda_graph(fn) if how == "captured" else fn
        except Exception as e:  # noqa: BLE001
            errors[how] = {"error": one_line(e)}
            release(clock)
    fns["matmul"], mm_flops, width = dense_reference(tokens.numel(), macs_per_row, arms.device, dtype)
    warmed = warm(clock, fns, probe.settings.warmup)
    timed = {k: t for k, t in warmed.items() if not isinstance(t, dict)}
    result = {
        "batch": label(rows, length),
        "rows": tokens.numel(),
        "unit_macs_per_row": macs_per_row,
        "unit_gflop": round(flops / 1e9, 4),
        "matmul": {"shape": f"[{tokens.numel()}, {width}] x [{width}, {width}]", "gflop": round(mm_flops / 1e9, 4)},
    }
    result.update(errors)
    result.update({k: t for k, t in warmed.items() if isinstance(t, dict)})
    if "matmul" in timed:
        n = max(1, math.ceil(probe.settings.round_s / 4 / max(timed.values())))
        rounds = fit_rounds(probe, "unit_fraction", name, n * sum(timed.values()))
        if not rounds:
            return
        samples = interleaved(clock, {k: fns[k] for k in timed}, rounds, n)
        mm = samples["matmul"]
        if isinstance(mm, dict):
            result["matmul"].update(mm)
        else:
            mm_rate = mm_flops / sorted(mm)[len(mm) // 2]
            result["matmul"].update(stats(mm), tflops=round(mm_rate / 1e12, 4))
            for how in ("eager", "graphed", "captured"):
                s = samples.get(how)
                if s is None:
                    continue
                if isinstance(s, dict):
                    result[how] = s
                    continue
                rate = flops / sorted(s)[len(s) // 2]
                result[how] = {
                    **stats(s),
                    "tflops": round(rate / 1e12, 4),
                    "fraction_of_matmul": round(rate / mm_rate, 4),
                }
    probe.record("unit_fraction", name, result)


def grouped_layers() -> List[Tuple[str, int, int, int]]:
    """(label, groups, in width a group, out width a group) of every grouped layer of the
    paper's three units (bench_define.UNIT_SHAPES, the paper style)."""
    from fairseq_define.modules import build_schedule

    out = []
    for shape, n, k, m, depth in bench.UNIT_SHAPES:
        s = build_schedule(n, k, depth, m, "define")
        for i, (w_in, w_out, g) in enumerate(zip(s.layer_in, s.layer_out, s.layer_groups)):
            if g > 1:
                out.append((f"{shape.split()[0]} layer {i} g={g} {w_in // g}->{w_out // g}", g, w_in // g, w_out // g))
    return out


def grouped_fns(rows: int, g: int, i: int, o: int, device: str, dtype) -> Dict[str, Callable]:
    """fwd+bwd of one grouped matmul four ways: strided (x [T, g*i] read as [g, T, i], as the
    fused unit does), contiguous [g, T, i], padded to multiples of 8, one dense block-diagonal."""
    up = lambda v: -(-v // 8) * 8  # noqa: E731
    leaf = lambda *shape: torch.randn(*shape, device=device, dtype=dtype, requires_grad=True)  # noqa: E731
    x, xc, xp = leaf(rows, g * i), leaf(g, rows, i), leaf(g, rows, up(i))
    w, wp, wd = leaf(g, i, o), leaf(g, up(i), up(o)), leaf(g * i, g * o)
    gy = torch.randn(g, rows, o, device=device, dtype=dtype)
    gp = torch.randn(g, rows, up(o), device=device, dtype=dtype)
    gd = torch.randn(rows, g * o, device=device, dtype=dtype)
    return {
        "strided": lambda: torch.bmm(x.view(rows, g, i).transpose(0, 1), w).backward(gy),  # [g, T, o]
        "contiguous": lambda: torch.bmm(xc, w).backward(gy),
        "padded_to_8": lambda: torch.bmm(xp, wp).backward(gp),
        "block_diagonal": lambda: (x @ wd).backward(gd),  # [T, g*o]
    }


def measure_alignment(probe: Probe, clock: Clock, device: str, dtype):
    rows = probe.settings.alignment_rows
    for name, g, i, o in grouped_layers():
        if not probe.allows("alignment", name, probe.settings.unknown_s / 8):
            continue
        try:
            fns = grouped_fns(rows, g, i, o, device, dtype)
        except Exception as e:  # noqa: BLE001
            probe.record("alignment", name, {"error": one_line(e)})
            release(clock)
            continue
        warmed = warm(clock, fns, probe.settings.warmup)
        timed = {k: t for k, t in warmed.items() if not isinstance(t, dict)}
        result = {"rows": rows, "groups": g, "in": i, "out": o, "aligned": i % 8 == 0 and o % 8 == 0}
        result.update({k: t for k, t in warmed.items() if isinstance(t, dict)})
        if timed:
            n = max(1, math.ceil(probe.settings.round_s / 4 / max(timed.values())))
            rounds = fit_rounds(probe, "alignment", name, n * sum(timed.values()))
            if not rounds:
                continue
            samples = interleaved(clock, {k: fns[k] for k in timed}, rounds, n)
            useful = 6 * rows * g * i * o
            for how, s in samples.items():
                result[how] = s if isinstance(s, dict) else {**stats(s), "useful_tflops": round(
                    useful / sorted(s)[len(s) // 2] / 1e12, 4)}
            medians = {k: v["median_ms"] for k, v in result.items() if isinstance(v, dict) and "median_ms" in v}
            if medians:
                result["fastest"] = min(medians, key=medians.get)
        probe.record("alignment", name, result)


# -- the summary -------------------------------------------------------------------------------------


def cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return "error" if isinstance(v, dict) else "-"


def summary(d: dict) -> str:
    """probe.md: the ratios with their A/A row, host-boundness, the unit's fraction, the
    alignment's winners, what was skipped and what failed."""
    p, m = d["probe"], d["machine"]
    gpu = (m.get("gpu") or {}).get("name", "CPU") if m else "?"
    lines = [f"# GPU probe: {gpu}, {p['dtype']}{' (--quick: the numbers mean nothing)' if p['quick'] else ''}", "",
             f"`{p['command']}`; {p['elapsed_s']} s of a {p['budget_s']:.0f} s budget; "
             f"{'finished' if p['finished'] else 'not finished'}.", ""]
    if m:
        lines += [f"Machine: {m.get('cpu')}, torch {m.get('torch')}, CUDA {m.get('cuda')}, Python {m.get('python')}; "
                  f"host {m['host'].get('small_op_us')} us a small operator"
                  + (f", {m['host']['graph_replay_1_kernels_us']} us a graph replay"
                     if isinstance(m["host"].get("graph_replay_1_kernels_us"), float) else "")
                  + ".", ""]
    lines += ["| section | status |", "|---|---|"] + [
        f"| {s} | {e['status']}{': ' + e['reason'] if 'reason' in e else ''} |" for s, e in d["sections"].items()]
    if d["ratios"]:
        lines += ["", "Step / projective step (median of interleaved rounds; A/A: define_aa / define):", "",
                  "| family batch | projective ms | " + " | ".join(ARMS[1:]) + " | A/A |",
                  "|---|---|" + "---|" * len(ARMS)]
        for key, r in d["ratios"].items():
            base = d["steps"].get(key, {}).get("arms", {}).get("projective", {})
            aa = d["steps"].get(key, {}).get("aa_over_define")
            lines.append(f"| {key} | {base.get('median_ms', '-')} | " + " | ".join(cell(r.get(a)) for a in ARMS[1:])
                         + f" | {cell(aa)} |")
    for name, h in d["host_bound"].items():
        if "host_bound" in h:
            lines.append(f"- {name}: projective step at 0.5x / 2x the batch = {h['half_over_one']:.2f} / "
                         f"{h['double_over_one']:.2f} of 1x: {'host-bound' if h['host_bound'] else 'not host-bound'}")
    for key, pr in d["profile"].items():
        if pr.get("embedding_share_of_device_time") is not None and pr.get("top_kernels"):
            k = pr["top_kernels"][0]
            lines.append(
                f"- profile {key}: {pr['device_us'] / 1e3:.2f} ms of kernels a step, the embedding's forward "
                f"{pr['embedding_share_of_device_time']:.1%} of it; top kernel {k['name'][:60]} ({k['device_us']:.0f} "
                f"us)"
            )
    for name, u in d["unit_fraction"].items():
        parts = [f"{how} {u[how]['fraction_of_matmul']:.2f}" for how in ("eager", "graphed", "captured")
                 if isinstance(u.get(how), dict) and "fraction_of_matmul" in u[how]]
        if parts:
            lines.append(f"- {name} unit, {u['rows']} rows, fraction of a dense matmul's rate: " + ", ".join(parts))
    for name, a in d["alignment"].items():
        if "fastest" in a:
            lines.append(f"- {name}: fastest {a['fastest']} (" + ", ".join(
                f"{k} {a[k]['median_ms']:.3f} ms" for k in ("strided", "contiguous", "padded_to_8", "block_diagonal")
                if isinstance(a.get(k), dict) and "median_ms" in a[k]) + ")")
    errors = sorted({f"{a}: {v['error']}" for r in d["ratios"].values() for a, v in r.items() if isinstance(v, dict)})
    if errors:
        lines += ["", "Arms that failed: " + "; ".join(errors)]
    if d["skipped"]:
        lines += ["", "Skipped (the first reason of each section; probe.json lists every item's):"]
        for section in SECTIONS:
            items = [s for s in d["skipped"] if s["section"] == section]
            if items:
                lines.append(f"- {section}: {', '.join(s['item'] for s in items)} ({items[0]['reason']})")
    return "\n".join(lines) + "\n"


# -- the run -----------------------------------------------------------------------------------------


def run(probe: Probe, args):
    settings, clock = probe.settings, Clock(args.device)
    dtype = getattr(torch, args.dtype)
    print(f"GPU probe on {args.device} ({args.dtype}{', quick' if args.quick else ''}) -> {probe.out}", flush=True)
    try:
        probe.data["machine"] = machine(args, clock, settings)
    except Exception as e:  # noqa: BLE001
        probe.data["machine"] = {"error": one_line(e)}
    probe.done["machine"] += 1
    probe.save()
    for family in FAMILIES:
        paper = family.quick_paper if args.quick else family.paper
        large = family.quick_large if args.quick else family.large
        items = [f"{family.name} {label(*b)}" for b in (*paper, large)]
        if probe.left() < settings.unknown_s:
            for section, item_list in (("ratios", items), ("host_bound", [family.name]),
                                       ("profile", [f"{family.name} {a}" for a in ARMS]),
                                       ("unit_fraction", [family.name])):
                for item in item_list:
                    probe.skip(section, item, f"budget: {max(probe.left(), 0):.1f} s left of {args.budget:.0f}, "
                                              f"a family needs at least {settings.unknown_s:.0f} s")
            continue
        print(f"{family.name}: building the arms", flush=True)
        arms = Arms(family, args, dtype)
        most = max(r * (t + 1) for r, t in (*paper, large, (2 * paper[0][0], paper[0][1])))
        batches = Batches(family.name, family_vocab(family.name, args.quick), most, probe)
        for b in paper:
            measure_steps(probe, clock, arms, batches, *b, "paper")
        measure_steps(probe, clock, arms, batches, *large, "large")
        if probe.allows("host_bound", family.name, settings.unknown_s / 4):
            measure_host_bound(probe, clock, arms, batches, *paper[0])
        measure_profile(probe, clock, arms, batches, *paper[0])
        measure_unit_fraction(probe, clock, arms, batches, *paper[0], dtype)
        del arms
        release(clock)
    measure_alignment(probe, clock, args.device, dtype)


class Parser(argparse.ArgumentParser):
    """argparse, its errors in one line (docs/errors.md)."""

    def error(self, message):
        sys.exit(cli_error(self.prog, message))


def parse_args(argv=None):
    parser = Parser(prog="gpu_probe.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for probe.json and probe.md (made if missing)")
    parser.add_argument("--budget", type=float, default=420.0, metavar="SECONDS",
                        help="the whole run's time, imports included; what would overrun it is skipped and listed "
                        "(default 420: under the 8 minutes a GPU run is given, with room for start-up)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="default cuda")
    parser.add_argument("--dtype", choices=("auto", "bfloat16", "float32"), default="auto",
                        help="auto: bfloat16 on cuda (as fairseq-train --bf16), float32 on the CPU")
    parser.add_argument("--quick", action="store_true", help="tiny models and batches: every section runs, "
                        "in about a minute on a CPU; the numbers mean nothing")
    parser.add_argument("--data-root", help="folder of the corpora (default $FAIRSEQ_DEFINE_DATA, else "
                        "run_scripts/corpora.py's default locations); without them, Zipf-distributed ids")
    args = parser.parse_args(argv)
    if not args.budget > 0 or math.isinf(args.budget):
        parser.error(f"--budget takes a positive number of seconds (got {args.budget})")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device cuda: no CUDA GPU visible to torch {torch.__version__}; run with --device cpu")
    if args.dtype == "auto":
        args.dtype = "bfloat16" if args.device == "cuda" else "float32"
    return args


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        sys.exit(cli_error("gpu_probe.py", f"cannot make --out {out}: {e.strerror or e}; choose another folder"))
    # the units' and models' own logs say how each was built: benchmark 2 prints those; here
    # they would bury the probe's lines
    logging.getLogger("fairseq_define").setLevel(logging.WARNING)
    logging.getLogger("fairseq").setLevel(logging.WARNING)
    bench.DATA_ROOT = args.data_root
    torch.manual_seed(0)
    probe = Probe(out, args, QUICK_SETTINGS if args.quick else GPU_SETTINGS)
    # a time limit's SIGTERM ends the run through the finally below, which records it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    finished = False
    try:
        try:
            run(probe, args)
            finished = True
        finally:  # a run cut short (an interrupt, a failure outside the measurements) says so
            probe.finish(finished)
    except UserError as e:  # probe.json could not be written (a full disk)
        sys.exit(cli_error("gpu_probe.py", e))
    print(f"written: {out / 'probe.json'}, {out / 'probe.md'} ({time.monotonic() - STARTED:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
