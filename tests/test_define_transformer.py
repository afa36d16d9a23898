"""define_transformer: the output layer forms, separate and shared vocabularies, parameter
report, incremental decoding = full forward, checkpoints from before the output setting."""

from pathlib import Path

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from fairseq_define.modules import DefineConfigError, DefineEmbedding, cache_define_tables
from fairseq_define.modules.define.unit_tied_output import UnitTiedOutputProjection
from fairseq_define.param_report import parameter_distribution
from fairseq_define.tools.params import build_arch

SMALL = ["--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
         "--decoder-ffn-embed-dim", "64", "--encoder-layers", "2", "--decoder-layers", "2",
         "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
         "--define-map-dim", "16", "--define-expand-dim", "64", "--dropout", "0.0"]


def tiny_model(*extra, vocab=50, tgt_vocab=None):
    torch.manual_seed(0)
    with torch.device("cpu"):
        from fairseq import options
        from fairseq.models import build_model

        from fairseq_define.models.without_data import VocabularyOnlyTask, dictionary_of_size

        parser = options.get_training_parser(default_task="translation")
        args = options.parse_args_and_arch(
            parser, ["-", "--task", "translation", "--arch", "define_transformer_tiny", *SMALL, *extra]
        )
        src = dictionary_of_size(vocab)
        tgt = src if tgt_vocab is None else dictionary_of_size(tgt_vocab)
        task = VocabularyOnlyTask(src, tgt)
        return build_model(args, task).eval(), task


@pytest.mark.parametrize("transform", ["define", "projective", "hgt", "define_residual"])
def test_embeddings_are_define_and_output_is_tied_at_n(transform):
    model, _ = tiny_model("--define-transform", transform, "--define-output-layer", "tied_map")
    dec = model.decoder
    assert isinstance(model.encoder.embed_tokens, DefineEmbedding) and isinstance(dec.embed_tokens, DefineEmbedding)
    assert dec.output_projection.weight is dec.embed_tokens.map.weight  # [V, n]
    assert dec.output_projection.weight.shape == (50, 16)
    assert dec.project_out_dim.weight.shape == (16, 32)  # d_model -> n
    assert model.encoder.embed_scale == 1.0  # the map scales itself


def test_parameter_distribution_columns():
    model, _ = tiny_model(vocab=50, tgt_vocab=60)
    counts = parameter_distribution(model)
    units = [model.encoder.embed_tokens.unit, model.decoder.embed_tokens.unit]
    assert counts["define"] == sum(p.numel() for u in units for p in u.parameters())
    assert counts["input_output"] == 50 * 16 + 60 * 16 + 60 * 32  # two maps + the untied d-wide output layer
    assert counts["total"] == sum(p.numel() for p in model.parameters())


def test_projective_baseline_is_one_flag_away_and_smaller():
    define, _ = tiny_model()
    projective, _ = tiny_model("--define-transform", "projective")
    d, p = parameter_distribution(define), parameter_distribution(projective)
    assert p["define"] == 0 and d["define"] > 0
    assert d["context"] == p["context"]


def sample_batch(vocab=50):
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, vocab, (3, 7), generator=g)
    src[:, -1] = 2
    src[0, :2] = 1  # left padding
    src_lengths = (src != 1).sum(-1)
    return src, src_lengths


FORMS = ["untied", "tied_map", "tied_unit"]


@pytest.mark.parametrize("form", FORMS)
def test_incremental_decoding_equals_full_forward(form):
    model, _ = tiny_model("--define-output-layer", form)
    src, src_lengths = sample_batch()
    prev = torch.randint(4, 50, (3, 6), generator=torch.Generator().manual_seed(2))
    prev[:, 0] = 2
    with torch.no_grad():
        full, _ = model(src, src_lengths, prev)
        enc = model.encoder(src, src_lengths=src_lengths)
        state = {}
        steps = [
            model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)[0] for t in range(prev.size(1))
        ]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("form", FORMS)
def test_beam_search_scores_equal_full_forward_scores(form):
    model, task = tiny_model("--define-output-layer", form)
    src, src_lengths = sample_batch()
    gen = SequenceGenerator([model], task.target_dictionary, beam_size=3, max_len_b=8, normalize_scores=False)
    with torch.no_grad():
        hypos = gen.forward({"net_input": {"src_tokens": src, "src_lengths": src_lengths}})
        for i, sent in enumerate(hypos):
            best = sent[0]
            tokens = best["tokens"].unsqueeze(0)
            prev = torch.cat([tokens.new_tensor([[2]]), tokens[:, :-1]], 1)
            logits, extra = model(src[i: i + 1, (src[i] != 1).nonzero()[0].item():], src_lengths[i: i + 1], prev)
            lprobs = model.get_normalized_probs((logits, extra), log_probs=True)
            full = lprobs.gather(-1, tokens.unsqueeze(-1)).squeeze()
            torch.testing.assert_close(best["positional_scores"], full, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(best["score"], full.sum(), atol=1e-4, rtol=1e-5)


def test_out_dim_mismatch_is_a_clear_error():
    with pytest.raises(DefineConfigError, match="set --define-out-dim to 32"):
        tiny_model("--define-out-dim", "24")


def test_paper_config_builds_at_the_paper_sizes():
    model, args = build_arch("define_transformer_wmt_en_de", 32000)
    s = model.encoder.embed_tokens.schedule
    assert (s.map_dim, s.layer_out[-1], s.out_dim, len(s.layer_out)) == (128, 1024, 512, 3)
    assert args.encoder_layers == 6 and args.decoder_embed_dim == 512 and args.encoder_ffn_embed_dim == 2048


@pytest.mark.parametrize("shared", [True, False])
def test_output_layer_forms_build_what_they_say(shared):
    share = ["--share-all-embeddings"] if shared else []
    vocab, tgt_vocab = 50, (None if shared else 60)
    V = 50 if shared else 60
    untied, _ = tiny_model("--define-output-layer", "untied", *share, vocab=vocab, tgt_vocab=tgt_vocab)
    dec = untied.decoder
    assert dec.output_projection.weight.shape == (V, 32) and dec.project_out_dim is None  # d_model wide
    assert all(dec.output_projection.weight is not p for p in dec.embed_tokens.parameters())
    assert (untied.encoder.embed_tokens is dec.embed_tokens) == shared  # one DeFINE map and unit per side
    tied_map, _ = tiny_model("--define-output-layer", "tied_map", *share, vocab=vocab, tgt_vocab=tgt_vocab)
    assert tied_map.decoder.output_projection.weight is tied_map.decoder.embed_tokens.map.weight  # [V, n]
    tied_unit, _ = tiny_model("--define-output-layer", "tied_unit", *share, vocab=vocab, tgt_vocab=tgt_vocab)
    out = tied_unit.decoder.output_projection
    assert isinstance(out, UnitTiedOutputProjection) and not list(out.parameters())
    assert tied_unit.decoder.project_out_dim is None
    torch.testing.assert_close(out.weight, tied_unit.decoder.embed_tokens.vocabulary_table())  # [V, d]
    n = {name: sum(p.numel() for p in m.parameters()) for name, m in
         [("untied", untied), ("tied_map", tied_map), ("tied_unit", tied_unit)]}
    assert n["untied"] - n["tied_unit"] == V * 32  # the d-wide output layer
    assert n["tied_map"] - n["tied_unit"] == 32 * 16  # the d -> n projection
    # what the state dict stores: no copy of the embedding under the output projection
    assert not any(k.startswith("decoder.output_projection") for k in tied_unit.state_dict())


def test_the_paper_architecture_builds_the_untied_output_by_default():
    model, args = build_arch("define_transformer_wmt_en_de", 32000)
    assert args.define_output_layer == "untied"
    assert model.decoder.output_projection.weight.shape == (32000, 512)
    tiny, _ = tiny_model()  # the small one in the same form (study 1)
    assert tiny.args.define_output_layer == "untied"
    assert tiny.decoder.output_projection.weight.shape == (50, 32)  # [V, d]


@pytest.mark.parametrize("form", ["tied_map", "tied_unit"])
def test_share_decoder_input_output_embed_keeps_its_meaning(form):
    model, _ = tiny_model("--share-decoder-input-output-embed", "--define-output-layer", form)
    assert model.args.define_output_layer == form


def test_share_decoder_input_output_embed_is_refused_with_an_untied_output():
    with pytest.raises(DefineConfigError, match="drop the flag, or choose --define-output-layer tied_map"):
        tiny_model("--share-decoder-input-output-embed", "--define-output-layer", "untied")


@pytest.mark.parametrize("extra, match", [
    (["--define-output-layer", "tied_unit", "--decoder-output-dim", "24"], "drop --decoder-output-dim"),
    (["--define-output-layer", "tied_map", "--decoder-output-dim", "24"], "projects to the map width n = 16"),
    (["--define-output-layer", "tied_unit", "--adaptive-softmax-cutoff", "20"], "use --define-output-layer untied"),
])
def test_output_forms_refuse_fairseq_flags_that_contradict_them(extra, match):
    with pytest.raises(DefineConfigError, match=match):
        tiny_model(*extra)


def test_untied_output_keeps_a_user_output_dim():
    model, _ = tiny_model("--define-output-layer", "untied", "--decoder-output-dim", "24")
    assert model.decoder.project_out_dim.weight.shape == (24, 32)
    assert model.decoder.output_projection.weight.shape == (50, 24)


def test_unit_tied_output_trains_the_unit_and_refreshes_its_table():
    model, _ = tiny_model("--define-output-layer", "tied_unit", "--share-all-embeddings")
    src, src_lengths = sample_batch()
    prev = torch.randint(4, 50, (3, 6), generator=torch.Generator().manual_seed(2))
    model.train()
    logits, _ = model(src, src_lengths, prev)
    logits.logsumexp(-1).sum().backward()  # depends on the output layer only through the table
    reduce = model.decoder.embed_tokens.unit.reduce
    assert reduce.weight.grad is not None and reduce.weight.grad.abs().sum() > 0
    model.eval()
    out = model.decoder.output_projection
    with torch.no_grad():
        before = out.weight
        assert out.weight is before  # reused at inference
        reduce.bias.add_(1.0)  # an optimizer step
        after = out.weight
    assert after is not before
    torch.testing.assert_close(after, model.decoder.embed_tokens.vocabulary_table().detach())


@pytest.mark.parametrize("form", FORMS)
def test_cached_tables_give_the_live_outputs(form):
    model, _ = tiny_model("--define-output-layer", form, "--share-all-embeddings")
    src, src_lengths = sample_batch()
    prev = torch.randint(4, 50, (3, 6), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        live, _ = model(src, src_lengths, prev)
        cache_define_tables(model)
        cached, _ = model(src, src_lengths, prev)
    torch.testing.assert_close(cached, live, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", ["shared", "separate"])
def test_checkpoints_from_before_the_output_setting_load_as_they_were_built(variant, tmp_path):
    """tests/legacy_checkpoints: checkpoints saved by the code before --define-output-layer, which
    tied the output at n: "shared" (define_transformer_tiny, --share-all-embeddings) and
    "separate" (define_transformer, whose default is now untied; one vocabulary per side, the
    authors' unit), with the log-probabilities that code computed (tests/legacy_checkpoints/README.md)."""
    import shutil

    from fairseq import checkpoint_utils

    legacy = Path(__file__).parent / "legacy_checkpoints"
    for lang in ("en", "de"):
        shutil.copy(legacy / f"dict.{lang}.txt", tmp_path)
    (model,), cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(legacy / f"legacy_{variant}.pt")],
        arg_overrides={"data": str(tmp_path), "source_lang": "en", "target_lang": "de"})
    assert cfg.model.define_output_layer == "tied_map"
    assert model.decoder.output_projection.weight is model.decoder.embed_tokens.map.weight
    ref = torch.load(legacy / f"legacy_{variant}.ref.pt")
    model.eval()
    with torch.no_grad():
        lp = model.get_normalized_probs(model(**ref["net_input"]), log_probs=True)
    got = lp.gather(-1, ref["target"].unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(got, ref["target_log_probs"], atol=1e-5, rtol=1e-5)
    assert torch.equal(lp.argmax(-1), ref["argmax"])


def test_an_output_layer_outside_the_choices_from_a_stored_config_is_refused():
    """--model-overrides and checkpoints' configs bypass argparse's choices."""
    from fairseq import options
    from fairseq.models import build_model

    from fairseq_define.models.without_data import VocabularyOnlyTask, dictionary_of_size
    from fairseq_define.modules.config_bounds import ConfigRangeError

    parser = options.get_training_parser(default_task="translation")
    args = options.parse_args_and_arch(
        parser, ["-", "--task", "translation", "--arch", "define_transformer_tiny", *SMALL]
    )
    args.define_output_layer = "tied"
    d = dictionary_of_size(50)
    with pytest.raises(ConfigRangeError, match="not one of untied, tied_map, tied_unit"):
        build_model(args, VocabularyOnlyTask(d, d))
