"""fairseq-define-export: a trained DeFINE model as fairseq's own architecture. The export
must give the same outputs through the stock CLIs without --user-dir as the original with
the plugin (docs/inference.md, "Deploy"), hold only stock settings and classes, and refuse
in one line what stock fairseq cannot express."""

import math
import re
from argparse import Namespace

import pytest
import torch
from fairseq.checkpoint_utils import checkpoint_pickle_globals, safe_torch_load
from fairseq.models import ARCH_CONFIG_REGISTRY

from fairseq_define.models.stock_form import NotExportable, export_state
from fairseq_define.modules import cache_define_tables

from .helpers import (
    TINY,
    USER_DIR,
    assert_user_error,
    binarize_ptb_slice,
    dictionary,
    made_once,
    result,
    run_cli,
    run_in_process,
    snapshot,
    tiny_lm,
    tiny_lstm,
    tiny_model,
)

# -- in process: every output form, sharing and unit style, live and cached ----------------


def translation_model(form, shared, style, vocab=(44, 50), **settings):
    """define_transformer_tiny at TINY's sizes (and ``settings``), built as fairseq-train builds it:
    (model, cfg, task)."""
    from fairseq_define.models.define_transformer import DefineTransformerModel

    src = dictionary(vocab[0])
    tgt = src if shared else dictionary(vocab[1])
    args = Namespace(arch="define_transformer_tiny", encoder_embed_dim=64, decoder_embed_dim=64, define_map_dim=32,
                     define_expand_dim=128, define_output_layer=form, define_style=style, share_all_embeddings=shared,
                     dropout=0.0, task="translation", criterion="cross_entropy", optimizer="adam",
                     user_dir=USER_DIR, data="data-bin", **settings)
    ARCH_CONFIG_REGISTRY[args.arch](args)
    task = Namespace(source_dictionary=src, target_dictionary=tgt)
    torch.manual_seed(0)
    model = DefineTransformerModel.build_model(args, task).eval()
    cfg = {"model": args, "task": {"_name": "translation", "data": "data-bin"}, "common": {"user_dir": USER_DIR}}
    return model, cfg, task


def stock_model(state, task):
    """The exported checkpoint's model, built by fairseq from its config alone."""
    from fairseq import models

    model_cfg = state["cfg"]["model"]
    if isinstance(model_cfg, dict):
        from omegaconf import OmegaConf

        model_cfg = OmegaConf.create(model_cfg)
    model = models.build_model(model_cfg, task)
    model.load_state_dict(state["model"], strict=True)
    return model.eval()


def greedy_log_probs(model, src, steps=6):
    """Per-step log-probabilities of greedy decoding through the incremental state (the path
    generation takes): [B, steps, V]."""
    eos = model.decoder.dictionary.eos()
    enc = model.encoder(src, src_lengths=torch.full((src.size(0),), src.size(1)))
    prev, state, out = torch.full((src.size(0), 1), eos), {}, []
    with torch.no_grad():
        for _ in range(steps):
            x = model.decoder(prev, encoder_out=enc, incremental_state=state)
            lp = model.get_normalized_probs(x, log_probs=True)[:, -1]  # [B, V]
            out.append(lp)
            prev = torch.cat([prev, lp.argmax(-1, keepdim=True)], 1)
    return torch.stack(out, 1)


# each style once live and once cached would double the runs: the paper's unit live, the authors' cached
@pytest.mark.parametrize("style, cached", [("paper", False), ("authors", True)], ids=["paper-live", "authors-cached"])
@pytest.mark.parametrize("shared", [True, False], ids=["shared", "separate"])
@pytest.mark.parametrize("form", ["untied", "tied_map", "tied_unit"])
def test_translation_export_computes_what_the_define_model_computes(form, shared, style, cached):
    model, cfg, task = translation_model(form, shared, style)
    if cached:
        cache_define_tables(model)
    state = export_state(model, cfg, task)
    stock = stock_model(state, task)
    assert type(stock).__name__ == "TransformerModel" and stock.encoder.embed_scale == 1.0
    src = torch.randint(4, 44, (3, 9))  # the source dictionary's words (the smaller one where separate)
    src[:, -1] = task.source_dictionary.eos()
    torch.testing.assert_close(greedy_log_probs(stock, src), greedy_log_probs(model, src), atol=1e-4, rtol=0)
    # tables, not units; one tied table where the output is tied to the unit
    assert not any(".unit." in k or ".map." in k for k in state["model"])
    dec = stock.decoder
    assert (dec.output_projection.weight is dec.embed_tokens.weight) == (form == "tied_unit")
    assert (stock.encoder.embed_tokens is dec.embed_tokens) == (shared and form == "tied_unit")


@pytest.mark.parametrize("settings", [
    {}, dict(define_style="authors", adaptive_input=True, adaptive_input_cutoff="10,20", adaptive_input_factor=2),
    dict(define_output_layer="untied", adaptive_input=True, adaptive_input_cutoff="10,20", adaptive_input_factor=2),
    dict(define_output_layer="tied_unit"), dict(define_output_layer="untied"),
], ids=["tied_map", "tied_adaptive", "untied_adaptive", "tied_unit", "untied"])
def test_transformer_lm_export_computes_what_the_define_model_computes(settings):
    torch.manual_seed(0)
    model = tiny_lm(**settings)
    from fairseq_define.models.define_transformer_lm import DefineTransformerLMConfig

    # as fairseq-train stores a dataclass model's config: its fields, named by the architecture
    stored = DefineTransformerLMConfig.from_namespace(model.args)
    cfg = {
        "model": {
            **{k: getattr(stored, k) for k in stored.__dataclass_fields__},
            "_name": "define_transformer_lm_tiny",
            "base_shuffle": 1,
        },  # the parser's default, which base_lm_architecture leaves as it is
        "task": {"_name": "language_modeling", "data": "data-bin"},
    }
    task = Namespace(source_dictionary=model.decoder.dictionary, target_dictionary=model.decoder.dictionary,
                     dictionary=model.decoder.dictionary)
    state = export_state(model, cfg, task)
    stock = stock_model(state, task)
    assert type(stock).__name__ == "TransformerLanguageModel" and stock.decoder.embed_scale == 1.0
    assert not state["cfg"]["model"]["adaptive_input"] and not state["cfg"]["model"]["tie_adaptive_weights"]
    tokens = torch.randint(4, 40, (3, 11))
    with torch.no_grad():
        got = stock.get_normalized_probs(stock(tokens), log_probs=True)
        want = model.get_normalized_probs(model(tokens), log_probs=True)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)


def lm_cfg(model, name):
    return {
        "model": {**{k: getattr(model.decoder.cfg, k) for k in model.decoder.cfg.__dataclass_fields__}, "_name": name},
        "task": {"_name": "contiguous_lm", "data": "data-bin"},
        "criterion": {"_name": "projected_adaptive_loss"},
    }


@pytest.mark.parametrize("settings", [
    dict(lstm_hidden_dim=8),
    dict(lstm_hidden_dim=16, define_map_dim=16, no_softmax_bias=True, adaptive_cutoff="20,40", define_style="authors"),
    dict(lstm_layers=1, define_transform="none"),
    dict(lstm_layers=1, define_transform="none", map_scale=4.0),  # the scale folds into fairseq's table
    dict(lstm_hidden_dim=8, map_scale=4.0),  # the unit's own input scale
], ids=["standard", "adaptive_no_bias", "one_layer_map_alone", "map_alone_scaled", "unit_on_a_scaled_map"])
def test_lstm_export_computes_what_the_define_model_computes(settings):
    torch.manual_seed(0)
    model = tiny_lstm(**settings)
    task = Namespace(source_dictionary=model.decoder.dictionary, target_dictionary=model.decoder.dictionary,
                     dictionary=model.decoder.dictionary)
    state = export_state(model, lm_cfg(model, "define_lstm_lm"), task)
    stock = stock_model(state, task)
    assert type(stock).__name__ == "LSTMModel" or type(stock).__name__ == "LSTMLanguageModel"
    assert state["cfg"]["task"]["_name"] == "language_modeling" and state["cfg"]["criterion"] is None
    tokens = torch.randint(4, 60, (3, 11))
    with torch.no_grad():
        got = stock.get_normalized_probs(stock(tokens), log_probs=True)
        want = model.get_normalized_probs(model(tokens), log_probs=True)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)


@pytest.mark.parametrize("build, reason", [
    (lambda: tiny_model(), "fairseq has no Transformer-XL"),
    (lambda: tiny_lstm(), "LSTM layers are 12/8 wide"),
    (lambda: tiny_lstm(lstm_hidden_dim=16, define_map_dim=16, adaptive_cutoff="20,40"), "an output bias per word"),
    (lambda: tiny_lstm(lstm_hidden_dim=8, adaptive_cutoff="20,40", no_softmax_bias=True, div_val=2.0),
     "--div-val 2"),
], ids=["transformer_xl", "lstm_widths", "lstm_adaptive_bias", "lstm_div_val"])
def test_what_stock_fairseq_cannot_express_is_refused_with_the_reason(build, reason):
    model = build()
    task = Namespace(source_dictionary=model.decoder.dictionary, target_dictionary=model.decoder.dictionary,
                     dictionary=model.decoder.dictionary)
    with pytest.raises(NotExportable, match=re.escape(reason)):
        export_state(model, lm_cfg(model, "x"), task)


@pytest.mark.parametrize("settings, reason", [
    ({"activation_fn": "tanh"}, "CTranslate2 cannot convert this model: Option --activation-fn tanh is not supported "
                                "(supported activations are: gelu"),
    ({"no_token_positional_embeddings": True}, "Option --no-token-positional-embeddings is not supported"),
    ({"adaptive_softmax_cutoff": "20,40"}, "CTranslate2 has no adaptive softmax (--adaptive-softmax-cutoff 20,40)"),
], ids=["tanh", "no_positions", "adaptive_softmax"])
def test_a_form_ctranslate2_cannot_take_is_refused_before_anything_is_written(monkeypatch, tmp_path, settings, reason):
    """The export was written and the converter then failed in a traceback (an adaptive
    softmax: an AttributeError); now one line, and neither file is made."""
    pytest.importorskip("ctranslate2")
    from fairseq_define.errors import UserError
    from fairseq_define.tools import export

    model, cfg, task = translation_model("untied", False, "paper", **settings)
    monkeypatch.setattr(export, "read_for_rewrite", lambda path, output: {})  # the checkpoint: this model
    monkeypatch.setattr(export, "load_ensemble", lambda path, data: (model, cfg, task))
    (tmp_path / "checkpoint.pt").write_bytes(b"read through load_ensemble")
    with pytest.raises(UserError, match=re.escape(reason)) as info:
        export.export_checkpoint(str(tmp_path / "checkpoint.pt"), str(tmp_path / "export.pt"), ct2=True)
    assert "drop --ct2" in str(info.value) and "\n" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]


# -- through the stock CLIs, on models trained by fairseq-train ---------------------------

# beside the shared `trained` checkpoint (conftest: tied_map, one embedding, the paper's unit)
NMT_RUNS = {
    # separate dictionaries (no --joined-dictionary), the authors' unit, the paper's untied output
    "untied_separate_authors": ["--define-output-layer", "untied", "--define-style", "authors"],
    "tied_unit_shared": ["--define-output-layer", "tied_unit", "--share-all-embeddings"],
}
GENERATE = ["--gen-subset", "test", "--beam", "3", "--max-len-b", "20", "--batch-size", "20", "--cpu"]


def hypotheses(output):
    return {int(i): (float(s), h) for i, s, h in re.findall(r"^H-(\d+)\t([-0-9.e]+)\t(.*)$", output, re.M)}


def positional(output):
    return {int(i): [float(x) for x in s.split()] for i, s in re.findall(r"^P-(\d+)\t(.*)$", output, re.M)}


def train_nmt(wmt_bin, folder, name):
    data = wmt_bin / "bin"
    if "separate" in name:
        data = folder / "bin"
        run_in_process("fairseq-preprocess", "-s", "en", "-t", "de", "--trainpref", wmt_bin / "train.bpe",
                       "--validpref", wmt_bin / "valid.bpe", "--testpref", wmt_bin / "test.bpe", "--destdir", data,
                       "--workers", "1")
    run_in_process("fairseq-train", data, "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
                   *NMT_RUNS[name], "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500", "--max-update", "12",
                   "--save-dir", folder / "ckpt", "--cpu", "--no-epoch-checkpoints", "--disable-validation",
                   "--log-format", "simple", "--seed", "3")
    return str(data), str(folder / "ckpt" / "checkpoint_last.pt")


@pytest.fixture(scope="module", params=["tied_map_shared", "tied_map_shared_cached", *NMT_RUNS])
def nmt_export(request, wmt_bin, trained, tmp_path_factory):
    """(data-bin, the DeFINE checkpoint, its export, the tool's output) for each form."""
    from pathlib import Path

    name = request.param
    if name.startswith("tied_map_shared"):
        data, ckpt = wmt_bin / "bin", trained / "checkpoint_last.pt"
        if name.endswith("cached"):
            cached = tmp_path_factory.mktemp("cached") / "cached.pt"
            run_in_process("fairseq-define-cache-tables", "--path", ckpt, "--output", cached, "--data", data)
            ckpt = cached
    else:
        data, ckpt = map(Path, made_once(tmp_path_factory, f"export_{name}", lambda f: train_nmt(wmt_bin, f, name)))
    out = tmp_path_factory.mktemp("export") / "export.pt"
    # in the test's process: the tests run the export with stock fairseq in processes of their own,
    # and the console script's export is the language models' test below
    log = run_in_process("fairseq-define-export", ckpt, out).stdout
    return data, ckpt, out, log


def test_stock_fairseq_generate_gives_the_same_translations_without_the_plugin(nmt_export):
    data, ckpt, out, log = nmt_export
    assert f"wrote {out}: fairseq's transformer, loads without --user-dir" in log
    plugin = run_in_process("fairseq-generate", data, "--user-dir", USER_DIR, "--path", ckpt, *GENERATE).stdout
    stock = run_cli("fairseq-generate", data, "--path", out, *GENERATE).stdout  # no --user-dir
    base, got = hypotheses(plugin), hypotheses(stock)
    assert len(base) == 40 and got.keys() == base.keys()
    for i in base:
        assert got[i][1] == base[i][1]
        assert abs(got[i][0] - base[i][0]) <= 1e-4
    # the reference translations scored token by token: the whole distribution, not only its argmax
    plugin = positional(run_in_process("fairseq-generate", data, "--user-dir", USER_DIR, "--path", ckpt, *GENERATE,
                                       "--score-reference").stdout)
    stock = positional(run_cli("fairseq-generate", data, "--path", out, *GENERATE, "--score-reference").stdout)
    assert len(plugin) == 40 and stock.keys() == plugin.keys()
    for i in plugin:  # P- lines print 4 decimals: the two roundings may add 1e-4
        torch.testing.assert_close(torch.tensor(stock[i]), torch.tensor(plugin[i]), atol=2e-4, rtol=0)


def stock_training_keys(data):
    """The Namespace keys stock fairseq-train stores for --arch transformer --task translation
    (with the criterion, optimizer and scheduler the test models train with)."""
    from fairseq import options

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [str(data), "--arch", "transformer", "--task", "translation",
                                                "--optimizer", "adam", "--criterion", "cross_entropy"])
    # fairseq adds these itself: convert_namespace_to_omegaconf names the architecture, and
    # TransformerModel.build_model fills the positions the task leaves unset and, without
    # --share-all-embeddings, the FSDP wrapping threshold
    return set(vars(args)) | {"_name", "max_source_positions", "max_target_positions", "min_params_to_wrap"}


def test_the_export_holds_only_stock_settings_and_classes(nmt_export):
    from fairseq.dataclass.configs import FairseqConfig
    from fairseq.tasks.translation import TranslationConfig

    data, _, out, _ = nmt_export
    state = safe_torch_load(str(out))
    cfg = state["cfg"]
    assert isinstance(cfg["model"], Namespace) and cfg["model"].arch == "transformer"
    assert set(vars(cfg["model"])) <= stock_training_keys(data)
    assert cfg["model"].user_dir is None and cfg["common"]["user_dir"] is None
    for name, f in FairseqConfig.__dataclass_fields__.items():
        if isinstance(cfg.get(name), dict) and hasattr(f.type, "__dataclass_fields__"):
            assert set(cfg[name]) <= set(f.type.__dataclass_fields__), name
    assert set(cfg["task"]) <= set(TranslationConfig.__dataclass_fields__) and cfg["task"]["_name"] == "translation"
    text = repr(cfg)
    assert "define" not in text.lower(), re.findall(r".{40}define.{40}", text.lower())[:3]
    assert all(g.split(".")[0] in ("argparse", "collections", "torch") for g in checkpoint_pickle_globals(str(out)))
    assert not any(".unit." in k or ".map." in k for k in state["model"])


def test_ctranslate2_greedy_output_and_scores_equal_fairseq_generate(nmt_export, wmt_bin, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    data, ckpt, out, _ = nmt_export
    # in the test's process: that stock fairseq needs no plugin for the export is the tests' above
    log = run_in_process(
        "fairseq-define-export", ckpt, tmp_path / "export.pt", "--data", data, "--ct2", tmp_path / "ct2"
    ).stdout
    assert f"wrote {tmp_path / 'ct2'}: the CTranslate2 model (float32)" in log
    source = [l.split() for l in (wmt_bin / "test.bpe.en").read_text(encoding="utf-8").splitlines()]
    target = [l.split() for l in (wmt_bin / "test.bpe.de").read_text(encoding="utf-8").splitlines()]
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu", compute_type="float32")
    ct2 = [" ".join(r.hypotheses[0]) for r in translator.translate_batch(source, beam_size=1, max_decoding_length=20)]
    gen = hypotheses(
        run_in_process("fairseq-generate", data, "--path", out, *GENERATE[:2], "--beam", "1", *GENERATE[4:]).stdout
    )
    assert len(gen) == len(source) == 40
    assert ct2 == [gen[i][1] for i in range(len(source))]
    scores = [r.log_probs for r in translator.score_batch(source, target)]
    ref = positional(run_in_process("fairseq-generate", data, "--path", out, *GENERATE, "--score-reference").stdout)
    for i, s in enumerate(scores):  # P- lines: base 2, 4 decimals
        torch.testing.assert_close(torch.tensor(s) / math.log(2), torch.tensor(ref[i]), atol=2e-4, rtol=0)


# -- language models through fairseq-eval-lm ------------------------------------------------

LM_COMMON = ["--user-dir", USER_DIR, "--tokens-per-sample", "16", "--cpu", "--optimizer", "adam", "--lr", "3e-3",
             "--batch-size", "4", "--max-update", "6", "--disable-validation", "--no-epoch-checkpoints",
             "--log-format", "simple", "--seed", "2"]
LM_RUNS = {
    # the adaptive map with the authors' unit, the softmax tied to it (the paper's LM tying)
    "transformer_lm": ["--task", "language_modeling", "--arch", "define_transformer_lm_tiny", "--define-style",
                       "authors", "--adaptive-input", "--adaptive-input-cutoff", "200,800", "--criterion",
                       "adaptive_loss", "--ddp-backend", "legacy_ddp"],
    "lstm_lm": ["--task", "contiguous_lm", "--arch", "define_lstm_tiny", "--lstm-hidden-dim", "16", "--criterion",
                "projected_adaptive_loss", "--define-transform", "define"],
    "lstm_wide": ["--task", "contiguous_lm", "--arch", "define_lstm_tiny", "--criterion", "projected_adaptive_loss"],
    "txl": ["--task", "contiguous_lm", "--arch", "define_txl_tiny", "--criterion", "projected_adaptive_loss",
            "--mem-len", "16"],
}


@pytest.fixture(scope="module")
def lm_runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("export_lm")
    binarize_ptb_slice(d, 300, 30)
    for name, flags in LM_RUNS.items():
        run_in_process("fairseq-train", d / "bin", *LM_COMMON, *flags, "--save-dir", d / name)
    return d


@pytest.mark.cli
@pytest.mark.parametrize("name", ["transformer_lm", "lstm_lm"])
def test_stock_fairseq_eval_lm_gives_the_same_loss_without_the_plugin(lm_runs, name):
    out = lm_runs / f"{name}.pt"
    log = run_cli("fairseq-define-export", lm_runs / name / "checkpoint_last.pt", out).stdout
    assert f"fairseq's {name}, loads without --user-dir" in log
    common = ["--gen-subset", "valid", "--task", "language_modeling", "--tokens-per-sample", "16", "--batch-size", "4",
              "--cpu"]
    plugin = result(run_in_process("fairseq-eval-lm", lm_runs / "bin", "--user-dir", USER_DIR, "--path",
                                   lm_runs / name / "checkpoint_last.pt", *common).stdout)
    stock = result(run_cli("fairseq-eval-lm", lm_runs / "bin", "--path", out, *common).stdout)
    assert stock[0] == plugin[0] > 100 and abs(stock[1] - plugin[1]) <= 1e-4


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.cli
@pytest.mark.parametrize("name, expected", [
    ("lstm_wide", "its LSTM layers are 32/16 wide, but fairseq's lstm_lm has one width"),
    ("txl", "fairseq has no Transformer-XL"),
])
def test_a_model_without_a_stock_form_is_refused_in_one_line(lm_runs, tmp_path, name, expected):
    out = tmp_path / "export.pt"
    proc = run_cli("fairseq-define-export", lm_runs / name / "checkpoint_last.pt", out, check=False)
    assert_user_error(proc, "fairseq-define-export", expected)
    assert list(tmp_path.iterdir()) == []


def test_bad_input_is_refused_in_one_line_and_nothing_is_written(trained, tmp_path_factory):
    """In the test's process (the refusal from the console script, its exit code: the test
    above)."""
    ckpt = trained / "checkpoint_last.pt"
    stock = tmp_path_factory.mktemp("stock") / "export.pt"
    run_in_process("fairseq-define-export", ckpt, stock)
    tmp_path = tmp_path_factory.mktemp("bad")
    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint\n", encoding="utf-8")
    plain = tmp_path / "plain.pt"
    torch.save(safe_torch_load(str(ckpt))["model"], plain)
    exists = tmp_path / "exists.pt"
    exists.write_bytes(b"keep me")
    cases = [
        (tmp_path / "missing.pt", tmp_path / "a.pt", "no such checkpoint"),
        (text, tmp_path / "b.pt", "notes.txt"),
        (plain, tmp_path / "c.pt", "is not a fairseq checkpoint"),
        (stock, tmp_path / "d.pt", "is not a fairseq-define model"),  # already stock
        (ckpt, exists, "exists; choose a new file name"),
        (ckpt, tmp_path / "no_such_folder" / "e.pt", "does not exist; create it first"),
    ]
    before = snapshot(tmp_path)
    for source, dest, expected in cases:
        proc = run_in_process("fairseq-define-export", source, dest, check=False)
        assert_user_error(proc, "fairseq-define-export", expected)
    assert snapshot(tmp_path) == before


def test_the_hub_exports_what_the_tool_exports(trained, wmt_bin, tmp_path):
    from fairseq_define.models.define_transformer import DefineTransformerModel

    tool = tmp_path / "tool.pt"
    run_cli("fairseq-define-export", trained / "checkpoint_last.pt", tool)
    hub = DefineTransformerModel.from_pretrained(
        str(trained), "checkpoint_last.pt", data_name_or_path=str(wmt_bin / "bin")
    )
    hub.export(tmp_path / "hub.pt")
    a, b = safe_torch_load(str(tool))["model"], safe_torch_load(str(tmp_path / "hub.pt"))["model"]
    assert a.keys() == b.keys()
    for k in a:
        if not k.endswith("._float_tensor"):  # fairseq's placeholder buffers, never initialised
            torch.testing.assert_close(b[k], a[k], atol=1e-6, rtol=0, msg=k)
    with pytest.raises(Exception, match="exists"):
        hub.export(tmp_path / "hub.pt")
