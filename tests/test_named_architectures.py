"""Named architectures (``--arch``) of the four models: every name is written out in its
model file beside the model (greppable: models/*.py), every architecture the paper's tables
name is registered, and an architecture fills only the settings left unset."""

from argparse import Namespace
from pathlib import Path

import pytest
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_INV_REGISTRY, ARCH_MODEL_REGISTRY

import fairseq_define.models  # registers the architectures
from fairseq_define.models.named_architectures import preset
from fairseq_define.paper_tables import TABLES

MODELS = ("define_transformer", "define_lstm_lm", "define_transformer_xl", "define_transformer_lm")
MODEL_FILES = {"define_transformer": "define_transformer.py", "define_lstm_lm": "lstm_lm.py",
               "define_transformer_xl": "transformer_xl.py", "define_transformer_lm": "define_transformer_lm.py"}
MODELS_DIR = Path(fairseq_define.models.__file__).parent
ARCHS = sorted((a, m) for m in MODELS for a in ARCH_MODEL_INV_REGISTRY[m])
# (table:row, architecture) of every architecture the paper's tables name, full scale and small
NAMED = sorted({(f"{t.id}:{r.id}", arch) for t in TABLES.values() for r in t.rows
                for arch in {r.arch, r.train_arch(small=True)}})


@pytest.mark.parametrize("arch, model", ARCHS)
def test_every_architecture_name_is_written_out_in_its_model_file(arch, model):
    assert f'"{arch}"' in (MODELS_DIR / MODEL_FILES[model]).read_text(encoding="utf-8")


@pytest.mark.parametrize("row, arch", NAMED)
def test_every_architecture_a_paper_row_names_is_registered(row, arch):
    assert arch in ARCH_MODEL_REGISTRY, f"{row} names {arch}, which no model registers"


@pytest.mark.parametrize("arch, model", [(a, m) for a, m in ARCHS if a != m or preset(a) is not None])
def test_a_preset_is_what_the_architecture_sets_over_its_model_defaults(arch, model):
    """The settings a row of the paper reads (``Row.settings``) are the ones its architecture
    fills: each preset value survives the model's base architecture. (A dataclass model's own
    name is an architecture of its defaults, without a preset.)"""
    args = Namespace()
    ARCH_CONFIG_REGISTRY[arch](args)
    assert {k: getattr(args, k) for k in preset(arch)} == dict(preset(arch))


def test_a_preset_of_an_architecture_not_registered_here_is_none():
    assert preset("transformer_wmt_en_de") is None and preset("transformer_lm_wiki103") is None


@pytest.mark.parametrize("arch, unset, kept", [
    ("define_transformer_tiny", "encoder_layers", "define_map_dim"),
    ("define_lstm_wt103_t6_glt", "lstm_layers", "define_max_groups"),
    ("define_txl_wt103_define_n128", "decoder_embed_dim", "define_expand_dim"),
    ("define_transformer_lm_wiki103_n64", "define_expand_dim", "decoder_layers"),
    ("define_transformer_lm_small", "define_map_dim", "decoder_embed_dim"),
])
def test_an_architecture_fills_what_is_unset_or_none_and_keeps_what_is_set(arch, unset, kept):
    full = Namespace()
    ARCH_CONFIG_REGISTRY[arch](full)
    # None: a field present but unset, as in a config loaded from a checkpoint
    args = Namespace(**{unset: None, kept: 7})
    ARCH_CONFIG_REGISTRY[arch](args)
    assert getattr(args, unset) == getattr(full, unset) is not None
    assert getattr(args, kept) == 7 != getattr(full, kept)
    assert vars(args).keys() == vars(full).keys()
