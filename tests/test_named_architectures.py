"""Named architectures (``--arch``) of the four models: every name is written out in the
source (greppable: models/*.py, or tools/paper_tables.py for a paper table's row), and an
architecture fills only the settings left unset."""

from argparse import Namespace
from pathlib import Path

import pytest
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_INV_REGISTRY

import fairseq_define.models  # registers the architectures

MODELS = ("define_transformer", "define_lstm_lm", "define_transformer_xl", "define_transformer_lm")
PACKAGE = Path(fairseq_define.models.__file__).parents[1]
SOURCE = "\n".join(p.read_text() for p in [*(PACKAGE / "models").glob("*.py"), PACKAGE / "tools" / "paper_tables.py"])
ARCHS = sorted(a for m in MODELS for a in ARCH_MODEL_INV_REGISTRY[m])


@pytest.mark.parametrize("arch", ARCHS)
def test_every_architecture_name_is_written_out(arch):
    assert f'"{arch}"' in SOURCE


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
