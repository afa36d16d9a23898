"""The output layer of the DeFINE Transformers (``--define-output-layer``): for
``define_transformer`` (translation) and ``define_transformer_lm``, which choice a config makes,
the settings each choice refuses, the fairseq flags that build it, the module it builds, and
the output layer of stock fairseq that computes the same (docs/define_unit.md, "The
translation model's output layer"; docs/inference.md, "Deploy").

    untied     a layer of its own at the decoder's width d: a d x V table, or fairseq's
               adaptive softmax at d (the paper's Table 3 model; the translation default)
    tied_map   the decoder's features projected d -> n and scored against the n-dim map, or
               fairseq's adaptive softmax tied to the adaptive map (the paper's LM tying,
               Tables 1-2; the language model's default)
    tied_unit  scored against the DeFINE unit's outputs for every vocabulary entry
               (modules/define/unit_tied_output.py): full width, no parameters of its own

In stock fairseq: ``untied`` is copied, ``tied_map`` becomes one d x V matrix (the projection
folded into the map table) or fairseq's untied adaptive softmax with the same weights,
``tied_unit`` the unit's table tied to the decoder's input table, as fairseq ties.
"""

from typing import Callable, NamedTuple

import torch
from fairseq.dataclass import ChoiceEnum
from fairseq.modules.adaptive_softmax import TiedHeadModule, TiedLinear

from ..errors import UserError
from ..modules.define.config import DefineConfigError
from ..modules.define.unit_tied_output import UnitTiedOutputProjection
from .stock_form import NotExportable

CHOICES = ("untied", "tied_map", "tied_unit")
OUTPUT_LAYER_CHOICES = ChoiceEnum(list(CHOICES))

# what the training log says of each
DESCRIPTIONS = {
    "untied": "untied, d_model x vocabulary (the paper's Table 3)",
    "tied_map": "tied to the n-dim map (d_model -> n projection)",
    "tied_unit": "tied to the DeFINE unit's outputs",
}

# the language model's choice where a stored config has none (it had no other before the setting)
LM_DEFAULT = "tied_map"
# what a translation checkpoint saved before the setting existed was built with
IMPLIED_TRANSLATION_FORM = "tied_map"


# -- which choice ------------------------------------------------------------------------


def implied_translation_form(args) -> None:
    """Before a translation row fills its defaults: a config without the setting whose fairseq
    flags already describe the map-tied output (the sharing flag on, the decoder's output width
    n) builds that form. Every checkpoint saved before the setting existed says so (that code
    set both flags when it built the model), and loads as it was built."""
    if (
        getattr(args, "define_output_layer", None) is None
        and getattr(args, "share_decoder_input_output_embed", False)
        and getattr(args, "decoder_output_dim", None) is not None
        and args.decoder_output_dim == getattr(args, "define_map_dim", None)
    ):
        args.define_output_layer = IMPLIED_TRANSLATION_FORM


def lm_form(args) -> str:
    """The language model's choice; ``LM_DEFAULT`` for a config saved before the setting existed
    (read, not set: a stored config is a struct that takes no new keys)."""
    return getattr(args, "define_output_layer", None) or LM_DEFAULT


# -- what each choice refuses ------------------------------------------------------------


def check_translation(args) -> None:
    """define_transformer's choice against fairseq's own flags, in one line each."""
    form = args.define_output_layer
    if form == "untied" and args.share_decoder_input_output_embed and not args.share_all_embeddings:
        # not under --share-all-embeddings: fairseq's build sets the sharing flag itself there
        # and saves it with the model, so a stored config cannot tell it from the user's; the
        # untied output keeps a layer of its own either way (build_output_projection)
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


def check_language_model(args, defaults: dict) -> None:
    """define_transformer_lm's choice against fairseq's own flags, in one line each
    (``defaults``: the model config's defaults, which a form replaces without a word)."""
    form = lm_form(args)
    if form == "tied_unit":
        if args.adaptive_softmax_cutoff:
            raise DefineConfigError(
                "--define-output-layer tied_unit scores a full softmax against the unit's outputs: drop "
                "--adaptive-softmax-cutoff (and use --criterion cross_entropy), or choose --define-output-layer "
                "untied for an adaptive softmax of its own at d"
            )
        out_dim = args.decoder_output_dim or args.decoder_embed_dim
        in_dim = args.decoder_input_dim or args.decoder_embed_dim
        if out_dim != in_dim:
            raise DefineConfigError(
                f"--define-output-layer tied_unit scores the decoder's {out_dim}-dim states against the unit's "
                f"{in_dim}-dim outputs: drop --decoder-output-dim (or make it --decoder-input-dim)"
            )
    elif form == "tied_map":
        _check_lm_tied_map(args, defaults)
    else:  # untied
        tied = [flag for flag, key in (("--share-decoder-input-output-embed", "share_decoder_input_output_embed"),
                                       ("--tie-adaptive-weights", "tie_adaptive_weights"),
                                       ("--tie-adaptive-proj", "tie_adaptive_proj")) if getattr(args, key, False)]
        if tied:
            raise DefineConfigError(
                f"{tied[0]} ties the output layer, but --define-output-layer untied keeps one of its own: drop "
                f"{' and '.join(tied)}, or use --define-output-layer tied_map (the output tied to the map at n)"
            )


def check_adaptive_softmax_training(decoder, features) -> None:
    """A criterion that trains through log-probabilities over the whole vocabulary
    (``get_normalized_probs``: cross_entropy, label_smoothed_cross_entropy) on fairseq's
    adaptive softmax, whose ``get_log_prob`` computes them in place for inference: the first
    backward ended in an autograd RuntimeError. --criterion adaptive_loss trains it on the
    targets' bands. Checked where the log-probabilities are asked for in training (a model
    does not know its criterion when it is built); evaluation and inference pass."""
    softmax = getattr(decoder, "adaptive_softmax", None)
    if softmax is not None and decoder.training and torch.is_grad_enabled() and features.requires_grad:
        cutoff = ",".join(str(c) for c in softmax.cutoff[:-1])  # fairseq appends the vocabulary size
        raise UserError(
            f"an adaptive softmax (--adaptive-softmax-cutoff {cutoff}) trains through --criterion adaptive_loss: add "
            "it (this criterion asks for log-probabilities over the whole vocabulary, which fairseq's adaptive "
            "softmax computes for inference only)"
        )


def _check_lm_tied_map(args, defaults: dict) -> None:
    """tied_map scores the decoder's features at the map width n, in the adaptive map's own bands
    and factor (:func:`configure_language_model` sets them): a --decoder-output-dim,
    --adaptive-softmax-cutoff or --adaptive-softmax-factor it would replace is refused, not
    dropped. An unset one reads as its default (d for the output width, or the config's
    default), which the form replaces without a word."""
    n, out_dim = args.define_map_dim, args.decoder_output_dim
    if out_dim not in (None, n, args.decoder_embed_dim, defaults["decoder_output_dim"]):
        raise DefineConfigError(
            f"--decoder-output-dim {out_dim} does not apply to --define-output-layer tied_map: its features are "
            f"projected to the map width n={n} (--define-map-dim) and scored against the map; drop it, or use "
            "--define-output-layer untied for an output layer of its own"
        )
    factor, input_factor = args.adaptive_softmax_factor, args.adaptive_input_factor
    if args.adaptive_input and factor not in (None, input_factor, defaults["adaptive_softmax_factor"]):
        raise DefineConfigError(
            f"--adaptive-softmax-factor {factor} differs from --adaptive-input-factor {input_factor}: the softmax is "
            "tied to the adaptive map, so it takes the map's factor; drop --adaptive-softmax-factor (or set "
            "--adaptive-input-factor), or use --define-output-layer untied"
        )
    if not args.adaptive_softmax_cutoff:
        return
    if not args.adaptive_input:
        raise DefineConfigError(
            "--adaptive-softmax-cutoff without --adaptive-input: the output is tied to the n-dim map table; "
            "add --adaptive-input --adaptive-input-cutoff (the same bands) for an adaptive map and softmax"
        )
    if str(args.adaptive_softmax_cutoff) != str(args.adaptive_input_cutoff):
        raise DefineConfigError(
            f"--adaptive-softmax-cutoff {args.adaptive_softmax_cutoff} differs from --adaptive-input-cutoff "
            f"{args.adaptive_input_cutoff}: the softmax is tied to the adaptive map, so it takes the map's "
            "bands; drop --adaptive-softmax-cutoff"
        )


# -- the fairseq flags that build each choice --------------------------------------------


def configure_translation(args) -> None:
    """The flags fairseq's Transformer builds ``args.define_output_layer`` from."""
    if args.define_output_layer == "tied_map":
        # d_model -> n projection, logits against the decoder's map table
        args.share_decoder_input_output_embed = True
        args.decoder_output_dim = args.define_map_dim
    elif args.define_output_layer == "tied_unit":
        args.share_decoder_input_output_embed = True


def configure_language_model(args) -> None:
    """The flags fairseq's transformer_lm builds the language model's choice from."""
    form = lm_form(args)
    if form == "tied_map":
        args.decoder_output_dim = args.define_map_dim  # features d -> n, scored against the n-dim map
        if args.adaptive_input:  # fairseq's adaptive softmax, tied to the adaptive map
            args.adaptive_softmax_cutoff = args.adaptive_input_cutoff
            args.adaptive_softmax_factor = args.adaptive_input_factor
            args.tie_adaptive_weights = args.tie_adaptive_proj = True
        else:
            args.share_decoder_input_output_embed = True
    elif form == "untied":
        if args.adaptive_input and not args.adaptive_softmax_cutoff:
            args.adaptive_softmax_cutoff = args.adaptive_input_cutoff  # the map's bands, at d
        args.tie_adaptive_weights = args.tie_adaptive_proj = False
        args.share_decoder_input_output_embed = False
    else:  # tied_unit: a full softmax against the unit's outputs, no table of its own
        args.share_decoder_input_output_embed = True


# -- the module --------------------------------------------------------------------------


def build_output_projection(decoder, form: str, fairseq_build: Callable, cfg, dictionary, embed_tokens) -> None:
    """``decoder``'s output layer of ``form`` (recorded as ``decoder.output_form``):
    tied_unit's projection here, the others by fairseq's own ``fairseq_build`` (the decoder
    class's build_output_projection) from the flags the configure functions set.
    ``embed_tokens``: what a tied output reads, the DeFINE embedding (its ``weight`` is the
    n-dim map table) or an adaptive map."""
    decoder.output_form = form
    if form == "tied_unit":
        decoder.output_projection = UnitTiedOutputProjection(embed_tokens)  # [B, T, d] -> [B, T, V]
        return
    if form == "untied":
        # under --share-all-embeddings fairseq has set the sharing flag for the output too; only
        # the encoder's and decoder's inputs share the DeFINE embedding then
        decoder.share_input_output_embed = False
    fairseq_build(cfg, dictionary, embed_tokens)


# -- the stock fairseq form --------------------------------------------------------------


class StockOutput(NamedTuple):
    """The output layer of a stock Transformer decoder that computes what a DeFINE one does."""

    weights: dict  # stock name -> tensor
    settings: dict  # the stock model's output flags
    consumed: list  # prefixes of the DeFINE weights folded into ``weights``


def fold(table: torch.Tensor, projection: torch.Tensor) -> torch.Tensor:
    """The output layer of features projected d -> n and scored against an n-dim table:
    (x P^T) M^T = x (M P)^T, so one [V, d] matrix M P (computed in float64)."""
    return (table.double() @ projection.double()).to(table.dtype)  # [V, n] x [n, d] -> [V, d]


@torch.no_grad()
def untied_adaptive_softmax(asm, prefix: str) -> dict:
    """The weights of fairseq's untied AdaptiveSoftmax computing what ``asm`` (fairseq's,
    tied to an adaptive input or not) computes: the head's tied word rows and class rows in one
    matrix, each tail band's projection and table as plain linear layers."""

    def linear_weight(m):
        if isinstance(m, TiedLinear):
            return (m.weight.t() if m.transpose else m.weight).detach().clone()
        if isinstance(m, torch.nn.Linear):
            return m.weight.detach().clone()
        raise NotExportable(
            f"the adaptive softmax holds a {type(m).__name__}, which fairseq's untied one cannot express"
        )

    out = {}
    if isinstance(asm.head, TiedHeadModule):
        if not isinstance(asm.head.word_proj, TiedLinear):
            raise NotExportable("the adaptive softmax's first band is narrower than its input, which "
                                "fairseq's untied adaptive softmax cannot express")
        out[f"{prefix}.head.weight"] = torch.cat(
            [linear_weight(asm.head.word_proj), linear_weight(asm.head.class_proj)]
        )
    else:
        out[f"{prefix}.head.weight"] = linear_weight(asm.head)
    for i, band in enumerate(asm.tail):
        out[f"{prefix}.tail.{i}.0.weight"] = linear_weight(band[0])
        out[f"{prefix}.tail.{i}.2.weight"] = linear_weight(band[2])
    return out


@torch.no_grad()
def stock_output(decoder, input_table: torch.Tensor) -> StockOutput:
    """The stock form of ``decoder``'s output layer (a decoder this module built;
    ``input_table``: the [V, d] table its stock form reads as input embeddings)."""
    form = decoder.output_form
    settings = dict(share_decoder_input_output_embed=False, decoder_output_dim=decoder.output_embed_dim)
    if decoder.adaptive_softmax is not None:  # tied to the adaptive map, or untied: fairseq's untied one
        return StockOutput(untied_adaptive_softmax(decoder.adaptive_softmax, "decoder.adaptive_softmax"), settings,
                           ["decoder.adaptive_softmax."])
    if form == "tied_unit":  # the unit's table, tied to the decoder's input table as fairseq ties
        settings.update(share_decoder_input_output_embed=True)
        return StockOutput({"decoder.output_projection.weight": input_table}, settings, ["decoder.output_projection."])
    if form == "tied_map":  # d -> n projection times the n-dim map table
        weight = fold(decoder.embed_tokens.weight.detach(), decoder.project_out_dim.weight.detach())
        settings.update(decoder_output_dim=decoder.embed_dim)
        return StockOutput({"decoder.output_projection.weight": weight}, settings,
                           ["decoder.project_out_dim.", "decoder.output_projection."])
    return StockOutput({}, settings, [])  # untied: copied by name
