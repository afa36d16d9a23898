"""Every architecture the plugin registers resolves to the settings pinned in
tests/arch_settings.json: ``vars(args)`` after the architecture function on a fresh
Namespace. The tables behind the registrations (each model file's presets) may be
reorganized; the names and what they set may not change."""

import json
from argparse import Namespace
from pathlib import Path

import pytest
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

from fairseq_define.paper_tables import TABLES

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


@pytest.mark.parametrize("table", TABLES.values(), ids=TABLES.keys())
def test_a_paper_row_reads_the_settings_its_architecture_fills(table):
    """A paper row names its architecture; its settings are the model file's preset: a row of an
    architecture this plugin registers has them (those of fairseq's own have none), and they are
    what it resolves to."""
    for row in table.rows:
        assert (row.settings is not None) == (row.arch in PINNED), row.id
        for key, value in (row.settings or {}).items():
            assert PINNED[row.arch][key] == value, (row.id, key)
