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
import os
import sys

logger = logging.getLogger("fairseq_define.cache_tables")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fairseq-define-cache-tables", description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", required=True, help="trained checkpoint")
    parser.add_argument("--output", required=True, help="checkpoint to write (must not exist)")
    parser.add_argument("--data", help="data directory with the dictionaries (default: the one the checkpoint was trained on)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    prog = parser.prog

    from fairseq import checkpoint_utils

    import fairseq_define  # noqa: F401
    from fairseq_define.errors import cli_error
    from fairseq_define.modules import DefineEmbedding, cache_define_tables

    def fail(message):
        return cli_error(prog, message)

    if os.path.exists(args.output):
        return fail(f"{args.output} exists; choose a new file name (nothing is overwritten)")
    try:
        state = checkpoint_utils.safe_torch_load(args.path, map_location="cpu")  # as fairseq wrote it
        overrides = {"data": args.data} if args.data else {}
        models, _cfg, _task = checkpoint_utils.load_model_ensemble_and_task([args.path], arg_overrides=overrides)
    except checkpoint_utils.CheckpointLoadError as e:
        return fail(e)
    except FileNotFoundError as e:
        return fail(f"{e}; pass --data with the directory holding the model's dict.*.txt")
    model = models[0]
    units = sum(p.numel() for m in model.modules() if isinstance(m, DefineEmbedding) and m.unit is not None for p in m.unit.parameters())
    if not any(isinstance(m, DefineEmbedding) for m in model.modules()):
        return fail(f"{args.path} has no DeFINE embeddings to cache")
    table_bytes = cache_define_tables(model)
    state["model"] = model.state_dict()
    model_cfg = state["cfg"]["model"]  # a Namespace (argparse models) or a dict
    if isinstance(model_cfg, dict):
        model_cfg["define_cached_table"] = True
    else:
        model_cfg.define_cached_table = True
    state["last_optimizer_state"] = None  # inference only: the units it refers to are gone
    state["extra_state"] = {k: v for k, v in (state.get("extra_state") or {}).items() if k != "train_iterator"}
    checkpoint_utils.torch_persistent_save(state, args.output)
    logger.info(
        "wrote %s: DeFINE units (%.2fM parameters) replaced by cached tables of %.2f MB",
        args.output, units / 1e6, table_bytes / 2**20,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
