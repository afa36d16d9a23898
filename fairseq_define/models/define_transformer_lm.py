"""fairseq's decoder-only Transformer language model (``transformer_lm``) with a DeFINE input
layer (paper sections 3.4 and 4.1): everything else is fairseq's own model, its task
(``--task language_modeling``), criteria (``cross_entropy``, ``adaptive_loss``) and tools.

The token embedding is a map of width n (``--define-map-dim``) followed by the DeFINE unit
n -> m (m = ``--decoder-input-dim``, d_model unless set). The map is a standard n-dim table,
or with ``--adaptive-input`` fairseq's adaptive input of width n (bands n / factor^i, each
projected to n; Baevski & Auli 2019). The output is tied at the map width, as the paper ties
it: the decoder's features are projected d -> n and scored against the n-dim table, or by
fairseq's adaptive softmax tied to the adaptive map (tables and band projections, as in the
Table 2 setup). ``--define-output-layer`` chooses another output: ``untied`` keeps a layer
of its own at the decoder's width d (a d x vocabulary table, or with ``--adaptive-input``
fairseq's adaptive softmax at d with the map's bands, untied), ``tied_unit`` scores against
the unit's d-dim outputs for the whole vocabulary (define_transformer's third form).
``--define-transform projective`` is the baseline at the same n: one linear n -> m instead of
the unit.
"""

import math
from dataclasses import dataclass, field, fields

from fairseq import utils
from fairseq.models import register_model
from fairseq.models.transformer import TransformerDecoder
from fairseq.models.transformer.transformer_decoder import Linear
from fairseq.models.transformer_lm import (
    TransformerLanguageModel,
    TransformerLanguageModelConfig,
    base_lm_architecture,
    transformer_lm_baevski_wiki103,
)

from ..modules.config_bounds import check_dropouts
from ..modules.define.config import DEFINE_TRANSFORM_CHOICES, DefineConfig, DefineConfigError, parse_int_list
from ..modules.define.embedding import DefineEmbedding
from ..modules.define.options import DefineOptions
from ..modules.lm.adaptive_io import ProjectedAdaptiveInput
from ..param_report import log_parameter_distribution
from .hub_interface import LanguageModelHubInterface, from_pretrained
from .inference_tables import InferenceTablesMixin
from .named_architectures import fill_defaults, register_architectures
from .output_layer import (
    OUTPUT_LAYER_CHOICES,
    build_output_projection,
    check_adaptive_softmax_training,
    check_language_model,
    configure_language_model,
    lm_form,
    stock_output,
)
from .stock_config import dataclass_keys
from .stock_form import token_table
from .transformer_xl import TABLE_2_MAP_DIMS, TABLE_2_UNIT


@dataclass
class DefineTransformerLMConfig(TransformerLanguageModelConfig, DefineConfig):
    define_map_dim: int = field(
        default=128,
        metadata={"help": "n: width of the map (the first band with --adaptive-input) and of the tied output"},
    )
    define_transform: DEFINE_TRANSFORM_CHOICES = field(
        default="define",
        metadata={"help": "define (the paper's unit; its ablations: see define_transformer) or "
                  "projective (one linear n -> m: the baseline at the same n)"},
    )
    define_output_layer: OUTPUT_LAYER_CHOICES = field(
        default="tied_map",
        metadata={"help": "the output layer: tied_map (d -> n projection scored against the n-dim map, or "
                  "with --adaptive-input the adaptive softmax tied to the adaptive map: the paper's LM "
                  "tying), untied (a layer of its own at the decoder's width: a d x vocabulary table, or "
                  "with --adaptive-input fairseq's adaptive softmax at d with the map's bands unless "
                  "--adaptive-softmax-cutoff says otherwise), or tied_unit (logits against the DeFINE "
                  "unit's d-dim output for every vocabulary entry, a full softmax: one pass of the unit "
                  "over the vocabulary per training step)"},
    )


@register_model("define_transformer_lm", dataclass=DefineTransformerLMConfig)
class DefineTransformerLanguageModel(InferenceTablesMixin, TransformerLanguageModel):
    @classmethod
    def hub_models(cls):
        return {}  # fairseq's transformer_lm downloads are models without DeFINE

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", **kwargs):
        """fairseq's hub loading; the interface also exports the model to fairseq's own
        transformer_lm (``hub.export(path)``)."""
        return from_pretrained(cls, LanguageModelHubInterface, model_name_or_path, checkpoint_file,
                               data_name_or_path, **kwargs)

    def __init__(self, decoder, args=None):
        super().__init__(decoder)
        self.args = args  # the DeFINE settings, read when a checkpoint is loaded

    @classmethod
    def build_model(cls, args, task):
        check_dropouts(args)
        _check_settings(args, task)
        options = DefineOptions.from_config(args)  # once for the model
        if options.transform == "none":
            raise DefineConfigError(
                "--define-transform none leaves an n-dim map where the decoder reads d dims: use "
                "--arch transformer_lm for the model without DeFINE, or projective for the baseline at n"
            )
        if args.decoder_layers_to_keep:  # as fairseq's transformer_lm
            args.decoder_layers = len(args.decoder_layers_to_keep.split(","))
        if getattr(args, "max_target_positions", None) is None:
            args.max_target_positions = getattr(args, "tokens_per_sample", None) or 1024
        args.no_scale_embedding = True  # the map scales itself by sqrt(n); the unit's output enters unscaled
        configure_language_model(args)
        dictionary = task.source_dictionary
        embed = cls.build_embedding(args, dictionary, args.decoder_input_dim, options=options)
        model = cls(DefineTransformerLMDecoder(args, task.target_dictionary, embed), args)
        log_parameter_distribution(model, getattr(args, "arch", None) or getattr(args, "_name", None))
        return model

    @classmethod
    def build_embedding(cls, args, dictionary, embed_dim, path=None, *, options: DefineOptions):
        """Map (n-dim table or adaptive input of width n) -> DeFINE unit n -> ``embed_dim``,
        with the model's DeFINE settings (``options``)."""
        if args.adaptive_input:
            cutoff = utils.eval_str_list(args.adaptive_input_cutoff, type=int)
            n = args.define_map_dim
            adaptive = ProjectedAdaptiveInput(
                len(dictionary),
                dictionary.pad(),
                n,
                args.adaptive_input_factor,
                n,
                cutoff,
                flags=("--adaptive-input-cutoff", "--adaptive-input-factor"),
            )
            # sqrt(n): as fairseq scales its (adaptive) token embeddings by sqrt of their width
            emb = DefineEmbedding(options, len(dictionary), dictionary.pad(), embed_dim, adaptive, math.sqrt(n))
        else:
            emb = DefineEmbedding(options, len(dictionary), dictionary.pad(), embed_dim)
        if emb.embedding_dim != embed_dim:
            raise DefineConfigError(
                f"the DeFINE unit outputs {emb.embedding_dim} dims but --decoder-input-dim is {embed_dim}; "
                "leave --define-out-dim unset (or equal to it) and drop --define-no-reduce"
            )
        return emb

    def define_options(self):
        return self.args

    def stock_form(self, cfg):
        """fairseq's ``transformer_lm`` computing what this model computes (models/stock_form.py):
        the embedding as its table, the output layer as models/output_layer.py states it (the
        adaptive softmax tied to the adaptive map becomes fairseq's untied one with the same
        weights), every other weight copied. ``cfg``: the checkpoint's stored model config."""
        dec = self.decoder
        weights = {"decoder.embed_tokens.weight": token_table(dec.embed_tokens)}  # [V, m]
        output = stock_output(dec, weights["decoder.embed_tokens.weight"])
        weights.update(output.weights)
        model_cfg = {k: v for k, v in dict(cfg).items() if k in dataclass_keys(TransformerLanguageModelConfig)}
        model_cfg.update(adaptive_input=False, adaptive_input_cutoff=None, tie_adaptive_weights=False,
                         tie_adaptive_proj=False, character_embeddings=False, no_scale_embedding=True,
                         **output.settings, _name="transformer_lm",
                         decoder_input_dim=weights["decoder.embed_tokens.weight"].size(1))
        return model_cfg, "language_modeling", weights, ["decoder.embed_tokens.", *output.consumed]


class DefineTransformerLMDecoder(TransformerDecoder):
    """fairseq's TransformerDecoder whose output layer is tied to the DeFINE map at n."""

    def __init__(self, args, dictionary, embed_tokens):
        # read here: fairseq hands build_output_projection a TransformerConfig, which drops
        # the plugin's settings
        self.output_form = lm_form(args)
        super().__init__(args, dictionary, embed_tokens, no_encoder_attn=True)
        if self.project_out_dim is None and self.embed_dim != self.output_embed_dim:
            # fairseq leaves d -> n out when the adaptive softmax is tied (its tied setup has
            # n = d); here the tied softmax reads n-dim features
            self.project_out_dim = Linear(self.embed_dim, self.output_embed_dim, bias=False)

    def build_output_projection(self, args, dictionary, embed_tokens):
        # tied_map: the adaptive softmax ties to the adaptive map inside the DeFINE embedding;
        # the standard output ties to embed_tokens.weight, the n-dim map table. untied: fairseq
        # builds its own d-wide layer and reads neither
        tied_to = embed_tokens.map if args.adaptive_input and self.output_form != "tied_unit" else embed_tokens
        build_output_projection(self, self.output_form, super().build_output_projection, args, dictionary, tied_to)

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        check_adaptive_softmax_training(self, net_output[0])  # a criterion other than adaptive_loss
        return super().get_normalized_probs(net_output, log_probs, sample)


def _check_settings(args, task) -> None:
    """One line for each setting this model cannot honour, naming the fix."""
    from fairseq.tasks.translation import TranslationTask

    from ..tasks.contiguous_lm import ContiguousLMTask

    if isinstance(task, TranslationTask):
        raise DefineConfigError(
            "define_transformer_lm is a language model, but this command runs a translation task: "
            "use --task language_modeling on data binarized with fairseq-preprocess --only-source"
        )
    if isinstance(task, ContiguousLMTask):
        raise DefineConfigError(
            "define_transformer_lm reads blocks of --tokens-per-sample tokens without state between "
            "them: use --task language_modeling (contiguous_lm is for define_txl_* and define_lstm_*)"
        )
    if args.character_embeddings:
        raise DefineConfigError("--character-embeddings replaces the token table, which DeFINE's map is: drop it")
    parse_int_list(args.adaptive_input_cutoff, "--adaptive-input-cutoff")  # whole numbers, not truncated
    parse_int_list(args.adaptive_softmax_cutoff, "--adaptive-softmax-cutoff")
    if args.adaptive_input and not args.adaptive_input_cutoff:
        raise DefineConfigError("--adaptive-input needs --adaptive-input-cutoff (e.g. 20000,60000)")
    check_language_model(args, {f.name: f.default for f in fields(DefineTransformerLMConfig)})


# -- named architectures ---------------------------------------------------------------
# WIKI103 rows are fairseq's transformer_lm_wiki103 (16 layers, d 1024, adaptive input and
# softmax 20000,60000 factor 4, tied) with its adaptive input at width n and a DeFINE unit
# (Table 2's N=3, k=4096; m = d) or the projective baseline; n as Table 2's rows. Not a table
# of the paper (paper_tables.py: TABLE_TLM).

def _wiki103(n: int, transform: str) -> tuple:
    """(docstring, settings) of the WikiText-103 row at ``n`` (one of Table 2's): fairseq's
    transformer_lm_wiki103 (``_wiki103_base`` fills the rest) with its adaptive input at width
    n and Table 2's unit (``define``) or one linear n -> d (``projective``)."""
    if n not in TABLE_2_MAP_DIMS:
        raise ValueError(f"n={n} is not one of Table 2's rows {TABLE_2_MAP_DIMS}")
    if transform == "define":
        doc = (f"transformer_lm_wiki103 with DeFINE: adaptive input n={n} (factor 4), Table 2's unit, m=1024, "
               f"adaptive softmax tied at n={n}")
    else:
        doc = (f"transformer_lm_wiki103 with adaptive input n={n} (factor 4) and one linear n -> 1024, adaptive "
               f"softmax tied at n={n}: the baseline of the DeFINE row at the same n")
    return doc, dict(
        define_map_dim=n, **(TABLE_2_UNIT if transform == "define" else dict(define_transform="projective"))
    )


WIKI103_ARCHITECTURES = {
    "define_transformer_lm_wiki103": _wiki103(128, "define"),  # n of the Table 2 row that Table 5 compresses
    "define_transformer_lm_wiki103_n384": _wiki103(384, "define"),
    "define_transformer_lm_wiki103_n256": _wiki103(256, "define"),
    "define_transformer_lm_wiki103_n128": _wiki103(128, "define"),
    "define_transformer_lm_wiki103_n64": _wiki103(64, "define"),
    "define_transformer_lm_wiki103_projective_n384": _wiki103(384, "projective"),
    "define_transformer_lm_wiki103_projective_n256": _wiki103(256, "projective"),
    "define_transformer_lm_wiki103_projective_n128": _wiki103(128, "projective"),
    "define_transformer_lm_wiki103_projective_n64": _wiki103(64, "projective"),
}
ARCHITECTURES = {
    "define_transformer_lm_small": (
        "For WikiText-2 on a CPU: 4 layers, d=256 (4 heads), inner 1024, adaptive input n=128 (cutoffs "
        "4000,20000, factor 4), DeFINE N=3, k=1024, adaptive softmax tied at n",
        dict(decoder_layers=4, decoder_embed_dim=256, decoder_attention_heads=4, decoder_ffn_embed_dim=1024,
             adaptive_input=True, adaptive_input_cutoff="4000,20000", define_map_dim=128, define_expand_dim=1024,
             define_depth=3)),
    "define_transformer_lm_tiny": (
        "For tests: 2 layers, d=32 (2 heads), inner 64, a standard n=16 table, DeFINE N=3, k=64",
        dict(decoder_layers=2, decoder_embed_dim=32, decoder_attention_heads=2, decoder_ffn_embed_dim=64,
             define_map_dim=16, define_expand_dim=64, define_depth=3)),
}


def _wiki103_base(args):
    """fairseq's transformer_lm_wiki103 defaults; the softmax bands follow the map's
    (``--adaptive-input-cutoff`` alone changes both: the softmax is tied to the map)."""
    if getattr(args, "adaptive_input_cutoff", None) is not None:
        fill_defaults(args, {"adaptive_softmax_cutoff": args.adaptive_input_cutoff})
    transformer_lm_baevski_wiki103(args)


register_architectures("define_transformer_lm", WIKI103_ARCHITECTURES, base=_wiki103_base)
register_architectures("define_transformer_lm", ARCHITECTURES, base=base_lm_architecture)
