"""define_transformer: tying at n, parameter report, incremental decoding = full forward."""

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from fairseq_define.modules import DefineConfigError, DefineEmbedding
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

        from fairseq_define.tools.params import VocabularyOnlyTask, dictionary_of_size

        parser = options.get_training_parser(default_task="translation")
        args = options.parse_args_and_arch(parser, ["-", "--task", "translation", "--arch", "define_transformer_tiny", *SMALL, *extra])
        src = dictionary_of_size(vocab)
        tgt = src if tgt_vocab is None else dictionary_of_size(tgt_vocab)
        task = VocabularyOnlyTask(src, tgt)
        return build_model(args, task).eval(), task


@pytest.mark.parametrize("transform", ["define", "projective", "hgt", "define_residual"])
def test_embeddings_are_define_and_output_is_tied_at_n(transform):
    model, _ = tiny_model("--define-transform", transform)
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
    assert counts["input_output"] == 50 * 16 + 60 * 16 + 32 * 16  # two maps + d->n projection
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


def test_incremental_decoding_equals_full_forward():
    model, _ = tiny_model()
    src, src_lengths = sample_batch()
    prev = torch.randint(4, 50, (3, 6), generator=torch.Generator().manual_seed(2))
    prev[:, 0] = 2
    with torch.no_grad():
        full, _ = model(src, src_lengths, prev)
        enc = model.encoder(src, src_lengths=src_lengths)
        state = {}
        steps = [model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)[0] for t in range(prev.size(1))]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_beam_search_scores_equal_full_forward_scores():
    model, task = tiny_model()
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
