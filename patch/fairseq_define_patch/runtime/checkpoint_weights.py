"""A checkpoint's weights, each named for what is wrong with it, before any model runs.

fairseq handed a checkpoint's state dict to torch's load_state_dict: a missing or an extra key
was a RuntimeError traceback (fairseq-generate, the export), a NaN or inf weight loaded without
a word and ended a beam search in ``AssertionError: 10 < 10``, a size mismatch anywhere (a
feed-forward weight) was blamed on the dictionary, and a NaN in a tied tensor on "another
output layer" (NaN never equals NaN). ``check_state_dict`` checks a state dict against the
weights it must fit (a model's, or for the averaging tool the first checkpoint's): every entry
a tensor, the names (missing and extra keys, where the load is strict), every shape, every
floating-point value finite; the first failure is one line naming the tensor and what is wrong
with it. ``load_checked`` is what fairseq's BaseFairseqModel.load_state_dict calls,
so every loader of a fairseq model (fairseq-train's resume and fine-tune, generate, eval-lm,
interactive, the hub, the plugin's tools and export) checks the same way, before the tied
values are compared (check_tied_values, a form error of checkpoint_fit.py): damage is named as damage, not as
another form. The trainer puts the file's name before the line (checkpoint_misfit.py).
``float32_checked`` holds a model in memory (the hub's export) to the same values.
"""

import torch
from fairseq import UserError

from .checkpoint_fit import CheckpointFormError

__all__ = ["CheckpointWeightsError", "check_finite", "check_state_dict", "check_tied_values", "float32_checked",
           "load_checked"]

# the fix for a file whose weights are damaged
_INTACT = "use an intact copy (checkpoint_best.pt, an earlier checkpointN.pt)"
# where the weights fit no model its settings build: damaged, or edited
_DAMAGED = "the file is damaged or was edited; " + _INTACT


class CheckpointWeightsError(UserError):
    """A state dict that does not fit what it is loaded into, or holds damaged values.
    ``kind``: "not_tensor", "non_finite" (the file is damaged), "missing", "extra", "shape",
    "positions", "dictionary" (it does not fit); ``detail``: what is wrong, without the fix."""

    def __init__(self, kind, key, detail, fix, what="the checkpoint"):
        prefix = {"not_tensor": "{} is damaged: ", "non_finite": "{} is damaged: ",
                  "dictionary": "{} does not fit the data: "}.get(kind, "").format(what)
        super().__init__("{}{}; {}".format(prefix, detail, fix))
        self.kind, self.key, self.detail, self.fix = kind, key, detail, fix

    @property
    def damaged(self):
        return self.kind in ("not_tensor", "non_finite")

    def __reduce__(self):  # pickled (a worker's error) as the UserError of its line
        return UserError, self.args


def _shape(t):
    return "[{}]".format(", ".join(str(s) for s in t.shape))


def _skipped(key):
    # fairseq's sinusoidal positions keep an uninitialised one-element buffer (torch.FloatTensor(1),
    # used only for its dtype and device): any bits, never read as a number
    return key.endswith("._float_tensor")


def check_finite(state_dict, what="the checkpoint"):
    """Every floating-point (and complex) tensor of ``state_dict`` holds finite values: a NaN or an
    inf weight makes every score it touches NaN (a diverged run, or a damaged file)."""
    for key, value in state_dict.items():
        if not isinstance(value, torch.Tensor) or _skipped(key) or value.is_meta:
            continue
        if not (value.is_floating_point() or value.is_complex()) or value.numel() == 0:
            continue
        finite = torch.isfinite(value)
        if bool(finite.all()):
            continue
        nan = int(torch.isnan(value).sum())
        bad = value.numel() - int(finite.sum())
        what_bad = " and ".join(
            part
            for part in ("{:,} NaN".format(nan) if nan else "", "{:,} infinite".format(bad - nan) if bad > nan else "")
            if part
        )
        raise CheckpointWeightsError(
            "non_finite", key,
            "its weight {} holds {} value{} (of {:,})".format(key, what_bad, "" if bad == 1 else "s", value.numel()),
            "a run that diverged saves such weights too; " + _INTACT, what,
        )


def _listed(keys, limit=3):
    more = len(keys) - limit
    return ", ".join(keys[:limit]) + (" and {} more".format(more) if more > 0 else "")


def check_state_dict(expected, state_dict, strict=True, dictionary_sizes=(), what="the checkpoint", model="this model"):
    """Check ``state_dict`` (of ``what``) against ``expected`` (name -> tensor: the weights of
    ``model``, which it must fit):
    every entry a tensor; with ``strict``, no name missing and none extra; every shape equal;
    every floating-point value finite. A table whose rows alone differ, where this model's
    rows are one of ``dictionary_sizes`` and the checkpoint's other such tables differ too,
    is put down to the dictionary. Raises CheckpointWeightsError for the first failure."""
    for key, value in state_dict.items():
        if not isinstance(value, torch.Tensor) and not key.endswith("_extra_state"):  # a module's own object
            raise CheckpointWeightsError(
                "not_tensor", key, "its entry {} is a {}, not a tensor".format(key, type(value).__name__), _INTACT, what
            )
    if strict:
        _check_names([k for k in expected if k not in state_dict], [k for k in state_dict if k not in expected], what,
                     model)
    _check_shapes(expected, state_dict, set(dictionary_sizes), what, model)
    check_finite(state_dict, what)


def _check_names(missing, extra, what="the checkpoint", model="this model"):
    fix = "the file is damaged, or its weights are of another model than its settings build; " + _INTACT
    if missing:
        raise CheckpointWeightsError("missing", missing[0], "{} lacks {}, which {} has".format(
            what, _listed(missing), model), fix)
    if extra:
        raise CheckpointWeightsError("extra", extra[0], "{} holds {}, which {} has no place for".format(
            what, _listed(extra), model), fix)


def _rows_only(saved, here):
    return saved.dim() == here.dim() >= 1 and saved.shape[1:] == here.shape[1:] and saved.shape[0] != here.shape[0]


def _check_shapes(expected, state_dict, dictionary_sizes, what, model):
    differ = [k for k, v in expected.items() if k in state_dict and state_dict[k].shape != v.shape]
    if not differ:
        return
    # tables of a dictionary's rows: another dictionary where every such table of the
    # checkpoint has other rows (where one alone has, that table is wrong: damaged)
    changed = [
        tables for tables in (
            [k for k, v in expected.items() if k in state_dict and v.dim() >= 1 and v.shape[0] == size]
            for size in sorted(dictionary_sizes)
        ) if tables and set(tables) <= set(differ)
    ]
    if changed and all(_rows_only(state_dict[k], expected[k]) for k in differ):
        key = min((tables[0] for tables in changed), key=list(expected).index)
        raise CheckpointWeightsError(
            "dictionary", key,
            "{} has {:,} rows in the checkpoint but {:,} here: this run's dictionary (dict.*.txt) differs from the "
            "one it was trained with".format(key, state_dict[key].shape[0], expected[key].shape[0]),
            "use the dictionary (dict.*.txt) the model was trained with", what,
        )
    key = differ[0]
    saved, here = state_dict[key], expected[key]
    if "embed_positions" in key and _rows_only(saved, here):
        raise CheckpointWeightsError(
            "positions", key,
            "the learned positions table {} is {} in the checkpoint but {} in {}".format(
                key, _shape(saved), _shape(here), model),
            "keep --max-source-positions / --max-target-positions (and --model-overrides of them) at the values it "
            "was trained with",
        )
    raise CheckpointWeightsError(
        "shape", key, "{}'s weight {} is {}, but {} in {}".format(
            what, key, _shape(saved), _shape(here), model), _DAMAGED)


def _dictionary_sizes(model):
    from fairseq.data import Dictionary

    return {len(d) for d in (getattr(m, "dictionary", None) for m in model.modules()) if isinstance(d, Dictionary)}


def load_checked(model, state_dict, strict, load):
    """``load(state_dict, False)`` (torch's load_state_dict, not strict) once ``state_dict``
    fits ``model`` (check_state_dict against the model's own state dict: entries, shapes,
    finite values) and the keys that name one tied tensor hold equal values
    (check_tied_values); with ``strict``, a key the load found missing or left over is then
    one line. The names are torch's own findings: a module's loading may drop or rename keys
    (the encoder layers drop the fast-path copies fairseq 0.12.2 saved)."""
    check_state_dict(model.state_dict(), state_dict, False, _dictionary_sizes(model),
                     model="the model its settings build")
    result = load(check_tied_values(model, state_dict), False)
    if strict:
        _check_names(list(result.missing_keys), list(result.unexpected_keys))
    return result


def float32_checked(model, what="the model"):
    """``model`` for a computation that must be exact (the export's probe against a float32
    stock model): its weights checked finite, and where a floating-point weight is of half
    precision (hub.half(), hub.bfloat16()), a float32 copy, to which every such value converts
    exactly (the probe compared a bfloat16 model with its float32 form and called it "not an
    exact form"); else ``model`` itself."""
    import copy
    import logging

    state = model.state_dict()
    check_finite(state, what)
    half = sorted({str(v.dtype).replace("torch.", "") for v in state.values()
                   if isinstance(v, torch.Tensor) and v.is_floating_point() and v.element_size() < 4})
    if not half:
        return model
    logging.getLogger(__name__).info("%s holds %s weights: a float32 copy of it is used", what, "/".join(half))
    return copy.deepcopy(model).float()


def check_tied_values(model, state_dict):
    """``state_dict``, once the keys of it that name one tensor of ``model`` (tied weights)
    are found to hold equal values: a checkpoint whose tables were trained apart has
    different ones (checkpoint_fit.py's form error; a NaN in one is damage, named as such by
    check_finite: NaN never equals NaN)."""
    groups = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), []).append(name)
    for names in groups.values():
        present = [n for n in names if n in state_dict and isinstance(state_dict[n], torch.Tensor)]
        first = present[0] if present else None
        for other in present[1:]:
            a, b = state_dict[first], state_dict[other]
            if a.shape == b.shape and a.dtype == b.dtype and not torch.equal(a, b):
                check_finite({first: a, other: b})  # NaN never equals NaN: damage, not another form
                raise CheckpointFormError(
                    "the checkpoint holds different values for {} and {}, which this model ties "
                    "(one tensor): it was trained with another output layer or embedding sharing "
                    "(e.g. an untied output layer); load it with the settings it was trained "
                    "with".format(first, other)
                )
    return state_dict
