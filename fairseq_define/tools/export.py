"""fairseq-define-export: a trained DeFINE model as a checkpoint of fairseq's own
architecture, which a stock fairseq loads without this plugin (no ``--user-dir``) and which
CTranslate2's ``ct2-fairseq-converter`` reads (docs/inference.md, "Deploy").

    fairseq-define-export checkpoints/checkpoint_best.pt export.pt [--data data-bin] \
        [--ct2 ct2_model --ct2-quantization int8]

DeFINE maps each token on its own (paper section 3.4), so each side's embedding is computed
once into a plain ``embed_tokens`` table, as fairseq-define-cache-tables does; the models
already skip fairseq's embedding scale (``no_scale_embedding``), and so does the export. The
output form becomes a plain output layer: ``tied_map`` the d -> n projection times the n-dim
map table (one d x V matrix), ``tied_unit`` the unit's table (tied to the decoder's input
table, as fairseq ties), ``untied`` copied (models/output_layer.py). Every other weight is
copied. Each family states its stock form (``model.stock_form``), and models/stock_form.py
builds and checks it; this tool reads the checkpoint and writes the files.

    define_transformer*      -> transformer (every output form, shared or separate vocabularies)
    define_transformer_lm*   -> transformer_lm (the tied adaptive softmax becomes fairseq's
                                untied one with the same weights)
    define_lstm_lm*          -> lstm_lm where exact: every LSTM layer as wide as the last (n),
                                an adaptive softmax only without output biases and with
                                factor 4 (fairseq's lstm_lm fixes it)
    define_transformer_xl*   -> refused: fairseq has no Transformer-XL

Before writing, the export is built as the stock model and its log-probabilities checked
against the DeFINE model's on a probe batch; a difference above 1e-4 is refused.
"""

import argparse
import logging
import os
import shutil
import sys
import tempfile
from argparse import Namespace

import torch
from fairseq import checkpoint_utils

from fairseq_define_patch.installed import add_parameter_limit

from ..errors import UserError, cli_error
from ..models.stock_form import NotExportable, export_state  # noqa: F401  (NotExportable: what it raises)
from ..output_files import check_output, raise_write_failure, save_checkpoint
from .inference_checkpoint import load_ensemble, read_for_rewrite

logger = logging.getLogger("fairseq_define.export")


def export_checkpoint(path: str, output: str, data=None, ct2: bool = False) -> str:
    """Read a trained checkpoint and write its stock form to ``output`` (which must not
    exist; written whole or not at all). Returns the stock architecture's name. ``ct2``: a
    CTranslate2 model is to follow, so a stock form CTranslate2 cannot read is refused
    before anything is written."""
    check_output(output, flag=None)
    if not os.path.isfile(path):
        raise UserError(f"no such checkpoint: {path}")
    state = read_for_rewrite(path, output)
    model, cfg, task = load_ensemble(path, data)
    history = state.get("optimizer_history") or [{}]
    exported = export_state(model, cfg, task, num_updates=int(history[-1].get("num_updates", 0) or 0))
    model_cfg = exported["cfg"]["model"]
    arch = getattr(model_cfg, "arch", None) or model_cfg["_name"]
    if ct2:
        check_ctranslate2_form(arch, model_cfg)
    save_checkpoint(exported, output, flag=None)
    return arch


def check_ctranslate2_form(arch, model_cfg) -> None:
    """--ct2: a stock form CTranslate2's fairseq converter cannot take, refused before anything
    is written (it was refused by the converter after the export, in a traceback): a model other
    than a translation model; an adaptive softmax, which the converter does not check and then
    fails on; and what the converter itself checks (its ``_get_model_spec``: the activation,
    positional embeddings, the two sides' heads and normalization), in its words."""
    drop = "drop --ct2 (the export alone loads in stock fairseq)"
    if arch != "transformer":
        raise UserError(f"--ct2 converts translation models and this is a {arch}: drop --ct2 (ct2-fairseq-converter "
                        "reads a transformer_lm without an adaptive softmax)")
    if getattr(model_cfg, "adaptive_softmax_cutoff", None):
        raise UserError(f"--ct2: CTranslate2 has no adaptive softmax (--adaptive-softmax-cutoff "
                        f"{model_cfg.adaptive_softmax_cutoff}): {drop}, or train with a full softmax")
    try:
        from ctranslate2.converters.fairseq import _get_model_spec
    except ImportError:  # another converter version: its conversion says it
        return
    try:
        _get_model_spec(model_cfg)
    except ValueError as e:
        reasons = [line[2:] for line in str(e).splitlines() if line.startswith("- ")] or [str(e)]
        raise UserError(f"--ct2: CTranslate2 cannot convert this model: {'; '.join(reasons)}: {drop}") from None


def convert_to_ctranslate2(export_path, data, output_dir, quantization=None) -> None:
    """CTranslate2's fairseq converter on an exported checkpoint (``pip install
    'fairseq-define[deploy]'``). fairseq stores a translation model's settings as an
    argparse Namespace, which torch's weights-only loader (the converter's default) refuses;
    the file is first read by fairseq's safe loader, which admits only plain data, and the
    converter then reads it with Namespace allowed. ``data``: the data directory (None: the
    one the export's task names); ``quantization``: e.g. int8, float16.
    The language pair the model was trained on is passed on: the converter reads only the
    model's settings and otherwise guesses the pair from the data folder's file names."""
    try:
        from ctranslate2.converters import FairseqConverter
    except ImportError:
        raise UserError("CTranslate2 is not installed: pip install 'fairseq-define[deploy]' (or ctranslate2)") from None
    try:
        task = checkpoint_utils.safe_torch_load(str(export_path), map_location="cpu")["cfg"]["task"]
    except checkpoint_utils.CheckpointLoadError as e:
        raise UserError(str(e)) from None
    pair = {k: task.get(k) for k in ("source_lang", "target_lang")}
    data = data or task["data"]  # the data directory the export's task names
    if os.path.lexists(output_dir):
        raise UserError(f"{output_dir} exists; choose a new folder for the CTranslate2 model (nothing is overwritten)")
    # converted into a fresh folder beside it, renamed when complete: all or nothing
    parent = os.path.dirname(os.path.abspath(output_dir))
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(output_dir))}.", dir=parent)
    try:
        with torch.serialization.safe_globals([Namespace]):
            FairseqConverter(str(export_path), str(data), **pair).convert(tmp, quantization=quantization, force=True)
        os.rename(tmp, output_dir)
    except (OSError, RuntimeError) as e:  # the converter's files (model.bin, vocabularies) failed to write
        raise_write_failure(output_dir, e, "not made")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fairseq-define-export", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="trained fairseq-define checkpoint (live DeFINE units or cached tables)")
    parser.add_argument("output", help="the stock fairseq checkpoint to write (must not exist)")
    parser.add_argument(
        "--data", help="data directory with the dictionaries (default: the one the checkpoint was trained on)"
    )
    parser.add_argument("--ct2", metavar="DIR", help="also convert the export to a CTranslate2 model in DIR "
                        "(translation models; needs ctranslate2: pip install 'fairseq-define[deploy]')")
    parser.add_argument("--ct2-quantization", metavar="TYPE", help="CTranslate2 weight type, e.g. int8 or float16 "
                        "(default: as trained, float32)")
    add_parameter_limit(parser, argv)  # --max-model-parameters: the model budget's limit, as fairseq's tools take it
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:  # every choice before the export is read or written
        if args.ct2_quantization is not None and not args.ct2:
            raise UserError("--ct2-quantization is the CTranslate2 model's weight type: give --ct2 DIR too, or drop it")
        if args.ct2:
            if os.path.lexists(args.ct2):
                raise UserError(
                    f"{args.ct2} exists; choose a new folder for the CTranslate2 model (nothing is overwritten)"
                )
            import ctranslate2  # noqa: F401  (before the export: refuse early)
            from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

            if args.ct2_quantization is not None and args.ct2_quantization not in ACCEPTED_MODEL_TYPES:
                raise UserError(f"--ct2-quantization {args.ct2_quantization!r} is not a CTranslate2 weight type: "
                                f"use one of {', '.join(ACCEPTED_MODEL_TYPES)}")
    except ImportError:
        return cli_error(parser.prog, "--ct2 needs CTranslate2: pip install 'fairseq-define[deploy]' (or ctranslate2)")
    except UserError as e:
        return cli_error(parser.prog, e)
    try:
        arch = export_checkpoint(args.checkpoint, args.output, args.data, ct2=bool(args.ct2))
    except UserError as e:
        return cli_error(parser.prog, e)
    logger.info("wrote %s: fairseq's %s, loads without --user-dir", args.output, arch)
    if args.ct2:
        try:
            convert_to_ctranslate2(args.output, args.data, args.ct2, args.ct2_quantization)
        except BaseException as e:
            # the command is all or nothing: the export written above goes too, so that the
            # same command runs again once the cause is fixed (it refuses an existing output)
            os.unlink(args.output)
            if not isinstance(e, UserError):
                raise
            return cli_error(parser.prog, f"{e}; {args.output} is removed too, so the same command can run again")
        logger.info("wrote %s: the CTranslate2 model (%s)", args.ct2, args.ct2_quantization or "float32")
    return 0


if __name__ == "__main__":
    sys.exit(main())
