"""Does a DeFINE LSTM keep token-specific embeddings under AWD-LSTM's optimizer?
(docs/stability.md)

    .venv/bin/python benchmarks/collapse_probe.py                        # define_lstm_small
    .venv/bin/python benchmarks/collapse_probe.py --define-unit-grad-scale 1   # collapses
    .venv/bin/python benchmarks/collapse_probe.py --define-transform projective
    .venv/bin/python benchmarks/collapse_probe.py --arch define_awd_lstm_ptb_define --updates 60
    .venv/bin/python benchmarks/collapse_probe.py --optimizer adam --lr 2e-3

Trains in one process on PTB with the model, loss (``awd_lm_loss``: AR 2, TAR 1) and
optimizer (``nt_asgd``'s AveragedSGD, weight decay 1.2e-6; its SGD phase, as the first epoch
is) of fairseq-define, gradients clipped to ``--clip`` as fairseq's ``--clip-norm``: batches
of 20 streams x 35 tokens, hidden state carried across segments. Prints the validation
perplexity (on the first ``--val-tokens`` tokens of ptb.valid.txt, 10 streams) and the mean
pairwise cosine and mean norm of the embedding outputs (the DeFINE unit's, or the
projective map's) for the 500 most frequent words, at init and every ``--log-every``
updates. Any other ``--flag value`` is passed to the architecture (fairseq's parser).

Data: PTB (ptb/ptb.{train,valid,test}.txt) in the data root, ``--data-root DIR`` or
$FAIRSEQ_DEFINE_DATA, found and checked by run_scripts/corpora.py.
"""

import argparse
import math
import sys
import time
from argparse import Namespace
from collections import Counter
from pathlib import Path

import torch
from fairseq import options
from fairseq.data import Dictionary

import fairseq_define  # noqa: F401  (registers the architectures)
from fairseq_define.criterions.awd_lm_loss import AWDLanguageModelLoss
from fairseq_define.models.lstm_lm import LSTMLanguageModel
from fairseq_define.modules.stability.unit_grad_scale import centre_reduce_bias
from fairseq_define.optim.nt_asgd import AveragedSGD

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "run_scripts"))
import corpora  # noqa: E402  (the data root and the checksums of run_scripts/corpora.tsv)


def load_ptb(folder: Path):
    """A frequency-sorted dictionary of the training text (as fairseq-preprocess builds
    it) and each split as one token stream, lines ending in </s>."""
    lines = {}
    for split in ("train", "valid"):
        path = folder / f"ptb.{split}.txt"
        lines[split] = [line.split() for line in path.open(encoding="utf-8")]
    counts = Counter(w for line in lines["train"] for w in line)
    d = Dictionary()
    for w, c in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0])):
        d.add_symbol(w, c)
    streams = {
        split: torch.tensor([i for line in ls for i in [d.index(w) for w in line] + [d.eos()]])
        for split, ls in lines.items()
    }
    return d, streams


def rows(stream, n):
    return stream[: stream.numel() // n * n].view(n, -1)  # [n, L]: one stream per row


def mean_pairwise_cosine(x):
    x = torch.nn.functional.normalize(x.double(), dim=-1)  # [V, m]
    c = x @ x.t()
    return ((c.sum() - c.diagonal().sum()) / (x.size(0) * (x.size(0) - 1))).item()


@torch.no_grad()
def embedding_stats(model, d, top=500):
    model.eval()
    out = model.decoder.embed_tokens(torch.arange(d.nspecial, d.nspecial + top)[None])[0]  # [top, m]
    model.train()
    return mean_pairwise_cosine(out), out.norm(dim=-1).mean().item()


@torch.no_grad()
def mean_share(model, d, top=500):
    """|mean x|^2 / mean |x|^2 over the embedding outputs of the TOP most frequent words: the
    share of their energy in the one vector every token shares."""
    model.eval()
    out = model.decoder.embed_tokens(torch.arange(d.nspecial, d.nspecial + top)[None])[0].double()  # [top, m]
    model.train()
    return (out.mean(0).pow(2).sum() / out.pow(2).sum(-1).mean()).item()


@torch.no_grad()
def valid_ppl(model, criterion, stream, T=35):
    model.eval()
    data = rows(stream, 10)
    total = count = 0
    for i, s in enumerate(range(0, data.size(1) - 1, T)):
        tgt = data[:, s + 1:s + 1 + T]
        out = model.decoder(data[:, s:s + tgt.size(1)], stream="valid", segment=i)
        total += criterion.compute_loss(model, out, {"target": tgt})[0].item()
        count += tgt.numel()
    model.train()
    return math.exp(total / count)


def unit_param_kind(name, p):
    """expand, reduce or vector: the kinds of --kind-scales."""
    if p.dim() == 1:
        return "vector"
    if name.startswith("reduce.") or name.startswith("output_layer."):
        return "reduce"
    return "expand"


def probe_setup(model, args):
    """The experiment-only variants of the unit's training (docs/stability.md)."""
    emb = model.decoder.embed_tokens
    unit = getattr(emb, "unit", None)  # none for a standard table (--define-transform none)
    if unit is None:
        if args.centre_init_only or args.kind_scales:
            sys.exit("collapse_probe.py: error: --centre-init-only and --kind-scales need a DeFINE unit; "
                     "drop them or use --define-transform define")
        return
    if args.centre_init_only:
        centre_reduce_bias(unit, emb.map_outputs_at_init())
    if args.kind_scales:
        scales = dict((k, float(v)) for k, v in (kv.split("=") for kv in args.kind_scales.split(",")))
        counts = Counter()
        prefixes = sorted((k for k in scales if "." in k), key=len, reverse=True)
        for name, p in unit.named_parameters():
            # a key with a dot is a parameter-name prefix; it overrides the kind
            kind = next((k for k in prefixes if name.startswith(k)), unit_param_kind(name, p))
            counts[kind] += p.numel()
            if scales.get(kind, 1.0) != 1.0:
                # an experiment beside the unit's own --define-unit-grad-scale (applied in its backward)
                p.register_hook(lambda g, factor=scales[kind]: g * factor)
        print(f"kind scales {scales}, params {dict(counts)}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-root", help="folder of the corpora (default $FAIRSEQ_DEFINE_DATA, else the default "
                                       "locations of run_scripts/corpora.py)")
    p.add_argument("--arch", default="define_lstm_small")
    p.add_argument("--updates", type=int, default=300)
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd",
                   help="sgd: AWD-LSTM's (nt_asgd's SGD phase, weight decay 1.2e-6); adam")
    p.add_argument("--lr", type=float, default=30.0)
    p.add_argument("--clip", type=float, default=0.25)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--val-tokens", type=int, default=20000)
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--kind-scales", default=None,
                   help="gradient scales by kind of unit parameter instead of "
                   "--define-unit-grad-scale: expand (the weights of layers followed by a "
                   "LayerNorm), reduce (the last layer's weight), vector (biases, LayerNorm "
                   "affine), e.g. expand=0.1,reduce=0.01,vector=0; a key with a dot is a prefix of "
                   "the unit's parameter names and overrides the kind (output_layer.norm.=0.01)")
    p.add_argument("--centre-init-only", action="store_true",
                   help="with --define-unit-centring none: centre Reduce's bias at init "
                   "(as the default does) without centring the gradients")
    args, model_flags = p.parse_known_args(argv)
    if args.kind_scales:
        model_flags += ["--define-unit-grad-scale", "1"]
    torch.set_num_threads(args.threads)
    try:
        folder = corpora.locate("ptb", args.data_root)
    except corpora.DataError as e:
        sys.exit(f"collapse_probe.py: error: {e}")
    d, streams = load_ptb(folder)
    torch.manual_seed(args.seed)
    parser = options.get_training_parser(default_task="language_modeling")
    margs = options.parse_args_and_arch(
        parser, input_args=["-", "--task", "language_modeling", "--arch", args.arch, *model_flags])
    task = Namespace(target_dictionary=d, source_dictionary=d)
    model = LSTMLanguageModel.build_model(margs, task).train()
    criterion = AWDLanguageModelLoss(task, False, 2.0, 1.0)
    probe_setup(model, args)
    if args.optimizer == "sgd":
        optimizer = AveragedSGD(model.parameters(), lr=args.lr, weight_decay=1.2e-6)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    train, T = rows(streams["train"], 20), 35
    if args.updates * T + 1 > train.size(1):
        sys.exit(f"collapse_probe.py: error: --updates {args.updates} runs past the training "
                 f"text ({train.size(1) // T} segments); use fewer")
    cos, norm = embedding_stats(model, d)
    print(f"update 0: cosine {cos:.3f}, norm {norm:.2f}, mean share {mean_share(model, d):.3f}", flush=True)
    start = time.time()
    for step in range(args.updates):
        tgt = train[:, step * T + 1:(step + 1) * T + 1]
        sample = {"net_input": {"src_tokens": train[:, step * T:(step + 1) * T], "src_lengths": None,
                                "stream": "train", "segment": step},
                  "target": tgt, "ntokens": tgt.numel()}
        optimizer.zero_grad()
        loss, sample_size, _ = criterion(model, sample)
        (loss / sample_size).backward()  # fairseq divides the summed loss by the tokens
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        if (step + 1) % args.log_every == 0 or step + 1 == args.updates:
            cos, norm = embedding_stats(model, d)
            print(f"update {step + 1}: cosine {cos:.3f}, norm {norm:.2f}, mean share {mean_share(model, d):.3f}",
                  flush=True)
    ppl = valid_ppl(model, criterion, streams["valid"][: args.val_tokens])
    print(f"{args.arch} {' '.join(model_flags)} {args.optimizer} lr {args.lr:g}: "
          f"{args.updates} updates, valid ppl {ppl:.1f}, cosine {cos:.3f}, norm {norm:.2f} "
          f"({time.time() - start:.0f}s)")


if __name__ == "__main__":
    main()
