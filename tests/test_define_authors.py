"""The authors' DeFINE unit (``--define-style authors``) against an independent reference
of their released code's forward pass (DeFINE mode of DExTra, github sacmehta/delight),
written here from reading that code with plain torch ops and a loop over groups; their
parameter counts; the schedules of both styles against closed forms; and the style through
the embedding, the parameter tool and the CLIs."""

import math
import re
from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F

from fairseq_define.modules import (
    AuthorsDefineUnit,
    DefineConfigError,
    DefineEmbedding,
    DefineUnit,
    GroupLayerNorm,
    build_authors_schedule,
    build_schedule,
    cache_define_tables,
)
from fairseq_define.modules.define.config import DEFAULT_DEFINE_STYLE
from fairseq_define.modules.define.embedding import set_unit_run
from fairseq_define.tools import params

from .helpers import USER_DIR, define_cfg, define_options, model_map, run_cli, run_in_process

# (n, k, N, m): the NMT unit (Table 3) and Table 1a R3 / R4 / R5
PAPER_SHAPES = {"nmt": (128, 1024, 3, 512), "r3": (256, 1024, 3, 256), "r4": (384, 1024, 7, 384),
                "r5": (512, 1024, 11, 512)}
# their counts in millions, measured with a port of their code (shared notes)
THEIR_MILLIONS = {"nmt": 1.588, "r3": 0.810, "r4": 1.921, "r5": 3.403}
SMALL_SHAPES = [(16, 64, 3, 32), (32, 256, 4, 128), (64, 200, 5, 96), (24, 96, 2, 64), (16, 40, 6, 256)]


# -- the reference: their schedule and forward, from their code --------------------------------

def ref_schedule(n, k, N, m, g_max=None):
    """Groups: 2^(i mod (log2 g_max + 1)) for i = 0..N-1, reversed (their counter restarts at 1
    after g_max); outputs: floor(linspace(m/2, k, N))[1:] rounded up to a multiple of
    max(g_l, g_l+1, 8), then m; inputs: m/2, then output + m/2."""
    h = m // 2
    if g_max is None:
        g_max = 2 ** math.ceil(math.log2(max(m // 32, 1)))
    period = int(math.log2(g_max)) + 1
    groups = [2 ** (i % period) for i in range(N)][::-1]
    outs = []
    for l in range(1, N):
        w = math.floor(Fraction(h) + Fraction(k - h) * l / (N - 1))
        q = max(groups[l - 1], groups[l], 8)
        outs.append(-(-w // q) * q)
    outs.append(m)
    ins = [h] + [o + h for o in outs[:-1]]
    return ins, outs, groups


def ref_param_count(n, k, N, m, g_max=None):
    """Their compute_macs_params: weights + biases + LayerNorm affine per layer."""
    h = m // 2
    ins, outs, groups = ref_schedule(n, k, N, m, g_max)

    def linear(i, o):  # Linear(bias) + LayerNorm(o)
        return i * o + o + 2 * o

    total = linear(n, h) + linear(h + m, m)
    for i, o, g in zip(ins, outs, groups):
        total += i * o // g + o + 2 * (o // g)  # [g, i/g, o/g] weights, [g, 1, o/g] bias, LN(o/g)
    return total


def their_params(unit):
    """Our unit's weights in their layout: Linear [out, in] + bias [out]; GLT [g, in/g, out/g]
    + bias [g, 1, out/g]; LayerNorm affine over out (Linear) or out/g (GLT)."""

    def layer(l):
        g = l.transform.groups
        w = l.transform.weight.detach()
        o = l.transform.out_features
        b = l.transform.bias.detach() if l.transform.bias is not None else None
        p = {"g": g}
        if g == 1:
            p["w"] = w[0].t().contiguous()  # [out, in]
            p["b"] = b
        else:
            p["w"] = w.clone()
            p["b"] = None if b is None else b.reshape(g, 1, o // g)
        p["ln"] = None if l.norm is None else (l.norm.weight.detach(), l.norm.bias.detach())
        return p

    return [layer(unit.input_layer)] + [layer(l) for l in unit.layers] + [layer(unit.output_layer)]


def ref_layer(x, p, act, drop):
    """x [B, T, in] -> [B, T, out]: their Linear or GroupLinear, norm, activation, dropout."""
    if p["g"] == 1:
        y = F.linear(x, p["w"], p["b"])
        if p["ln"] is not None:
            y = F.layer_norm(y, y.shape[-1:], p["ln"][0], p["ln"][1], 1e-5)
    else:
        B, T, _ = x.shape
        g = p["g"]
        xg = x.reshape(B * T, g, -1)
        parts = []
        for j in range(g):  # each group its own matrix
            yj = xg[:, j] @ p["w"][j]
            if p["b"] is not None:
                yj = yj + p["b"][j, 0]
            if p["ln"] is not None:
                yj = F.layer_norm(yj, yj.shape[-1:], p["ln"][0], p["ln"][1], 1e-5)
            parts.append(yj)
        y = torch.stack(parts, 1).reshape(B, T, -1)
    y = act(y)
    return drop(y)


def ref_forward(ps, e, groups, act=lambda y: y * torch.sigmoid(y), drop=lambda y: y):
    x = ref_layer(e, ps[0], act, drop)  # input projection [B, T, m/2]
    B, T, _ = x.shape
    out = x
    N = len(groups)
    for i in range(N):
        out = ref_layer(out, ps[1 + i], act, drop)
        g_next = groups[i + 1] if i < N - 1 else 1
        xs = x.reshape(B, T, g_next, -1)
        os_ = out.reshape(B, T, g_next, -1)
        out = torch.cat([xs, os_], -1).reshape(B, T, -1)
    return ref_layer(out, ps[-1], act, drop)


def randomize(module):
    """Non-trivial biases and norm affines, so that the comparison sees where they act."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if not name.endswith("transform.weight"):
                p.add_(torch.randn_like(p) * 0.3)


# -- counts and schedules ----------------------------------------------------------------------

@pytest.mark.parametrize("key", PAPER_SHAPES)
def test_parameter_counts_equal_their_code_at_the_paper_shapes(key):
    n, k, N, m = PAPER_SHAPES[key]
    with torch.device("meta"):
        unit = AuthorsDefineUnit(build_authors_schedule(n, k, N, m))
    count = sum(p.numel() for p in unit.parameters())
    assert count == ref_param_count(n, k, N, m)
    assert round(count / 1e6, 3) == THEIR_MILLIONS[key]


def test_nmt_count_by_hand():
    # In 128->256 (32768 + 256 + 512); 256->640/g4 (40960 + 640 + 320); 896->1024/g2
    # (458752 + 1024 + 1024); 1280->512 Linear (655360 + 512 + 1024); Out 768->512 (393216 + 512 + 1024)
    assert ref_param_count(*PAPER_SHAPES["nmt"]) == 1_587_904
    with torch.device("meta"):
        unit = AuthorsDefineUnit(build_authors_schedule(*PAPER_SHAPES["nmt"]))
    assert sum(p.numel() for p in unit.parameters()) == 1_587_904


@pytest.mark.parametrize("shape", list(PAPER_SHAPES.values()) + SMALL_SHAPES + [(128, 1024, 7, 256), (64, 512, 9, 512)])
def test_authors_schedule_matches_the_closed_form(shape):
    s = build_authors_schedule(*shape)
    assert (s.layer_in, s.layer_out, s.layer_groups) == ref_schedule(*shape)
    assert s.proj_dim == shape[3] // 2 and s.reduce_in == shape[3] + shape[3] // 2


def test_authors_groups_at_n7_are_the_reversed_restarting_counter():
    assert build_authors_schedule(384, 1024, 7, 384).layer_groups == [2, 1, 16, 8, 4, 2, 1]
    assert build_authors_schedule(384, 1024, 7, 384, max_groups=4).layer_groups == [1, 4, 2, 1, 4, 2, 1]


@pytest.mark.parametrize("transform", ["define", "hgt"])
@pytest.mark.parametrize(
    "shape", [(128, 1024, 3, 512, 8), (384, 1024, 7, 384, 16), (96, 960, 4, 96, 4), (64, 256, 2, 64, 1)]
)
def test_paper_schedule_matches_the_closed_form(transform, shape):
    """The documented rule: g_l = max(g_max // 2^(l-1), 1); width l = n + (k - n) l / N rounded
    half up to a multiple of lcm(g_l, g_(l+1)) (Reduce: 1 group); Expand l > 1 reads w_(l-1) + n
    with the mixer, w_(l-1) without."""
    n, k, N, m, g_max = shape
    s = build_schedule(n, k, N, m, transform, max_groups=g_max)
    groups = [max(g_max // 2 ** l, 1) for l in range(N)]
    widths = []
    for l in range(1, N + 1):
        q = math.lcm(groups[l - 1], groups[l] if l < N else 1)
        widths.append(max(q, math.floor((Fraction(n) + Fraction(k - n) * l / N) / q + Fraction(1, 2)) * q))
    extra = n if transform == "define" else 0
    assert s.layer_groups == groups and s.layer_out == widths
    assert s.layer_in == [n] + [w + extra for w in widths[:-1]]
    assert s.reduce_in == widths[-1] + n


@pytest.mark.parametrize("kwargs, message", [
    (dict(depth=1), "at least 2 layers"),
    (dict(map_dim=15), "odd"),
    (dict(max_groups=3), "not divisible by define_max_groups"),
    (dict(out_dim=24, depth=4, max_groups=8), "m/2=12 is not divisible by the 8 groups"),
])
def test_authors_schedule_refuses_what_their_code_refuses(kwargs, message):
    base = dict(map_dim=16, expand_dim=64, depth=3, out_dim=32)
    with pytest.raises(DefineConfigError, match=message):
        build_authors_schedule(**{**base, **kwargs})


def test_default_g_max_is_their_rule_where_their_code_builds_a_unit():
    assert build_authors_schedule(128, 1024, 3, 512).max_groups == 16  # 2^ceil(log2(512 // 32))
    assert build_authors_schedule(128, 1024, 3, 96).max_groups == 4  # 96 // 32 = 3
    assert build_authors_schedule(64, 256, 3, 48).max_groups == 1
    # their code refuses m=400 (m/2 = 200 does not split into 16 groups): halved to 8
    assert build_authors_schedule(128, 1024, 7, 400).max_groups == 8


# -- forward against the reference --------------------------------------------------------------

@pytest.mark.parametrize("shape", list(PAPER_SHAPES.values()) + SMALL_SHAPES)
def test_forward_equals_the_reference_of_their_code(shape):
    n, k, N, m = shape
    torch.manual_seed(sum(shape))
    unit = AuthorsDefineUnit(build_authors_schedule(n, k, N, m)).eval()
    randomize(unit)
    e = torch.randn(2, 3, n)
    with torch.no_grad():
        got = unit(e)
        want = ref_forward(their_params(unit), e, unit.schedule.layer_groups)
    assert got.shape == (2, 3, m)
    assert (got - want).abs().max().item() < 1e-5


@pytest.mark.parametrize("activation, act", [("gelu", F.gelu), ("relu", F.relu), ("tanh", torch.tanh)])
@pytest.mark.parametrize("norm", ["layer", "none"])
@pytest.mark.parametrize("bias", [True, False])
def test_forward_settings_equal_the_reference(activation, act, norm, bias):
    torch.manual_seed(1)
    s = build_authors_schedule(32, 256, 4, 128)
    unit = AuthorsDefineUnit(s, activation=activation, norm=norm, bias=bias).eval()
    randomize(unit)
    assert all((l.transform.bias is None) != bias for l in unit.layers)
    assert unit.input_layer.transform.bias is not None and unit.output_layer.transform.bias is not None
    e = torch.randn(3, 2, 32)
    with torch.no_grad():
        want = ref_forward(their_params(unit), e, s.layer_groups, act=act)
        assert (unit(e) - want).abs().max().item() < 1e-5


def test_dropout_sits_after_the_input_projection_every_layer_and_the_output():
    """Training mode, same seed: the reference draws its dropout masks at their places."""
    s = build_authors_schedule(32, 256, 4, 128)
    unit = AuthorsDefineUnit(s, dropout=0.3).train()
    e = torch.randn(2, 5, 32)
    torch.manual_seed(7)
    got = unit(e)
    torch.manual_seed(7)
    want = ref_forward(their_params(unit), e, s.layer_groups, drop=lambda y: F.dropout(y, 0.3, True))
    assert (got - want).abs().max().item() < 1e-5


def test_init_is_xavier_uniform_on_their_weight_shapes():
    torch.manual_seed(0)
    unit = AuthorsDefineUnit(build_authors_schedule(128, 1024, 3, 512))
    for layer in [unit.input_layer, *unit.layers, unit.output_layer]:
        w, g = layer.transform.weight, layer.transform.groups
        i, o = layer.transform.in_features, layer.transform.out_features
        # torch's fans of their tensors: [out, in] for a Linear; [g, in/g, out/g] has
        # fan_in = (in/g)(out/g), fan_out = g (out/g)
        bound = math.sqrt(6 / (i + o)) if g == 1 else math.sqrt(6 / ((i // g) * (o // g) + o))
        assert w.abs().max().item() <= bound
        assert abs(w.std().item() - bound / math.sqrt(3)) < 0.05 * bound
        assert torch.count_nonzero(layer.transform.bias) == 0
        assert torch.equal(layer.norm.weight, torch.ones_like(layer.norm.weight))


def test_group_layer_norm_is_layer_norm_per_group_with_a_shared_affine():
    torch.manual_seed(0)
    norm = GroupLayerNorm(12, 3)
    randomize(norm)
    x = torch.randn(4, 12)
    want = torch.cat([F.layer_norm(c, (4,), norm.weight, norm.bias) for c in x.split(4, -1)], -1)
    torch.testing.assert_close(norm(x), want)
    assert sum(p.numel() for p in norm.parameters()) == 8


def test_paper_style_group_layer_norm_knob():
    s = build_schedule(16, 64, 3, 16, "define", max_groups=4)
    full = DefineUnit(s, norm="layer")
    grouped = DefineUnit(s, norm="group_layer")
    assert [type(l.norm).__name__ for l in grouped.layers] == ["GroupLayerNorm"] * 3
    assert [l.norm.weight.numel() for l in grouped.layers] == [o // g for o, g in zip(s.layer_out, s.layer_groups)]
    diff = sum(2 * o - 2 * (o // g) for o, g in zip(s.layer_out, s.layer_groups))
    count = lambda u: sum(p.numel() for p in u.parameters())  # noqa: E731
    assert count(full) - count(grouped) == diff > 0


# -- the style through the embedding ----------------------------------------------------------

TOKENS = torch.tensor([[5, 9, 5, 7], [9, 9, 30, 5]])


def authors_options(**kw):
    return define_options(define_style="authors", define_max_groups=None, **kw)


def test_default_style_is_one_constant():
    assert DEFAULT_DEFINE_STYLE == "paper"
    assert define_cfg().define_style == DEFAULT_DEFINE_STYLE


def test_embedding_builds_the_authors_unit_and_scales_a_standard_map_by_sqrt_n():
    torch.manual_seed(0)
    emb = DefineEmbedding(authors_options(), 40, 1, 32).eval()
    assert isinstance(emb.unit, AuthorsDefineUnit) and emb.embedding_dim == 32
    e = emb.map.weight[TOKENS] * math.sqrt(16)
    torch.testing.assert_close(emb(TOKENS), emb.unit(e))


@pytest.mark.parametrize("adaptive_cls", ["fairseq", "projected"])
def test_authors_adaptive_map_scales_each_band_by_sqrt_of_its_width(adaptive_cls):
    from fairseq.modules import AdaptiveInput

    from fairseq_define.modules.lm.adaptive_io import ProjectedAdaptiveInput

    torch.manual_seed(0)
    cutoff = [10, 20]
    if adaptive_cls == "fairseq":
        amap = AdaptiveInput(40, 1, 16, 2.0, 16, cutoff + [40])
    else:
        amap = ProjectedAdaptiveInput(40, 1, 16, 2.0, 16, cutoff)
    emb = DefineEmbedding(authors_options(), 40, 1, 32, map_layer=amap, map_scale=7.0).eval()
    tokens = torch.tensor([[3, 12, 25, 39], [0, 19, 20, 9]])
    want = torch.zeros(2, 4, 16)
    for i, lo, hi in ((0, 0, 10), (1, 10, 20), (2, 20, 40)):
        table, proj = amap.embeddings[i][0], amap.embeddings[i][1]
        mask = (tokens >= lo) & (tokens < hi)
        want[mask] = proj(table(tokens[mask] - lo) * math.sqrt(table.embedding_dim))
    torch.testing.assert_close(emb.map_tokens(tokens), want)


def test_authors_map_dropout_is_one_mask_per_sequence():
    emb = DefineEmbedding(authors_options(define_map_dropout=0.5), 40, 1, 32).train()
    torch.manual_seed(0)
    e = emb.map_tokens(torch.tensor([[5, 5, 5, 5]]))
    assert torch.equal(e[0, 0], e[0, 3]) and (e[0, 0] == 0).any()


@pytest.mark.parametrize("style", ["paper", "authors"])
@pytest.mark.parametrize("map_kind", ["standard", "adaptive"])
def test_unique_token_path_equals_plain_path_for_both_styles(style, map_kind):
    torch.manual_seed(0)
    kw = dict(define_style=style, define_max_groups=None)
    plain = set_unit_run(
        DefineEmbedding(define_options(**kw), 40, 1, 32, map_layer=model_map(map_kind)), token_path="plain"
    )
    unique = set_unit_run(DefineEmbedding(define_options(**kw), 40, 1, 32, map_layer=model_map(map_kind)),
                          token_path="unique")
    unique.load_state_dict(plain.state_dict())
    out_p, out_u = plain(TOKENS), unique(TOKENS)
    torch.testing.assert_close(out_u, out_p, atol=1e-6, rtol=1e-5)
    weight = torch.randn_like(out_p)
    (out_p * weight).sum().backward()
    (out_u * weight).sum().backward()
    for (name, a), (_, b) in zip(plain.named_parameters(), unique.named_parameters()):
        torch.testing.assert_close(b.grad, a.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_unique_path_is_skipped_when_the_authors_unit_drops_out():
    emb = DefineEmbedding(authors_options(define_dropout=0.5), 40, 1, 32).train()
    torch.manual_seed(0)
    a = emb(TOKENS)
    assert not torch.equal(a[0, 0], a[0, 2])


@pytest.mark.parametrize("map_kind", ["standard", "adaptive"])
def test_authors_cached_table_equals_live_unit(map_kind):
    torch.manual_seed(0)
    emb = DefineEmbedding(authors_options(), 40, 1, 32, map_layer=model_map(map_kind)).eval()
    live = emb(TOKENS)
    cache_define_tables(emb)
    assert emb.unit is None
    torch.testing.assert_close(emb(TOKENS), live, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("overrides, message", [
    (dict(define_transform="hgt"), "ablation of the paper's unit"),
    (dict(define_no_reduce=True), "--define-no-reduce"),
    (dict(define_groups="4,2,1"), "--define-groups"),
])
def test_settings_without_a_counterpart_in_their_code_are_refused(overrides, message):
    with pytest.raises(DefineConfigError, match=message):
        DefineEmbedding(authors_options(**overrides), 40, 1, 32)


def test_projective_ignores_the_style():
    a = DefineEmbedding(authors_options(define_transform="projective"), 40, 1, 32)
    assert isinstance(a.unit, DefineUnit) and a.schedule.transform == "projective"


# -- tools and CLIs ------------------------------------------------------------------------------

def test_params_tool_prints_the_authors_unit(capsys):
    assert params.cli_main(["--arch", "define_transformer_wmt_en_de", "--define-style", "authors"]) == 0
    out = capsys.readouterr().out
    assert out.count("unit 1.588M: define (authors, g_max=16): In 128->256, Expand 256->640/g4 896->1024/g2 "
                     "1280->512/g1, Out 768->512") == 2  # encoder and decoder


def test_params_tool_refuses_an_ablation_in_the_authors_style(capsys):
    assert params.cli_main(["--arch", "define_transformer_tiny", "--define-style", "authors",
                            "--define-transform", "glt"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fairseq-define-params: error: define_transform=glt")


def test_paper_table_1a_shows_both_styles_beside_the_paper(capsys):
    params.lstm_table("1a")
    out = capsys.readouterr().out
    for row, authors, paper in (("R3", "0.81", "0.41"), ("R4", "1.92", "1.83"), ("R5", "3.40", "3.89")):
        line = next(l for l in out.splitlines() if l.startswith(row))
        assert re.search(rf"\({paper}\)\s+{authors}\s", line), line


@pytest.mark.parametrize("arch", ["define_lstm_wt103_t6_linear", "define_lstm_wt103_t6_glt", "define_lstm_wt103_t6_hgt",
                                  "define_lstm_wt103_t6_define_nomix", "define_lstm_wt103_t8_residual",
                                  "define_lstm_wt103_t8_no_reduce"])
def test_ablation_architectures_are_pinned_to_the_paper_style(arch):
    """Whatever the default style: the arch fills define_style=paper when the user sets none."""
    from argparse import Namespace

    from fairseq.models import ARCH_CONFIG_REGISTRY

    args = Namespace()
    ARCH_CONFIG_REGISTRY[arch](args)
    assert args.define_style == "paper"
    model, _ = params.build_arch(arch, 30000, extra=["--adaptive-cutoff", "2000,8000"])
    assert all(isinstance(u, DefineUnit) for u in params.define_units(model))


def test_lstm_and_transformer_xl_build_the_authors_unit():
    for arch, extra in (("define_lstm_tiny", ["--define-transform", "define"]),
                        ("define_txl_tiny", ["--define-transform", "define", "--adaptive-cutoff", "20,40"]),
                        ("define_awd_lstm_ptb_define", [])):
        model, _ = params.build_arch(arch, 100, extra=[*extra, "--define-style", "authors"])
        units = params.define_units(model)
        assert len(units) == 1 and isinstance(units[0], AuthorsDefineUnit), arch


@pytest.fixture(scope="module")
def authors_nmt(wmt_bin, tmp_path_factory):
    ckpt = tmp_path_factory.mktemp("authors_nmt")
    out = run_in_process("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny",
                         "--define-style", "authors", "--define-dropout", "0.1", "--share-all-embeddings",
                         "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500", "--max-update", "3",
                         "--save-dir", ckpt, "--cpu", "--no-epoch-checkpoints", "--log-format", "simple", "--seed", "3")
    assert "define_transformer_tiny: DeFINE" in out.stdout and "num_updates 3" in out.stdout
    return ckpt


def test_nmt_authors_style_scores_the_same_with_cached_tables(wmt_bin, authors_nmt, tmp_path):
    """fairseq-train / fairseq-generate / fairseq-define-cache-tables / the hub with the
    authors' unit: the cached checkpoint gives every reference token the live one's
    log-probability. (Reference scoring, not beam search: after 3 updates the model's
    candidates are near ties, which a table lookup's 1e-6 rounding may reorder.)"""
    from fairseq_define.models.define_transformer import DefineTransformerModel

    gen = ["--user-dir", USER_DIR, "--gen-subset", "test", "--score-reference", "--max-sentences", "8", "--cpu"]
    live = run_in_process("fairseq-generate", wmt_bin / "bin", "--path", authors_nmt / "checkpoint_last.pt",
                          *gen).stdout
    run_cli("fairseq-define-cache-tables", "--path", authors_nmt / "checkpoint_last.pt", "--output", tmp_path / "c.pt",
            "--data", wmt_bin / "bin")
    cached = run_in_process("fairseq-generate", wmt_bin / "bin", "--path", tmp_path / "c.pt", *gen).stdout

    def positional(out):
        return {int(i): [float(x) for x in scores.split()] for i, scores in re.findall(r"^P-(\d+)\t(.*)$", out, re.M)}

    want, got = positional(live), positional(cached)
    assert len(want) > 10 and got.keys() == want.keys()
    for i, scores in want.items():
        assert len(got[i]) == len(scores) and max(abs(a - b) for a, b in zip(got[i], scores)) < 1e-4, i
    hub = DefineTransformerModel.from_pretrained(str(authors_nmt), "checkpoint_last.pt",
                                                 data_name_or_path=str(wmt_bin / "bin"), define_cache_on_load=True)
    assert isinstance(hub.translate("the house"), str)


def test_define_out_dim_zero_is_refused_in_both_styles():
    for style in ("paper", "authors"):
        with pytest.raises(DefineConfigError, match=r"define_out_dim \(m\) must be a positive integer, got 0"):
            DefineEmbedding(define_options(define_style=style, define_max_groups=None, define_out_dim=0), 40, 1, 32)


@pytest.mark.parametrize("sizes, message", [
    (dict(depth=100000), r"define_depth \(N\)=100000 is larger than this plugin supports \(64\)"),
    (dict(expand_dim=1000000), r"define_expand_dim \(k\)=1000000 is larger than this plugin supports \(65536\)"),
])
def test_the_authors_schedule_has_the_paper_styles_size_bounds(sizes, message):
    from fairseq_define.modules.config_bounds import ConfigRangeError

    shape = {**dict(map_dim=16, expand_dim=64, depth=3, out_dim=32), **sizes}
    with pytest.raises(ConfigRangeError, match=message):
        build_authors_schedule(**shape)
