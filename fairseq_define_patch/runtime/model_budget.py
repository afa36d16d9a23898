"""A budget for every model fairseq builds: its sizes bounded, its parameters and position
tables estimated and held to a limit before anything is allocated.

fairseq's own sizes had no upper bound, and a model is built from whatever config arrives: the
command line, --model-overrides, or the config stored in a checkpoint (a 15 KB file with
``decoder_ffn_embed_dim = 10**9`` made fairseq-generate ask for 256 GB; ``encoder_layers =
100000`` built until memory ran out; an adaptive factor below 1 grows every band instead of
shrinking it). fairseq/models/__init__.py's build_model, which every tool, the trainer and the
hub go through, now calls ``check_model_budget`` first: one line naming the setting and the
limit. The estimate is deliberately generous (an upper bound for fairseq's transformer, LSTM
and convolutional families and the plugin's models: every table counted untied); a genuinely
larger model raises the limit with --max-model-parameters on the command line (every tool that
parses fairseq's model options: train, generate, interactive, eval-lm, validate) or with
FAIRSEQ_DEFINE_MAX_PARAMETERS in the environment (the hub, and any other caller)
(docs/checkpoints.md).
"""

import argparse
import math
import os

from fairseq import UserError

from .checkpoint_fit import config_values

__all__ = ["LIMIT_FLAG", "LIMIT_VARIABLE", "MAX_PARAMETERS", "MAX_POSITIONS", "MAX_LAYERS", "MAX_WIDTH",
           "ModelBudgetError", "add_parameter_limit", "check_model_budget", "estimate_parameters",
           "parameter_limit"]

# entries (parameters and position-table rows times their width) a model may hold by default:
# 4 GiB in float32, above every model this project trains (the largest is ~250M) and far
# below what makes a machine swap; --max-model-parameters (or FAIRSEQ_DEFINE_MAX_PARAMETERS) raises it
MAX_PARAMETERS = 1 << 30
LIMIT_VARIABLE = "FAIRSEQ_DEFINE_MAX_PARAMETERS"
LIMIT_FLAG = "--max-model-parameters"  # the command line's way to set LIMIT_VARIABLE
# each size on its own: far beyond any trained model, and small enough that a size at the bound
# fails the estimate at once instead of after minutes of building
MAX_WIDTH = 1 << 20  # a dimension: embeddings, hidden and FFN sizes
MAX_LAYERS = 10_000  # layers (or Expand layers) of one stack
MAX_POSITIONS = 1 << 24  # a positions table's rows (max_*_positions, tokens_per_sample)
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


def _settings(cfg):
    """name -> value of a model config, a plugin's own settings aside."""
    return {k: v for k, v in config_values(cfg).items() if not str(k).startswith(PLUGIN_PREFIXES)}


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_width(name):
    return name.endswith(("_dim", "_hidden_size", "_hidden_dim")) or name == "hidden_size"


def _is_layers(name):
    return name.endswith(("_layers", "_depth")) and not name.endswith("_to_keep")


def _is_positions(name):
    return name.startswith("max_") and name.endswith("_positions") or name == "tokens_per_sample"


def _group(name):
    # the stack a size belongs to: encoder_layers and encoder_embed_dim share "encoder"
    return name.split("_", 1)[0]


def _dictionary_size(task):
    sizes = []
    for attr in ("source_dictionary", "target_dictionary", "dictionary"):
        try:
            d = getattr(task, attr, None)
            if d is not None:
                sizes.append(len(d))
        except Exception:  # a task without that dictionary raises NotImplementedError
            continue
    return max(sizes, default=0)


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
    parse_args_and_arch): the option on ``parser`` (so --help lists it and the parse accepts
    it), and its value, read from ``input_args`` before any model is built, handed on as
    FAIRSEQ_DEFINE_MAX_PARAMETERS, which workers that fairseq spawns for more devices inherit.
    A value that is no positive number is one line."""
    if LIMIT_FLAG not in parser._option_string_actions:  # parse_args_and_arch may run twice on a parser
        parser.add_argument(
            LIMIT_FLAG, metavar="N", default=None,
            help=f"the most parameters and position-table entries a model may hold before it is built "
                 f"(default {MAX_PARAMETERS:,}, or {LIMIT_VARIABLE}); raise it for a model that large on purpose",
        )
    reader = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    reader.add_argument(LIMIT_FLAG, default=None)
    given, _ = reader.parse_known_args(input_args)
    if given.max_model_parameters is not None:
        os.environ[LIMIT_VARIABLE] = str(_parse_limit(given.max_model_parameters, LIMIT_FLAG + " "))


def _check_bounds(settings):
    for name, value in settings.items():
        if not _number(value):
            continue
        if name in MIN_ONE_SETTINGS and value < 1:
            raise ModelBudgetError(
                f"{name}={value} must be at least 1 ({_flag(name)}): each band is the one before "
                "divided by it, so below 1 the bands grow instead of shrinking"
            )
        for test, bound, what in ((_is_width, MAX_WIDTH, "a width"), (_is_layers, MAX_LAYERS, "a layer count"),
                                  (_is_positions, MAX_POSITIONS, "a positions table's length")):
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
        if int(width // factor ** last) < 1:
            raise ModelBudgetError(
                f"{factor_name}={factor} over {len(cutoffs) + 1} bands leaves the last band "
                f"{width} // {factor}**{last} = 0 wide: lower {_flag(factor_name)} or use fewer "
                f"cutoffs ({_flag(cutoff_name)})"
            )


def estimate_parameters(settings, vocabulary):
    """(entries, part) for a model config: an upper estimate of its parameters and position
    tables, and the largest part, in words naming its settings. Tables: vocabulary x the widest
    table width of each stack (encoder, decoder, define, ...), twice for a decoder (its output
    layer); a stack of L layers of width d with an FFN (or expansion) f:
    L x (8 d^2 + 2 d f), as a decoder layer with cross-attention (and an LSTM's four gates)
    holds; positions: rows x their stack's width."""
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
        # an input table per stack, and a decoder's output table (counted untied)
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
        if ("ffn" in name or "expand" in name) and not any(_is_layers(k) and _group(k) == _group(name) for k in settings):
            d, d_name = stack_width(_group(name), False)  # a stack without a layer count: one layer
            terms.append((2 * value * d, named(name, d_name)))
    if not terms:
        return 0, None
    return sum(t for t, _ in terms), max(terms)[1]


def _raised_limit(total):
    # a round value at or above ``total``, for the message: 4.18e11 -> 4.2e11
    exponent = int(math.floor(math.log10(total)))
    return f"{math.ceil(total / 10 ** (exponent - 1)) / 10:g}e{exponent}"


def check_model_budget(cfg, task):
    """Before fairseq builds the model of ``cfg`` (a model config) for ``task``: every size
    within its bound, factors at least 1, adaptive bands at least 1 wide, and the estimated
    parameters within parameter_limit(); else one line (ModelBudgetError). Returns ``cfg``."""
    settings = _settings(cfg)
    _check_bounds(settings)
    _check_bands(settings)
    limit = parameter_limit()
    total, part = estimate_parameters(settings, _dictionary_size(task))
    if total > limit:
        raise ModelBudgetError(
            f"this model would hold about {total:,} parameters and position entries "
            f"({4 * total / 2**30:,.1f} GiB in float32), more than the limit of {limit:,}; the "
            f"largest part is {part}: lower those settings, or, for a model that large on "
            f"purpose, raise the limit with {LIMIT_FLAG} {_raised_limit(total)} (or "
            f"{LIMIT_VARIABLE}={_raised_limit(total)} in the environment)"
        )
    return cfg
