"""define_transformer_lm in process: fairseq's transformer_lm with a DeFINE input layer, of
either map and unit style, and the projective baseline at the same n. Its output is tied at
n (to the n-dim table, or fairseq's adaptive softmax to the adaptive map), untied at d (a
table or an adaptive softmax of its own) or tied to the unit's outputs; incremental
decoding equals a full pass; the WikiText-103 architectures keep fairseq's context model;
settings it cannot honour are refused in one line."""

from argparse import Namespace

import pytest
import torch
from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY

from fairseq_define.errors import UserError
from fairseq_define.models.define_transformer_lm import DefineTransformerLanguageModel
from fairseq_define.models.transformer_xl import TABLE_2_MAP_DIMS
from fairseq_define.modules.define.config import DefineConfigError
from fairseq_define.param_report import parameter_distribution

from .helpers import ADAPTIVE, tiny_lm

OUTPUT_FORMS = ["tied_map", "untied", "tied_unit"]


@pytest.mark.parametrize("transform", ["define", "projective"])
@pytest.mark.parametrize("style", ["paper", "authors"])
@pytest.mark.parametrize("adaptive", [False, True], ids=["standard", "adaptive"])
@pytest.mark.parametrize("output", OUTPUT_FORMS)
def test_incremental_decoding_equals_a_full_pass(transform, style, adaptive, output):
    torch.manual_seed(0)
    model = tiny_lm(define_transform=transform, define_style=style, define_output_layer=output,
                    **(ADAPTIVE if adaptive else {}))
    tokens = torch.randint(4, 40, (2, 7))
    state = {}
    with torch.no_grad():
        full = model.get_normalized_probs(model(tokens), log_probs=True)  # [B, T, V]
        steps = [model.get_normalized_probs(model.decoder(tokens[:, :t + 1], incremental_state=state), log_probs=True)
                 for t in range(tokens.size(1))]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(full.exp().sum(-1), torch.ones(2, 7))


def test_standard_output_is_tied_to_the_n_dim_map_table():
    model = tiny_lm(define_map_dim=12)
    dec = model.decoder
    assert dec.output_projection.weight is dec.embed_tokens.map.weight  # [V, n]
    assert dec.embed_tokens.map.weight.shape == (40, 12)
    assert dec.project_out_dim.weight.shape == (12, 32)  # d -> n, no bias
    assert dec.embed_scale == 1.0  # the map scales itself by sqrt(n)


def test_adaptive_softmax_is_tied_to_the_adaptive_map():
    """Every band table and tail projection of fairseq's adaptive softmax is the adaptive
    map's; only the cluster logits and d -> n are the output's own."""
    model = tiny_lm(define_map_dim=12, **ADAPTIVE)
    dec = model.decoder
    amap, softmax = dec.embed_tokens.map, dec.adaptive_softmax
    assert [band[0].weight.shape[1] for band in amap.embeddings] == [12, 6, 3]  # n / factor^i
    assert softmax.head.word_proj.weight is amap.embeddings[0][0].weight
    for i, tail in enumerate(softmax.tail):
        assert tail[0].weight is amap.embeddings[i + 1][1].weight  # the band's projection, transposed
        assert tail[2].weight is amap.embeddings[i + 1][0].weight
    own = {id(p) for p in softmax.parameters()} - {id(p) for p in amap.parameters()}
    assert own == {id(softmax.head.class_proj.weight)}
    assert dec.project_out_dim.weight.shape == (12, 32)


def test_untied_output_is_a_d_wide_layer_of_its_own():
    model = tiny_lm(define_map_dim=12, define_output_layer="untied")
    dec = model.decoder
    assert dec.output_projection.weight.shape == (40, 32)  # [V, d]
    assert dec.output_projection.weight is not dec.embed_tokens.map.weight
    assert dec.project_out_dim is None and dec.adaptive_softmax is None


def test_untied_adaptive_softmax_is_at_d_with_the_maps_bands_and_shares_nothing():
    model = tiny_lm(define_map_dim=12, define_output_layer="untied", **ADAPTIVE)
    dec = model.decoder
    softmax, amap = dec.adaptive_softmax, dec.embed_tokens.map
    assert softmax.cutoff == [10, 20, 40] and softmax.input_dim == 32 and dec.project_out_dim is None
    # d / factor^i with the softmax's own --adaptive-softmax-factor (fairseq's default 4)
    assert [t[0].weight.shape for t in softmax.tail] == [(8, 32), (2, 32)]
    assert not {id(p) for p in softmax.parameters()} & {id(p) for p in amap.parameters()}


def test_untied_adaptive_softmax_takes_its_own_bands_when_given():
    model = tiny_lm(define_output_layer="untied", adaptive_softmax_cutoff="15", **ADAPTIVE)
    assert model.decoder.adaptive_softmax.cutoff == [15, 40]


@pytest.mark.parametrize("adaptive", [False, True], ids=["standard", "adaptive"])
def test_tied_unit_output_scores_against_the_units_outputs(adaptive):
    model = tiny_lm(define_output_layer="tied_unit", **(ADAPTIVE if adaptive else {}))
    dec = model.decoder
    assert dec.adaptive_softmax is None and dec.project_out_dim is None
    own = {id(p) for p in dec.output_projection.parameters()}
    assert not own  # no parameters of its own: not stored twice
    with torch.no_grad():
        table = dec.embed_tokens(torch.arange(40)[None])[0]  # [V, d]: the unit's output per entry
        torch.testing.assert_close(dec.output_projection.weight, table)
    assert parameter_distribution(model)["total"] < parameter_distribution(
        tiny_lm(define_output_layer="untied", **(ADAPTIVE if adaptive else {})))["total"]


@pytest.mark.parametrize("output", OUTPUT_FORMS)
def test_an_output_form_trains_its_own_weights(output):
    """One step of SGD moves the weights the output form reads: the map and the unit for the
    tied forms, the layer of its own for untied."""
    torch.manual_seed(0)
    model = tiny_lm(define_output_layer=output).train()
    tokens = torch.randint(4, 40, (2, 7))
    logits, _ = model(tokens)
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten()).backward()
    dec = model.decoder
    assert dec.embed_tokens.map.weight.grad.abs().sum() > 0
    if output == "untied":
        assert dec.output_projection.weight.grad.abs().sum() > 0


def test_a_checkpoint_from_before_the_setting_loads_tied_at_n():
    """Configs saved before --define-output-layer existed have no such key: tied at n, as built."""
    args = Namespace(arch="define_transformer_lm_tiny", dropout=0.0, tokens_per_sample=64)
    ARCH_CONFIG_REGISTRY["define_transformer_lm_tiny"](args)
    d = tiny_lm().decoder.dictionary
    model = DefineTransformerLanguageModel.build_model(args, Namespace(source_dictionary=d, target_dictionary=d))
    assert model.decoder.output_projection.weight is model.decoder.embed_tokens.map.weight


def test_projective_counts_as_input_output_and_define_as_define():
    define, projective = (
        parameter_distribution(tiny_lm()),
        parameter_distribution(tiny_lm(define_transform="projective")),
    )
    assert projective["define"] == 0 < define["define"]
    assert projective["context"] == define["context"]
    assert projective["input_output"] == define["input_output"] + 16 * 32 + 32  # + the linear n -> m


def test_wikitext_103_archs_keep_fairseqs_context_model():
    """fairseq's transformer_lm_wiki103 counts 247M (Baevski & Auli); the DeFINE rows keep its
    context model and shrink the input-output layers with n."""
    from fairseq_define.tools.params import build_arch

    base = parameter_distribution(build_arch("transformer_lm_wiki103", 267735)[0])
    assert round(base["total"] / 1e6) == 247
    io = []
    for n in (max(TABLE_2_MAP_DIMS), min(TABLE_2_MAP_DIMS)):  # the widest and narrowest rows
        counts = parameter_distribution(build_arch(f"define_transformer_lm_wiki103_n{n}", 267735)[0])
        assert counts["context"] == base["context"] and counts["define"] > 0
        io.append(counts["input_output"])
    assert io == sorted(io, reverse=True) and io[0] < base["input_output"]


def test_wikitext_103_rows_take_the_softmax_bands_from_the_map():
    model = tiny_lm(vocab=3000, arch="define_transformer_lm_wiki103_n64", decoder_layers=1, decoder_embed_dim=32,
                    decoder_ffn_embed_dim=64, define_expand_dim=64, adaptive_input_cutoff="200,800")
    assert model.decoder.adaptive_softmax.cutoff == [200, 800, 3000]


@pytest.mark.parametrize("settings, message", [
    (dict(ADAPTIVE, adaptive_softmax_cutoff="10,30"), "drop --adaptive-softmax-cutoff"),
    (dict(adaptive_softmax_cutoff="10,20"), "add --adaptive-input"),
    (dict(adaptive_input=True), "needs --adaptive-input-cutoff"),
    (dict(define_transform="none"), "--arch transformer_lm"),
    (dict(character_embeddings=True), "drop it"),
    (dict(define_no_reduce=True), "drop --define-no-reduce"),
    (dict(ADAPTIVE, adaptive_input_cutoff="10,50"), "--adaptive-input-cutoff 10,50 reaches the vocabulary size 40"),
    (dict(ADAPTIVE, define_map_dim=2, adaptive_input_factor=4), "a smaller --adaptive-input-factor"),
    (dict(ADAPTIVE, define_output_layer="tied_unit", adaptive_softmax_cutoff="10,20"), "full softmax"),
    (dict(define_output_layer="tied_unit", decoder_output_dim=16), "drop --decoder-output-dim"),
])
def test_settings_it_cannot_honour_are_refused(settings, message):
    with pytest.raises(UserError, match=message):  # one line at the command line (fairseq_define.errors)
        tiny_lm(**settings)


def test_contiguous_lm_task_is_refused():
    from fairseq_define.tasks.contiguous_lm import ContiguousLMTask

    d = Dictionary()
    args = Namespace(arch="define_transformer_lm_tiny", tokens_per_sample=8)
    ARCH_CONFIG_REGISTRY["define_transformer_lm_tiny"](args)
    task = ContiguousLMTask.__new__(ContiguousLMTask)  # only its type matters here
    task.dictionary = task.output_dictionary = d
    with pytest.raises(DefineConfigError, match="use --task language_modeling"):
        DefineTransformerLanguageModel.build_model(args, task)


@pytest.mark.parametrize("adaptive", [False, True], ids=["standard", "adaptive"])
def test_cache_on_load_replaces_the_unit_by_its_table(adaptive):
    """define_cache_on_load (as --model-overrides sets it) caches the unit when the
    checkpoint's weights are loaded; the model scores as the live one."""
    torch.manual_seed(0)
    settings = ADAPTIVE if adaptive else {}
    live = tiny_lm(**settings)
    cached = tiny_lm(define_cache_on_load=True, **settings)
    cached.load_state_dict(live.state_dict())
    assert live.decoder.embed_tokens.unit is not None and cached.decoder.embed_tokens.unit is None
    tokens = torch.randint(4, 40, (2, 7))
    with torch.no_grad():
        torch.testing.assert_close(cached.get_normalized_probs(cached(tokens), log_probs=True),
                                   live.get_normalized_probs(live(tokens), log_probs=True), atol=1e-5, rtol=1e-5)


def test_params_tool_reports_the_distribution_against_fairseqs_model(capsys):
    from fairseq_define.tools.params import cli_main

    assert cli_main(["--arch", "define_transformer_lm_wiki103_n64", "--vocab-size", "267735",
                     "--baseline", "transformer_lm_wiki103"]) == 0
    out = capsys.readouterr().out
    assert "define_transformer_lm_wiki103_n64: DeFINE " in out and "Expand 64->" in out
    assert "transformer_lm_wiki103 (same sizes): DeFINE 0.00M | context model 201.54M" in out
    ratio = float(out.split("ratio define_transformer_lm_wiki103_n64 / transformer_lm_wiki103 = ")[1].split()[0])
    assert ratio < 1
