"""fairseq 0.12.2's encoder layers and torch's fused inference path, as patched
(fairseq_define_patch/fairseq_bugs/encoder_fastpath.py: fairseq/modules/transformer_layer.py,
fairseq/trainer.py): a loaded model in eval mode takes the fast path with the trained weights
themselves (no untrained copies registered as parameters) and agrees with the normal path;
checkpoints saved with the copies still load, translate the same and resume training."""

import inspect
import re
import sys

import pytest
import torch
from fairseq import checkpoint_utils, options
from fairseq.models import build_model

from fairseq_define.models.without_data import VocabularyOnlyTask, build_arch, dictionary_of_size
from fairseq_define.param_report import parameter_distribution

from .helpers import TINY_STOCK_TRANSFORMER, run_cli, run_in_process

# the copies fairseq 0.12.2 registered on every encoder layer (and saved in checkpoints)
COPIES = ("in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias",
          "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias")
DIMS = ["--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
        "--decoder-ffn-embed-dim", "64", "--encoder-layers", "2", "--decoder-layers", "2",
        "--encoder-attention-heads", "4", "--decoder-attention-heads", "4", "--dropout", "0"]
ARCHS = {"transformer": [], "define_transformer_tiny": ["--define-map-dim", "16", "--define-expand-dim", "64"]}
VOCAB = 40


def tiny(arch, seed=0):
    torch.manual_seed(seed)
    parser = options.get_training_parser(default_task="translation")
    args = options.parse_args_and_arch(parser, ["-", "--task", "translation", "--arch", arch, *DIMS, *ARCHS[arch]])
    vocab = dictionary_of_size(VOCAB)
    return build_model(args, VocabularyOnlyTask(vocab, vocab))


def batch(left_pad=True):
    """Two sources, the second two tokens shorter (padded on the left, as fairseq pads them,
    or on the right), and a target prefix; token ids past the special symbols."""
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, VOCAB, (2, 7), generator=g)
    if left_pad:
        src[1, :2] = 1
    else:
        src[1, -2:] = 1
    prev = torch.randint(4, VOCAB, (2, 5), generator=g)
    return src, torch.tensor([7, 5]), prev


def fast_path_calls(monkeypatch):
    calls = []
    fused = torch._transformer_encoder_layer_fwd

    def counting(*args):
        calls.append(args)
        return fused(*args)

    monkeypatch.setattr(torch, "_transformer_encoder_layer_fwd", counting)
    return calls


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_encoder_layers_hold_only_trained_parameters(arch):
    """Every parameter gets a gradient from a training step (DDP needs no
    --find-unused-parameters) and none of the copies is a parameter or saved."""
    model = tiny(arch).train()
    names = [n for n, _ in model.named_parameters()]
    assert not [n for n in names if n.rsplit(".", 1)[-1] in COPIES]
    assert not [k for k in model.state_dict() if k.rsplit(".", 1)[-1] in COPIES]
    src, lengths, prev = batch()
    model(src, lengths, prev)[0].sum().backward()
    assert [n for n, p in model.named_parameters() if p.grad is None] == []


@pytest.mark.parametrize("left_pad", [True, False], ids=["left_pad", "right_pad_nested"])
@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_loaded_model_takes_the_fast_path_and_agrees_with_the_normal_path(arch, left_pad, monkeypatch):
    normal = tiny(arch).eval()
    loaded = tiny(arch, seed=1).eval()
    loaded.load_state_dict(normal.state_dict(), strict=True)  # what fairseq-generate does
    calls = fast_path_calls(monkeypatch)
    src, lengths, prev = batch(left_pad)
    with torch.no_grad():
        want = normal(src, lengths, prev)[0]
        assert not calls  # a model never loaded keeps the normal path
        got = loaded(src, lengths, prev)[0]
        assert len(calls) == 2  # one per encoder layer
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        # the fast path reads the weights as they are now, not a copy taken at load time
        for m in (normal, loaded):
            m.encoder.layers[0].fc1.weight.mul_(2)
            m.encoder.layers[1].self_attn.k_proj.weight.add_(0.1)
        torch.testing.assert_close(loaded(src, lengths, prev)[0], normal(src, lengths, prev)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_a_checkpoint_holding_the_copies_loads_strictly_with_the_same_outputs(arch, monkeypatch):
    """fairseq 0.12.2 saved each encoder layer's copies (zeros, or stale values after a
    resume); they are dropped on load, whatever they hold."""
    model = tiny(arch).eval()
    old = dict(model.state_dict())
    g = torch.Generator().manual_seed(2)
    for i, layer in enumerate(model.encoder.layers):
        attn, prefix = layer.self_attn, f"encoder.layers.{i}."
        shapes = {
            "in_proj_weight": (3 * attn.q_proj.weight.shape[0], attn.q_proj.weight.shape[1]),
            "in_proj_bias": (3 * attn.q_proj.bias.shape[0],),
            "out_proj_weight": attn.out_proj.weight.shape,
            "out_proj_bias": attn.out_proj.bias.shape,
            "fc1_weight": layer.fc1.weight.shape,
            "fc1_bias": layer.fc1.bias.shape,
            "fc2_weight": layer.fc2.weight.shape,
            "fc2_bias": layer.fc2.bias.shape,
        }
        old.update({prefix + k: torch.randn(s, generator=g) for k, s in shapes.items()})
    reloaded = tiny(arch, seed=1).eval()
    reloaded.load_state_dict(old, strict=True)
    assert reloaded.state_dict().keys() == model.state_dict().keys()
    calls = fast_path_calls(monkeypatch)
    src, lengths, prev = batch()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(src, lengths, prev)[0], model(src, lengths, prev)[0], atol=1e-5, rtol=1e-5)
    assert calls


def test_paper_model_parameter_count_has_no_copies():
    """define_transformer_wmt_en_de with a shared 32K vocabulary, tied at n: about 49M
    parameters, all of them in the paper's distribution (fairseq-train logs this count)."""
    model, _ = build_arch("define_transformer_wmt_en_de", 32000, None,
                          ["--share-all-embeddings", "--define-output-layer", "tied_map"])
    total = sum(p.numel() for p in model.parameters())
    assert 48e6 < total < 50e6
    assert parameter_distribution(model)["total"] == total


def register_copies(layer):
    """The copies as fairseq 0.12.2 registered them: the encoder layer's own parameters."""
    q, out = layer.self_attn.q_proj, layer.self_attn.out_proj
    layer.in_proj_weight = torch.nn.Parameter(torch.zeros(q.weight.shape[0] * 3, q.weight.shape[1]))
    layer.in_proj_bias = torch.nn.Parameter(torch.zeros(q.bias.shape[0] * 3))
    layer.out_proj_weight = torch.nn.Parameter(torch.zeros(out.weight.shape))
    layer.out_proj_bias = torch.nn.Parameter(torch.zeros(out.bias.shape))
    layer.fc1_weight = torch.nn.Parameter(torch.zeros(layer.fc1.weight.shape))
    layer.fc1_bias = torch.nn.Parameter(torch.zeros(layer.fc1.bias.shape))
    layer.fc2_weight = torch.nn.Parameter(torch.zeros(layer.fc2.weight.shape))
    layer.fc2_bias = torch.nn.Parameter(torch.zeros(layer.fc2.bias.shape))


# fairseq-train with the encoder layers as fairseq 0.12.2 built them (the copies saved in the
# model and in the optimizer state)
TRAIN_WITH_COPIES = "import sys\nimport torch\n\n\n" + inspect.getsource(register_copies) + """

from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

init = TransformerEncoderLayerBase.__init__


def with_copies(self, cfg, return_fc=False):
    init(self, cfg, return_fc)
    register_copies(self)


TransformerEncoderLayerBase.__init__ = with_copies
from fairseq_cli.train import cli_main

sys.argv[0] = "fairseq-train"
cli_main()
"""


@pytest.mark.parametrize("flat", [False, True], ids=["per_parameter", "flat_fp16"])
def test_an_optimizer_state_covering_the_copies_is_cut_to_the_parameters(flat):
    """Each state entry here holds its parameter's values, so a misplaced cut shows."""
    from fairseq_define_patch.runtime.encoder_fastpath import without_fastpath_copies as _without_fastpath_copies

    model, old = tiny("transformer"), tiny("transformer")  # the same weights
    for layer in old.encoder.layers:
        register_copies(layer)
        for name in COPIES:
            getattr(layer, name).data.fill_(-7.0)
    params, old_params = list(model.parameters()), list(old.parameters())  # the trainer's order
    assert len(old_params) == len(params) + len(COPIES) * len(old.encoder.layers)
    if flat:  # --fp16: one flat fp32 parameter
        state = {"state": {0: {"exp_avg": torch.cat([p.detach().flatten() for p in old_params]), "step": 3}},
                 "param_groups": [{"lr": 0.1, "params": [0]}]}
    else:
        state = {"state": {i: {"exp_avg": p.detach().clone()} for i, p in enumerate(old_params)},
                 "param_groups": [{"lr": 0.1, "params": list(range(len(old_params)))}]}
    got = _without_fastpath_copies(state, model, torch.nn.Module())
    if flat:
        assert torch.equal(got["state"][0]["exp_avg"], torch.cat([p.detach().flatten() for p in params]))
        assert got["state"][0]["step"] == 3 and got["param_groups"] == state["param_groups"]
    else:
        assert sorted(got["state"]) == got["param_groups"][0]["params"] == list(range(len(params)))
        assert all(torch.equal(got["state"][i]["exp_avg"], p) for i, p in enumerate(params))
        assert got["param_groups"][0]["lr"] == 0.1
    assert _without_fastpath_copies(got, model, torch.nn.Module()) is got  # a state that fits


def train_args(wmt_bin, save_dir, updates, *extra):
    return [wmt_bin / "bin", *TINY_STOCK_TRANSFORMER, "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1000",
            "--max-update", str(updates), "--dropout", "0", "--seed", "4", "--cpu", "--save-dir", save_dir,
            "--no-epoch-checkpoints", "--disable-validation", "--log-format", "simple", "--log-interval", "1", *extra]


def train_losses(out):
    return {u: loss for loss, u in re.findall(r"train_inner \| .*? loss=([0-9.]+),.*?num_updates=(\d+)", out)}


def test_a_checkpoint_saved_with_the_copies_translates_and_resumes_like_one_without(wmt_bin, tmp_path):
    """Written by fairseq-train with 0.12.2's layers: it loads for translation (the fast path)
    with the outputs of the same model saved without the copies, and training resumes from
    it (its optimizer state covers the copies too) with the same losses."""
    old, new = tmp_path / "old", tmp_path / "new"
    run_cli(sys.executable, "-c", TRAIN_WITH_COPIES, *train_args(wmt_bin, old, 2))
    state = checkpoint_utils.load_checkpoint_to_cpu(str(old / "checkpoint_last.pt"))
    assert "encoder.layers.0.fc1_weight" in state["model"]
    # the trainings without the copies in the test's process (the one with them patches fairseq: its own process)
    want = train_losses(
        run_in_process("fairseq-train", *train_args(wmt_bin, new, 3, "--save-interval-updates", "2")).stdout
    )
    (at_2,) = new.glob("checkpoint_*_2.pt")

    (m_old,), _ = checkpoint_utils.load_model_ensemble([str(old / "checkpoint_last.pt")])
    (m_new,), _ = checkpoint_utils.load_model_ensemble([str(at_2)])
    src, lengths, prev = batch()
    with torch.no_grad():
        assert torch.equal(m_old.eval()(src, lengths, prev)[0], m_new.eval()(src, lengths, prev)[0])

    out = run_in_process("fairseq-train", *train_args(wmt_bin, old, 3)).stdout
    assert "dropped the entries of the encoder layers' 8 fast-path weight copies" in out
    assert train_losses(out) == {"3": want["3"]}
