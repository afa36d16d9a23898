"""Every architecture the plugin registers resolves to the settings pinned in
tests/arch_settings.json: ``vars(args)`` after the architecture function on a fresh
Namespace. The tables behind the registrations (models/*.py, tools/paper_tables.py) may be
reorganized; the names and what they set may not change."""

import json
from argparse import Namespace
from pathlib import Path

import pytest
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

PINNED = json.loads((Path(__file__).parent / "arch_settings.json").read_text(encoding="utf-8"))


def registered():
    return sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m.__module__.startswith("fairseq_define"))


def test_the_registered_names_are_the_pinned_ones():
    assert registered() == sorted(PINNED)


@pytest.mark.parametrize("arch", sorted(PINNED))
def test_an_architecture_resolves_to_its_pinned_settings(arch):
    args = Namespace()
    ARCH_CONFIG_REGISTRY[arch](args)
    assert json.loads(json.dumps(vars(args), default=repr)) == PINNED[arch]
