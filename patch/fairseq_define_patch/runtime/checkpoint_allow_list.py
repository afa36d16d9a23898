"""The classes a fairseq checkpoint may hold besides tensors and plain containers: the
allow-list of the weights-only loader (checkpoint_loading.py).

torch >= 2.6 loads with its weights-only unpickler by default and refuses fairseq's
checkpoints, which hold argparse and omegaconf configs; torch's unpickler with this list
accepts them, and refuses everything else, so a crafted checkpoint cannot run code when it is
loaded. Plugins add their own config types with ``add_checkpoint_safe_globals``.
"""

import argparse
import collections
import typing

__all__ = ["add_checkpoint_safe_globals", "checkpoint_safe_globals_by_name", "_fairseq_checkpoint_safe_globals"]


def _fairseq_checkpoint_safe_globals():
    """Non-tensor classes that fairseq checkpoints hold (added by fairseq_define)."""
    import omegaconf
    from fairseq.data import dictionary as fairseq_dictionary
    from omegaconf import nodes as omegaconf_nodes

    allowed = [
        argparse.Namespace,
        collections.OrderedDict,
        collections.defaultdict,
        omegaconf.DictConfig,
        omegaconf.ListConfig,
        omegaconf.base.ContainerMetadata,
        omegaconf.base.Metadata,
        omegaconf_nodes.AnyNode,
        omegaconf_nodes.StringNode,
        omegaconf_nodes.IntegerNode,
        omegaconf_nodes.FloatNode,
        omegaconf_nodes.BooleanNode,
        omegaconf_nodes.EnumNode,
        typing.Any,
        # task state of the audio fine-tuning and HuBERT tasks: symbols, counts, indices
        fairseq_dictionary.Dictionary,
        # omegaconf metadata names these types (a config broadcast between ranks)
        dict,
        list,
        int,
        float,
        bool,
        str,
    ]
    return allowed + list(_EXTRA_SAFE_GLOBALS)


_EXTRA_SAFE_GLOBALS = []


def add_checkpoint_safe_globals(classes):
    """Let checkpoints hold more classes (plugins call this for their own config types)."""
    for cls in classes:
        if cls not in _EXTRA_SAFE_GLOBALS:
            _EXTRA_SAFE_GLOBALS.append(cls)


def checkpoint_safe_globals_by_name():
    """The safe loader's allow-list: qualified name -> object (torch's and fairseq's)."""
    from torch import _weights_only_unpickler

    safe = dict(_weights_only_unpickler._get_allowed_globals())
    for obj in _fairseq_checkpoint_safe_globals():
        name = getattr(obj, "__qualname__", None) or getattr(obj, "_name", "")
        safe[f"{obj.__module__}.{name}"] = obj
    return safe
