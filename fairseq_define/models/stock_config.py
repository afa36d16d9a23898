"""A checkpoint config that stock fairseq 0.12.2 reads: only the options fairseq itself
defines, no plugin setting, no ``--user-dir`` (what fairseq-define-export writes).

fairseq stores a model's config in two ways: an argparse model (``transformer``,
``lstm_lm``) as the whole ``fairseq-train`` Namespace, a dataclass model
(``transformer_lm``) as a dict of its config's fields. Either way the other sections (common,
dataset, task, bpe, ...) are dicts of a section dataclass, or of the dataclass of the
registry entry they name. A stock fairseq merges a task section into its dataclass on load,
and refuses a key it does not know, so every key here is one of fairseq's own.
"""

import argparse
import dataclasses
from argparse import Namespace
from typing import Dict, Optional, Set

# the sections of FairseqConfig that name a registry entry by their "_name"
REGISTRY_SECTIONS = ("criterion", "optimizer", "lr_scheduler", "scoring", "bpe", "tokenizer")


def is_stock(cls) -> bool:
    """A class that fairseq itself defines (not a plugin's)."""
    return cls.__module__.split(".")[0] == "fairseq"


def section_dataclasses() -> Dict[str, type]:
    """FairseqConfig's sections of a fixed dataclass: name -> dataclass (common, dataset, ...)."""
    from fairseq.dataclass.configs import FairseqConfig

    return {f.name: f.type for f in dataclasses.fields(FairseqConfig) if dataclasses.is_dataclass(f.type)}


def dataclass_keys(dc) -> Set[str]:
    return {f.name for f in dataclasses.fields(dc)}


def registry_entry(section: str, name: Optional[str]):
    """(class, dataclass or None) of a stock registry entry; None if ``name`` is a plugin's or unknown."""
    from fairseq.registry import REGISTRIES

    reg = REGISTRIES.get(section)
    cls = reg["registry"].get(name) if reg and name else None
    if cls is None or not is_stock(cls):
        return None
    return cls, reg["dataclass_registry"].get(name)


def argparse_dests(*adders) -> Set[str]:
    """The Namespace keys the ``add_args``-style callables define."""
    parser = argparse.ArgumentParser(add_help=False, conflict_handler="resolve")
    for add in adders:
        add(parser)
    return {a.dest for a in parser._actions}


def training_namespace_keys(model_cls, task_cls, registry_names: Dict[str, Optional[str]]) -> Set[str]:
    """The keys of the Namespace a stock ``fairseq-train`` stores for an argparse model:
    the sections' options, the model's and the task's, and those of the stock registry
    entries named in ``registry_names`` (section -> name)."""
    from fairseq.dataclass.utils import gen_parser_from_dataclass

    adders = [lambda p, dc=dc: gen_parser_from_dataclass(p, dc()) for dc in section_dataclasses().values()]
    adders += [model_cls.add_args, task_cls.add_args]
    for section, name in registry_names.items():
        entry = registry_entry(section, name)
        if entry is not None:
            cls, dc = entry
            adders.append((lambda p, dc=dc: gen_parser_from_dataclass(p, dc())) if dc else cls.add_args)
    keys = argparse_dests(*adders)
    # the choices fairseq's parser adds for the registries, the model and the task
    return keys | {"arch", "task", "_name", *REGISTRY_SECTIONS}


def _get(cfg, key, default=None):
    if cfg is None:
        return default
    if isinstance(cfg, Namespace):
        return getattr(cfg, key, default)
    return cfg.get(key, default)


def stock_registry_section(section: str, value):
    """A registry section (criterion, bpe, ...) kept if it names a stock entry, with only its
    dataclass's keys; otherwise None (an inference checkpoint needs no plugin criterion or
    optimizer)."""
    name = _get(value, "_name")
    entry = registry_entry(section, name)
    if entry is None or entry[1] is None:
        return None
    keys = dataclass_keys(entry[1])
    return {"_name": name, **{k: v for k, v in dict(value).items() if k in keys}}


def stock_config(cfg: dict, model, task_name: str) -> dict:
    """A copy of a checkpoint's ``cfg`` (a dict, as fairseq saves it) with ``model`` as its
    model section, the stock task ``task_name`` (its fields from the original task section),
    and every other section reduced to stock keys; no ``--user-dir``."""
    from fairseq.tasks import TASK_DATACLASS_REGISTRY

    out = {"_name": None}
    for name, dc in section_dataclasses().items():
        section = cfg.get(name)
        out[name] = None if section is None else {k: v for k, v in dict(section).items() if k in dataclass_keys(dc)}
    out["common"] = {**(out["common"] or {}), "user_dir": None}
    for name in REGISTRY_SECTIONS:
        out[name] = stock_registry_section(name, cfg.get(name))
    task_keys = dataclass_keys(TASK_DATACLASS_REGISTRY[task_name])
    task = {k: v for k, v in dict(cfg.get("task") or {}).items() if k in task_keys}
    out["task"] = {**task, "_name": task_name}
    out["model"] = model
    return out
