"""How compositional codes are best learned (paper Table 5; docs/inference.md, "Compression"): relative
reconstruction error ||E' - E|| / ||E|| of every token table of trained checkpoints, for
four ways of learning the codes, side by side on the same table:

    random + LS       random codes, least-squares codebooks (refinement rounds 0)
    autoencoder + LS  Shu & Nakayama's autoencoder (--steps batches), least-squares codebooks
    autoencoder + ref the autoencoder's codes, then refinement (LS codebooks + ICM on codes)
    random + ref      random codes, then refinement (fairseq-define-compress's default)

    .venv/bin/python benchmarks/bench_codes.py --path work/nmt_demo/checkpoints/checkpoint_best.pt \\
        --path work/txl_wikitext2/projective/checkpoint_last.pt

Tables narrower than coding would make them are skipped, as fairseq-define-compress skips them.
"""

import argparse
import logging
import platform
import time

import torch

import fairseq_define  # noqa: F401
from fairseq_define.modules.compression.compositional_codes import (
    autoencoder_codes,
    embedding_tables,
    refine_codes,
)
from fairseq_define.tools.inference_checkpoint import load_model


def compare(table, n_codebooks, n_codes, steps, rounds, seed=1):
    """{method: (error, refinement rounds run, seconds)} for one table [V, d]."""
    table = table.detach().float().cpu()
    results = {}
    start = time.perf_counter()
    random_codes = torch.randint(n_codes, (table.size(0), n_codebooks), generator=torch.Generator().manual_seed(seed))
    _, _, errors = refine_codes(table, random_codes, n_codes, rounds)
    elapsed = time.perf_counter() - start
    results["random + LS"] = (errors[0], 0, None)
    results["random + ref"] = (errors[-1], len(errors) - 1, elapsed)
    start = time.perf_counter()
    ae_codes = autoencoder_codes(table, n_codebooks, n_codes, steps, seed=seed)
    ae_seconds = time.perf_counter() - start
    _, _, errors = refine_codes(table, ae_codes, n_codes, rounds)
    results["autoencoder + LS"] = (errors[0], 0, ae_seconds)
    results["autoencoder + ref"] = (errors[-1], len(errors) - 1, time.perf_counter() - start)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", action="append", required=True, help="trained checkpoint (repeat for several)")
    parser.add_argument("--data", help="data directory with the dictionaries, if not where the checkpoint was trained")
    parser.add_argument("--codebooks", type=int, default=32, help="M: codebooks (codes per row); default 32")
    parser.add_argument("--codes", type=int, default=16, help="K: codes per codebook; default 16")
    parser.add_argument(
        "--steps", type=int, default=2000, help="autoencoder training steps (batches of 128 rows); default 2000"
    )
    parser.add_argument(
        "--rounds", type=int, default=20, help="most refinement rounds (stops when one gains < 0.1%%); default 20"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(
        f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch "
        f"{torch.__version__}; "
        f"{args.codebooks} x {args.codes} codes, autoencoder {args.steps} steps, at most {args.rounds} rounds"
    )
    methods = ["random + LS", "autoencoder + LS", "autoencoder + ref", "random + ref"]
    print(f"\n{'table':<58} " + " ".join(f"{m:>20}" for m in methods))
    for path in args.path:
        model = load_model(path, args.data)
        for name, emb in embedding_tables(model, args.codebooks, args.codes).items():
            res = compare(emb.weight, args.codebooks, args.codes, args.steps, args.rounds)
            cells = []
            for m in methods:
                error, rounds, seconds = res[m]
                note = f" ({rounds}r)" if rounds else ""
                cells.append(f"{error:.3f}{note}".rjust(20))
            label = f"{path.split('/')[-2]}/{name} {list(emb.weight.shape)}"
            print(f"{label:<58} " + " ".join(cells))
            print(
                f"{'':<58} seconds: random + ref {res['random + ref'][2]:.1f}, autoencoder "
                f"{res['autoencoder + LS'][2]:.1f}, "
                f"autoencoder + ref {res['autoencoder + ref'][2]:.1f}"
            )


if __name__ == "__main__":
    main()
