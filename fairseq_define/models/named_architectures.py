"""Named architectures (``--arch NAME``): each model file holds its presets, one literal
table name -> (docstring, settings), beside the model (as fairseq's transformer_lm.py), and
registers it here in one loop. An architecture fills the settings the user left unset:
absent, or None as in a config loaded from a checkpoint, where every field is present."""

from types import MappingProxyType
from typing import Callable, Dict, Mapping, Optional, Tuple

from fairseq.models import register_model_architecture

ArchTable = Dict[str, Tuple[str, Mapping[str, object]]]

# every registered preset's settings, by architecture (what the paper's rows and the tools read)
_PRESETS: Dict[str, Mapping[str, object]] = {}


def preset(arch: str) -> Optional[Mapping[str, object]]:
    """The settings the model file's table gives ``arch`` (before its model's defaults fill the
    rest); None for an architecture this plugin does not register (fairseq's own)."""
    settings = _PRESETS.get(arch)
    return None if settings is None else MappingProxyType(settings)


def fill_defaults(args, settings: Mapping[str, object]) -> None:
    """Set each of ``settings`` on ``args`` (a Namespace or an omegaconf config) unless set."""
    for key, value in settings.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)


def register_architectures(model_name: str, table: ArchTable, base: Optional[Callable] = None,
                           prepare: Optional[Callable] = None) -> None:
    """Register every row of ``table`` for ``model_name``; ``base`` (if any) fills what the
    row leaves unset, after it; ``prepare`` (if any) sees the config before the row does
    (to tell a checkpoint's config that predates a setting)."""
    for name, (doc, settings) in table.items():

        def arch(args, settings=settings):
            if prepare is not None:
                prepare(args)
            fill_defaults(args, settings)
            if base is not None:
                base(args)

        arch.__name__ = arch.__qualname__ = name
        arch.__doc__ = doc
        register_model_architecture(model_name, name)(arch)
        _PRESETS[name] = settings
