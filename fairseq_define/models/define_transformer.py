"""Transformer NMT with DeFINE token embeddings (paper section 4.2, Table 3).

Encoder and decoder embeddings are DeFINE units on n-dim map tables. The decoder output is
projected d_model -> n and scored against the decoder's n-dim map table, which is where the
parameter saving over a standard Transformer comes from. ``--define-transform projective``
gives the like-for-like baseline (same n, one linear map n -> d_model).
"""

import logging
from dataclasses import fields

from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models import register_model
from fairseq.models.transformer import TransformerModel, base_architecture

from ..modules.config_bounds import check_settings
from ..modules.define_config import DefineConfig, DefineConfigError
from ..modules.define_embedding import DefineEmbedding
from ..modules.define_options import DefineOptions
from ..param_report import log_parameter_distribution
from .hub_interface import TranslationHubInterface
from .inference_tables import InferenceTablesMixin
from .named_architectures import fill_defaults, register_architectures

logger = logging.getLogger(__name__)


@register_model("define_transformer")
class DefineTransformerModel(InferenceTablesMixin, TransformerModel):
    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        # defaults come from the architecture functions, as for fairseq's transformer
        gen_parser_from_dataclass(parser, DefineConfig(), delete_default=True)

    @classmethod
    def build_model(cls, args, task):
        define_base_architecture(args)
        check_settings(args, DefineConfig)
        from fairseq.tasks.language_modeling import LanguageModelingTask

        if isinstance(task, LanguageModelingTask):
            raise DefineConfigError(
                f"{args.arch} is a translation model, but this command runs a language modeling task: "
                "use fairseq-generate / fairseq-validate with translation data (or a --arch of the "
                "language models: define_lstm_*, define_txl_*)"
            )
        if args.encoder_embed_path or args.decoder_embed_path:
            raise DefineConfigError(
                "--encoder-embed-path/--decoder-embed-path load m-dim pretrained embeddings, "
                "which a DeFINE map (n-dim) cannot use; drop them or use --arch transformer"
            )
        if str(args.define_map) != "standard":
            raise DefineConfigError(
                "--define-map adaptive is for the language models (tied to an adaptive "
                "softmax); define_transformer ties its output to a standard n-dim table: "
                "drop --define-map adaptive"
            )
        # The map scales its n-dim table by sqrt(n); the unit's output enters unscaled.
        args.no_scale_embedding = True
        # Output layer tied at n: d_model -> n projection, logits against the map table.
        args.share_decoder_input_output_embed = True
        args.decoder_output_dim = args.define_map_dim
        model = super().build_model(args, task)
        log_parameter_distribution(model, args.arch)
        return model

    def define_options(self):
        return self.args

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", **kwargs):
        """fairseq's hub loading; the interface also scores given translations
        (``hub.score(sources, targets=...)``, :class:`TranslationHubInterface`)."""
        from fairseq import hub_utils

        x = hub_utils.from_pretrained(
            model_name_or_path, checkpoint_file, data_name_or_path, archive_map=cls.hub_models(), **kwargs
        )
        return TranslationHubInterface(x["args"], x["task"], x["models"])

    @classmethod
    def build_embedding(cls, args, dictionary, embed_dim, path=None):
        emb = DefineEmbedding(DefineOptions.from_config(args), len(dictionary), dictionary.pad(), embed_dim)
        if emb.embedding_dim != embed_dim:
            raise DefineConfigError(
                f"the DeFINE unit outputs {emb.embedding_dim} dims but the Transformer's "
                f"embedding dim is {embed_dim}; set --define-out-dim to {embed_dim} (or leave "
                "it unset), and keep Reduce (drop --define-no-reduce) or set "
                f"--encoder-embed-dim/--decoder-embed-dim to {emb.embedding_dim}"
            )
        return emb


# -- named architectures ---------------------------------------------------------------

ARCHITECTURES = {
    "define_transformer": ("Transformer base with the paper's NMT DeFINE: n=128, k=1024, N=3, m=d_model.",
                           dict(define_map_dim=128, define_expand_dim=1024, define_depth=3)),
    "define_transformer_wmt_en_de": ("Table 3: Transformer base + DeFINE (n=128, k=1024, m=512, N=3).", {}),
    "define_transformer_tiny": (
        "A small model for CPU demos and tests (3+3 layers, d=128, n=32, k=256, N=3, the paper's unit): "
        "study 1's best DeFINE arm on Multi30k val (docs/studies.md).",
        dict(encoder_embed_dim=128, encoder_ffn_embed_dim=512, encoder_layers=3, encoder_attention_heads=4,
             decoder_embed_dim=128, decoder_ffn_embed_dim=512, decoder_layers=3, decoder_attention_heads=4,
             define_map_dim=32, define_expand_dim=256, define_depth=3)),
}


def define_base_architecture(args):
    """What a row leaves unset: the paper's NMT DeFINE (the ``define_transformer`` row), the
    other DeFINE settings' defaults, then fairseq's Transformer base."""
    fill_defaults(args, ARCHITECTURES["define_transformer"][1])
    fill_defaults(args, {f.name: f.default for f in fields(DefineConfig)})
    base_architecture(args)


register_architectures("define_transformer", ARCHITECTURES, base=define_base_architecture)
