"""Cached DeFINE tables (section 3.4) and the unique-token path give the same results as
the live unit."""

import re

import pytest
import torch
from fairseq.checkpoint_utils import safe_torch_load

from fairseq_define.modules import DefineEmbedding, cache_define_tables
from fairseq_define.modules.define.config import DefineConfigError
from fairseq_define.modules.define.embedding import set_unit_run

from .helpers import USER_DIR, define_options, model_map, run_cli, run_in_process, subprocess_run_interactive

pytestmark = pytest.mark.cli  # starts fairseq's command-line tools or a recipe


TOKENS = torch.tensor([[5, 9, 5, 1], [9, 9, 30, 5]])
# gradients: without the padding row, whose zero vector makes LayerNorm ill-conditioned
GRAD_TOKENS = torch.tensor([[5, 9, 5, 7], [9, 9, 30, 5]])


@pytest.mark.parametrize("transform", ["define", "hgt", "glt_shuffle", "define_residual", "projective"])
@pytest.mark.parametrize("map_kind", ["standard", "adaptive"])
def test_unique_token_path_equals_plain_path_outputs_and_gradients(transform, map_kind):
    torch.manual_seed(0)
    plain = set_unit_run(DefineEmbedding(define_options(define_transform=transform), 40, 1, 24,
                                         map_layer=model_map(map_kind)), token_path="plain")
    unique = set_unit_run(DefineEmbedding(define_options(define_transform=transform), 40, 1, 24,
                                          map_layer=model_map(map_kind)), token_path="unique")
    unique.load_state_dict(plain.state_dict())
    torch.testing.assert_close(unique(TOKENS), plain(TOKENS), atol=1e-6, rtol=1e-5)
    out_p, out_u = plain(GRAD_TOKENS), unique(GRAD_TOKENS)
    weight = torch.randn_like(out_p)
    (out_p * weight).sum().backward()
    (out_u * weight).sum().backward()
    for (name, a), (_, b) in zip(plain.named_parameters(), unique.named_parameters()):
        torch.testing.assert_close(b.grad, a.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_unique_path_is_skipped_when_dropout_is_active():
    emb = DefineEmbedding(define_options(define_dropout=0.5), 40, 1, 24).train()
    torch.manual_seed(0)
    a = emb(TOKENS)
    assert not torch.equal(a[0, 0], a[0, 2])  # same token, independent dropout per position
    emb.eval()
    b = emb(TOKENS)
    assert torch.equal(b[0, 0], b[0, 2])


@pytest.mark.parametrize("map_kind", ["standard", "adaptive"])
def test_cached_table_equals_live_unit(map_kind):
    torch.manual_seed(0)
    emb = DefineEmbedding(define_options(), 40, 1, 24, map_layer=model_map(map_kind)).eval()
    live = emb(TOKENS)
    size = cache_define_tables(emb)
    assert emb.unit is None and size == 40 * 24 * 4
    torch.testing.assert_close(emb(TOKENS), live, atol=1e-6, rtol=1e-6)


def hypotheses(output):
    return {int(i): (float(s), h) for i, s, h in re.findall(r"^H-(\d+)\t([-0-9.e]+)\t(.*)$", output, re.M)}


@pytest.fixture(scope="module")
def cached_nmt(wmt_bin, trained, tmp_path_factory):
    """The trained NMT checkpoint with its DeFINE units cached, and the tool's output."""
    cached = tmp_path_factory.mktemp("cached") / "cached.pt"
    out = run_cli("fairseq-define-cache-tables", "--path", trained / "checkpoint_last.pt", "--output", cached,
                  "--data", wmt_bin / "bin").stdout
    return cached, out


def test_cached_checkpoint_and_cache_on_load_generate_the_same(wmt_bin, trained, cached_nmt):
    ckpt = trained / "checkpoint_last.pt"
    cached, out = cached_nmt
    assert "replaced by cached tables of" in out and " MB" in out
    state = safe_torch_load(str(cached))
    assert not any(".unit." in k for k in state["model"]) and any("cached_table" in k for k in state["model"])

    def gen(path, *extra):
        return run_in_process("fairseq-generate", wmt_bin / "bin", "--user-dir", USER_DIR, "--path", path,
                              "--gen-subset", "test", "--beam", "3", "--max-len-b", "20", "--batch-size", "16",
                              "--cpu", *extra).stdout

    base = hypotheses(gen(ckpt))
    for result in (
        hypotheses(gen(cached)),
        hypotheses(gen(ckpt, "--model-overrides", "{'define_cache_on_load': True}")),
    ):
        assert result.keys() == base.keys() and len(base) == 40
        for i in base:
            assert result[i][1] == base[i][1]
            assert abs(result[i][0] - base[i][0]) <= 1e-5
    again = run_cli("fairseq-define-cache-tables", "--path", ckpt, "--output", cached, check=False)
    assert again.returncode == 2 and "exists" in again.stdout


def test_cached_checkpoint_translates_the_same_in_interactive(wmt_bin, trained, cached_nmt):

    cached, _ = cached_nmt
    lines = "".join(wmt_bin.joinpath("test.bpe.en").read_text(encoding="utf-8").splitlines(True)[:5])
    base = hypotheses(subprocess_run_interactive(wmt_bin, trained / "checkpoint_last.pt", lines).stdout)
    result = hypotheses(subprocess_run_interactive(wmt_bin, cached, lines).stdout)
    assert len(base) == 5 and result.keys() == base.keys()
    for i in base:
        assert result[i][1] == base[i][1] and abs(result[i][0] - base[i][0]) <= 1e-5


def test_cached_checkpoint_in_the_hub_translates_and_scores_the_same(wmt_bin, trained, cached_nmt):
    from fairseq_define.models.define_transformer import DefineTransformerModel

    cached, _ = cached_nmt
    kw = dict(data_name_or_path=str(wmt_bin / "bin"), bpe="subword_nmt", bpe_codes=str(wmt_bin / "codes"))
    hubs = [
        DefineTransformerModel.from_pretrained(str(trained), "checkpoint_last.pt", **kw),
        DefineTransformerModel.from_pretrained(str(cached.parent), cached.name, **kw),
        DefineTransformerModel.from_pretrained(str(trained), "checkpoint_last.pt", define_cache_on_load=True, **kw),
    ]
    assert hubs[0].models[0].encoder.embed_tokens.unit is not None
    assert all(h.models[0].encoder.embed_tokens.unit is None for h in hubs[1:])
    sources = wmt_bin.joinpath("test.tok.en").read_text(encoding="utf-8").splitlines()[:4]
    targets = wmt_bin.joinpath("test.tok.de").read_text(encoding="utf-8").splitlines()[:4]
    base_text = hubs[0].translate(sources, beam=2, max_len_b=15)
    base_scores = hubs[0].score(sources, targets=targets)
    for hub in hubs[1:]:
        assert hub.translate(sources, beam=2, max_len_b=15) == base_text
        for got, want in zip(hub.score(sources, targets=targets), base_scores):
            assert torch.equal(got["tokens"], want["tokens"])
            torch.testing.assert_close(got["positional_scores"], want["positional_scores"], atol=1e-5, rtol=0)


def test_caching_a_cached_checkpoint_is_refused(cached_nmt, tmp_path):
    cached, _ = cached_nmt
    proc = run_cli("fairseq-define-cache-tables", "--path", cached, "--output", tmp_path / "twice.pt", check=False)
    assert proc.returncode == 2 and "already holds cached DeFINE tables" in proc.stdout
    assert not (tmp_path / "twice.pt").exists()


def test_a_cached_table_refuses_to_train():
    emb = DefineEmbedding(define_options(), 40, 1, 24)
    cache_define_tables(emb)
    assert not emb.training
    with pytest.raises(DefineConfigError, match="for inference only"):
        emb.train()
    assert emb(TOKENS).shape == (2, 4, 24)
    # built from a cached checkpoint's config (fairseq's modules start in training mode)
    built = DefineEmbedding(define_options(define_cached_table=True), 40, 1, 24)
    with pytest.raises(DefineConfigError, match="for inference only"):
        built(TOKENS)
    with torch.no_grad():
        assert built(TOKENS).shape == (2, 4, 24)


def test_compressed_checkpoint_translates(wmt_bin, trained, tmp_path):
    compressed = tmp_path / "compressed.pt"
    run_in_process("fairseq-define-compress", "--path", trained / "checkpoint_last.pt", "--output", compressed,
                   "--data", wmt_bin / "bin", "--refine-rounds", "3")
    out = run_in_process("fairseq-generate", wmt_bin / "bin", "--user-dir", USER_DIR, "--path", compressed,
                         "--gen-subset", "test", "--beam", "3", "--max-len-b", "20", "--batch-size", "16",
                         "--cpu").stdout
    assert "stored as compositional codes" in out and len(hypotheses(out)) == 40
