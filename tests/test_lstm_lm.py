"""LSTM / AWD-LSTM language models: every DeFINE variant on the map, the tied (adaptive)
softmax, hidden state carried across segments against one long sequence, incremental
decoding, AWD-LSTM's regularizers and loss, NT-ASGD, cached tables, and every named
architecture of Tables 1, 6, 7 and 8 through fairseq's parser."""

from argparse import Namespace

import pytest
import torch
from fairseq import UserError
from fairseq.data import Dictionary
from fairseq.models import ARCH_MODEL_REGISTRY

from fairseq_define.criterions.awd_lm_loss import AWDLanguageModelLoss
from fairseq_define.modules.define.embedding import cache_define_tables
from fairseq_define.modules.lm.awd_regularization import WeightDropLSTM, embedding_dropout, locked_dropout
from fairseq_define.optim.nt_asgd import AveragedSGD
from fairseq_define.tools.params import LSTM_TABLES, TABLE1A_ROWS, build_arch, parameter_distribution

from .helpers import ptb_style, tiny_lstm

TRANSFORMS = ["none", "projective", "linear", "glt", "glt_shuffle", "hgt", "define_nomix", "define", "define_residual"]


def lstm_params(i, h):
    return 4 * h * (i + h) + 8 * h  # W_ih, W_hh and both biases


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("cutoff", [None, "20,40"])
def test_every_variant_gives_normalised_log_probs_and_gradients(transform, cutoff):
    torch.manual_seed(0)
    out_dim = None if transform == "none" else 16
    model = tiny_lstm(define_transform=transform, adaptive_cutoff=cutoff, div_val=2.0, define_out_dim=out_dim).train()
    tokens = torch.randint(4, 60, (3, 5))
    x, extra = model(tokens)
    assert x.shape == (3, 5, 8) and extra["raw_output"].shape == (3, 5, 8)  # the last layer is n wide
    lprobs = model.get_normalized_probs((x, extra), log_probs=True)  # [3, 5, V]
    assert lprobs.shape == (3, 5, 60)
    torch.testing.assert_close(lprobs.exp().sum(-1), torch.ones(3, 5), atol=1e-5, rtol=0)
    lprobs.gather(-1, tokens.unsqueeze(-1)).sum().backward()
    # the LSTM reads m dims; every layer of the unit and the tied map table learn
    assert model.decoder.layers[0].input_size == (8 if transform == "none" else 16)
    no_grad = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not no_grad, no_grad


def test_a_band_narrower_than_one_dim_is_refused():
    from fairseq_define.errors import UserError

    with pytest.raises(UserError, match="leaves a band 0 dims wide"):
        tiny_lstm(adaptive_cutoff="20,40", div_val=4.0)


def test_no_reduce_feeds_the_expanded_width_to_the_lstm():
    model = tiny_lstm(define_transform="define", define_no_reduce=True)
    assert model.decoder.layers[0].input_size == 32  # k
    assert model(torch.randint(4, 60, (2, 3)))[0].shape == (2, 3, 8)


def test_context_model_counts_lstm_layers_exactly():
    model = tiny_lstm(define_transform="define", define_out_dim=16, lstm_layers=3)
    counts = parameter_distribution(model)
    assert counts["context"] == lstm_params(16, 12) + lstm_params(12, 12) + lstm_params(12, 8)
    # tied: the softmax adds only its per-word bias to the map table
    assert counts["input_output"] == 60 * 8 + 60


@pytest.mark.parametrize("row", TABLE1A_ROWS, ids=[r[0] for r in TABLE1A_ROWS])
def test_table_1a_context_and_input_output_columns_are_exact(row):
    name, arch, _, p_context, p_io, _ = row
    model, _ = build_arch(arch, 267735)
    counts = parameter_distribution(model)
    assert round(counts["context"] / 1e6, 2) == p_context
    assert round(counts["input_output"] / 1e6, 2) == p_io


def test_awd_lstm_ptb_baseline_counts_24_2m():
    model, _ = build_arch("define_awd_lstm_ptb", 10000)
    assert round(parameter_distribution(model)["total"] / 1e6, 2) == 24.22


@pytest.mark.parametrize("transform", ["none", "define"])
def test_carried_state_over_segments_equals_one_long_sequence(transform):
    torch.manual_seed(1)
    model = tiny_lstm(define_transform=transform, define_out_dim=None if transform == "none" else 16)
    tokens = torch.randint(4, 60, (2, 12))
    with torch.no_grad():
        full, _ = model(tokens)
        parts = [model(tokens[:, i:i + 4], stream="valid", segment=i // 4)[0] for i in range(0, 12, 4)]
        torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-6, rtol=1e-5)
        # a segment that does not follow the stored one starts from a zero state
        restart, _ = model(tokens[:, 4:8], stream="valid", segment=5)
        torch.testing.assert_close(restart, model(tokens[:, 4:8])[0])
        assert not torch.allclose(restart, parts[1])


def test_incremental_decoding_equals_full_forward():
    torch.manual_seed(2)
    model = tiny_lstm(define_transform="define", define_out_dim=16)
    tokens = torch.randint(4, 60, (2, 6))
    with torch.no_grad():
        full, _ = model(tokens)
        state = {}
        steps = [model(tokens[:, : t + 1], incremental_state=state)[0] for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-6, rtol=1e-5)


def test_cached_table_gives_the_live_units_outputs():
    torch.manual_seed(3)
    model = tiny_lstm(define_transform="define", define_out_dim=16, adaptive_cutoff="20", div_val=2.0)
    tokens = torch.randint(4, 60, (2, 7))
    with torch.no_grad():
        live, _ = model(tokens)
        assert cache_define_tables(model) == 60 * 16 * 4
        cached, _ = model(tokens)
    torch.testing.assert_close(cached, live, atol=1e-6, rtol=1e-6)


def test_weight_drop_masks_hidden_weights_per_forward_and_keeps_the_raw_weights():
    torch.manual_seed(4)
    lstm = WeightDropLSTM(5, 6, weight_drop=0.5)
    raw = lstm.weight_hh_l0.detach().clone()
    x = torch.randn(2, 4, 5)
    lstm.train()
    a, _ = lstm(x)
    b, _ = lstm(x)
    assert not torch.allclose(a, b)  # a new DropConnect mask each forward
    assert torch.equal(lstm.weight_hh_l0, raw)  # the parameter itself is never overwritten
    a.sum().backward()
    assert lstm.weight_hh_l0.grad is not None and lstm.weight_hh_l0.grad.abs().sum() > 0
    plain = torch.nn.LSTM(5, 6, batch_first=True)
    plain.load_state_dict(lstm.state_dict())
    lstm.eval()
    with torch.no_grad():
        torch.testing.assert_close(lstm(x)[0], plain(x)[0])  # no mask in evaluation


@pytest.mark.parametrize("weight_drop", [0.0, 0.5])
def test_centred_input_gives_the_plain_outputs_and_the_centred_input_weight_gradient(weight_drop):
    torch.manual_seed(8)
    plain, centred = WeightDropLSTM(5, 6, weight_drop), WeightDropLSTM(5, 6, weight_drop, centre_input=True)
    centred.load_state_dict(plain.state_dict())
    before = {k: v.clone() for k, v in centred.state_dict().items()}
    x = torch.randn(3, 4, 5) + 2.0  # a shared mean, as the authors' unit hands the LSTM
    h0 = (torch.randn(1, 3, 6), torch.randn(1, 3, 6))
    out = {}
    for name, lstm in (("plain", plain), ("centred", centred)):
        xi = x.clone().requires_grad_(True)
        torch.manual_seed(9)  # the same DropConnect mask
        y, (h, c) = lstm.train()(xi, h0)
        (y.pow(2).sum() + h.sum() + c.sum()).backward()
        out[name] = (y, h, c, xi.grad)
    for a, b in zip(out["plain"], out["centred"]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)  # outputs and the input's gradient
    for name in ("weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
        torch.testing.assert_close(getattr(centred, name).grad, getattr(plain, name).grad, atol=1e-5, rtol=1e-5)
    # sum_t g_t (x_t - mean x)^T: the plain gradient less the bias's gradient times the mean input
    mean = x.reshape(-1, 5).mean(0)
    expected = plain.weight_ih_l0.grad - torch.outer(plain.bias_ih_l0.grad, mean)
    torch.testing.assert_close(centred.weight_ih_l0.grad, expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(expected, plain.weight_ih_l0.grad, atol=1e-3)
    for k, v in centred.state_dict().items():
        assert torch.equal(v, before[k]), k  # the parameters themselves are never overwritten
    centred.eval()
    with torch.no_grad():
        torch.testing.assert_close(centred(x)[0], plain.eval()(x)[0])


@pytest.mark.parametrize("mode,centred", [("none", [False, False, False]), ("embedding", [True, False, False]),
                                          ("all", [True, True, True])])
def test_lstm_input_centring_picks_the_layers(mode, centred):
    model = tiny_lstm(lstm_layers=3, lstm_input_centring=mode)
    assert [layer.centre_input for layer in model.decoder.layers] == centred


def test_locked_dropout_shares_one_mask_over_time_and_embedding_dropout_one_per_word():
    torch.manual_seed(5)
    x = torch.ones(3, 7, 10)
    y = locked_dropout(x, 0.5, True)
    assert torch.equal(y, y[:, :1].expand_as(y))  # the same mask at every step
    assert set(y.unique().tolist()) <= {0.0, 2.0}
    assert torch.equal(locked_dropout(x, 0.5, False), x)
    tokens = torch.tensor([[5, 6, 5, 7, 5]])
    e = embedding_dropout(tokens, torch.ones(1, 5, 4), 10, 0.5, True)
    assert torch.equal(e[0, 0], e[0, 2]) and torch.equal(e[0, 0], e[0, 4])  # one draw per word type
    assert set(e[..., 0].unique().tolist()) <= {0.0, 2.0}


@pytest.mark.parametrize("alpha,beta", [(0.0, 0.0), (2.0, 0.0), (0.0, 1.0), (2.0, 1.0)])
def test_awd_loss_adds_ar_and_tar_scaled_to_the_summed_nll(alpha, beta):
    torch.manual_seed(6)
    model = tiny_lstm(dropout=0.3).train()
    tokens = torch.randint(4, 60, (2, 6))
    target = torch.randint(4, 60, (2, 6))
    target[1, 4:] = 1  # padding
    sample = {"net_input": {"src_tokens": tokens}, "target": target, "ntokens": int(target.ne(1).sum())}
    crit = AWDLanguageModelLoss(Namespace(target_dictionary=model.decoder.dictionary), False, alpha, beta)
    torch.manual_seed(7)
    loss, size, log = crit(model, sample)
    torch.manual_seed(7)
    x, extra = model(tokens)
    nll = crit.compute_loss(model, (x, extra), sample)[0]
    keep = target.ne(1).unsqueeze(-1).float()
    raw = extra["raw_output"]
    ar = alpha * (x.pow(2) * keep).sum() / (keep.sum() * 8)
    both = keep[:, 1:] * keep[:, :-1]
    tar = beta * ((raw[:, 1:] - raw[:, :-1]).pow(2) * both).sum() / (both.sum() * 8)
    torch.testing.assert_close(loss, nll + (ar + tar) * sample["ntokens"])
    torch.testing.assert_close(log["loss"], nll.detach())  # ppl stays the NLL's
    assert size == sample["ntokens"] == 10


def test_averaged_sgd_is_sgd_then_the_mean_of_its_iterates_and_swaps_back():
    torch.manual_seed(8)
    w = torch.nn.Parameter(torch.randn(4))
    opt = AveragedSGD([w], lr=0.1, weight_decay=0.01)
    ref = w.detach().clone()
    iterates = []
    for step in range(6):
        if step == 2:
            opt.start_averaging()  # the mean starts with the next iterate (torch's ASGD, t0=0)
        g = torch.randn(4)
        w.grad = g.clone()
        opt.step()
        ref = ref - 0.1 * (g + 0.01 * ref)
        torch.testing.assert_close(w.detach(), ref)  # plain SGD throughout
        if step >= 2:
            iterates.append(w.detach().clone())
    mean = torch.stack(iterates).mean(0)
    assert opt.use_average()
    torch.testing.assert_close(w.detach(), mean)
    state = opt.state_dict()  # saved while swapped, as a checkpoint after validation is
    opt2 = AveragedSGD([w], lr=0.1, weight_decay=0.01)
    opt2.load_state_dict(state)
    opt2.use_iterate()  # what the first training step after resuming does
    torch.testing.assert_close(w.detach(), ref)


def test_nt_asgd_schedule_switches_when_validation_stops_improving():
    from fairseq_define.optim.nt_asgd import FairseqNTASGD, NTASGDConfig
    from fairseq_define.optim.nt_asgd_schedule import NTASGDSchedule, NTASGDScheduleConfig

    w = torch.nn.Parameter(torch.randn(3))
    opt = FairseqNTASGD(NTASGDConfig(weight_decay=0.0, lr=[1.0], fp16=False, bf16=False, amp=False, use_bmuf=False,
                                     zero_sharding="none", ddp_backend="pytorch_ddp"), [w])
    sched = NTASGDSchedule(NTASGDScheduleConfig(nonmono=2, lr=[1.0]), opt)
    for epoch, loss in enumerate([5.0, 4.0, 3.0, 3.5, 3.2], 1):
        sched.step(epoch, loss)
        assert not opt.averaging  # 3.5 and 3.2 are not worse than min of the earlier ones...
    sched.step(6, 4.5)  # ...4.5 is worse than min([5, 4, 3]) before the last 2
    assert opt.averaging
    resumed = NTASGDSchedule(NTASGDScheduleConfig(nonmono=2, lr=[1.0]), opt)
    resumed.load_state_dict(sched.state_dict())
    assert resumed.history == [5.0, 4.0, 3.0, 3.5, 3.2, 4.5]


LSTM_ARCHS = sorted(a for a in ARCH_MODEL_REGISTRY if a.startswith(("define_lstm_", "define_awd_lstm_")))
TABLE_ARCHS = sorted({arch for _, rows in LSTM_TABLES.values() for _, arch, *_ in rows})


def test_every_table_row_is_a_registered_architecture():
    assert set(TABLE_ARCHS) <= set(LSTM_ARCHS)
    assert len(TABLE_ARCHS) == 5 + 6 + 9 + 2  # Table 1a, 6, 7, 8 (8's DeFINE row is Table 6's)


# one architecture of each kind at full size: a full softmax, adaptive bands without a unit,
# DeFINE at the deepest unit, GLT with shuffle, residual skips, no Reduce, AWD-LSTM with DeFINE;
# every table architecture is built (on the meta device) and counted by tests/test_params_tool.py
REPRESENTATIVE_ARCHS = ["define_lstm_wt103_r1_standard", "define_lstm_wt103_r2_adaptive",
                        "define_lstm_wt103_r5_define_n512", "define_lstm_wt103_t6_glt_shuffle",
                        "define_lstm_wt103_t8_residual", "define_lstm_wt103_t8_no_reduce",
                        "define_awd_lstm_ptb_define", "define_lstm_small"]


@pytest.mark.parametrize("arch", REPRESENTATIVE_ARCHS)
def test_named_architectures_train_a_step_on_ptb(arch):
    """A named architecture at its full size, built by fairseq's parser on a PTB-format
    dictionary (WikiText-103's cutoffs replaced by ones that fit 10K words), one step."""
    from fairseq import options


    d = Dictionary()
    lines = ptb_style("train").read_text(encoding="utf-8").splitlines()[:1000]  # 3,000 words
    for line in lines:
        for w in line.split():
            d.add_symbol(w)
    parser = options.get_training_parser(default_task="language_modeling")
    extra = ["--adaptive-cutoff", "1000,2000"] if "wt103" in arch and "r1" not in arch else []
    args = options.parse_args_and_arch(parser, ["-", "--arch", arch, *extra])
    torch.manual_seed(0)
    model = ARCH_MODEL_REGISTRY[arch].build_model(args, Namespace(target_dictionary=d)).train()
    ids = [d.index(w) for w in " ".join(lines[:20]).split()][:33]
    tokens = torch.tensor(ids).view(1, -1)
    x, extra_out = model(tokens[:, :-1])
    nll = -model.decoder.adaptive_softmax.target_log_prob(x.reshape(-1, x.size(-1)), tokens[0, 1:]).mean()
    assert torch.isfinite(nll) and nll.item() > 0
    nll.backward()
    learning = [n for n, p in model.named_parameters() if "layers" in n or ".unit." in n]
    assert learning and all(model.get_parameter(n).grad is not None for n in learning)


def test_extract_features_has_fairseqs_return_shape():
    model = tiny_lstm(define_transform="define", define_out_dim=16)
    features, extra = model.extract_features(torch.randint(4, 60, (2, 5)))
    assert features.shape == (2, 5, 8) and extra["raw_output"].shape == (2, 5, 8)


@pytest.mark.parametrize("flag", ["fp16", "amp", "use_bmuf", "zero_sharding"])
def test_nt_asgd_refuses_what_it_cannot_average(flag):
    from fairseq_define.errors import UserError
    from fairseq_define.optim.nt_asgd import FairseqNTASGD, NTASGDConfig

    cfg = dict(weight_decay=0.0, lr=[1.0], fp16=False, bf16=False, amp=False, use_bmuf=False,
               zero_sharding="none", ddp_backend="pytorch_ddp")
    cfg[flag] = "os" if flag == "zero_sharding" else True
    with pytest.raises(UserError, match="nt_asgd"):
        FairseqNTASGD(NTASGDConfig(**cfg), [torch.nn.Parameter(torch.zeros(2))])


@pytest.mark.parametrize("transform", ["none", "define"])
def test_the_map_scale_multiplies_what_the_lstm_or_the_unit_reads(transform):
    """--map-scale s: the map alone feeds the LSTM s times its output; a DeFINE unit reads s
    times the map's output (as fairseq scales an adaptive input); the tied softmax's tables
    stay as they are."""
    plain = tiny_lstm(define_transform=transform)
    scaled = tiny_lstm(define_transform=transform, map_scale=4.0)
    scaled.load_state_dict(plain.state_dict())
    tokens = torch.randint(4, 60, (2, 7))
    seen = {}
    for name, model in (("plain", plain), ("scaled", scaled)):
        reader = model.decoder.layers[0] if transform == "none" else model.decoder.embed_tokens.unit
        handle = reader.register_forward_pre_hook(lambda m, args, name=name: seen.__setitem__(name, args[0]))
        with torch.no_grad():  # the modules' path, whose unit reads the scaled map
            model(tokens)
        handle.remove()
    assert torch.allclose(seen["scaled"], 4.0 * seen["plain"], atol=1e-6)  # the LSTM's [B, T, n] or the unit's
    table, _ = scaled.decoder.adaptive_softmax.tied_input.weights_for_band(0)
    assert torch.equal(table, plain.decoder.adaptive_softmax.tied_input.weights_for_band(0)[0])


@pytest.mark.parametrize("scale, line", [(0.0, "--map-scale must be a positive number, got 0.0"),
                                         (-1.0, "--map-scale must be a positive number, got -1.0"),
                                         (float("nan"), "map_scale=nan is not a finite number")])
def test_a_map_scale_that_is_no_positive_number_is_refused(scale, line):
    with pytest.raises(UserError, match=line):  # nan: the config bounds' own line
        tiny_lstm(map_scale=scale)
