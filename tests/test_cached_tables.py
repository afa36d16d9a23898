"""Cached DeFINE tables (section 3.4) and the unique-token path give the same results as
the live unit."""

import re
import pytest
import torch
from fairseq.checkpoint_utils import safe_torch_load

from fairseq_define.modules import DefineEmbedding, cache_define_tables

from .conftest import USER_DIR, define_cfg, run_cli


TOKENS = torch.tensor([[5, 9, 5, 1], [9, 9, 30, 5]])
# gradients: without the padding row, whose zero vector makes LayerNorm ill-conditioned
GRAD_TOKENS = torch.tensor([[5, 9, 5, 7], [9, 9, 30, 5]])


@pytest.mark.parametrize("transform", ["define", "hgt", "glt_shuffle", "define_residual", "projective"])
@pytest.mark.parametrize("map_kind", ["standard", "adaptive"])
def test_unique_token_path_equals_plain_path_outputs_and_gradients(transform, map_kind):
    torch.manual_seed(0)
    kw = dict(define_transform=transform, define_map=map_kind, define_adaptive_cutoff="20")
    plain = DefineEmbedding(define_cfg(define_token_path="plain", **kw), 40, 1, 24)
    unique = DefineEmbedding(define_cfg(define_token_path="unique", **kw), 40, 1, 24)
    unique.load_state_dict(plain.state_dict())
    torch.testing.assert_close(unique(TOKENS), plain(TOKENS), atol=1e-6, rtol=1e-5)
    out_p, out_u = plain(GRAD_TOKENS), unique(GRAD_TOKENS)
    weight = torch.randn_like(out_p)
    (out_p * weight).sum().backward()
    (out_u * weight).sum().backward()
    for (name, a), (_, b) in zip(plain.named_parameters(), unique.named_parameters()):
        torch.testing.assert_close(b.grad, a.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_unique_path_is_skipped_when_dropout_is_active():
    emb = DefineEmbedding(define_cfg(define_dropout=0.5), 40, 1, 24).train()
    torch.manual_seed(0)
    a = emb(TOKENS)
    assert not torch.equal(a[0, 0], a[0, 2])  # same token, independent dropout per position
    emb.eval()
    b = emb(TOKENS)
    assert torch.equal(b[0, 0], b[0, 2])


@pytest.mark.parametrize("map_kind", ["standard", "adaptive"])
def test_cached_table_equals_live_unit(map_kind):
    torch.manual_seed(0)
    emb = DefineEmbedding(define_cfg(define_map=map_kind, define_adaptive_cutoff="20"), 40, 1, 24).eval()
    live = emb(TOKENS)
    size = cache_define_tables(emb)
    assert emb.unit is None and size == 40 * 24 * 4
    torch.testing.assert_close(emb(TOKENS), live, atol=1e-6, rtol=1e-6)


def hypotheses(output):
    return {int(i): (float(s), h) for i, s, h in re.findall(r"^H-(\d+)\t([-0-9.e]+)\t(.*)$", output, re.M)}


def test_cached_checkpoint_and_cache_on_load_generate_the_same(wmt_bin, trained, tmp_path):
    ckpt = trained / "checkpoint_last.pt"
    cached = tmp_path / "cached.pt"
    out = run_cli("fairseq-define-cache-tables", "--path", ckpt, "--output", cached, "--data", wmt_bin / "bin").stdout
    assert "replaced by cached tables of" in out and " MB" in out
    state = safe_torch_load(str(cached))
    assert not any(".unit." in k for k in state["model"]) and any("cached_table" in k for k in state["model"])

    def gen(path, *extra):
        return run_cli("fairseq-generate", wmt_bin / "bin", "--user-dir", USER_DIR, "--path", path, "--gen-subset", "test",
                       "--beam", "3", "--max-len-b", "20", "--batch-size", "16", "--cpu", *extra).stdout

    base = hypotheses(gen(ckpt))
    for result in (hypotheses(gen(cached)), hypotheses(gen(ckpt, "--model-overrides", "{'define_cache_on_load': True}"))):
        assert result.keys() == base.keys() and len(base) == 40
        for i in base:
            assert result[i][1] == base[i][1]
            assert abs(result[i][0] - base[i][0]) <= 1e-5
    again = run_cli("fairseq-define-cache-tables", "--path", ckpt, "--output", cached, check=False)
    assert again.returncode == 2 and "exists" in again.stdout


def test_compressed_checkpoint_translates(wmt_bin, trained, tmp_path):
    compressed = tmp_path / "compressed.pt"
    run_cli("fairseq-define-compress", "--path", trained / "checkpoint_last.pt", "--output", compressed,
            "--data", wmt_bin / "bin", "--refine-rounds", "3")
    out = run_cli("fairseq-generate", wmt_bin / "bin", "--user-dir", USER_DIR, "--path", compressed, "--gen-subset",
                  "test", "--beam", "3", "--max-len-b", "20", "--batch-size", "16", "--cpu").stdout
    assert "stored as compositional codes" in out and len(hypotheses(out)) == 40
