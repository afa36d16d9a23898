"""LayerDrop pruning (``encoder_layers_to_keep`` / ``decoder_layers_to_keep``) renumbers the
layers of the encoder's or decoder's own stack, and nothing else.

fairseq's prune_state_dict (fairseq/checkpoint_utils.py) took every key holding ``.layers.N.``
for a layer: the layers of a module inside the stack's embedding (a DeFINE unit's
``encoder.embed_tokens.unit.layers.0``) were renumbered or dropped with the Transformer's, and
a stack that was not pruned lost all its layers (``decoder_layers_to_keep`` alone dropped every
``encoder.layers.N``); the intact checkpoint was then called damaged. A layer number that is
not a number, or beyond the stack, kept nothing and was blamed on the file too. At training,
--encoder-layers-to-keep (parsed into a list, which the Transformer's build_model split as a
string: an AttributeError traceback) is refused in one line naming where it belongs: the
Transformer counts the layers to keep with ``kept_layer_count`` (fairseq/models/transformer/).
fairseq/checkpoint_utils.py calls ``pruned_state_dict`` for its loop.
"""

import re

from fairseq import UserError

__all__ = ["kept_layer_count", "pruned_state_dict"]


def pruned_state_dict(state_dict, encoder_layers_to_keep, decoder_layers_to_keep):
    """``state_dict`` with the layers of each pruned stack renumbered to those kept (the
    others dropped) and every other key as it was."""
    found = {side: _stack_layers(state_dict, side) for side in ("encoder", "decoder")}
    renumber = {}
    for side, keep in (("encoder", encoder_layers_to_keep), ("decoder", decoder_layers_to_keep)):
        if keep:
            kept = _layer_numbers(side, keep, found[side][1])
            renumber[side] = {str(n): str(i) for i, n in enumerate(kept)}
    pruned = {}
    for key, value in state_dict.items():
        for side, mapping in renumber.items():
            match = found[side][0].search(key)
            if match:
                if match.group(1) in mapping:
                    pruned[key[:match.start(1)] + mapping[match.group(1)] + key[match.end(1):]] = value
                break
        else:  # not a layer of a pruned stack: kept as it is
            pruned[key] = value
    return pruned


def kept_layer_count(layers_to_keep, side):
    """The number of layers a model built with ``layers_to_keep`` (an override's or a stored
    config's string '0,2') has on ``side``; fairseq-train's list is refused."""
    if isinstance(layers_to_keep, (list, tuple)):  # fairseq-train's parse: a model to train, not to prune
        raise UserError(
            "--{side}-layers-to-keep prunes a model trained with LayerDrop as it loads for inference: give it to "
            "fairseq-generate or -eval-lm as --model-overrides \"{{'{side}_layers_to_keep': '0,2'}}\"; to train fewer "
            "layers, lower --{side}-layers (LayerDrop itself: --{side}-layerdrop 0.2)".format(side=side))
    return len(_layer_numbers(side, layers_to_keep, None))


def _stack_layers(state_dict, side):
    """The pattern of the stack's own layers and their numbers: ``side.layers.N`` where the model
    keeps its stack there (fairseq's Transformer and the plugin's models), else fairseq's
    ``side...layers.N`` (RoBERTa's ``encoder.sentence_encoder.layers.N``)."""
    own = re.compile(r"^{}\.layers\.(\d+)\.".format(side))
    if not any(own.search(k) for k in state_dict):
        own = re.compile(r"^{}.*\.layers\.(\d+)\.".format(side))
    return own, {int(m.group(1)) for m in map(own.search, state_dict) if m}


def _layer_numbers(side, keep, present):
    flag = "--{}-layers-to-keep".format(side)
    try:
        numbers = sorted({int(x) for x in str(keep).split(",")})
    except ValueError:
        raise UserError("{} {!r} is not a list of layer numbers: give e.g. '0,2' (the layers of the {} to "
                        "keep, from 0)".format(flag, keep, side)) from None
    beyond = [n for n in numbers if n < 0 or present is not None and n not in present]
    if beyond or not numbers:
        raise UserError("{} {!r} names layer {}, and this checkpoint's {} has layers {}: give numbers among "
                        "them".format(flag, keep, beyond[0] if beyond else "none",
                                      side, _span(present) if present is not None else "from 0"))
    return numbers


def _span(present):
    return "0-{}".format(max(present)) if present and sorted(present) == list(range(max(present) + 1)) else (
        ", ".join(map(str, sorted(present))) or "none")
