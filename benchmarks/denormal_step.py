"""What subnormal floats cost a CPU training step of a trained checkpoint
(fairseq_define/denormals.py, docs/language_models.md "Subnormal floats on the CPU").

    .venv/bin/python benchmarks/denormal_step.py --path RUN/checkpoint_last.pt --data DATA/bin [--path ...]

Loads each checkpoint with its task (the data folder it was trained on), takes the first
``--batches`` training batches, and times forward and backward through the model's own
criterion with subnormal floats kept and flushed to zero (``torch.set_flush_denormal``), in
alternating rounds, one thread. Prints, for each checkpoint, the seconds a step each way, their
ratio, how many subnormal values the modules' outputs held in one kept step (by module), and
for each LSTM the spread of its input and the share of its input pre-activations (x W_ih + b)
beyond +-30, where a gate's sigmoid is within 1e-13 of 0 or 1 (saturated).

Hardware and time: 2-core x86 CPU, about a minute a checkpoint. Expected (study 5's LSTM on
WikiText-2, seed 1, the cores shared with two trainings; docs/language_models.md): adaptive
input + DeFINE at 1,492-1,600 updates x3.6-4.1 (2.28-2.39 s kept against 0.62-0.66 s flushed
at 1,492), 27-28% of its first LSTM layer's input pre-activations beyond +-30; the adaptive
input alone x0.97-1.04, 0.3%. The paper reports GPU times only, where subnormals cost nothing."""

import argparse
import platform
import sys
import time
from collections import Counter
from pathlib import Path

import torch

import fairseq_define  # noqa: F401  (registers the plugin)
from fairseq_define.errors import UserError, cli_error
from fairseq_define.tools.inference_checkpoint import load_ensemble

TINY = torch.finfo(torch.float32).tiny  # the smallest normal float32


def subnormals(t) -> int:
    if isinstance(t, torch.Tensor) and t.dtype == torch.float32:
        return int(((t != 0) & (t.abs() < TINY)).sum())
    return 0


def load(path: str, data: str):
    """(model in training mode, criterion, batches) of one checkpoint."""
    model, cfg, task = load_ensemble(path, data)  # fairseq's load errors as one line
    task.load_dataset("train")
    itr = task.get_batch_iterator(task.dataset("train"), max_tokens=cfg.dataset.max_tokens,
                                  max_sentences=cfg.dataset.batch_size, seed=1).next_epoch_itr(shuffle=False)
    return model.train(), task.build_criterion(cfg.criterion), itr


def measure(path: str, data: str, batches: int, rounds: int) -> None:
    model, criterion, itr = load(path, data)
    sample = [next(itr) for _ in range(batches)]

    def steps():
        for s in sample:
            model.zero_grad()
            loss, _, _ = criterion(model, s)
            loss.backward()

    times = {False: [], True: []}
    try:
        for _ in range(rounds):
            for flush in (False, True):
                torch.set_flush_denormal(flush)
                start = time.perf_counter()
                steps()
                times[flush].append((time.perf_counter() - start) / batches)
    finally:
        torch.set_flush_denormal(False)
    found = Counter()
    hooks = [m.register_forward_hook(lambda m, i, o, name=name: found.update(
        {name: sum(subnormals(x) for x in (o if isinstance(o, (tuple, list)) else (o,)))}))
        for name, m in model.named_modules() if name]
    lstm_inputs = {}

    def keep_input(name):
        def hook(module, inputs, output):  # returns None: the output stays the module's
            lstm_inputs.setdefault(name, inputs[0].detach())  # [B, T, in]: the first step's batch
        return hook

    hooks += [m.register_forward_hook(keep_input(name)) for name, m in model.named_modules()
              if isinstance(m, torch.nn.LSTM)]
    steps()
    for h in hooks:
        h.remove()
    kept, flushed = min(times[False]), min(times[True])
    print(f"{path}\n  s a step, subnormals kept: {', '.join(f'{t:.3f}' for t in times[False])}; flushed: "
          f"{', '.join(f'{t:.3f}' for t in times[True])}; kept / flushed (best of each): {kept / flushed:.2f}")
    held = [f"{name} {n}" for name, n in found.most_common() if n]
    print(f"  subnormal values in the modules' outputs, one kept step: {', '.join(held[:6]) or 'none'}")
    for name, x in lstm_inputs.items():
        lstm = model.get_submodule(name)
        pre = x.reshape(-1, x.shape[-1]) @ lstm.weight_ih_l0.detach().t() + lstm.bias_ih_l0.detach()  # [T*B, 4H]
        print(f"  {name}: input std {x.std().item():.2f}, input pre-activations beyond +-30: "
              f"{(pre.abs() > 30).float().mean().item():.2%}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--path", action="append", required=True, help="a checkpoint (repeat for more)")
    p.add_argument("--data", required=True, help="the data-bin folder the checkpoints were trained on")
    p.add_argument("--batches", type=int, default=3, help="training batches a timing (default 3)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds, kept then flushed (default 3)")
    args = p.parse_args(argv)
    if args.batches < 1 or args.rounds < 1:
        return cli_error("denormal_step.py", "--batches and --rounds must be 1 or more")
    missing = [x for x in args.path if not Path(x).is_file()] + ([] if Path(args.data).is_dir() else [args.data])
    if missing:
        return cli_error("denormal_step.py", f"{missing[0]} not found: give --path a checkpoint file and --data "
                         "the data-bin folder it was trained on")
    torch.set_num_threads(1)
    print(f"machine: {platform.processor() or platform.machine()}, 1 thread, torch {torch.__version__}")
    try:
        for path in args.path:
            measure(path, args.data, args.batches, args.rounds)
    except UserError as e:
        return cli_error("denormal_step.py", e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
