"""DefineOptions: the --define-* flags resolved once per model, as the modules take them."""

import dataclasses
from argparse import Namespace

import pytest
from omegaconf import OmegaConf

from fairseq_define.models.lstm_lm import LSTMLMConfig
from fairseq_define.modules import DefineConfig, DefineOptions
from fairseq_define.modules.define.config import REMOVED_SETTINGS

from .helpers import compile_with_aot_eager, define_cfg


def test_a_config_without_the_define_fields_takes_define_configs_defaults():
    """A stored config older than a flag reads that flag's default, from DefineConfig only."""
    assert DefineOptions.from_config(Namespace()) == DefineOptions.from_config(DefineConfig())


@pytest.mark.parametrize("make", ["dataclass", "omegaconf"], ids=str)
def test_choices_and_lists_become_plain_types(make):
    cfg = LSTMLMConfig(define_transform="define", define_groups="4,2,1", define_norm="group_layer",
                       define_activation="gelu", define_unit_centring="none", define_no_bias=True)
    if make == "omegaconf":  # what fairseq hands a model built from a hydra config
        cfg = OmegaConf.structured(cfg)
    options = DefineOptions.from_config(cfg)
    assert (options.transform, options.norm, options.activation, options.unit_centring) == (
        "define", "group_layer", "gelu", "none")
    for value in (options.transform, options.norm, options.activation, options.unit_centring, options.style):
        assert type(value) is str
    assert options.groups == (4, 2, 1) and options.bias is False and options.reduce is True
    assert options.map_dim == 256 and options.out_dim is None  # LSTMLMConfig's own n default


@pytest.mark.parametrize("transform, style", [("define", "authors"), ("projective", "paper"), ("none", "paper")])
def test_the_authors_style_changes_only_the_define_transform(transform, style):
    assert DefineOptions.from_config(define_cfg(define_style="authors", define_transform=transform)).style == style


@pytest.mark.parametrize("make", ["namespace", "omegaconf"], ids=str)
def test_settings_of_older_code_in_a_stored_config_are_ignored(make):
    """--define-map / --define-adaptive-cutoff / --define-adaptive-factor are gone (the language
    models' adaptive input is their adaptive map), and so are the settings of how the unit runs
    (--define-token-path, --define-compile, --define-compile-mode, --define-row-bucket: the
    benchmarks' set_unit_run); a config saved with them resolves as without."""
    assert not set(REMOVED_SETTINGS) & {f.name for f in dataclasses.fields(DefineConfig)}
    old = dict(define_map="standard", define_adaptive_cutoff=None, define_adaptive_factor=2.0,
               define_token_path="plain", define_compile=True, define_compile_mode="reduce-overhead",
               define_row_bucket=64)
    assert set(old) == set(REMOVED_SETTINGS)
    cfg = define_cfg(**old)
    if make == "omegaconf":
        cfg = OmegaConf.create(vars(cfg))
    assert DefineOptions.from_config(cfg) == DefineOptions.from_config(define_cfg())


def test_options_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DefineOptions.from_config(define_cfg()).depth = 5


# per flag the modules read, a valid setting other than the default (with what it needs);
# define_cache_on_load acts in the model when a checkpoint loads, not in a module
OTHER_SETTINGS = {
    "define_style": {"define_style": "authors"}, "define_transform": {"define_transform": "projective"},
    "define_map_dim": {"define_map_dim": 32}, "define_expand_dim": {"define_expand_dim": 128},
    "define_depth": {"define_depth": 5}, "define_out_dim": {"define_out_dim": 24},
    "define_max_groups": {"define_max_groups": 2}, "define_groups": {"define_groups": "2,2,1"},
    "define_activation": {"define_activation": "relu"}, "define_norm": {"define_norm": "none"},
    "define_no_bias": {"define_no_bias": True}, "define_dropout": {"define_dropout": 0.1},
    "define_map_dropout": {"define_map_dropout": 0.1}, "define_no_reduce": {"define_no_reduce": True},
    "define_unit_grad_scale": {"define_unit_grad_scale": 1.0},
    "define_cached_table": {"define_cached_table": True},
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


def test_every_style_choice_has_one_row_in_the_styles_table():
    from fairseq_define.modules.define.config import DEFINE_STYLE_CHOICES
    from fairseq_define.modules.define.embedding import UNIT_TYPES
    from fairseq_define.modules.define.styles import STYLES

    assert set(STYLES) == {str(choice.value) for choice in DEFINE_STYLE_CHOICES}
    assert set(UNIT_TYPES) == {style.unit for style in STYLES.values()}


def test_the_embedding_takes_everything_style_specific_from_the_table(monkeypatch):
    """A style added to the table alone (its schedule, unit and map) is what the embedding
    builds and reads: the embedding does not know the styles."""
    import torch

    from fairseq_define.modules import DefineEmbedding, DefineUnit, build_schedule
    from fairseq_define.modules.define.styles import STYLES, Style

    calls = []

    def schedule(options, n, m):
        calls.append((n, m))
        return build_schedule(n, 32, 2, m, transform="linear")

    def read_map(emb, tokens):
        return emb.map(tokens) * 0 + 1.0

    monkeypatch.setitem(STYLES, "mine", Style(None, None, schedule, DefineUnit, read_map))
    options = dataclasses.replace(DefineOptions.from_config(define_cfg()), style="mine")
    emb = DefineEmbedding(options, 40, 1, 24)
    assert calls == [(16, 24)] and emb.schedule.transform == "linear" and isinstance(emb.unit, DefineUnit)
    out = emb(torch.tensor([[3, 7]]))
    torch.testing.assert_close(out[0, 0], out[0, 1])  # every token reads the same map output


@pytest.mark.parametrize("arch", ["define_transformer_tiny", "define_txl_tiny", "define_lstm_tiny",
                                  "define_transformer_lm_tiny"])
def test_a_model_resolves_its_define_settings_once(arch, monkeypatch):
    """One DefineOptions per model, handed to each of its DeFINE embeddings (the transformer
    has one per side here)."""
    import torch
    from fairseq import options
    from fairseq.models import ARCH_MODEL_REGISTRY

    from fairseq_define.models.without_data import VocabularyOnlyTask, dictionary_of_size, is_translation_arch
    from fairseq_define.modules import DefineEmbedding

    resolved, seen = [], []
    original_from_config, original_init = DefineOptions.from_config.__func__, DefineEmbedding.__init__

    def from_config(cls, cfg):
        resolved.append(original_from_config(cls, cfg))
        return resolved[-1]

    def init(self, options, *args, **kwargs):
        seen.append(options)
        original_init(self, options, *args, **kwargs)

    monkeypatch.setattr(DefineOptions, "from_config", classmethod(from_config))
    monkeypatch.setattr(DefineEmbedding, "__init__", init)
    task = "translation" if is_translation_arch(arch) else "language_modeling"
    flags = ["--define-transform", "define"] if "txl" in arch or "lstm" in arch else []
    args = options.parse_args_and_arch(options.get_training_parser(default_task=task),
                                       input_args=["-", "--task", task, "--arch", arch, *flags])
    d = dictionary_of_size(100)
    with torch.device("meta"):  # the model class's own build: fairseq's also counts the model first (model_budget.py)
        model = ARCH_MODEL_REGISTRY[arch].build_model(args, VocabularyOnlyTask(d, d))
    assert len(resolved) == 1 and seen and all(o is resolved[0] for o in seen)
    assert not hasattr(args, "define_resolved_options")  # nothing of it is saved with the model's args
    assert sum(isinstance(m, DefineEmbedding) for m in model.modules()) == len(seen)


@pytest.mark.parametrize("arch", ["define_txl_tiny", "define_lstm_tiny", "define_transformer_lm_tiny"])
def test_a_stored_config_with_the_removed_settings_loads_as_before(arch):
    """A checkpoint's config saved before --define-map, --define-adaptive-* and the run settings
    (--define-token-path, --define-compile, --define-compile-mode, --define-row-bucket) went
    holds them; fairseq builds the model from it as it does when loading the checkpoint, and
    the same weights give the same outputs."""
    import torch
    from fairseq import models, options

    from fairseq_define.models.without_data import VocabularyOnlyTask, dictionary_of_size

    args = options.parse_args_and_arch(options.get_training_parser(default_task="language_modeling"),
                                       input_args=["-", "--task", "language_modeling", "--arch", arch,
                                                   "--tokens-per-sample", "8"])
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import open_dict

    plain, stored = convert_namespace_to_omegaconf(args).model, convert_namespace_to_omegaconf(args).model
    with open_dict(stored):  # what the older code's checkpoint holds
        stored.update(define_map="standard", define_adaptive_cutoff=None, define_adaptive_factor=4.0,
                      define_token_path="plain", define_compile=True, define_compile_mode="reduce-overhead",
                      define_row_bucket=64)
    d = dictionary_of_size(60)
    task = VocabularyOnlyTask(d, d)
    torch.manual_seed(0)
    new = models.build_model(plain, task).eval()
    old = models.build_model(stored, task, from_checkpoint=True).eval()
    old.load_state_dict(new.state_dict())
    tokens = torch.randint(4, 60, (2, 6))
    torch.testing.assert_close(old(tokens)[0], new(tokens)[0], rtol=0, atol=0)


def test_a_checkpoint_saved_with_the_run_settings_resumes_and_takes_overrides_of_them():
    """The patch's checkpoint checks (resume, --finetune-from-model, --model-overrides) let a
    checkpoint whose stored config holds the removed run settings through: this run's config
    lacks them, and they are neutral; a setting that changes the function is still refused."""
    from fairseq import options
    from fairseq._define_runtime.checkpoint_fit import CheckpointFormError, check_checkpoint_form, check_overrides_fit
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import open_dict

    args = options.parse_args_and_arch(options.get_training_parser(default_task="language_modeling"),
                                       input_args=["-", "--task", "language_modeling", "--arch", "define_lstm_tiny"])
    here, stored = convert_namespace_to_omegaconf(args).model, convert_namespace_to_omegaconf(args).model
    run_settings = dict(define_token_path="plain", define_compile=True, define_compile_mode="reduce-overhead",
                        define_row_bucket=64)
    assert not set(run_settings) & set(here)
    with open_dict(stored):
        stored.update(run_settings)
    state = {"cfg": {"model": stored}}
    check_checkpoint_form("old.pt", state, here)
    check_overrides_fit(state, {"define_compile": False, "define_row_bucket": 0, "define_token_path": "auto"}, "old.pt")
    with open_dict(stored):
        stored.define_depth = here.define_depth + 1
    with pytest.raises(CheckpointFormError, match="--define-depth"):
        check_checkpoint_form("old.pt", state, here)


@pytest.mark.parametrize("flag", sorted(OTHER_SETTINGS))
def test_a_setting_is_neutral_exactly_when_trained_weights_compute_the_same_with_it(flag, monkeypatch):
    """The patch's checkpoint checks refuse a resume, a fine-tune or a --model-overrides that
    changes a setting unless it is neutral (config_bounds.NEUTRAL_MODEL_SETTINGS): a neutral
    one must leave the weights' function as it is (the same parameters and, outside training,
    the same outputs: dropout and gradient treatments are neutral), and every other one must
    change the parameters or the outputs, or the checks would refuse what is safe (resuming
    with another --define-unit-grad-scale, say)."""
    import torch
    from fairseq._define_runtime.checkpoint_fit import is_neutral_setting

    from fairseq_define.modules import DefineEmbedding
    from fairseq_define.modules.define.config import DefineConfigError

    compile_with_aot_eager(monkeypatch)
    base = dict(define_out_dim=32)
    torch.manual_seed(0)
    ours = DefineEmbedding(DefineOptions.from_config(define_cfg(**base)), 40, 1, 32).double()
    try:
        other = DefineEmbedding(
            DefineOptions.from_config(define_cfg(**{**base, **OTHER_SETTINGS[flag]})), 40, 1, 32
        ).double()
    except DefineConfigError:
        other = None  # a setting no model of these sizes takes alone (it changes the structure)
    same = other is not None and {k: v.shape for k, v in other.state_dict().items()} == {
        k: v.shape for k, v in ours.state_dict().items()}
    if same:
        other.load_state_dict(ours.state_dict())
        tokens = torch.randint(2, 40, (3, 7), generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            same = torch.allclose(ours.eval()(tokens), other.eval()(tokens), rtol=1e-10, atol=1e-12)
    assert is_neutral_setting(flag) == same, (flag, "neutral" if is_neutral_setting(flag) else "not neutral")
