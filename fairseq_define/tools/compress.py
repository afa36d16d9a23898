"""fairseq-define-compress: store every lookup table of a trained checkpoint as
compositional codes (Shu & Nakayama 2018; the paper's Table 5 uses 32 codebooks x 16 codes).

    fairseq-define-compress --path checkpoints/checkpoint_best.pt --output compressed.pt [--cache-define]

Codes start random (or from Shu & Nakayama's autoencoder, ``--init autoencoder``) and are
refined by alternating least-squares codebooks and an ICM pass over the codes.

With ``--cache-define`` the DeFINE units are first replaced by cached tables (section 3.4),
and those are compressed too; without it the units stay and read the decoded map tables.
Output layers tied to a table read the decoded table. The result loads in fairseq-generate,
-interactive, -eval-lm and the hub interface like any checkpoint (inference only).
"""

import argparse
import logging
import sys

from fairseq_define_patch.installed import add_parameter_limit

logger = logging.getLogger("fairseq_define.compress")

# M, codebooks per row: far above any published setting (the paper's Table 5 uses 32, Shu &
# Nakayama 2018 at most 64), so that a slip (10,000,000) is refused before the checkpoint is
# read, not after it (every row's M codes are held, and learnt, M at a time)
MAX_CODEBOOKS = 1024


def nothing_to_compress(model, path, codebooks, codes) -> str:
    """Why no table of ``model`` was compressed: it has none, or codes of ``codebooks`` x
    ``codes`` would not make one smaller (the codebooks alone outweigh a small table; the
    tool said "has no lookup tables" then too)."""
    from torch import nn

    from fairseq_define.modules.compression.compositional_codes import coded_bytes

    tables = [(name, m) for name, m in model.named_modules() if type(m) is nn.Embedding]
    if not tables:
        return f"{path} has no lookup tables to compress"
    name, m = max(tables, key=lambda t: t[1].weight.numel())
    size = m.weight.numel() * m.weight.element_size()
    coded = coded_bytes(m.num_embeddings, m.embedding_dim, codebooks, codes, m.weight.element_size())
    return (
        f"--codebooks {codebooks} x --codes {codes} would not make the lookup tables of {path} smaller (the "
        f"largest, {name} [{m.num_embeddings}, {m.embedding_dim}], is {size / 2**20:.3f} MB, and {coded / 2**20:.3f} "
        f"MB as codes): lower --codebooks or --codes"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fairseq-define-compress", description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", required=True, help="trained checkpoint")
    parser.add_argument("--output", required=True, help="checkpoint to write (must not exist)")
    parser.add_argument(
        "--data", help="data directory with the dictionaries (default: the one the checkpoint was trained on)"
    )
    parser.add_argument(
        "--codebooks", type=int, default=32, help=f"M: codebooks (codes per row), 1..{MAX_CODEBOOKS}; default 32"
    )
    parser.add_argument("--codes", type=int, default=16, help="K: codes per codebook, 2..256; default 16")
    parser.add_argument(
        "--init",
        choices=["random", "autoencoder"],
        default="random",
        help="where the codes start: random, or Shu & Nakayama's Gumbel-softmax autoencoder; default random "
        "(refined, it reaches a lower error: docs/inference.md, Compression)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=2000,
        help="autoencoder training steps per table (batches of 128 rows) with --init autoencoder; default 2000",
    )
    parser.add_argument(
        "--refine-rounds",
        type=int,
        default=20,
        help="rounds of least-squares codebooks + one ICM pass over the codes (stops early when a round "
        "gains < 0.1%%); 0 keeps the start's codes; default 20",
    )
    parser.add_argument(
        "--cache-define", action="store_true", help="cache the DeFINE units into tables first, and compress those too"
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed of the code learning")
    add_parameter_limit(parser, argv)  # --max-model-parameters: the model budget's limit, as fairseq's tools take it
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    prog = parser.prog

    import fairseq_define  # noqa: F401
    from fairseq_define.errors import UserError, cli_error
    from fairseq_define.models.inference_tables import InferenceTablesMixin
    from fairseq_define.modules import DefineEmbedding, cache_define_tables
    from fairseq_define.modules.compression.compositional_codes import CompositionalEmbedding, compress_embeddings

    from .inference_checkpoint import load_model_for_rewrite, mark_cached_tables, save_for_inference

    try:
        if (
            not 2 <= args.codes <= 256
            or not 1 <= args.codebooks <= MAX_CODEBOOKS
            or args.steps < 0
            or args.refine_rounds < 0
        ):
            raise UserError(
                f"--codes must be in 2..256, --codebooks in 1..{MAX_CODEBOOKS}, --steps and --refine-rounds "
                f"at least 0 (got --codes {args.codes} --codebooks {args.codebooks} --steps {args.steps} "
                f"--refine-rounds {args.refine_rounds})"
            )
        state, model = load_model_for_rewrite(args.path, args.output, args.data)
        if not isinstance(model, InferenceTablesMixin):
            # only our models rebuild the codes when a checkpoint is loaded
            raise UserError(
                f"{args.path} holds a {type(model).__name__}, not a fairseq-define model: "
                "fairseq-define-compress rewrites checkpoints of define_transformer, "
                "define_transformer_xl, define_lstm_lm and define_transformer_lm, whose loaders read the codes"
            )
        if any(isinstance(m, CompositionalEmbedding) for m in model.modules()):
            raise UserError(f"{args.path} is already compressed")
        if args.cache_define and not any(isinstance(m, DefineEmbedding) for m in model.modules()):
            raise UserError(f"{args.path} has no DeFINE units to cache; drop --cache-define")
    except UserError as e:
        return cli_error(prog, e)
    if args.cache_define:
        cache_define_tables(model)
        mark_cached_tables(state)
    model.eval()
    reports = compress_embeddings(model, args.codebooks, args.codes, progress=True, init=args.init, steps=args.steps,
                                  refine_rounds=args.refine_rounds, seed=args.seed)
    if not reports:
        return cli_error(prog, nothing_to_compress(model, args.path, args.codebooks, args.codes))
    try:
        save_for_inference(state, model, args.output, "its tables are compositional codes (fairseq-define-compress)")
    except UserError as e:
        return cli_error(prog, e)
    for r in reports:
        logger.info("%-45s [%d, %d]  %8.2f MB -> %6.2f MB  relative error %.4f", r["name"], *r["shape"],
                    r["before"] / 2**20, r["after"] / 2**20, r["error"])
    before, after = sum(r["before"] for r in reports), sum(r["after"] for r in reports)
    logger.info("wrote %s: look-up tables %.2f MB -> %.2f MB (%d x %d codes, log2(K)-bit packing)",
                args.output, before / 2**20, after / 2**20, args.codebooks, args.codes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
