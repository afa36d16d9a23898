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
from fairseq_define.modules.stability.gradients import centre, scale
from fairseq_define.optim.nt_asgd import AveragedSGD

from .helpers import define_options, ptb_style

TOP = 100  # the most frequent words, whose outputs are compared
COLLAPSED = 0.9  # mean pairwise cosine; the unit reaches 0.98-0.99 without the scale


@pytest.fixture(scope="module")
def ptb_stream():
    """The first 1000 lines of the PTB-format training text as one stream, with a
    frequency-sorted dictionary (as fairseq-preprocess builds it)."""
    with open(ptb_style("train"), encoding="utf-8") as f:
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


@pytest.mark.parametrize("style", ["paper", "authors"])
def test_default_keeps_token_specific_outputs_under_awd_lstm_sgd(ptb_stream, style):
    cosines = sgd_cosines(*ptb_stream, define_style=style)
    assert max(cosines) < COLLAPSED, cosines


@pytest.mark.parametrize("style", ["paper", "authors"])
def test_unscaled_uncentred_unit_collapses_under_awd_lstm_sgd(ptb_stream, style):
    """The failure the defaults prevent, so the bound above is one a collapse exceeds."""
    cosines = sgd_cosines(*ptb_stream, define_style=style, define_unit_grad_scale=1.0,
                          define_unit_centring="none")
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


@pytest.mark.parametrize("style", ["paper", "authors"])
def test_default_scale_is_applied_to_both_styles(style):
    factor = 0.01  # DEFAULT_UNIT_GRAD_SCALE, written out so a changed default is noticed here
    grads = {}
    for unit_scale in (None, 1.0):
        torch.manual_seed(0)
        cfg = define_options(define_style=style, define_max_groups=None, define_unit_grad_scale=unit_scale)
        emb = DefineEmbedding(cfg, 40, 1, 32)
        (emb(torch.randint(2, 40, (3, 7))) * torch.linspace(-1, 1, 32)).sum().backward()
        grads[unit_scale] = {name: p.grad for name, p in emb.named_parameters() if name.startswith("unit.")}
    for name, grad in grads[1.0].items():
        torch.testing.assert_close(grads[None][name], grad * factor, rtol=1e-5, atol=0), name


def test_projective_baseline_is_not_scaled():
    scaled, plain = embedding_grads(0.01, "projective"), embedding_grads(1.0, "projective")
    for name, grad in plain.items():
        torch.testing.assert_close(scaled[name], grad, rtol=0, atol=0), name


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_non_positive_scale_is_refused(bad):
    with pytest.raises(DefineConfigError, match="--define-unit-grad-scale must be positive"):
        DefineEmbedding(define_options(define_unit_grad_scale=bad), 40, 1, 24)


@pytest.mark.parametrize("groups", [1, 4])
@pytest.mark.parametrize("counted", [False, True], ids=["plain-rows", "counted-rows"])
def test_both_forms_of_the_centring_give_the_gradient_at_the_centred_input(groups, counted):
    """gradients.centre on the weight's gradient and on the output gradient before the
    weight's matmul (the training path's form; tests/test_fused_unit.py holds it to the
    first applied to the reference's gradients) both give sum_t c_t-weighted
    (x_t - mean x) g_t^T, the mean over positions (rows standing for c_t positions each)."""
    torch.manual_seed(0)
    T, i, o = 9, 8, 12
    x = torch.randn(T, i, dtype=torch.float64) + 1.5  # [T, in], a shared mean
    g = torch.randn(T, o, dtype=torch.float64)  # [T, out]
    counts = torch.randint(1, 5, (T,)).double() if counted else None  # [T]
    positions = counts.sum().item() if counted else T
    s = g.sum(0)  # [out]: the bias gradient

    def weight_grad(a, b):  # [g, in/g, out/g]: sum_t a_t b_t^T per group
        return torch.bmm(a.view(T, groups, -1).transpose(0, 1).transpose(1, 2), b.view(T, groups, -1).transpose(0, 1))

    mean = (counts @ x if counted else x.sum(0)) / positions  # [in]
    at_centred_input = weight_grad(x - mean, g)
    hooks = centre(weight_grad(x, g), mean.view(groups, -1), s.view(groups, -1), 1)
    fused = weight_grad(x, centre(g, counts, s, positions))
    torch.testing.assert_close(hooks, at_centred_input, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(fused, at_centred_input, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(weight_grad(x, g), at_centred_input)  # the share is not nothing


@pytest.mark.parametrize("in_place", [False, True])
def test_scale_multiplies_every_gradient(in_place):
    grads = [torch.ones(2, 3), torch.full((4,), 2.0)]
    out = scale(grads, 0.5, in_place=in_place)
    assert [t.tolist() for t in out] == [[[0.5] * 3] * 2, [1.0] * 4]
    assert (out[0] is grads[0]) == in_place


def test_centring_changes_no_output_and_only_the_unit_weights_gradients():
    torch.manual_seed(0)
    plain = DefineEmbedding(define_options(define_unit_centring="none"), 40, 1, 24)
    centred = DefineEmbedding(define_options(define_unit_centring="batch_mean"), 40, 1, 24)
    centred.load_state_dict(plain.state_dict())  # the same parameters (not the same init)
    tokens = torch.randint(2, 40, (3, 7))
    out_p, out_c = plain(tokens), centred(tokens)
    assert torch.equal(out_c, out_p)
    weight = torch.linspace(-1, 1, 24)
    (out_p * weight).sum().backward()
    (out_c * weight).sum().backward()
    for (name, p), (_, c) in zip(plain.named_parameters(), centred.named_parameters()):
        same = torch.allclose(c.grad, p.grad, rtol=1e-5, atol=1e-7)
        # only the unit's matrices change (the map table's gradient passes through the
        # unchanged forward pass; biases and LayerNorms keep theirs)
        assert same != (name.startswith("unit.") and p.dim() == 3), name


@pytest.mark.parametrize("centring,shared", [("batch_mean", False), ("none", True)])
def test_centred_init_starts_without_a_shared_output(centring, shared):
    """Reduce's mean feature maps to 0: the mean output over the vocabulary is small
    next to the outputs themselves."""
    torch.manual_seed(0)
    emb = DefineEmbedding(define_options(define_unit_centring=centring), 40, 1, 24).eval()
    with torch.no_grad():
        out = emb(torch.arange(40)[None])[0]  # [V, m]
    ratio = (out.mean(0).norm() / out.norm(dim=-1).mean()).item()
    assert (ratio > 0.2) == shared, ratio


@pytest.mark.parametrize("style", ["paper", "authors"])
def test_a_deep_copy_trains_as_the_original(style):
    """A deep copy of an embedding (EMA, fairseq's model copies) trains with the stability
    settings as the original does: they live in the training path's backward, not in hooks
    a copy would lose."""
    import copy

    torch.manual_seed(0)
    emb = DefineEmbedding(define_options(define_style=style, define_max_groups=None), 40, 1, 32)
    twin = copy.deepcopy(emb)
    tokens, weight = torch.randint(2, 40, (3, 7)), torch.linspace(-1, 1, 32)
    for m in (emb, twin):
        m.zero_grad()
        (m(tokens) * weight).sum().backward()
    grads = dict(emb.named_parameters())
    for name, p in twin.named_parameters():
        torch.testing.assert_close(p.grad, grads[name].grad, rtol=1e-5, atol=1e-8), name
    torch.manual_seed(0)  # and what the copy's backward applies is the stability settings: unscaled differs
    plain = DefineEmbedding(define_options(define_style=style, define_max_groups=None, define_unit_grad_scale=1.0,
                                           define_unit_centring="none"), 40, 1, 32)
    plain.load_state_dict(emb.state_dict())
    (plain(tokens) * weight).sum().backward()
    unit_grads = [(p.grad, grads[name].grad) for name, p in plain.named_parameters() if name.startswith("unit.")]
    assert not all(torch.allclose(a, b, rtol=1e-3, atol=1e-8) for a, b in unit_grads)
