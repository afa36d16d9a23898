"""A budget for every model fairseq builds: its sizes bounded, its parameters and position
tables counted and held to a limit before the model is built.

fairseq's own sizes had no upper bound, and a model is built from whatever config arrives: the
command line, --model-overrides, or the config stored in a checkpoint (a 15 KB file with
``decoder_ffn_embed_dim = 10**9`` made fairseq-generate ask for 256 GB; ``encoder_layers =
100000`` built until memory ran out; an adaptive factor below 1 grows every band instead of
shrinking it). fairseq/models/__init__.py's build_model, which every tool, the trainer and the
hub go through, now calls ``check_model_budget`` first: one line naming the setting and the
limit.

The count is exact, not a guess: every size is first held to its bound (size_bounds.py, the
one table), then the model's family counts what it will build, either with a counter written
for it (fairseq's transformers here: shared tables once, encoder and decoder layers each as
they are; a plugin registers its own with ``register_parameter_counter``) or, for any other
family, by building the model on the meta device, which holds shapes and no memory. A model
larger than the limit on purpose raises it with --max-model-parameters on the command line
(every tool that parses fairseq's model options, and the fairseq-define tools) or with
FAIRSEQ_DEFINE_MAX_PARAMETERS in the environment (the hub, and any other caller)
(docs/checkpoints.md).
"""

import argparse
import contextlib
import copy
import dataclasses
import logging
import math
import os
import sys
import threading
import warnings

import torch
from fairseq import UserError

from .checkpoint_fit import config_values
from .size_bounds import size_bound

__all__ = ["LIMIT_FLAG", "LIMIT_VARIABLE", "MAX_PARAMETERS", "MAX_POSITIONS", "MAX_LAYERS", "MAX_WIDTH",
           "MAX_HEADS", "ModelBudgetError", "add_parameter_limit", "check_model_budget", "count_model",
           "estimate_parameters", "parameter_counter", "parameter_limit", "parameter_limit_lifted",
           "register_parameter_counter"]

logger = logging.getLogger(__name__)

# entries (parameters and position-table rows times their width) a model may hold by default:
# 4 GiB in float32, above the largest model fairseq registers for one GPU at a 250K vocabulary
# (mbart_large: 610M) and far below what makes a machine swap; --max-model-parameters (or
# FAIRSEQ_DEFINE_MAX_PARAMETERS) raises it
MAX_PARAMETERS = 1 << 30
LIMIT_VARIABLE = "FAIRSEQ_DEFINE_MAX_PARAMETERS"
LIMIT_FLAG = "--max-model-parameters"  # the command line's way to set LIMIT_VARIABLE
MAX_WIDTH = size_bound("width")
MAX_LAYERS = size_bound("layers")
MAX_HEADS = size_bound("heads")
MAX_POSITIONS = size_bound("positions")
# settings that must be at least 1: each band's width is the previous one's divided by them
MIN_ONE_SETTINGS = ("adaptive_input_factor", "adaptive_softmax_factor", "div_val")
# (cutoffs, factor, the widths it divides): with c cutoffs the last band is width // factor**c
# wide (fairseq's AdaptiveInput: band i is d // factor**i of c + 1; AdaptiveSoftmax: tail i of
# c is d // factor**(i + 1))
_BANDS = (
    ("adaptive_input_cutoff", "adaptive_input_factor", ("decoder_input_dim", "decoder_embed_dim")),
    ("adaptive_softmax_cutoff", "adaptive_softmax_factor", ("decoder_output_dim", "decoder_embed_dim")),
)


class ModelBudgetError(UserError):
    """A model config whose sizes are out of bounds or whose model would exceed the limit."""


def _flag(name):
    return "--" + name.replace("_", "-")


# settings a plugin bounds itself, with limits of its own and lines that name them (the
# fairseq-define plugin's define_*: its config_bounds.py, checked when its model is built);
# a generic "a layer count" line here would pre-empt its "larger than this plugin supports"
PLUGIN_PREFIXES = ("define_",)


def _values(cfg):
    """name -> value of a model config: a Namespace, dict or DictConfig (config_values), or the
    dataclass that build_model makes of a Namespace for a dataclass model (transformer_lm)."""
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return {f.name: getattr(cfg, f.name, None) for f in dataclasses.fields(cfg)}
    return config_values(cfg)


def _settings(cfg):
    """name -> value of a model config, a plugin's own settings aside."""
    return {k: v for k, v in _values(cfg).items() if not str(k).startswith(PLUGIN_PREFIXES)}


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_width(name):
    return name.endswith(("_dim", "_hidden_size", "_hidden_dim")) or name == "hidden_size"


def _is_layers(name):
    return name.endswith(("_layers", "_depth")) and not name.endswith("_to_keep")


def _is_heads(name):
    return name.endswith("_heads")


def _is_positions(name):
    return name.startswith("max_") and name.endswith("_positions") or name == "tokens_per_sample"


def _group(name):
    # the stack a size belongs to: encoder_layers and encoder_embed_dim share "encoder"
    return name.split("_", 1)[0]


def _dictionary_sizes(task):
    """(source, target) vocabulary sizes of ``task`` (0 where it has no such dictionary)."""
    sizes = {}
    for attr in ("source_dictionary", "target_dictionary", "dictionary"):
        try:
            d = getattr(task, attr, None)
            sizes[attr] = len(d) if d is not None else 0
        except Exception:  # a task without that dictionary raises NotImplementedError
            sizes[attr] = 0
    source = sizes["source_dictionary"] or sizes["dictionary"]
    return source, sizes["target_dictionary"] or source


def _parse_limit(text, source):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value >= 1):
        raise ModelBudgetError(f"{source}{text!r} must be a positive number of parameters, e.g. 5e9")
    return int(value)


def parameter_limit():
    """MAX_PARAMETERS, or the value of FAIRSEQ_DEFINE_MAX_PARAMETERS (e.g. 5e9), which
    --max-model-parameters sets."""
    text = os.environ.get(LIMIT_VARIABLE)
    if not text:
        return MAX_PARAMETERS
    return _parse_limit(text, f"{LIMIT_VARIABLE}=")


def add_parameter_limit(parser, input_args):
    """--max-model-parameters for a CLI that parses fairseq's model options (options.py's
    parse_args_and_arch) or a tool's own parser: the option on ``parser`` (so --help lists it
    and the parse accepts it), and its value, read from ``input_args`` (None: sys.argv) before
    any model is built, handed on as FAIRSEQ_DEFINE_MAX_PARAMETERS, which workers that fairseq
    spawns for more devices inherit. A value that is no positive number is one line."""
    if LIMIT_FLAG not in parser._option_string_actions:  # parse_args_and_arch may run twice on a parser
        parser.add_argument(
            LIMIT_FLAG, metavar="N", default=None,
            help=f"the most parameters and position-table entries a model may hold before it is built "
                 f"(default {MAX_PARAMETERS:,}, or {LIMIT_VARIABLE}); raise it for a model that large on purpose",
        )
    reader = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    reader.add_argument(LIMIT_FLAG, default=None)
    given, _ = reader.parse_known_args(_spelt_in_full(parser, sys.argv[1:] if input_args is None else input_args))
    if given.max_model_parameters is not None:
        os.environ[LIMIT_VARIABLE] = str(_parse_limit(given.max_model_parameters, LIMIT_FLAG + " "))



def _spelt_in_full(parser, args):
    """``args`` with an abbreviation of LIMIT_FLAG that ``parser`` takes (argparse's allow_abbrev,
    the default of the plugin's tools: --max-model 5e9) written in full, so the limit read here
    is the one the parse accepts; it was ignored. An abbreviation that ``parser`` finds
    ambiguous is left for its parse to refuse."""
    if not parser.allow_abbrev:
        return args
    spelt = []
    for arg in args:
        name, eq, value = str(arg).partition("=")
        if (name.startswith("--") and len(name) > 2 and name != LIMIT_FLAG and LIMIT_FLAG.startswith(name)
                and [o for o in parser._option_string_actions if o.startswith(name)] == [LIMIT_FLAG]):
            arg = LIMIT_FLAG + eq + value
        spelt.append(arg)
    return spelt

_SIZES = ((_is_width, MAX_WIDTH, "a width"), (_is_layers, MAX_LAYERS, "a layer count"),
          (_is_heads, MAX_HEADS, "a head count"), (_is_positions, MAX_POSITIONS, "a positions table's length"))


def _check_bounds(settings):
    for name, value in settings.items():
        if not _number(value):
            continue
        if name in MIN_ONE_SETTINGS and value < 1:
            raise ModelBudgetError(
                f"{name}={value} must be at least 1 ({_flag(name)}): each band is the one before "
                "divided by it, so below 1 the bands grow instead of shrinking"
            )
        for test, bound, what in _SIZES:
            if test(name) and isinstance(value, int) and value > bound:
                raise ModelBudgetError(
                    f"{name}={value:,} is larger than fairseq builds ({what}: at most {bound:,}); "
                    f"lower {_flag(name)}"
                )


def _cutoffs(value):
    if isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, str) and value.strip():
        items = value.split(",")
    else:
        return None
    try:
        return [int(str(v).strip()) for v in items]
    except ValueError:
        return None  # not integers: the model's own check says so


def _check_bands(settings):
    """Adaptive input/softmax: cutoffs increasing and positive, every band at least 1 wide."""
    for cutoff_name, factor_name, width_names in _BANDS:
        cutoffs = _cutoffs(settings.get(cutoff_name))
        if not cutoffs:
            continue
        if cutoffs[0] < 1 or any(b <= a for a, b in zip(cutoffs, cutoffs[1:])):
            raise ModelBudgetError(
                f"{cutoff_name}={settings[cutoff_name]!r} must be increasing positive word counts, "
                f"e.g. 20000,60000 ({_flag(cutoff_name)})"
            )
        factor = settings.get(factor_name)
        width = next((settings[w] for w in width_names if isinstance(settings.get(w), int)), None)
        if not _number(factor) or factor < 1 or not isinstance(width, int) or width < 1:
            continue
        last = len(cutoffs)
        from .adaptive_bands import band_width  # (factor ** last overflows a float for a factor of 1e308)

        if band_width(width, factor, last) < 1:
            raise ModelBudgetError(
                f"{factor_name}={factor} over {len(cutoffs) + 1} bands leaves the last band "
                f"{width} // {factor}**{last} = 0 wide: lower {_flag(factor_name)} or use fewer "
                f"cutoffs ({_flag(cutoff_name)})"
            )


def estimate_parameters(settings, vocabulary):
    """(entries, part) for a model config whose family cannot be counted (neither a counter
    nor a meta build): an upper estimate of its parameters and position tables, and the
    largest part, in words naming its settings. Tables: vocabulary x the widest table width of
    each stack, twice for a decoder (its output layer); a stack of L layers of width d with an
    FFN f: L x (8 d^2 + 2 d f), as a decoder layer with cross-attention holds; positions: rows
    x their stack's width."""
    widths = {k: v for k, v in settings.items() if _is_width(k) and isinstance(v, int) and v > 0}

    def stack_width(group, ffn):
        # (size, its setting) of a stack's widest model (or FFN) width; the widest of all else
        sizes = [(v, k) for k, v in widths.items() if _group(k) == group and ("ffn" in k or "expand" in k) == ffn]
        if not sizes and not ffn:
            sizes = [(v, k) for k, v in widths.items() if "ffn" not in k and "expand" not in k]
        return max(sizes, default=(0, None))

    def named(*names):
        return " x ".join(f"{n}={settings[n]:,}" for n in names if n is not None)

    terms = []
    tables = {}  # group -> (width, setting): its widest table width
    for name, value in widths.items():
        if "ffn" not in name and "expand" not in name and "hidden" not in name:
            tables[_group(name)] = max(tables.get(_group(name), (0, None)), (value, name))
    for group, (value, name) in tables.items():
        count = 2 if group == "decoder" else 1
        terms.append((count * vocabulary * value, f"{named(name)} over {vocabulary:,} words"))
    for name, value in settings.items():
        if _is_layers(name) and isinstance(value, int) and value > 0:
            (d, d_name), (f, f_name) = stack_width(_group(name), False), stack_width(_group(name), True)
            terms.append((value * (8 * d * d + 2 * d * f), named(name, d_name, f_name if f else None)))
        elif _is_positions(name) and isinstance(value, int) and value > 0:
            group = {"max_source_positions": "encoder"}.get(name, "decoder")
            d, d_name = stack_width(group, False)
            terms.append((value * d, named(name, d_name)))
    for name, value in widths.items():
        if ("ffn" in name or "expand" in name) and not any(
            _is_layers(k) and _group(k) == _group(name) for k in settings
        ):
            d, d_name = stack_width(_group(name), False)
            terms.append((2 * value * d, named(name, d_name)))
    if not terms:
        return 0, None
    return sum(t for t, _ in terms), max(terms)[1]


# -- counters: what a family builds, from its settings ----------------------------------------

_COUNTERS = {}  # model class -> counter(settings, task) -> [(entries, part in words)], or None
_fairseq_counters = {}  # fairseq's own, registered at the first count (fairseq.models is loaded by then)


def register_parameter_counter(model_class, counter):
    """Count the models of ``model_class`` (that class itself, not its subclasses, which may
    add parameters) with ``counter(settings, task)``: a list of (entries, the part in words
    naming its settings) whose sum is the model's parameters and position tables, or None
    when the settings are ones it does not model (the model is then counted on the meta
    device). A plugin registers its families' counters here."""
    _COUNTERS[model_class] = counter


def _get(settings, name, default=None):
    value = settings.get(name)
    return default if value is None or isinstance(value, str) and value.startswith("${") else value


def _adaptive_input(vocab, d_in, d_out, factor, cutoff):
    """fairseq's AdaptiveInput: band i of the words is an embedding d_in // factor**i wide and
    its projection to d_out."""
    cutoff = cutoff + [vocab] if vocab > cutoff[-1] else cutoff
    bands = [(hi - lo, int(d_in // factor ** i)) for i, (lo, hi) in enumerate(zip([0] + cutoff, cutoff))]
    return sum(size * dim + dim * d_out for size, dim in bands), bands


def _adaptive_softmax(vocab, d, factor, cutoff, tied_bands, tie_proj, tied_width=None):
    """fairseq's AdaptiveSoftmax: a head over the first band and a class per tail, and tail i a
    projection to d // factor**(i + 1) and its output; tied to the adaptive input's bands
    (``tied_bands``, which project to ``tied_width``), the outputs are theirs, and so are the
    projections with ``tie_proj`` (else each a new one of its band's projection's shape)."""
    cutoff = cutoff + [vocab] if vocab > cutoff[-1] else cutoff
    tails = len(cutoff) - 1
    if tied_bands:
        total = d * tails + (d * tied_bands[0][1] if d != tied_bands[0][1] else 0)
    else:
        total = d * (cutoff[0] + tails)
    for i in range(tails):
        dim = tied_bands[i + 1][1] if tied_bands else int(d // factor ** (i + 1))
        total += (0 if tie_proj else tied_width * dim) if tied_bands else d * dim
        total += 0 if tied_bands else dim * (cutoff[i + 1] - cutoff[i])
    return total


def _positions(rows, width, padding, learned, name):
    # fairseq's PositionalEmbedding: rows + padding index + 1, learned or sinusoidal
    return (rows + padding + 1) * width, f"{name}={rows:,} x {width:,} ({'learned' if learned else 'sinusoidal'})"


# settings whose modules the transformer counters do not model (NormFormer's scales, character
# embeddings, attention over the encoder's and the decoder's states together; with BASE layers
# and quantization noise: _unmodelled): such a model is built on the meta device instead
_UNMODELLED = ("scale_attn", "scale_fc", "scale_heads", "scale_resids", "character_embeddings",
               "cross_self_attention")


def _layer(d, f, heads, head_dim, cross=None):
    """A transformer layer of width d and FFN f: self-attention (q, k, v of heads x head_dim,
    out back to d), a cross-attention over keys ``cross`` wide, the FFN, a LayerNorm each."""
    a = heads * head_dim
    attention = lambda kdim: d * a + 2 * kdim * a + 3 * a + a * d + d  # noqa: E731
    total = attention(d) + 2 * d + 2 * d * f + f + d + 2 * d
    if cross is not None:
        total += attention(cross) + 2 * d
    return total


def _transformer_stack(s, side, vocab, padding, table, cross=None, positions_rows=None):
    """Parts of one stack of fairseq's TransformerEncoder/Decoder (encoder_* or decoder_*
    settings): its table (``table`` False: shared, counted elsewhere), positions, layers and
    norms."""
    d = _get(s, f"{side}_embed_dim")
    d_in = _get(s, f"{side}_input_dim", d) if side == "decoder" else d
    layers, f = _get(s, f"{side}_layers"), _get(s, f"{side}_ffn_embed_dim")
    heads = _get(s, f"{side}_attention_heads", 1)
    parts = []
    if table:
        parts.append((vocab * d_in, f"{side}_embed_dim={d_in:,} over {vocab:,} words"))
    if d_in != d:
        parts.append((d_in * d, f"{side}_input_dim={d_in:,} x {side}_embed_dim={d:,}"))
    if not _get(s, "no_token_positional_embeddings", False):
        # fairseq's default when unset: DEFAULT_MAX_SOURCE_POSITIONS = DEFAULT_MAX_TARGET_POSITIONS = 1024
        rows = positions_rows or _get(s, f"max_{'source' if side == 'encoder' else 'target'}_positions", 1024)
        learned = bool(_get(s, f"{side}_learned_pos", False))
        entries, words = _positions(
            rows, d, padding, learned, f"max_{'source' if side == 'encoder' else 'target'}_positions"
        )
        # a sinusoidal table is no parameter, but memory all the same
        parts.append((entries, words) if learned else (entries, words, "buffer"))
    if _get(s, "layernorm_embedding", False):
        parts.append((2 * d, "layernorm_embedding"))
    per_layer = _layer(d, f, heads, d // heads if heads and d % heads == 0 else d, cross)
    parts.append(
        (layers * per_layer, f"{side}_layers={layers:,} x {side}_embed_dim={d:,} x {side}_ffn_embed_dim={f:,}")
    )
    if _get(s, f"{side}_normalize_before", False) and not (
        side == "decoder" and _get(s, "no_decoder_final_norm", False)
    ):
        parts.append((2 * d, f"{side} final LayerNorm"))
    return parts


def _decoder_output(s, vocab, tables_tied, embedding_bands):
    """The decoder's output layer: adaptive softmax, the input table again (tied: no new
    parameters) or an output table; and a projection from decoder_embed_dim to its width."""
    d = _get(s, "decoder_embed_dim")
    d_out = _get(s, "decoder_output_dim", d)
    tie_adaptive = bool(_get(s, "tie_adaptive_weights", False))
    parts = []
    if d_out != d and not tie_adaptive:
        parts.append((d * d_out, f"decoder_embed_dim={d:,} x decoder_output_dim={d_out:,}"))
    cutoff = _cutoffs(_get(s, "adaptive_softmax_cutoff"))
    if cutoff:
        factor = _get(s, "adaptive_softmax_factor", 4.0)
        entries = _adaptive_softmax(vocab, d_out, factor, cutoff, embedding_bands if tie_adaptive else None,
                                    bool(_get(s, "tie_adaptive_proj", False)), d)
        parts.append((entries, f"adaptive softmax of {vocab:,} words"))
    elif not tables_tied:
        parts.append((vocab * d_out, f"decoder_output_dim={d_out:,} over {vocab:,} words (output layer)"))
    return parts


def _unmodelled(s):
    return any(_get(s, name) for name in _UNMODELLED) or (_get(s, "base_layers") or 0) > 0 \
        or (_get(s, "quant_noise_pq") or 0) > 0


def _sizes_given(s, sides):
    return all(isinstance(_get(s, f"{side}_{size}"), int)
               for side in sides for size in ("embed_dim", "ffn_embed_dim", "layers", "attention_heads"))


def count_transformer(s, task):
    """fairseq's TransformerModel (transformer_*, bart_*, mbart_*): the encoder's table, the
    decoder's unless --share-all-embeddings, the output layer unless tied; encoder layers as
    encoder layers, decoder layers with their cross-attention."""
    if _unmodelled(s) or _get(s, "encoder_embed_path") or _get(s, "decoder_embed_path") \
            or not _sizes_given(s, ("encoder", "decoder")):
        return None
    source, target = _dictionary_sizes(task)
    padding = _padding(task)
    share_all = bool(_get(s, "share_all_embeddings", False))
    tied = share_all or bool(_get(s, "share_decoder_input_output_embed", False))
    enc = _get(s, "encoder_embed_dim")
    return (_transformer_stack(s, "encoder", source, padding, True)
            + _transformer_stack(s, "decoder", target, padding, not share_all,
                                 cross=None if _get(s, "no_cross_attention", False) else enc)
            + _decoder_output(s, target, tied, None))


def count_transformer_lm(s, task):
    """fairseq's TransformerLanguageModel: the decoder alone (no cross-attention), its input
    an embedding table or an adaptive input, its output tied, adaptive or a table."""
    if _unmodelled(s) or not _sizes_given(s, ("decoder",)):
        return None
    _, vocab = _dictionary_sizes(task)
    padding = _padding(task)
    d, d_in = _get(s, "decoder_embed_dim"), _get(s, "decoder_input_dim", _get(s, "decoder_embed_dim"))
    rows = _get(s, "max_target_positions") or _get(s, "tokens_per_sample", 1024)
    parts, bands = [], None
    if _get(s, "adaptive_input", False):
        cutoff = _cutoffs(_get(s, "adaptive_input_cutoff"))
        if not cutoff:
            return None
        entries, bands = _adaptive_input(vocab, d_in, d, _get(s, "adaptive_input_factor", 4.0), cutoff)
        parts.append((entries, f"adaptive input of {vocab:,} words, decoder_input_dim={d_in:,}"))
        s = {**s, "decoder_input_dim": d}  # the adaptive input projects to decoder_embed_dim itself
    stack = _transformer_stack(s, "decoder", vocab, padding, bands is None, positions_rows=rows)
    return parts + stack + _decoder_output(s, vocab, bool(_get(s, "share_decoder_input_output_embed", False)), bands)


def _padding(task):
    for attr in ("target_dictionary", "source_dictionary", "dictionary"):
        try:
            return getattr(task, attr).pad()
        except Exception:
            continue
    return 1


def _register_fairseq_counters():
    from fairseq.models.bart.model import BARTModel
    from fairseq.models.transformer.transformer_legacy import TransformerModel
    from fairseq.models.transformer_lm import TransformerLanguageModel

    _fairseq_counters.update({TransformerModel: count_transformer, BARTModel: count_transformer,
                              TransformerLanguageModel: count_transformer_lm})
    for model_class, counter in _fairseq_counters.items():
        _COUNTERS.setdefault(model_class, counter)  # a plugin's own counter comes first


# -- the count, by a counter or on the meta device -------------------------------------------

_building = threading.local()  # set while a model is built on the meta device to be counted


def _module_part(name):
    # "decoder.layers.3.fc1.weight" -> "decoder.layers": the part of the model a tensor is in
    return ".".join([p for p in name.split(".")[:-1] if not p.isdigit()][:2]) or name


def _fake_tensors():
    # tensors with shapes and no storage that, unlike the meta device's, can be copied: the
    # families whose initialisation copies through the CPU (fairseq's init_bert_params)
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode()


def _build_without_memory(model_class, cfg, task):
    """The model of ``cfg`` with shapes and no memory: on the meta device, or in fake tensors
    where its initialisation cannot run there. Models it builds inside itself skip the budget."""
    _building.active = True
    quiet = logging.root.manager.disable
    logging.disable(logging.WARNING)  # the model's own lines come once, from the real build
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                with torch.device("meta"):
                    return model_class.build_model(copy.deepcopy(cfg), task)
            except UserError:
                raise
            except Exception:
                with _fake_tensors():
                    return model_class.build_model(copy.deepcopy(cfg), task)
    finally:
        logging.disable(quiet)
        _building.active = False


_SIZE_ENDINGS = ("_dim", "_layers", "_heads", "_depth", "_hidden_size")


def _part_words(part, values):
    """A module of the model in words naming the settings that size it: "decoder.layers
    (decoder_layers=6, decoder_embed_dim=512, ...)"; an embedding's DeFINE settings too. A
    stack's layer settings come first, a recurrent layer's hidden size and a convolution stack's
    layer list among them (an LSTM's part was named by its embedding width alone, fconv's by
    its widths and not its --encoder-layers list)."""
    side = part.split(".")[0]

    def sizes_it(k, v):
        if isinstance(v, str):  # a list of layers, as fconv's "[(512, 3)] * 20"
            return k.endswith("_layers")
        return isinstance(v, int) and not isinstance(v, bool) and v > 1 and k.endswith(_SIZE_ENDINGS)

    names = [k for k, v in values.items() if sizes_it(k, v)
             and (k.startswith(side + "_") or "embed" in part and k.startswith("define_"))]
    if "embed" in part:  # a table: its width and its DeFINE unit's, not the stack's layers
        names = [k for k in names if k == side + "_embed_dim" or k.startswith("define_")]
    else:  # the stack's own settings first: they make it the largest part
        names.sort(key=lambda k: not k.endswith(("_layers", "_hidden_size")))
    sizes = ", ".join(f"{k}={values[k]!r}" if isinstance(values[k], str) else f"{k}={values[k]:,}" for k in names)
    return f"{part} ({sizes})" if sizes else part


def _count_on_meta(model_class, cfg, task):
    """Parts of the model of ``cfg``, built without memory: parameters (each once, however
    often it is shared) by the module they belong to, and buffers."""
    model = _build_without_memory(model_class, cfg, task)
    values = _values(cfg)
    parts, buffers = {}, 0
    for name, p in model.named_parameters():
        part = _module_part(name)
        parts[part] = parts.get(part, 0) + p.numel()
    for _, b in model.named_buffers():
        buffers += b.numel()
    out = [(n, _part_words(part, values)) for part, n in parts.items() if n]
    return out + ([(buffers, "buffers", "buffer")] if buffers else [])


def parameter_counter(model_class):
    """The counter registered for ``model_class`` (fairseq's own included), or None."""
    if not _fairseq_counters:
        _register_fairseq_counters()
    return _COUNTERS.get(model_class)


def count_model(cfg, task, model_class=None):
    """[(entries, part in words, [kind])] of the model of ``cfg``: its family's counter, or a
    build without memory; kind "buffer" marks entries that are no parameter. None for a
    config that names no registered model."""
    if model_class is None:
        model_class = _model_class(cfg)
    counter = parameter_counter(model_class)
    if counter is not None:
        parts = counter(_values(cfg), task)
        if parts is not None:
            return parts
    if model_class is None:
        return None
    return _count_on_meta(model_class, cfg, task)


def _model_class(cfg):
    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY

    name = getattr(cfg, "_name", None) or getattr(cfg, "arch", None)
    return ARCH_MODEL_REGISTRY.get(name) or MODEL_REGISTRY.get(name)


def _raised_limit(total):
    # a round value at or above ``total``, for the message: 4.18e11 -> 4.2e11
    exponent = int(math.floor(math.log10(total)))
    return f"{math.ceil(total / 10 ** (exponent - 1)) / 10:g}e{exponent}"


_limit_lifted = threading.local()  # set while a build that allocates nothing runs


@contextlib.contextmanager
def parameter_limit_lifted():
    """Builds inside this block allocate nothing (on the meta device, as fairseq-define-params
    counts a model): the parameter limit, which guards memory, does not apply to them, and
    the bounds of each size still do. fairseq-define-params refused to count a large model,
    whose count allocates nothing."""
    previous = getattr(_limit_lifted, "active", False)
    _limit_lifted.active = True
    try:
        yield
    finally:
        _limit_lifted.active = previous


def check_model_budget(cfg, task):
    """Before fairseq builds the model of ``cfg`` (a model config) for ``task``: every size
    within its bound, factors at least 1, adaptive bands at least 1 wide, and the model's
    parameters and position tables within parameter_limit(); else one line
    (ModelBudgetError). Returns ``cfg``."""
    if getattr(_building, "active", False):
        return cfg  # a model that a counted model builds inside itself: counted with it
    settings = _settings(cfg)
    _check_bounds(settings)
    _check_bands(settings)
    if getattr(_limit_lifted, "active", False):
        return cfg  # a build that allocates nothing: the sizes are bounded, the total is not
    limit = parameter_limit()
    try:
        parts = count_model(cfg, task)
    except UserError:
        raise  # the model's own check of its settings: the line a real build would give
    except Exception as e:  # a family that does not build on the meta device
        logger.debug("counting the model on the meta device failed (%s); estimating it", e)
        parts = None
    if parts is None:
        total, part = estimate_parameters(settings, max(_dictionary_sizes(task)))
    else:
        total = sum(p[0] for p in parts)
        part = max(parts, key=lambda p: p[0])[1] if parts else None
    if total > limit:
        raise ModelBudgetError(
            f"this model would hold about {total:,} parameters and position entries "
            f"({4 * total / 2**30:,.1f} GiB in float32), more than the limit of {limit:,}; the "
            f"largest part is {part}: lower those settings, or, for a model that large on "
            f"purpose, raise the limit with {LIMIT_FLAG} {_raised_limit(total)} (or "
            f"{LIMIT_VARIABLE}={_raised_limit(total)} in the environment)"
        )
    return cfg
