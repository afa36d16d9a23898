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
table, as fairseq ties), ``untied`` copied. Every other weight is copied.

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
from fairseq_define_patch.installed import add_parameter_limit

from ..errors import UserError, cli_error

logger = logging.getLogger("fairseq_define.export")

# log-probabilities of the export and the DeFINE model on the probe batch may differ by this
PROBE_TOLERANCE = 1e-4


class NotExportable(UserError):
    """The model has no exact form in stock fairseq; the message says why."""


# -- the tables ------------------------------------------------------------------------


@torch.no_grad()
def token_table(embedding) -> torch.Tensor:
    """Every vocabulary entry's input embedding, [V, m]: a DeFINE embedding's (its cached
    table, or the unit run over the map), or a map used alone (the language models'
    ``--define-transform none``)."""
    from ..modules.define.embedding import DefineEmbedding

    if isinstance(embedding, DefineEmbedding):
        return embedding.vocabulary_table().detach().clone()
    if isinstance(embedding, torch.nn.Embedding):
        return embedding.weight.detach().clone()
    ids = torch.arange(embedding.num_embeddings if hasattr(embedding, "num_embeddings") else embedding.cutoff[-1])
    return embedding(ids[None])[0].detach().clone()  # [V, m]: a map is a lookup per token


def fold(table: torch.Tensor, projection: torch.Tensor) -> torch.Tensor:
    """The output layer of features projected d -> n and scored against an n-dim table:
    (x P^T) M^T = x (M P)^T, so one [V, d] matrix M P (computed in float64)."""
    return (table.double() @ projection.double()).to(table.dtype)  # [V, n] x [n, d] -> [V, d]


@torch.no_grad()
def untied_adaptive_softmax(asm, prefix: str) -> dict:
    """The weights of fairseq's untied AdaptiveSoftmax computing what ``asm`` (fairseq's,
    tied to an adaptive input) computes: the head's tied word rows and class rows in one
    matrix, each tail band's projection and table as plain linear layers."""
    from fairseq.modules.adaptive_softmax import TiedHeadModule, TiedLinear

    def linear_weight(m):
        if isinstance(m, TiedLinear):
            return (m.weight.t() if m.transpose else m.weight).detach().clone()
        if isinstance(m, torch.nn.Linear):
            return m.weight.detach().clone()
        raise NotExportable(f"the adaptive softmax holds a {type(m).__name__}, which fairseq's untied one cannot express")

    out = {}
    if isinstance(asm.head, TiedHeadModule):
        if not isinstance(asm.head.word_proj, TiedLinear):
            raise NotExportable("the adaptive softmax's first band is narrower than its input, which "
                                "fairseq's untied adaptive softmax cannot express")
        out[f"{prefix}.head.weight"] = torch.cat([linear_weight(asm.head.word_proj), linear_weight(asm.head.class_proj)])
    else:
        out[f"{prefix}.head.weight"] = linear_weight(asm.head)
    for i, band in enumerate(asm.tail):
        out[f"{prefix}.tail.{i}.0.weight"] = linear_weight(band[0])
        out[f"{prefix}.tail.{i}.2.weight"] = linear_weight(band[2])
    return out


# -- the families ----------------------------------------------------------------------
# Each takes the DeFINE model and its stored config; returns (stock model config, stock task
# name, weights by stock name, prefixes of the DeFINE weights they consumed).


def _namespace(args, model_cls, task_cls, **settings) -> Namespace:
    """The stored Namespace reduced to the options a stock fairseq-train stores, with ``settings``."""
    from .stock_config import REGISTRY_SECTIONS, registry_entry, training_namespace_keys

    sections = {s: getattr(args, s, None) for s in REGISTRY_SECTIONS}
    keys = training_namespace_keys(model_cls, task_cls, sections)
    ns = Namespace(**{k: v for k, v in vars(args).items() if k in keys})
    for s, name in sections.items():
        if registry_entry(s, name) is None:
            setattr(ns, s, None)
    for k, v in settings.items():
        setattr(ns, k, v)
    ns.user_dir = None
    return ns


def export_translation(model, args):
    """define_transformer -> transformer."""
    from fairseq.models.transformer import TransformerModel
    from fairseq.tasks.translation import TranslationTask

    from ..modules.define.unit_tied_output import UnitTiedOutputProjection

    enc, dec = model.encoder, model.decoder
    shared = enc.embed_tokens is dec.embed_tokens
    if isinstance(dec.output_projection, UnitTiedOutputProjection):
        form = "tied_unit"
    elif dec.adaptive_softmax is None and dec.share_input_output_embed:
        form = "tied_map"
    else:
        form = "untied"
    d = dec.embed_dim
    weights = {"encoder.embed_tokens.weight": token_table(enc.embed_tokens)}  # [V_src, d]
    weights["decoder.embed_tokens.weight"] = weights["encoder.embed_tokens.weight"] if shared else token_table(dec.embed_tokens)
    consumed = ["encoder.embed_tokens.", "decoder.embed_tokens."]
    if form == "tied_map":  # d -> n projection times the n-dim map table
        weights["decoder.output_projection.weight"] = fold(dec.embed_tokens.weight.detach(), dec.project_out_dim.weight.detach())
        consumed += ["decoder.project_out_dim.", "decoder.output_projection."]
    elif form == "tied_unit":  # the unit's table, tied to the decoder's input table as fairseq ties
        weights["decoder.output_projection.weight"] = weights["decoder.embed_tokens.weight"]
        consumed.append("decoder.output_projection.")
    ns = _namespace(
        args, TransformerModel, TranslationTask, arch="transformer", _name="transformer",
        no_scale_embedding=True, encoder_embed_path=None, decoder_embed_path=None,
        decoder_input_dim=d, decoder_output_dim=d,
        # fairseq ties the output to the decoder's input table whenever all embeddings are
        # shared; the untied and map-tied outputs keep two (equal) input tables instead
        share_all_embeddings=shared and form == "tied_unit",
        share_decoder_input_output_embed=form == "tied_unit",
        tie_adaptive_weights=False,
    )
    return ns, "translation", weights, consumed


def export_transformer_lm(model, cfg):
    """define_transformer_lm -> transformer_lm."""
    from fairseq.models.transformer_lm import TransformerLanguageModelConfig

    from ..modules.define.unit_tied_output import UnitTiedOutputProjection
    from .stock_config import dataclass_keys

    dec = model.decoder
    d = dec.embed_dim
    weights = {"decoder.embed_tokens.weight": token_table(dec.embed_tokens)}  # [V, m]
    consumed = ["decoder.embed_tokens."]
    settings = dict(adaptive_input=False, adaptive_input_cutoff=None, tie_adaptive_weights=False,
                    tie_adaptive_proj=False, character_embeddings=False, no_scale_embedding=True,
                    share_decoder_input_output_embed=False, decoder_output_dim=dec.output_embed_dim)
    if dec.adaptive_softmax is not None:  # tied to the adaptive map, or untied: fairseq's untied one
        weights.update(untied_adaptive_softmax(dec.adaptive_softmax, "decoder.adaptive_softmax"))
        consumed.append("decoder.adaptive_softmax.")
    elif isinstance(dec.output_projection, UnitTiedOutputProjection):
        weights["decoder.output_projection.weight"] = weights["decoder.embed_tokens.weight"]
        settings.update(share_decoder_input_output_embed=True)
        consumed.append("decoder.output_projection.")
    elif dec.share_input_output_embed:  # d -> n projection times the n-dim map table
        weights["decoder.output_projection.weight"] = fold(dec.embed_tokens.weight.detach(), dec.project_out_dim.weight.detach())
        settings.update(decoder_output_dim=d)
        consumed += ["decoder.project_out_dim.", "decoder.output_projection."]
    keys = dataclass_keys(TransformerLanguageModelConfig)
    model_cfg = {k: v for k, v in dict(cfg).items() if k in keys}
    model_cfg.update(settings, _name="transformer_lm", decoder_input_dim=weights["decoder.embed_tokens.weight"].size(1))
    return model_cfg, "language_modeling", weights, consumed


def export_lstm_lm(model, cfg):
    """define_lstm_lm -> lstm_lm, where fairseq's LSTM decoder computes the same function."""
    from fairseq.models.lstm_lm import LSTMLanguageModel as StockLSTM
    from fairseq.tasks.language_modeling import LanguageModelingTask

    dec = model.decoder
    widths = {layer.hidden_size for layer in dec.layers}
    if len(widths) > 1:
        raise NotExportable(
            f"its LSTM layers are {'/'.join(str(l.hidden_size) for l in dec.layers)} wide, but fairseq's lstm_lm "
            "has one width for every layer (exact only with --lstm-hidden-dim equal to --define-map-dim, or one layer)")
    n = widths.pop()
    asm = dec.adaptive_softmax
    adaptive = asm.n_clusters > 0
    weights = {"decoder.embed_tokens.weight": token_table(dec.embed_tokens)}  # [V, m]
    for i, layer in enumerate(dec.layers):
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            weights[f"decoder.layers.{i}.{name}"] = getattr(layer, f"{name}_l0").detach().clone()
    table, _ = asm.tied_input.weights_for_band(0)
    if adaptive:
        if asm.bias is not None:
            raise NotExportable("its adaptive softmax has an output bias per word, which fairseq's adaptive "
                                "softmax lacks (exact only with --no-softmax-bias)")
        factor = float(model.define_options().div_val)
        if factor != 4.0:
            raise NotExportable(f"its adaptive bands shrink by --div-val {factor:g}, but fairseq's lstm_lm "
                                "builds its adaptive softmax with factor 4")
        weights["decoder.adaptive_softmax.head.weight"] = torch.cat([table, asm.cluster_weight]).detach().clone()
        for i in range(asm.n_clusters):
            emb, proj = asm.tied_input.weights_for_band(i + 1)  # [V_i, n_i], [n, n_i]
            weights[f"decoder.adaptive_softmax.tail.{i}.0.weight"] = proj.t().detach().clone()
            weights[f"decoder.adaptive_softmax.tail.{i}.2.weight"] = emb.detach().clone()
    else:  # fairseq's fc_out: the n-dim map table, with the per-word bias
        weights["decoder.fc_out.weight"] = table.detach().clone()
        weights["decoder.fc_out.bias"] = (asm.bias if asm.bias is not None else torch.zeros(table.size(0))).detach().clone()
    m = weights["decoder.embed_tokens.weight"].size(1)
    cutoff = ",".join(str(c) for c in asm.cutoff[:-1]) if adaptive else None
    ns = _namespace(
        Namespace(**dict(cfg)), StockLSTM, LanguageModelingTask, arch="lstm_lm", _name="lstm_lm", task="language_modeling",
        criterion="adaptive_loss" if adaptive else "cross_entropy", optimizer=None, lr_scheduler=None,
        decoder_embed_dim=m, decoder_hidden_size=n, decoder_out_embed_dim=n, decoder_layers=len(dec.layers),
        decoder_attention="0", decoder_dropout_in=0.0, decoder_dropout_out=0.0, dropout=0.0, residuals=False,
        decoder_embed_path=None, share_decoder_input_output_embed=False, adaptive_softmax_cutoff=cutoff,
    )
    return ns, "language_modeling", weights, ["decoder.embed_tokens.", "decoder.layers.", "decoder.adaptive_softmax."]


def export_family(model):
    """The export function for ``model``'s family; refuses a model that has none."""
    from ..models.define_transformer import DefineTransformerModel
    from ..models.define_transformer_lm import DefineTransformerLanguageModel
    from ..models.lstm_lm import LSTMLanguageModel
    from ..models.transformer_xl import TransformerXLLanguageModel

    if isinstance(model, TransformerXLLanguageModel):
        raise NotExportable("fairseq has no Transformer-XL (relative positions, segment memory), so a "
                            "define_transformer_xl model has no stock form; serve it with this plugin "
                            "(fairseq-define-cache-tables makes its DeFINE units lookup tables)")
    for cls, fn in ((DefineTransformerModel, export_translation), (DefineTransformerLanguageModel, export_transformer_lm),
                    (LSTMLanguageModel, export_lstm_lm)):
        if isinstance(model, cls):
            return fn
    raise NotExportable(f"{type(model).__name__} is not a fairseq-define model (define_transformer*, "
                        "define_transformer_lm*, define_lstm_lm*); a stock model needs no export")


# -- building and checking the stock model ----------------------------------------------


def stock_weights(stock, model, weights: dict, consumed) -> dict:
    """``stock``'s state dict filled from ``weights`` and, by name, ``model``'s other
    weights; a weight of either left without a place is refused."""
    own = model.state_dict()
    out = stock.state_dict()
    missing = []
    for key, value in out.items():
        if key in weights:
            new = weights[key]
        elif key in own and own[key].shape == value.shape:
            new = own[key]
        elif key.endswith((".version", "._float_tensor")):
            continue  # fairseq's bookkeeping buffers
        else:
            missing.append(key)
            continue
        if new.shape != value.shape:
            raise NotExportable(f"{key} is {tuple(new.shape)} here but {tuple(value.shape)} in fairseq's model")
        out[key] = new.detach().to(device=value.device, dtype=value.dtype).clone()  # the stock model: CPU, fp32
    if missing:
        raise NotExportable(f"fairseq's model has weights this one lacks: {', '.join(missing[:4])}")
    unused = [k for k in own if k not in out and not k.startswith(tuple(consumed)) and not k.endswith("._float_tensor")]
    if unused:
        raise NotExportable(f"fairseq's model has no place for {', '.join(unused[:4])}")
    return out


@torch.no_grad()
def probe_difference(a, b, task, translation: bool) -> float:
    """The largest difference of the two models' log-probabilities on a fixed batch of
    vocabulary tokens (4 sentences; for translation, sources of 9 tokens and prefixes of 7)."""
    g = torch.Generator().manual_seed(0)

    def tokens(dictionary, length):
        return torch.randint(dictionary.nspecial, len(dictionary), (4, length), generator=g)

    src_dict, tgt_dict = (task.source_dictionary, task.target_dictionary) if translation else (None, task.target_dictionary)
    prev = torch.cat([torch.full((4, 1), tgt_dict.eos()), tokens(tgt_dict, 7)], 1)  # [4, 8]
    if translation:
        src = torch.cat([tokens(src_dict, 9), torch.full((4, 1), src_dict.eos())], 1)  # [4, 10]
    results = []
    for m in (a, b):
        dev = next(m.parameters()).device  # a hub model may be on a GPU; the stock one is on the CPU
        out = m(src.to(dev), torch.full((4,), 10, device=dev), prev.to(dev)) if translation else m(prev.to(dev))
        results.append(m.get_normalized_probs(out, log_probs=True).float().cpu())
    return (results[0] - results[1]).abs().max().item()


def export_state(model, cfg, task, num_updates: int = 0) -> dict:
    """The stock checkpoint of ``model`` (a loaded fairseq-define model; ``cfg``: its
    checkpoint's config; ``task``: the task it was loaded with; ``num_updates``: how long it
    trained), checked on a probe batch. Inference only: no optimizer state."""
    from fairseq import models as fairseq_models
    from omegaconf import OmegaConf

    from .stock_config import stock_config

    model.eval()  # (not model = model.eval(): a hub model's train(), set by make_generation_fast_, returns None)
    plain_cfg = OmegaConf.to_container(cfg, resolve=False) if OmegaConf.is_config(cfg) else dict(cfg)
    model_cfg = cfg["model"] if isinstance(cfg["model"], Namespace) else plain_cfg["model"]
    family = export_family(model)
    with torch.no_grad():
        new_model_cfg, task_name, weights, consumed = family(model, model_cfg)
    build_cfg = OmegaConf.create(new_model_cfg) if isinstance(new_model_cfg, dict) else Namespace(**vars(new_model_cfg))
    arch = build_cfg["_name"] if isinstance(new_model_cfg, dict) else build_cfg.arch
    try:
        stock = fairseq_models.build_model(build_cfg, task).eval()
    except (ValueError, AssertionError) as e:
        raise NotExportable(f"fairseq's {arch} model cannot be built from its settings: {e}") from None
    stock.load_state_dict(stock_weights(stock, model, weights, consumed), strict=True)
    translation = task_name == "translation"
    diff = probe_difference(model, stock, task, translation)
    if not diff <= PROBE_TOLERANCE:
        raise NotExportable(f"fairseq's model computes other log-probabilities (by up to {diff:.3g} on a probe "
                            "batch), so it is not an exact form of this model")
    logger.info("fairseq's %s model matches on a probe batch (log-probabilities within %.1e)", arch, diff)
    return {
        "args": None,
        "cfg": stock_config(plain_cfg, new_model_cfg, task_name),
        "model": stock.state_dict(),
        "criterion": None,
        "optimizer_history": [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "FairseqOptimizer",
                               "lr_scheduler_state": {}, "num_updates": num_updates}],
        "task_state": {},
        "extra_state": {},
        "last_optimizer_state": None,
    }


def export_checkpoint(path: str, output: str, data=None) -> str:
    """Read a trained checkpoint and write its stock form to ``output`` (which must not
    exist; written whole or not at all). Returns the stock architecture's name."""
    from ..output_files import check_output, save_checkpoint
    from .inference_checkpoint import load_ensemble, read_for_rewrite

    check_output(output, flag=None)
    if not os.path.isfile(path):
        raise UserError(f"no such checkpoint: {path}")
    state = read_for_rewrite(path, output)
    model, cfg, task = load_ensemble(path, data)
    history = state.get("optimizer_history") or [{}]
    exported = export_state(model, cfg, task, num_updates=int(history[-1].get("num_updates", 0) or 0))
    save_checkpoint(exported, output, flag=None)
    model_cfg = exported["cfg"]["model"]
    return getattr(model_cfg, "arch", None) or model_cfg["_name"]


def convert_to_ctranslate2(export_path, data, output_dir, quantization=None) -> None:
    """CTranslate2's fairseq converter on an exported checkpoint (``pip install
    'fairseq-define[deploy]'``). fairseq stores a translation model's settings as an
    argparse Namespace, which torch's weights-only loader (the converter's default) refuses;
    the file is first read by fairseq's safe loader, which admits only plain data, and the
    converter then reads it with Namespace allowed. ``quantization``: e.g. int8, float16."""
    from fairseq import checkpoint_utils

    try:
        from ctranslate2.converters import FairseqConverter
    except ImportError:
        raise UserError("CTranslate2 is not installed: pip install 'fairseq-define[deploy]' (or ctranslate2)") from None
    try:
        checkpoint_utils.safe_torch_load(str(export_path), map_location="cpu")
    except checkpoint_utils.CheckpointLoadError as e:
        raise UserError(str(e)) from None
    if os.path.lexists(output_dir):
        raise UserError(f"{output_dir} exists; choose a new folder for the CTranslate2 model (nothing is overwritten)")
    # converted into a fresh folder beside it, renamed when complete: all or nothing
    parent = os.path.dirname(os.path.abspath(output_dir))
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(output_dir))}.", dir=parent)
    try:
        with torch.serialization.safe_globals([Namespace]):
            FairseqConverter(str(export_path), str(data)).convert(tmp, quantization=quantization, force=True)
        os.rename(tmp, output_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fairseq-define-export", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="trained fairseq-define checkpoint (live DeFINE units or cached tables)")
    parser.add_argument("output", help="the stock fairseq checkpoint to write (must not exist)")
    parser.add_argument("--data", help="data directory with the dictionaries (default: the one the checkpoint was trained on)")
    parser.add_argument("--ct2", metavar="DIR", help="also convert the export to a CTranslate2 model in DIR "
                        "(translation models; needs ctranslate2: pip install 'fairseq-define[deploy]')")
    parser.add_argument("--ct2-quantization", metavar="TYPE", help="CTranslate2 weight type, e.g. int8 or float16 "
                        "(default: as trained, float32)")
    add_parameter_limit(parser, argv)  # --max-model-parameters: the model budget's limit, as fairseq's tools take it
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    import fairseq_define  # noqa: F401  (registers the models the checkpoint names)

    try:  # every choice before the export is read or written
        if args.ct2_quantization is not None and not args.ct2:
            raise UserError("--ct2-quantization is the CTranslate2 model's weight type: give --ct2 DIR too, or drop it")
        if args.ct2:
            if os.path.lexists(args.ct2):
                raise UserError(f"{args.ct2} exists; choose a new folder for the CTranslate2 model (nothing is overwritten)")
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
        arch = export_checkpoint(args.checkpoint, args.output, args.data)
    except UserError as e:
        return cli_error(parser.prog, e)
    logger.info("wrote %s: fairseq's %s, loads without --user-dir", args.output, arch)
    if args.ct2:
        if arch != "transformer":
            return cli_error(parser.prog, f"wrote {args.output}, but --ct2 converts translation models and this is "
                             f"a {arch}: drop --ct2 (ct2-fairseq-converter reads a transformer_lm without an "
                             "adaptive softmax)")
        data = args.data or safe_data_dir(args.output)
        try:
            convert_to_ctranslate2(args.output, data, args.ct2, args.ct2_quantization)
        except UserError as e:
            return cli_error(parser.prog, e)
        logger.info("wrote %s: the CTranslate2 model (%s)", args.ct2, args.ct2_quantization or "float32")
    return 0


def safe_data_dir(path) -> str:
    """The data directory an exported checkpoint names (its task's data)."""
    from fairseq import checkpoint_utils

    return checkpoint_utils.safe_torch_load(str(path), map_location="cpu")["cfg"]["task"]["data"]


if __name__ == "__main__":
    sys.exit(main())
