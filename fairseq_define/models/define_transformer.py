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

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models import register_model
from fairseq.models.transformer import TransformerConfig, TransformerDecoderBase, TransformerModel, base_architecture
from fairseq.modules import BaseLayer

from ..modules.config_bounds import check_settings
from ..modules.define.config import DefineConfig, DefineConfigError
from ..modules.define.embedding import DefineEmbedding
from ..modules.define.options import DefineOptions
from ..modules.define.unit_tied_output import UnitTiedOutputProjection
from ..param_report import log_parameter_distribution
from .hub_interface import TranslationHubInterface, from_pretrained
from .inference_tables import InferenceTablesMixin
from .named_architectures import fill_defaults, register_architectures

logger = logging.getLogger(__name__)

OUTPUT_LAYER_CHOICES = ChoiceEnum(["untied", "tied_map", "tied_unit"])
# what a checkpoint saved before --define-output-layer existed was built with
IMPLIED_OUTPUT_LAYER = "tied_map"


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


def implied_output_layer(args) -> None:
    """Before a row fills its defaults: a config without the setting whose fairseq flags
    already describe the map-tied output (the sharing flag on, the decoder's output width n)
    builds that form. Every checkpoint saved before the setting existed says so (that code
    set both flags when it built the model), and loads as it was built."""
    if (
        getattr(args, "define_output_layer", None) is None
        and getattr(args, "share_decoder_input_output_embed", False)
        and getattr(args, "decoder_output_dim", None) is not None
        and args.decoder_output_dim == getattr(args, "define_map_dim", None)
    ):
        args.define_output_layer = IMPLIED_OUTPUT_LAYER


class DefineTransformerDecoder(TransformerDecoderBase):
    """fairseq's decoder with the output layer of ``--define-output-layer``."""

    def build_output_projection(self, cfg, dictionary, embed_tokens):
        form = cfg.define_output_layer
        if form == "tied_unit":
            self.output_projection = UnitTiedOutputProjection(embed_tokens)
            self.build_base_layers(cfg)
            return
        # untied under --share-all-embeddings: fairseq has set the sharing flag for the
        # output too; here only the encoder and decoder inputs share the DeFINE embedding
        self.share_input_output_embed = form == "tied_map"
        super().build_output_projection(cfg, dictionary, embed_tokens)

    def build_base_layers(self, cfg):
        for i in range(cfg.base_layers):  # as fairseq's build_output_projection ends
            self.layers.insert(((i + 1) * cfg.decoder.layers) // (cfg.base_layers + 1), BaseLayer(cfg))


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
        check_output_layer(args)
        if args.define_output_layer == "tied_map":
            # d_model -> n projection, logits against the decoder's map table
            args.share_decoder_input_output_embed = True
            args.decoder_output_dim = args.define_map_dim
        elif args.define_output_layer == "tied_unit":
            args.share_decoder_input_output_embed = True
        # resolved once for the model: fairseq's build_model copies args into the config it
        # hands build_embedding (once per side); removed after, as args is saved with the model
        args.define_resolved_options = DefineOptions.from_config(args)
        try:
            model = super().build_model(args, task)
        finally:
            del args.define_resolved_options
        logger.info("output layer: %s (--define-output-layer)", OUTPUT_LAYER_HELP[args.define_output_layer])
        log_parameter_distribution(model, args.arch)
        return model

    def define_options(self):
        return self.args

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


OUTPUT_LAYER_HELP = {
    "untied": "untied, d_model x vocabulary (the paper's Table 3)",
    "tied_map": "tied to the n-dim map (d_model -> n projection)",
    "tied_unit": "tied to the DeFINE unit's outputs",
}


def check_output_layer(args) -> None:
    """The output form against fairseq's own flags, in one line each."""
    form = args.define_output_layer
    if form == "untied" and args.share_decoder_input_output_embed and not args.share_all_embeddings:
        raise DefineConfigError(
            "--share-decoder-input-output-embed ties the output layer to the decoder's input "
            "embedding, but --define-output-layer untied keeps a separate d_model x vocabulary "
            "layer: drop the flag, or choose --define-output-layer tied_map (tied at the map "
            "width n) or tied_unit (tied to the DeFINE unit's outputs)"
        )
    if form != "untied" and args.adaptive_softmax_cutoff:
        raise DefineConfigError(
            f"--adaptive-softmax-cutoff needs its own output layer; --define-output-layer {form} "
            "ties it to the DeFINE embedding: use --define-output-layer untied"
        )
    if form == "tied_unit" and args.decoder_output_dim != args.decoder_embed_dim:
        raise DefineConfigError(
            f"--define-output-layer tied_unit scores the decoder's {args.decoder_embed_dim}-dim "
            f"states against the unit's outputs, but --decoder-output-dim is {args.decoder_output_dim}: "
            "drop --decoder-output-dim"
        )
    if form == "tied_map" and args.decoder_output_dim not in (args.decoder_embed_dim, args.define_map_dim):
        raise DefineConfigError(
            f"--define-output-layer tied_map projects to the map width n = {args.define_map_dim}, "
            f"but --decoder-output-dim is {args.decoder_output_dim}: drop --decoder-output-dim"
        )


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
    implied_output_layer(args)
    fill_defaults(args, ARCHITECTURES["define_transformer"][1])
    fill_defaults(args, {f.name: f.default for f in fields(DefineConfig) + fields(DefineTransformerConfig)})
    base_architecture(args)


register_architectures("define_transformer", ARCHITECTURES, base=define_base_architecture,
                       prepare=implied_output_layer)
