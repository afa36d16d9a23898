"""The output layer's one home (fairseq_define/models/output_layer.py), unit by unit: every
choice of ``--define-output-layer`` resolves, builds what it says in both Transformer models,
and states a stock output layer that gives the same log-probabilities from the same decoder
states; each refusal is one line. The whole export of each choice (the stock model built,
loaded and compared through generation): tests/test_export.py."""

from argparse import Namespace

import pytest
import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.models import ARCH_CONFIG_REGISTRY
from fairseq.modules.adaptive_softmax import AdaptiveSoftmax

from fairseq_define.models import output_layer
from fairseq_define.models.define_transformer import DefineTransformerModel
from fairseq_define.modules.define.config import DefineConfigError
from fairseq_define.modules.define.unit_tied_output import UnitTiedOutputProjection

from .helpers import ADAPTIVE, dictionary, tiny_lm


def translation_model(form, share_all_embeddings=False, **settings):
    """define_transformer_tiny at small sizes with ``form``, built as fairseq-train builds it."""
    src = dictionary(44)
    tgt = src if share_all_embeddings else dictionary(50)
    args = Namespace(arch="define_transformer_tiny", encoder_embed_dim=32, decoder_embed_dim=32, encoder_layers=1,
                     decoder_layers=1, define_map_dim=16, define_expand_dim=64, define_output_layer=form,
                     share_all_embeddings=share_all_embeddings, dropout=0.0, **settings)
    ARCH_CONFIG_REGISTRY[args.arch](args)
    torch.manual_seed(0)
    return DefineTransformerModel.build_model(args, Namespace(source_dictionary=src, target_dictionary=tgt)).eval()


def lm(form, adaptive):
    torch.manual_seed(0)
    return tiny_lm(define_output_layer=form, **(ADAPTIVE if adaptive else {}))


# (family, form, adaptive map): every choice in both models, the LM's with and without an adaptive map
CASES = [("translation", form, False) for form in output_layer.CHOICES] + [
    ("lm", form, adaptive) for form in output_layer.CHOICES for adaptive in (False, True)]
IDS = [f"{family}-{form}{'-adaptive' if adaptive else ''}" for family, form, adaptive in CASES]


def build(family, form, adaptive):
    return translation_model(form) if family == "translation" else lm(form, adaptive)


@pytest.mark.parametrize("family, form, adaptive", CASES, ids=IDS)
def test_each_choice_builds_what_it_says(family, form, adaptive):
    model = build(family, form, adaptive)
    dec = model.decoder
    assert dec.output_form == form and form in output_layer.DESCRIPTIONS
    named = {n: p for n, p in dec.named_parameters() if n.startswith(("output_projection", "adaptive_softmax"))}
    own = list(named.values())
    if form == "tied_unit":
        assert isinstance(dec.output_projection, UnitTiedOutputProjection) and dec.adaptive_softmax is None
        assert own == []  # no parameters of its own
    elif form == "tied_map":
        if adaptive:  # the softmax reads the adaptive map's tables and projections: its own are the class rows
            assert dec.adaptive_softmax is not None and list(named) == ["adaptive_softmax.head.class_proj.weight"]
        else:  # the n-dim map table itself, after the d -> n projection
            assert dec.output_projection.weight is dec.embed_tokens.map.weight
            assert dec.project_out_dim.weight.shape == (16, 32)
    else:  # untied: its own, at the decoder's width
        assert own and all(p is not q for p in own for q in dec.embed_tokens.parameters())
        assert (dec.adaptive_softmax is not None) == adaptive


def stock_log_probs(dec, cfg, stock, x):
    """The stock output layer's log-probabilities for the decoder's states ``x`` [B, T, d]
    (before the DeFINE decoder's d -> n projection; ``cfg``: the model's settings)."""
    h = x if dec.project_out_dim is None or "decoder.project_out_dim." in stock.consumed else dec.project_out_dim(x)
    if "decoder.adaptive_softmax.head.weight" in stock.weights:  # fairseq's untied adaptive softmax
        cutoff = utils.eval_str_list(cfg.adaptive_softmax_cutoff, type=int)
        asm = AdaptiveSoftmax(len(dec.dictionary), h.size(-1), cutoff, 0.0, factor=cfg.adaptive_softmax_factor)
        prefix = "decoder.adaptive_softmax."
        missing, unexpected = asm.load_state_dict({k[len(prefix):]: v for k, v in stock.weights.items()}, strict=False)
        assert missing == ["version"] and unexpected == []  # fairseq's bookkeeping buffer
        return asm.eval().get_log_prob(h, None)
    weight = stock.weights.get("decoder.output_projection.weight", dec.output_projection.weight)
    return F.log_softmax(F.linear(h, weight), dim=-1)


@pytest.mark.parametrize("family, form, adaptive", CASES, ids=IDS)
def test_each_choice_states_a_stock_output_layer_that_scores_the_same(family, form, adaptive):
    model = build(family, form, adaptive)
    dec = model.decoder
    table = torch.randn(len(dec.dictionary), dec.embed_dim)
    if form == "tied_unit":
        table = dec.embed_tokens.vocabulary_table().detach()  # the input table the stock decoder ties to
    stock = output_layer.stock_output(dec, table)
    assert stock.settings["share_decoder_input_output_embed"] == (form == "tied_unit")
    x = torch.randn(2, 5, dec.embed_dim)  # [B, T, d]
    with torch.no_grad():
        h = dec.project_out_dim(x) if dec.project_out_dim is not None else x
        want = dec.get_normalized_probs((dec.output_layer(h), {"attn": None}), log_probs=True)
        got = stock_log_probs(dec, model.args, stock, x)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    # the width of the states the stock output reads: d where the projection is folded into it
    folded = "decoder.project_out_dim." in stock.consumed
    assert folded == (form == "tied_map" and not adaptive)
    assert stock.settings["decoder_output_dim"] == (x if folded else h).size(-1)


@pytest.mark.parametrize(
    "args, form",
    [
        (
            dict(share_decoder_input_output_embed=True, decoder_output_dim=16, define_map_dim=16),
            "tied_map",
        ),  # before the setting
        (dict(share_decoder_input_output_embed=True, decoder_output_dim=32, define_map_dim=16), None),
        (dict(share_decoder_input_output_embed=False, decoder_output_dim=16, define_map_dim=16), None),
        (
            dict(
                define_output_layer="tied_unit",
                share_decoder_input_output_embed=True,
                decoder_output_dim=16,
                define_map_dim=16,
            ),
            "tied_unit",
        ),
    ],
    ids=["legacy_tied", "wider_output", "not_shared", "set"],
)
def test_a_translation_config_without_the_setting_resolves_to_what_it_built(args, form):
    ns = Namespace(**args)
    output_layer.implied_translation_form(ns)
    assert getattr(ns, "define_output_layer", None) == form


def test_the_untied_translation_output_under_shared_embeddings_builds_its_own_layer():
    # fairseq sets the sharing flag itself under --share-all-embeddings and saves it with the
    # model: such a config must build (and load) with the output untied
    model = translation_model("untied", share_all_embeddings=True, share_decoder_input_output_embed=True)
    decoder = model.decoder
    assert decoder.output_form == "untied"
    assert decoder.output_projection.weight.data_ptr() != model.encoder.embed_tokens.weight.data_ptr()


def test_a_language_model_config_without_the_setting_is_map_tied():
    assert output_layer.lm_form(Namespace()) == output_layer.lm_form(Namespace(define_output_layer=None)) == "tied_map"
    assert output_layer.lm_form(Namespace(define_output_layer="untied")) == "untied"


# (family, form, the model's flags, a fragment of the one line): every refusal of output_layer's checks
REFUSALS = [
    ("translation", "untied", dict(share_decoder_input_output_embed=True), "drop the flag, or choose"),
    ("translation", "tied_map", dict(adaptive_softmax_cutoff="20"), "use --define-output-layer untied"),
    ("translation", "tied_unit", dict(decoder_output_dim=24), "drop --decoder-output-dim"),
    ("translation", "tied_map", dict(decoder_output_dim=24), "projects to the map width n = 16"),
    ("lm", "tied_unit", dict(ADAPTIVE, adaptive_softmax_cutoff="10,20"), "full softmax"),
    ("lm", "tied_unit", dict(decoder_output_dim=16), "drop --decoder-output-dim"),
    ("lm", "tied_map", dict(decoder_output_dim=24), "--decoder-output-dim 24 does not apply"),
    ("lm", "tied_map", dict(ADAPTIVE, adaptive_softmax_factor=3.0), "differs from --adaptive-input-factor"),
    ("lm", "tied_map", dict(adaptive_softmax_cutoff="10,20"), "add --adaptive-input"),
    ("lm", "tied_map", dict(ADAPTIVE, adaptive_softmax_cutoff="10,30"), "drop --adaptive-softmax-cutoff"),
    ("lm", "untied", dict(share_decoder_input_output_embed=True), "drop --share-decoder-input-output-embed"),
    ("lm", "untied", dict(ADAPTIVE, tie_adaptive_weights=True), "drop --tie-adaptive-weights"),
]


@pytest.mark.parametrize("family, form, flags, expected", REFUSALS,
                         ids=[f"{f}-{o}-{'-'.join(s)}" for f, o, s, _ in REFUSALS])
def test_flags_a_choice_cannot_honour_are_refused_in_one_line(family, form, flags, expected):
    with pytest.raises(DefineConfigError, match=expected) as info:
        if family == "translation":
            translation_model(form, **flags)
        else:
            tiny_lm(define_output_layer=form, **flags)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("build", [
    lambda: translation_model("untied", adaptive_softmax_cutoff="20"),
    lambda: tiny_lm(define_output_layer="untied", **ADAPTIVE),
], ids=["translation", "lm"])
def test_an_adaptive_softmax_trained_through_full_log_probabilities_names_adaptive_loss(build):
    """cross_entropy on fairseq's adaptive softmax ended in an autograd RuntimeError at the
    first backward (get_log_prob works in place, for inference); evaluation still scores."""
    from fairseq.criterions.cross_entropy import CrossEntropyCriterion

    from fairseq_define.errors import UserError

    model = build().train()
    dec = model.decoder
    tokens = torch.randint(4, 40, (2, 5))  # [B, T]
    run = (
        (lambda: model(tokens, torch.tensor([5, 5]), tokens)) if hasattr(model, "encoder") else (lambda: model(tokens))
    )
    criterion = CrossEntropyCriterion(Namespace(target_dictionary=dec.dictionary), sentence_avg=False)
    with pytest.raises(UserError, match=r"an adaptive softmax \(--adaptive-softmax-cutoff (10,)?20\) trains through "
                                        r"--criterion adaptive_loss: add it") as info:
        loss, _ = criterion.compute_loss(model, run(), {"target": tokens})
        loss.backward()
    assert "\n" not in str(info.value)
    model.eval()
    with torch.no_grad():
        assert torch.isfinite(model.get_normalized_probs(run(), log_probs=True)).all()
