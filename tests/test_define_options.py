"""DefineOptions: the --define-* flags resolved once, as the modules take them."""

import dataclasses
from argparse import Namespace

import pytest
from omegaconf import OmegaConf

from fairseq_define.models.lstm_lm import LSTMLMConfig
from fairseq_define.modules import DefineConfig, DefineOptions

from .helpers import define_cfg


def test_a_config_without_the_define_fields_takes_define_configs_defaults():
    """A stored config older than a flag reads that flag's default, from DefineConfig only."""
    assert DefineOptions.from_config(Namespace()) == DefineOptions.from_config(DefineConfig())


@pytest.mark.parametrize("make", ["dataclass", "omegaconf"], ids=str)
def test_choices_and_lists_become_plain_types(make):
    cfg = LSTMLMConfig(define_transform="define", define_groups="4,2,1", define_norm="group_layer",
                       define_activation="gelu", define_token_path="plain", define_no_bias=True)
    if make == "omegaconf":  # what fairseq hands a model built from a hydra config
        cfg = OmegaConf.structured(cfg)
    options = DefineOptions.from_config(cfg)
    assert (options.transform, options.norm, options.activation, options.token_path, options.map) == (
        "define", "group_layer", "gelu", "plain", "standard")
    for value in (options.transform, options.norm, options.activation, options.token_path, options.map, options.style):
        assert type(value) is str
    assert options.groups == (4, 2, 1) and options.bias is False and options.reduce is True
    assert options.map_dim == 256 and options.out_dim is None  # LSTMLMConfig's own n default


@pytest.mark.parametrize("transform, style", [("define", "authors"), ("projective", "paper"), ("none", "paper")])
def test_the_authors_style_changes_only_the_define_transform(transform, style):
    assert DefineOptions.from_config(define_cfg(define_style="authors", define_transform=transform)).style == style


def test_adaptive_cutoffs_are_read_only_for_the_adaptive_map():
    options = DefineOptions.from_config(define_cfg(define_map="adaptive", define_adaptive_cutoff="20,40"))
    assert options.adaptive_cutoff == (20, 40)
    assert DefineOptions.from_config(define_cfg()).adaptive_cutoff is None


def test_options_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DefineOptions.from_config(define_cfg()).depth = 5


# per flag the modules read, a valid setting other than the default (with what it needs);
# define_cache_on_load acts in the model when a checkpoint loads, not in a module
OTHER_SETTINGS = {
    "define_style": {"define_style": "authors"}, "define_transform": {"define_transform": "projective"},
    "define_map": {"define_map": "adaptive", "define_adaptive_cutoff": "20"},
    "define_adaptive_cutoff": {"define_map": "adaptive", "define_adaptive_cutoff": "20"},
    "define_map_dim": {"define_map_dim": 32}, "define_expand_dim": {"define_expand_dim": 128},
    "define_depth": {"define_depth": 5}, "define_out_dim": {"define_out_dim": 24},
    "define_max_groups": {"define_max_groups": 2}, "define_groups": {"define_groups": "4,2,1"},
    "define_activation": {"define_activation": "relu"}, "define_norm": {"define_norm": "none"},
    "define_no_bias": {"define_no_bias": True}, "define_dropout": {"define_dropout": 0.1},
    "define_map_dropout": {"define_map_dropout": 0.1}, "define_no_reduce": {"define_no_reduce": True},
    "define_adaptive_factor": {"define_adaptive_factor": 2.0}, "define_unit_grad_scale": {"define_unit_grad_scale": 1.0},
    "define_token_path": {"define_token_path": "plain"}, "define_cached_table": {"define_cached_table": True},
    "define_unit_centring": {"define_unit_centring": "none"},
}


@pytest.mark.parametrize("style,scale", [("paper", 0.01), ("authors", 0.01)])
def test_an_unset_grad_scale_takes_the_styles_default(style, scale):
    assert DefineOptions.from_config(define_cfg(define_style=style)).unit_grad_scale == scale
    assert DefineOptions.from_config(define_cfg(define_style=style, define_unit_grad_scale=1.0)).unit_grad_scale == 1.0


def test_every_define_flag_reaches_the_options():
    """A flag added to DefineConfig needs a field of DefineOptions (and a setting here)."""
    flags = {f.name for f in dataclasses.fields(DefineConfig) if f.name.startswith("define_")}
    assert flags - {"define_cache_on_load"} == set(OTHER_SETTINGS)
    default = DefineOptions.from_config(define_cfg())
    for flag, overrides in OTHER_SETTINGS.items():
        assert DefineOptions.from_config(define_cfg(**overrides)) != default, flag
