"""Compositional-code compression (Shu & Nakayama 2018; paper Table 5): the code table, the
least-squares codebooks, code learning, and compressed models that save and load."""

from argparse import Namespace

import pytest
import torch
from fairseq.data import Dictionary

from fairseq_define.modules.compression.compositional_codes import (
    CompositionalEmbedding,
    compress_embeddings,
    fit_codebooks,
    learn_codes,
    reconstruction_error,
    refine_codes,
    restore_compressed_embeddings,
)

from .helpers import ptb_style, tiny_lstm
from .helpers import tiny_model as tiny_txl


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


@pytest.fixture(scope="module")
def ptb_word_vectors():
    """A table with the structure of real word vectors: PPMI-SVD vectors [1500, 32] of the
    1500 most frequent words of the PTB-format test slice (co-occurrence within 2 tokens, its
    3,000 training lines)."""
    from collections import Counter


    lines = ptb_style("train").read_text(encoding="utf-8").split("\n")
    words = [w for line in lines for w in line.split()]
    vocab = {w: i for i, (w, _) in enumerate(Counter(words).most_common(1500))}
    ids = torch.tensor([vocab.get(w, -1) for w in words])
    counts = torch.zeros(1500, 1500, dtype=torch.float64)
    for offset in (1, 2):
        a, b = ids[:-offset], ids[offset:]
        keep = (a >= 0) & (b >= 0)
        counts.index_put_((a[keep], b[keep]), torch.ones(int(keep.sum()), dtype=torch.float64), accumulate=True)
    counts = counts + counts.T
    ppmi = (counts * counts.sum() / counts.sum(1, keepdim=True) / counts.sum(0, keepdim=True)).log()
    u, sv, _ = torch.linalg.svd(ppmi.clamp(min=0).nan_to_num(0))
    return (u[:, :32] * sv[:32].sqrt()).float()  # [1500, 32]


def test_refinement_lowers_the_error_every_round_and_beats_random_codes(ptb_word_vectors):
    table = ptb_word_vectors
    random_codes = torch.randint(0, 16, (1500, 8), generator=torch.Generator().manual_seed(0))
    random_error = reconstruction_error(table.double(), random_codes, fit_codebooks(table.double(), random_codes, 16))
    codes, books, errors = refine_codes(table, random_codes, 16, rounds=20)
    assert errors[0] == pytest.approx(random_error)
    assert all(b <= a + 1e-9 for a, b in zip(errors, errors[1:])), errors
    assert 1 < len(errors) <= 21 and errors[-1] < 0.6 * random_error, errors  # measured 0.90 -> 0.47
    assert reconstruction_error(table.double(), codes, books) == pytest.approx(errors[-1])


def test_autoencoder_codes_refined_are_better_than_the_autoencoder_alone(ptb_word_vectors):
    table = ptb_word_vectors
    codes, books, ae_error = learn_codes(
        table, n_codebooks=8, n_codes=16, init="autoencoder", steps=300, refine_rounds=0
    )
    assert codes.dtype == torch.uint8 and codes.shape == (1500, 8) and books.shape == (8, 16, 32)
    assert ae_error == pytest.approx(reconstruction_error(table, codes, books), rel=1e-5)
    _, _, refined_error = learn_codes(table, n_codebooks=8, n_codes=16, init="autoencoder", steps=300, refine_rounds=20)
    assert refined_error < 0.7 * ae_error, (ae_error, refined_error)  # measured 0.89 -> 0.47
    with pytest.raises(ValueError, match="unknown code initialisation 'kmeans'; use one of random, autoencoder"):
        learn_codes(table, init="kmeans")


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
        # the output layer alone: the same features, scored again after the codebooks change
        for table in tables:
            table.codebooks.add_(0.5 * torch.randn_like(table.codebooks))  # a shift alone cancels in a band
        assert not torch.allclose(model.get_normalized_probs((x, extra), log_probs=True), lprobs, atol=1e-3)


def test_define_transformer_output_projection_follows_the_compressed_map():
    from fairseq import options

    from fairseq_define.models.define_transformer import DefineTransformerModel
    from fairseq_define.modules.compression.compositional_codes import TiedLinear

    d = Dictionary()
    for i in range(60):
        d.add_symbol(f"w{i}")
    parser = options.get_training_parser(default_task="translation")
    args = options.parse_args_and_arch(parser, ["-", "--arch", "define_transformer_tiny", "--share-all-embeddings",
                                                 "--define-output-layer", "tied_map"])
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
    # the projection reads the table live: after the codebooks change (fine-tuning, or a
    # checkpoint loaded into a restored model) its logits follow the new decoded rows
    table, projection = model.decoder.embed_tokens.map, model.decoder.output_projection
    features = torch.randn(3, table.embedding_dim)
    with torch.no_grad():
        before = projection(features)
        table.codebooks.add_(0.5 * torch.randn_like(table.codebooks))
        after = projection(features)
    assert not torch.allclose(after, before, atol=1e-3)
    torch.testing.assert_close(after, features @ table.weight.detach().T)


def test_only_token_tables_that_shrink_are_compressed_and_padding_stays_zero():
    from fairseq.modules import LearnedPositionalEmbedding

    from fairseq_define.modules.compression.compositional_codes import embedding_tables

    model = torch.nn.Module()
    model.tokens = torch.nn.Embedding(100, 16, padding_idx=1)
    model.positions = LearnedPositionalEmbedding(100, 16, padding_idx=1)  # takes other arguments
    model.narrow = torch.nn.Embedding(20, 2)  # 160 bytes; codes 30 + codebooks 256: larger
    assert list(embedding_tables(model, 4, 8)) == ["tokens"]
    compress_embeddings(model, n_codebooks=4, n_codes=8, steps=5)
    assert isinstance(model.tokens, CompositionalEmbedding) and type(model.narrow) is torch.nn.Embedding
    assert model.tokens(torch.tensor([1])).abs().sum() == 0 and model.tokens.weight[1].abs().sum() == 0
