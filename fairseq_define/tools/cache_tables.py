"""fairseq-define-cache-tables: turn a trained checkpoint into one whose DeFINE embeddings
are plain lookup tables (paper section 3.4), so inference costs what a standard embedding
costs. The output layers stay tied to the n-dim map tables; the units are dropped.

    fairseq-define-cache-tables --path checkpoints/checkpoint_best.pt --output cached.pt [--data data-bin]

The result works with fairseq-generate, -interactive, -eval-lm and the hub interface like
any checkpoint. Without a new file, ``--model-overrides "{'define_cache_on_load': True}"``
does the same in memory at load time.
"""

import argparse
import logging
import sys

from fairseq_define_patch.installed import add_parameter_limit

logger = logging.getLogger("fairseq_define.cache_tables")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fairseq-define-cache-tables", description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", required=True, help="trained checkpoint")
    parser.add_argument("--output", required=True, help="checkpoint to write (must not exist)")
    parser.add_argument(
        "--data", help="data directory with the dictionaries (default: the one the checkpoint was trained on)"
    )
    add_parameter_limit(parser, argv)  # --max-model-parameters: the model budget's limit, as fairseq's tools take it
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    prog = parser.prog

    import fairseq_define  # noqa: F401
    from fairseq_define.errors import UserError, cli_error
    from fairseq_define.modules import DefineEmbedding, cache_define_tables

    from .inference_checkpoint import load_model_for_rewrite, mark_cached_tables, save_for_inference

    try:
        state, model = load_model_for_rewrite(args.path, args.output, args.data)
        embeddings = [m for m in model.modules() if isinstance(m, DefineEmbedding)]
        if not embeddings:
            raise UserError(f"{args.path} has no DeFINE embeddings to cache (is it a fairseq-define model?)")
        if all(m.unit is None for m in embeddings):
            raise UserError(f"{args.path} already holds cached DeFINE tables; use it as it is")
    except UserError as e:
        return cli_error(prog, e)
    units = sum(p.numel() for m in embeddings if m.unit is not None for p in m.unit.parameters())
    table_bytes = cache_define_tables(model)
    mark_cached_tables(state)
    try:
        save_for_inference(
            state, model, args.output, "its DeFINE units are cached tables (fairseq-define-cache-tables)"
        )
    except UserError as e:
        return cli_error(prog, e)
    logger.info(
        "wrote %s: DeFINE units (%.2fM parameters) replaced by cached tables of %.2f MB",
        args.output, units / 1e6, table_bytes / 2**20,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
