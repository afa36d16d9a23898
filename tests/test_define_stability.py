"""The DeFINE unit under AWD-LSTM's optimizer (SGD at lr 30, gradient clipped to 0.25):
token-specific outputs survive a short training on real PTB text with the default
``--define-unit-grad-scale``, and collapse onto one shared vector without it
(docs/stability.md); the scale multiplies exactly the unit's gradients."""

from argparse import Namespace
from collections import Counter

import pytest
import torch

from fairseq.data import Dictionary
from fairseq_define.criterions.awd_lm_loss import AWDLanguageModelLoss
from fairseq_define.models.lstm_lm import LSTMLanguageModel, LSTMLMConfig
from fairseq_define.modules import DefineConfigError, DefineEmbedding
from fairseq_define.optim.nt_asgd import AveragedSGD

from .conftest import define_options

TOP = 100  # the most frequent words, whose outputs are compared
COLLAPSED = 0.9  # mean pairwise cosine; the unit reaches 0.98-0.99 without the scale


@pytest.fixture(scope="module")
def ptb_stream(shared_data):
    """The first 1000 lines of PTB's training text as one stream, with a frequency-sorted
    dictionary (as fairseq-preprocess builds it)."""
    with open(shared_data / "ptb" / "ptb.train.txt", encoding="utf-8") as f:
        lines = [line.split() + ["</s>"] for _, line in zip(range(1000), f)]
    counts = Counter(w for line in lines for w in line if w != "</s>")
    d = Dictionary()
    for w, c in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0])):
        d.add_symbol(w, c)
    return d, torch.tensor([d.index(w) for line in lines for w in line])


def mean_pairwise_cosine(x):
    x = torch.nn.functional.normalize(x.double(), dim=-1)  # [V, m]
    c = x @ x.t()
    return ((c.sum() - c.diagonal().sum()) / (x.size(0) * (x.size(0) - 1))).item()


def sgd_cosines(d, stream, steps=20, **overrides):
    """AWD-LSTM's loss and optimizer on a small DeFINE LSTM; the unit outputs' mean
    pairwise cosine over the TOP most frequent words every 10 updates."""
    torch.manual_seed(0)
    cfg = LSTMLMConfig(lstm_layers=2, lstm_hidden_dim=64, define_map_dim=32, define_out_dim=64,
                       define_expand_dim=128, define_depth=3, define_transform="define")
    for k, v in overrides.items():
        setattr(cfg, k, v)
    task = Namespace(target_dictionary=d)
    model = LSTMLanguageModel.build_model(cfg, task).train()
    criterion = AWDLanguageModelLoss(task, False, 2.0, 1.0)
    optimizer = AveragedSGD(model.parameters(), lr=30.0, weight_decay=1.2e-6)
    B, T = 10, 20
    data = stream[: stream.numel() // B * B].view(B, -1)  # [B, L]: one stream per row
    top = torch.arange(d.nspecial, d.nspecial + TOP)[None]  # [1, TOP]
    cosines = []
    for step in range(steps):
        src, tgt = data[:, step * T:(step + 1) * T], data[:, step * T + 1:(step + 1) * T + 1]
        sample = {"net_input": {"src_tokens": src, "src_lengths": None}, "target": tgt, "ntokens": tgt.numel()}
        optimizer.zero_grad()
        loss, sample_size, _ = criterion(model, sample)
        (loss / sample_size).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)  # as fairseq's --clip-norm
        optimizer.step()
        if (step + 1) % 10 == 0:
            model.eval()
            with torch.no_grad():
                cosines.append(mean_pairwise_cosine(model.decoder.embed_tokens(top)[0]))  # [TOP, m]
            model.train()
    return cosines


def test_default_keeps_token_specific_outputs_under_awd_lstm_sgd(ptb_stream):
    cosines = sgd_cosines(*ptb_stream)
    assert max(cosines) < COLLAPSED, cosines


def test_unscaled_unit_collapses_under_awd_lstm_sgd(ptb_stream):
    """The failure the default prevents, so the bound above is one a collapse exceeds."""
    cosines = sgd_cosines(*ptb_stream, define_unit_grad_scale=1.0)
    assert max(cosines) > COLLAPSED, cosines


def embedding_grads(scale, transform="define"):
    torch.manual_seed(0)
    emb = DefineEmbedding(define_options(define_transform=transform, define_unit_grad_scale=scale), 40, 1, 24)
    tokens = torch.randint(2, 40, (3, 7))
    (emb(tokens) * torch.linspace(-1, 1, 24)).sum().backward()
    return {name: p.grad.clone() for name, p in emb.named_parameters()}


@pytest.mark.parametrize("transform", ["define", "hgt", "define_residual"])
def test_scale_multiplies_the_unit_gradients_and_nothing_else(transform):
    scaled, plain = embedding_grads(0.01, transform), embedding_grads(1.0, transform)
    assert any(name.startswith("unit.") for name in plain)
    for name, grad in plain.items():
        factor = 0.01 if name.startswith("unit.") else 1.0  # the map table trains as is
        torch.testing.assert_close(scaled[name], grad * factor, rtol=1e-5, atol=0), name


def test_projective_baseline_is_not_scaled():
    scaled, plain = embedding_grads(0.01, "projective"), embedding_grads(1.0, "projective")
    for name, grad in plain.items():
        torch.testing.assert_close(scaled[name], grad, rtol=0, atol=0), name


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_non_positive_scale_is_refused(bad):
    with pytest.raises(DefineConfigError, match="--define-unit-grad-scale must be positive"):
        DefineEmbedding(define_options(define_unit_grad_scale=bad), 40, 1, 24)
