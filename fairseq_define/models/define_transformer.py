"""Transformer NMT with DeFINE token embeddings (paper section 4.2, Table 3).

Encoder and decoder embeddings are DeFINE units on n-dim map tables (one per side, or one
shared with ``--share-all-embeddings``). The output layer is a setting
(``--define-output-layer``): the paper's Table 3 model keeps a d_model-wide, untied output
layer (its 68M only adds up that way, docs/reproduction.md); ``tied_map`` projects
d_model -> n and scores against the decoder's n-dim map table (the LMs' tying, Tables 1-2);
``tied_unit`` scores against the unit's outputs for the whole vocabulary.
``--define-transform projective`` gives the like-for-like baseline (same n, one linear map
n -> d_model).
"""

import logging
from dataclasses import dataclass, field, fields

from fairseq.dataclass import FairseqDataclass
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models import register_model
from fairseq.models.transformer import TransformerConfig, TransformerDecoderBase, TransformerModel, base_architecture
from fairseq.modules import BaseLayer
from fairseq.tasks.translation import TranslationTask

from ..modules.config_bounds import check_settings
from ..modules.define.config import DefineConfig, DefineConfigError
from ..modules.define.embedding import DefineEmbedding
from ..modules.define.options import DefineOptions
from ..param_report import log_parameter_distribution
from .hub_interface import TranslationHubInterface, from_pretrained
from .inference_tables import InferenceTablesMixin
from .named_architectures import fill_defaults, register_architectures
from .output_layer import (
    DESCRIPTIONS,
    OUTPUT_LAYER_CHOICES,
    build_output_projection,
    check_adaptive_softmax_training,
    check_translation,
    configure_translation,
    implied_translation_form,
    stock_output,
)
from .stock_form import stock_namespace, token_table

logger = logging.getLogger(__name__)


@dataclass
class DefineTransformerConfig(FairseqDataclass):
    define_output_layer: OUTPUT_LAYER_CHOICES = field(
        default="untied",
        metadata={
            "help": "the decoder's output layer: untied (a d_model x vocabulary layer of its own, "
            "the paper's Table 3 model), tied_map (d_model -> n projection, logits against the "
            "n-dim map table: fewest parameters), or tied_unit (logits against the DeFINE "
            "unit's m-dim output for every vocabulary entry: full width, no parameters of its "
            "own, one pass of the unit over the vocabulary per training step)"
        },
    )


class DefineTransformerDecoder(TransformerDecoderBase):
    """fairseq's decoder with the output layer of ``--define-output-layer`` (models/output_layer.py)."""

    def build_output_projection(self, cfg, dictionary, embed_tokens):
        build_output_projection(self, cfg.define_output_layer, super().build_output_projection, cfg, dictionary,
                                embed_tokens)
        if self.output_form == "tied_unit":
            self.build_base_layers(cfg)  # fairseq's own build_output_projection ends with them

    def build_base_layers(self, cfg):
        for i in range(cfg.base_layers):  # as fairseq's build_output_projection ends
            self.layers.insert(((i + 1) * cfg.decoder.layers) // (cfg.base_layers + 1), BaseLayer(cfg))

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        check_adaptive_softmax_training(self, net_output[0])  # a criterion other than adaptive_loss
        return super().get_normalized_probs(net_output, log_probs, sample)


@register_model("define_transformer")
class DefineTransformerModel(InferenceTablesMixin, TransformerModel):
    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        # defaults come from the architecture functions, as for fairseq's transformer
        gen_parser_from_dataclass(parser, DefineConfig(), delete_default=True)
        gen_parser_from_dataclass(parser, DefineTransformerConfig(), delete_default=True)

    @classmethod
    def build_model(cls, args, task):
        define_base_architecture(args)
        check_settings(args, DefineConfig, DefineTransformerConfig)
        from fairseq.tasks.language_modeling import LanguageModelingTask

        if isinstance(task, LanguageModelingTask):
            raise DefineConfigError(
                f"{args.arch} is a translation model, but this command runs a language modeling task: "
                "use fairseq-generate / fairseq-validate with translation data (or a --arch of the "
                "language models: define_lstm_*, define_txl_*, define_transformer_lm_*)"
            )
        if args.encoder_embed_path or args.decoder_embed_path:
            raise DefineConfigError(
                "--encoder-embed-path/--decoder-embed-path load m-dim pretrained embeddings, "
                "which a DeFINE map (n-dim) cannot use; drop them or use --arch transformer"
            )
        # The map scales its n-dim table by sqrt(n); the unit's output enters unscaled.
        args.no_scale_embedding = True
        check_translation(args)
        configure_translation(args)
        # resolved once for the model: fairseq's build_model copies args into the config it
        # hands build_embedding (once per side); removed after, as args is saved with the model
        args.define_resolved_options = DefineOptions.from_config(args)
        try:
            model = super().build_model(args, task)
        finally:
            del args.define_resolved_options
        logger.info("output layer: %s (--define-output-layer)", DESCRIPTIONS[args.define_output_layer])
        log_parameter_distribution(model, args.arch)
        return model

    def define_options(self):
        return self.args

    def stock_form(self, args):
        """fairseq's ``transformer`` computing what this model computes, for every output
        layer, shared or separate vocabularies (models/stock_form.py): each side's embedding
        as its table, the output layer as models/output_layer.py states it, every other
        weight copied. ``args``: the checkpoint's stored model config."""
        enc, dec = self.encoder, self.decoder
        shared = enc.embed_tokens is dec.embed_tokens
        weights = {"encoder.embed_tokens.weight": token_table(enc.embed_tokens)}  # [V_src, d]
        weights["decoder.embed_tokens.weight"] = (
            weights["encoder.embed_tokens.weight"] if shared else token_table(dec.embed_tokens)
        )
        output = stock_output(dec, weights["decoder.embed_tokens.weight"])
        weights.update(output.weights)
        tied = output.settings["share_decoder_input_output_embed"]
        ns = stock_namespace(
            args, TransformerModel, TranslationTask, arch="transformer", _name="transformer",
            no_scale_embedding=True, encoder_embed_path=None, decoder_embed_path=None, decoder_input_dim=dec.embed_dim,
            # fairseq ties the output to the decoder's input table whenever all embeddings are
            # shared; the untied and map-tied outputs keep two (equal) input tables instead
            share_all_embeddings=shared and tied, tie_adaptive_weights=False, **output.settings,
        )
        return ns, "translation", weights, ["encoder.embed_tokens.", "decoder.embed_tokens.", *output.consumed]

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return DefineTransformerDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", **kwargs):
        """fairseq's hub loading; the interface also scores given translations
        (``hub.score(sources, targets=...)``, :class:`TranslationHubInterface`) and exports
        the model to fairseq's own transformer (``hub.export(path)``)."""
        return from_pretrained(cls, TranslationHubInterface, model_name_or_path, checkpoint_file, data_name_or_path,
                               **kwargs)

    @classmethod
    def build_embedding(cls, args, dictionary, embed_dim, path=None):
        emb = DefineEmbedding(args.define_resolved_options, len(dictionary), dictionary.pad(), embed_dim)
        if emb.embedding_dim != embed_dim:
            raise DefineConfigError(
                f"the DeFINE unit outputs {emb.embedding_dim} dims but the Transformer's "
                f"embedding dim is {embed_dim}; set --define-out-dim to {embed_dim} (or leave "
                "it unset), and keep Reduce (drop --define-no-reduce) or set "
                f"--encoder-embed-dim/--decoder-embed-dim to {emb.embedding_dim}"
            )
        return emb


# -- named architectures ---------------------------------------------------------------
# Table 3's row (its numbers and small run: paper_tables.py) is Transformer base with the
# paper's NMT unit: this model's defaults, nothing of its own.

ARCHITECTURES = {
    "define_transformer": (
        "Transformer base with the paper's NMT DeFINE (Table 3's unit), m=d_model.",
        dict(define_map_dim=128, define_expand_dim=1024, define_depth=3)),
    "define_transformer_wmt_en_de": (
        "Transformer on WMT14 EN-DE, without checkpoint averaging (Table 3): Transformer + DeFINE", {}),
    "define_transformer_tiny": (
        "A small model for CPU demos and tests (3+3 layers, d=128, n=32, k=256, N=3, the paper's unit) "
        "in Table 3's form (the d-wide untied output layer): study 1's DeFINE arm that beats the paper's "
        "baseline form at equal parameters (docs/studies.md).",
        dict(encoder_embed_dim=128, encoder_ffn_embed_dim=512, encoder_layers=3, encoder_attention_heads=4,
             decoder_embed_dim=128, decoder_ffn_embed_dim=512, decoder_layers=3, decoder_attention_heads=4,
             define_map_dim=32, define_expand_dim=256, define_depth=3, define_output_layer="untied")),
}


def define_base_architecture(args):
    """What a row leaves unset: the paper's NMT DeFINE (the ``define_transformer`` row), the
    other DeFINE settings' defaults, then fairseq's Transformer base."""
    implied_translation_form(args)
    fill_defaults(args, ARCHITECTURES["define_transformer"][1])
    fill_defaults(args, {f.name: f.default for f in fields(DefineConfig) + fields(DefineTransformerConfig)})
    base_architecture(args)


register_architectures("define_transformer", ARCHITECTURES, base=define_base_architecture,
                       prepare=implied_translation_form)
