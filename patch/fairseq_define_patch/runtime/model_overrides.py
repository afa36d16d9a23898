"""--model-overrides: names checked against the checkpoint's config and model; a model option
the stored config lacks is set, not dropped; a nested group is applied, not ignored.

--model-overrides names settings by their option names; fairseq dropped a name that the
checkpoint's stored config lacks without a word: a typo, or a model option added after the
checkpoint was saved (whose override then did nothing). fairseq/checkpoint_utils.py now calls
``_set_missing_model_options`` after it applies the overrides, and fairseq-generate,
-interactive, -eval-lm and -validate call ``check_model_overrides`` after loading: any other
unknown name gets one line, with the closest setting's name.

Before any override is applied, load_checkpoint_to_cpu calls ``checked_model_overrides``:
every key must be a name (fairseq's setattr raised a TypeError on ``{1: 2}``); a group given
as a dict (``{'model': {'dropout': 0.3}}``, fairseq's nested form) is flattened into its
names, each checked against that group of the stored config (fairseq applied it to a group
kept as a DictConfig only: a Namespace group, such as the model of an architecture without a
dataclass, took ``model`` as one more attribute and the run changed nothing); and a model
setting gets a value of the kind the checkpoint stores (a dropout of ``'x'`` or ``{0.1}`` was
a TypeError deep in the model). The flat form sets a name in every group that holds it, and
so does the nested form once flattened: ``max_source_positions`` is the task's and the
model's alike.
"""

import math
from argparse import Namespace

from fairseq import UserError
from omegaconf import DictConfig, open_dict

__all__ = ["check_model_overrides", "checked_model_overrides", "flat_model_overrides", "_set_missing_model_options"]

_EXAMPLE = "e.g. \"{'dropout': 0.1}\" or \"{'model': {'dropout': 0.1}}\""


def _model_option_names(model_cfg):
    # (added by fairseq_define) the options of the model a stored config names: its
    # dataclass's fields, or what its add_args declares
    import argparse

    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY

    if isinstance(model_cfg, dict):  # a checkpoint's stored config before omegaconf reads it
        model_cfg = argparse.Namespace(**{k: model_cfg.get(k) for k in ("_name", "arch")})
    name = getattr(model_cfg, "_name", None) or getattr(model_cfg, "arch", None)
    cls = ARCH_MODEL_REGISTRY.get(name) or MODEL_REGISTRY.get(name)
    if cls is None:
        return set()
    dc = getattr(cls, "__dataclass", None)
    if dc is not None:
        return set(dc.__dataclass_fields__)
    parser = argparse.ArgumentParser(add_help=False, conflict_handler="resolve")
    try:
        cls.add_args(parser)
    except Exception:  # a model whose add_args needs more than a parser: its stored keys only
        return set()
    return {a.dest for a in parser._actions}


def _config_keys(cfg):
    # the names in a config's groups; a group kept as a Namespace (a model without a
    # dataclass) took every override as an attribute, so its names come from its model
    known = set()
    nodes = [cfg]
    while nodes:
        node = nodes.pop()
        for key in node.keys():
            known.add(key)
            if key in node and isinstance(node[key], DictConfig):
                nodes.append(node[key])
    return known


def _set_missing_model_options(cfg, overrides):
    # (added by fairseq_define) an override of a model option that the stored config lacks
    # (saved before the option existed): set it, where fairseq dropped it
    model_cfg = cfg.get("model", None) if isinstance(cfg, DictConfig) else None
    if not isinstance(model_cfg, DictConfig):
        return
    missing = [k for k in overrides if k not in model_cfg]
    options = _model_option_names(model_cfg) if missing else set()
    with open_dict(model_cfg):
        for key in missing:
            if key in options:
                model_cfg[key] = overrides[key]


def _group_names():
    # fairseq's config groups: a --model-overrides key naming one, with a dict value, gives
    # settings of that group
    import dataclasses

    from fairseq.dataclass.configs import FairseqConfig

    return {f.name for f in dataclasses.fields(FairseqConfig) if not f.name.startswith("_")}


def _names(node, model):
    # the settings a stored group holds (Namespace, dict or DictConfig); with ``model``, the
    # options of its model too (one added after the checkpoint was saved is set, not dropped)
    if isinstance(node, Namespace):
        names = set(vars(node))
    elif isinstance(node, (dict, DictConfig)):
        names = set(map(str, node.keys()))
    else:
        return set()
    return names | _model_option_names(node) if model else names


def _stored(node, name):
    if isinstance(node, Namespace):
        return getattr(node, name, None)
    if isinstance(node, (dict, DictConfig)) and name in node:
        try:
            return node.get(name)
        except Exception:  # an interpolation that does not resolve here
            return None
    return None


def _suggest(name, known):
    import difflib

    close = difflib.get_close_matches(str(name), sorted(map(str, known)), n=1)
    return " (did you mean {!r}?)".format(close[0]) if close else ""


def _check_kind(name, value, stored):
    # a model setting's override of the kind the checkpoint stores: True/False for a flag, a
    # (finite) number for a number, a string for a string; None unsets it
    if value is None or stored is None or isinstance(stored, str) and stored.startswith("${"):
        return
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(stored, bool):
        wrong = None if isinstance(value, bool) else "True or False"
    elif isinstance(stored, (int, float)):
        wrong = None if number else "a number"
    elif isinstance(stored, str):
        wrong = None if isinstance(value, str) else "a string"
    else:
        wrong = None
    if wrong:
        raise UserError("--model-overrides: {}={!r} must be {} (the checkpoint's {} is {!r}): {}".format(
            name, value, wrong, name, stored, _EXAMPLE))
    if number and not math.isfinite(value):
        raise UserError("--model-overrides: {}={} is not a finite number: give a finite value".format(name, value))


def flat_model_overrides(overrides, cfg=None):
    """(added by fairseq_define) --model-overrides (or a hub call's keyword arguments) as flat
    names, checked against ``cfg``, the stored config they will be applied to (a DictConfig or
    dict of groups, an old checkpoint's args Namespace, or None: names not checked): every key
    a string; a group given as a dict flattened into its names, each a setting of that group
    (``{'model': {'dropout': 0.3}}`` is ``{'dropout': 0.3}``); a name given twice with two
    values refused; a model setting's value of the kind the checkpoint stores."""
    if overrides is None:
        return None
    if not isinstance(overrides, dict):
        raise UserError("--model-overrides must be a dict of settings, {}; got {!r}".format(_EXAMPLE, overrides))
    groups = _group_names()
    flat, where = {}, {}

    def put(name, value, origin):
        if not isinstance(name, str):
            raise UserError("--model-overrides: the key {!r} ({}) is not a setting's name: give names as "
                            "strings, {}".format(name, type(name).__name__, _EXAMPLE))
        if name in flat and not (flat[name] == value and type(flat[name]) is type(value)):
            raise UserError("--model-overrides gives {} twice ({}={!r}, {}={!r}): give it once".format(
                name, where[name], flat[name], origin, value))
        flat[name], where[name] = value, origin

    flat_cfg = isinstance(cfg, Namespace)  # an old checkpoint's args: one flat namespace
    for key, value in overrides.items():
        if not (isinstance(key, str) and key in groups and isinstance(value, dict)):
            put(key, value, key)
            continue
        node = cfg if flat_cfg else _stored(cfg, key)
        known = _names(node, key == "model" or flat_cfg) if cfg is not None else None
        if cfg is not None and node is None:
            raise UserError("--model-overrides: this checkpoint's config has no {} group (it is unset), so "
                            "{{'{}': {!r}}} would set nothing: drop it".format(key, key, value))
        for name, inner in value.items():
            if isinstance(inner, dict):
                raise UserError("--model-overrides: {{'{}': {{{!r}: {{...}}}}}} nests deeper than a config group: "
                                "give settings one level down, {}".format(key, name, _EXAMPLE))
            if known is not None and isinstance(name, str) and name not in known:
                raise UserError("--model-overrides: {!r}{} is not a setting of this checkpoint's {} group: use "
                                "the option's name without -- and with _ for -, {}".format(
                                    name, _suggest(name, known), key, _EXAMPLE))
            put(name, inner, "{}.{}".format(key, name))
    model = cfg if flat_cfg else _stored(cfg, "model") if cfg is not None else None
    if model is not None:
        for name, value in flat.items():
            if name in (vars(model) if isinstance(model, Namespace) else model):
                _check_kind(name, value, _stored(model, name))
    return flat


def checked_model_overrides(overrides, state):
    """(added by fairseq_define) ``flat_model_overrides`` against the config stored in the
    loaded checkpoint ``state`` (load_checkpoint_to_cpu, before anything is applied)."""
    cfg = None
    if isinstance(state, dict):
        cfg = state.get("cfg") if state.get("cfg") is not None else state.get("args")
    return flat_model_overrides(overrides, cfg)


def check_model_overrides(overrides, cfg, source="--model-overrides"):
    """(added by fairseq_define) Refuse --model-overrides names that are no setting of the
    loaded checkpoint's config (model, task, generation, ...), nor an option of its model.
    ``source`` names where they came from in the line: the hub's from_pretrained passes its
    keyword arguments, which fairseq applied the same way and dropped without a word."""
    import difflib

    if not overrides or not isinstance(cfg, DictConfig):
        return
    overrides = flat_model_overrides(overrides, cfg)
    known = _config_keys(cfg)
    model_cfg = cfg.get("model", None)
    if model_cfg is not None:
        known |= _model_option_names(model_cfg)
    unknown = [k for k in overrides if k not in known]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(str(key), sorted(map(str, known)), n=1)
            hints.append("{!r}{}".format(key, " (did you mean {!r}?)".format(close[0]) if close else ""))
        raise UserError(
            "{}: {} {} not a setting of this checkpoint's model, task or other config: use the option's "
            "name without -- and with _ for -, e.g. {}".format(
                source, ", ".join(hints), "is" if len(unknown) == 1 else "are",
                "\"{'dropout': 0.0}\"" if source.startswith("--") else "dropout=0.0",
            )
        )
    _check_task_settings_reach_the_task(overrides, cfg, source)


# the tools that build their task from their own command line and load only the models: an
# override of a task setting changes the stored config, which nothing reads there
_OWN_TASK = ("fairseq-generate", "fairseq-interactive", "fairseq-eval-lm")


def _check_task_settings_reach_the_task(overrides, cfg, source):
    import os
    import sys

    prog = os.path.basename(sys.argv[0]) if sys.argv else ""
    task_cfg, model_cfg = cfg.get("task", None), cfg.get("model", None)
    if not source.startswith("--") or prog not in _OWN_TASK or not isinstance(task_cfg, DictConfig):
        return
    in_task = [k for k in overrides if k in task_cfg]
    if not in_task:
        return
    # the model's group: a DictConfig, or a Namespace (an architecture without a dataclass)
    model = set(vars(model_cfg)) if isinstance(model_cfg, Namespace) else set(_config_keys(model_cfg or DictConfig({})))
    model |= _model_option_names(model_cfg) if model_cfg is not None else set()
    task_only = [k for k in in_task if k not in model]
    if task_only:
        raise UserError(
            "{} {}: {} the task's, which {} builds from its own command line, so the override would "
            "change nothing; give {} instead".format(
                source, ", ".join(map(repr, task_only)), "is" if len(task_only) == 1 else "are", prog,
                " ".join(_as_argument(k, overrides[k]) for k in task_only),
            )
        )


def _as_argument(key, value) -> str:
    """A task setting as its tool's command line takes it: fairseq's ``data`` is positional
    (gen_parser_from_dataclass adds it without --), every other setting an option."""
    return "{} (the data directory, first positional argument)".format(value) if key == "data" else "--{} {}".format(
        key.replace("_", "-"), value
    )
