"""Compositional-code compression (Shu & Nakayama 2018; paper Table 5): the code table, the
least-squares codebooks, code learning, and compressed models that save and load."""

from argparse import Namespace

import pytest
import torch

from fairseq.data import Dictionary
from fairseq_define.modules.compositional_codes import (
    CompositionalEmbedding,
    fit_codebooks,
    learn_codes,
    compress_embeddings,
    restore_compressed_embeddings,
)

from .test_lstm_lm import tiny_lstm
from .test_transformer_xl import tiny_model as tiny_txl


def test_lookup_and_weight_decode_the_sum_of_one_vector_per_codebook():
    torch.manual_seed(0)
    emb = CompositionalEmbedding(7, 5, n_codebooks=3, n_codes=4)
    emb.codes.copy_(torch.randint(0, 4, (7, 3), dtype=torch.uint8))
    emb.codebooks.data.normal_()
    expected = torch.stack([sum(emb.codebooks[m, int(emb.codes[w, m])] for m in range(3)) for w in range(7)])
    torch.testing.assert_close(emb.weight, expected)
    torch.testing.assert_close(emb(torch.tensor([[6, 0, 6]])), expected[[6, 0, 6]].unsqueeze(0))
    # 7 rows x 3 codes x 2 bits, packed, plus 3 x 4 x 5 float32 codebook entries
    assert emb.storage_bytes() == 6 + 3 * 4 * 5 * 4 and emb.storage_bytes(packed=False) == 21 + 240


def test_least_squares_codebooks_rebuild_a_representable_table_exactly():
    torch.manual_seed(1)
    codes = torch.randint(0, 8, (300, 4))
    books = torch.randn(4, 8, 6, dtype=torch.float64)
    table = sum(books[m][codes[:, m]] for m in range(4))  # [300, 6]
    fitted = fit_codebooks(table, codes, 8, ridge=1e-9)
    rebuilt = sum(fitted[m][codes[:, m]] for m in range(4))
    torch.testing.assert_close(rebuilt, table, atol=1e-6, rtol=1e-6)


def test_learned_codes_beat_random_codes_on_a_trained_table():
    """A table with structure (a trained LSTM's map would do; here rows drawn around 20
    centres): the autoencoder's codes reconstruct it better than random ones, each with its
    least-squares codebooks."""
    torch.manual_seed(2)
    centres = torch.randn(20, 16)
    table = centres[torch.randint(0, 20, (500,))] + 0.05 * torch.randn(500, 16)
    codes, books, error = learn_codes(table, n_codebooks=4, n_codes=8, steps=300)
    assert codes.dtype == torch.uint8 and codes.shape == (500, 4) and books.shape == (4, 8, 16)
    random_codes = torch.randint(0, 8, (500, 4))
    random_books = fit_codebooks(table.double(), random_codes, 8).float()
    random_error = (sum(random_books[m][random_codes[:, m]] for m in range(4)) - table).norm() / table.norm()
    assert error < 0.5 * random_error.item(), (error, random_error)


@pytest.mark.parametrize("kind", ["lstm_define", "lstm_adaptive", "txl_define"])
def test_compressed_model_saves_loads_and_ties_its_output_to_the_decoded_table(kind):
    torch.manual_seed(3)
    if kind == "lstm_define":
        build = lambda: tiny_lstm(define_transform="define", define_out_dim=16)  # noqa: E731
    elif kind == "lstm_adaptive":
        build = lambda: tiny_lstm(adaptive_cutoff="20", div_val=2.0)  # noqa: E731
    else:
        build = lambda: tiny_txl(define_transform="define", define_expand_dim=32, define_depth=2)  # noqa: E731
    model = build()
    tokens = torch.randint(4, 50, (2, 6))
    reports = compress_embeddings(model, n_codebooks=4, n_codes=8, steps=20)
    assert reports and all(r["after"] < r["before"] for r in reports if r["shape"][0] >= 50)
    tables = [m for m in model.modules() if isinstance(m, CompositionalEmbedding)]
    assert len(tables) == len(reports)
    with torch.no_grad():
        x, extra = model(tokens)
        lprobs = model.get_normalized_probs((x, extra), log_probs=True)
    torch.testing.assert_close(lprobs.exp().sum(-1), torch.ones(2, 6), atol=1e-5, rtol=0)
    # the softmax reads the compressed table: changing a codebook changes the output
    fresh = build()
    assert restore_compressed_embeddings(fresh, model.state_dict()) == len(tables)
    fresh.load_state_dict(model.state_dict(), strict=True)
    with torch.no_grad():
        torch.testing.assert_close(fresh.get_normalized_probs(fresh(tokens), log_probs=True), lprobs)
        tables[0].codebooks.add_(0.5)
        assert not torch.allclose(model.get_normalized_probs(model(tokens), log_probs=True), lprobs)


def test_define_transformer_output_projection_follows_the_compressed_map():
    from fairseq import options
    from fairseq_define.models.define_transformer import DefineTransformerModel
    from fairseq_define.modules.compositional_codes import TiedLinear

    d = Dictionary()
    for i in range(60):
        d.add_symbol(f"w{i}")
    parser = options.get_training_parser(default_task="translation")
    args = options.parse_args_and_arch(parser, ["-", "--arch", "define_transformer_tiny", "--share-all-embeddings"])
    torch.manual_seed(4)
    model = DefineTransformerModel.build_model(args, Namespace(source_dictionary=d, target_dictionary=d)).eval()
    compress_embeddings(model, n_codebooks=4, n_codes=8, steps=10)
    assert isinstance(model.decoder.output_projection, TiedLinear)
    assert model.encoder.embed_tokens.map is model.decoder.embed_tokens.map  # still one shared table
    assert isinstance(model.decoder.embed_tokens.map, CompositionalEmbedding)
    torch.testing.assert_close(model.decoder.output_projection.weight, model.decoder.embed_tokens.map.weight)
    src = torch.randint(4, 60, (2, 5))
    with torch.no_grad():
        out, _ = model(src, torch.tensor([5, 5]), torch.randint(4, 60, (2, 4)))
    assert out.shape == (2, 4, 64) and torch.isfinite(out).all()


def test_only_token_tables_that_shrink_are_compressed_and_padding_stays_zero():
    from fairseq.modules import LearnedPositionalEmbedding

    from fairseq_define.modules.compositional_codes import embedding_tables

    model = torch.nn.Module()
    model.tokens = torch.nn.Embedding(100, 16, padding_idx=1)
    model.positions = LearnedPositionalEmbedding(100, 16, padding_idx=1)  # takes other arguments
    model.narrow = torch.nn.Embedding(20, 2)  # 160 bytes; codes 30 + codebooks 256: larger
    assert list(embedding_tables(model, 4, 8)) == ["tokens"]
    compress_embeddings(model, n_codebooks=4, n_codes=8, steps=5)
    assert isinstance(model.tokens, CompositionalEmbedding) and type(model.narrow) is torch.nn.Embedding
    assert model.tokens(torch.tensor([1])).abs().sum() == 0 and model.tokens.weight[1].abs().sum() == 0
