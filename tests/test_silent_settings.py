"""Settings that were accepted and ignored, or gave a wrong result with exit 0 (issue 60,
"Silent"): each is honoured or refused in one line naming the problem and the fix, through the
real command-line tools on the shared tiny checkpoints (docs/errors.md)."""

import pytest

from .helpers import USER_DIR, assert_user_error, run_cli, run_in_process


def _generate(wmt_bin, trained, *flags):
    return ("fairseq-generate", wmt_bin / "bin", "--user-dir", USER_DIR, "--path", trained / "checkpoint_last.pt",
            "-s", "en", "-t", "de", "--beam", "2", "--max-len-b", "20", "--cpu", *flags)


def _interactive(wmt_bin, trained, *flags):
    return ("fairseq-interactive", wmt_bin / "bin", "--user-dir", USER_DIR, "--path", trained / "checkpoint_last.pt",
            "-s", "en", "-t", "de", "--beam", "2", "--max-len-b", "20", "--cpu", *flags)


# fairseq-generate scored one shard of the test set as the whole and exited 0; --num-shards and
# --shard-id were ignored; interactive runs one process too
@pytest.mark.cli
@pytest.mark.parametrize("tool,flags,expected", [
    ("generate", ["--distributed-world-size", "2"], "--distributed-world-size 2 splits the test set"),
    ("generate", ["--distributed-world-size", "2", "--distributed-rank", "1"], "--distributed-world-size 2 splits"),
    ("generate", ["--distributed-rank", "1"], "--distributed-rank 1 splits the test set"),
    ("generate", ["--num-shards", "2", "--shard-id", "1"], "--num-shards 2 splits the test set"),
    ("generate", ["--shard-id", "1"], "drop --shard-id"),
    ("interactive", ["--distributed-world-size", "2"], "fairseq-interactive translates all of it in one process"),
    ("interactive", ["--num-shards", "2"], "drop --num-shards"),
])
def test_generation_runs_one_process_over_the_whole_input(wmt_bin, trained, tool, flags, expected):
    command = (_generate if tool == "generate" else _interactive)(wmt_bin, trained, *flags)
    proc = run_cli(*command, check=False, timeout=300)
    assert_user_error(proc, f"fairseq-{tool}", expected)


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    """define_transformer_lm_tiny trained 2 updates on the PTB-style slice: (bin folder, checkpoint)."""
    from .helpers import binarize_ptb_slice

    d = tmp_path_factory.mktemp("silent_lm")
    data = binarize_ptb_slice(d, 300, 40)
    run_in_process("fairseq-train", data, "--user-dir", USER_DIR, "--task", "language_modeling", "--arch",
                   "define_transformer_lm_tiny", "--tokens-per-sample", "32", "--max-tokens", "256", "--max-update",
                   "2", "--cpu", "--optimizer", "adam", "--lr", "1e-3", "--save-dir", d / "ck",
                   "--no-epoch-checkpoints")
    return data, d / "ck" / "checkpoint_last.pt"


def _eval_lm(lm, *flags):
    data, ckpt = lm
    return ("fairseq-eval-lm", data, "--user-dir", USER_DIR, "--path", ckpt, "--cpu", "--max-tokens", "256",
            "--tokens-per-sample", "32", "--gen-subset", "valid", *flags)


def _scores(tool, out):
    """What a run scored: each hypothesis's score (generate), the loss and perplexity (eval-lm)."""
    import re

    if tool == "generate":
        return sorted(l.split("\t")[:2] for l in out.splitlines() if l.startswith("H-"))
    return re.findall(r"Loss \(base 2\): ([0-9.]+), Perplexity: ([0-9.]+)", out)


# --bf16 was accepted by the inference tools and the model ran in float32: the same scores
@pytest.mark.cli
@pytest.mark.parametrize("tool", ["generate", "eval-lm"])
def test_bf16_runs_inference_in_bfloat16(wmt_bin, trained, lm, tool):
    command = (lambda *f: _generate(wmt_bin, trained, *f)) if tool == "generate" else (lambda *f: _eval_lm(lm, *f))
    full, half = (_scores(tool, run_in_process(*command(*flags)).stdout) for flags in ([], ["--bf16"]))
    assert full and len(half) == len(full)
    assert half != full  # bfloat16 rounds the weights: the scores move (a little)



def _hub(wmt_bin, trained, checkpoint_file="checkpoint_last.pt", **kwargs):
    from fairseq_define.models.define_transformer import DefineTransformerModel

    return DefineTransformerModel.from_pretrained(
        str(trained), checkpoint_file=checkpoint_file, data_name_or_path=str(wmt_bin / "bin"), **kwargs)


# --lenpen nan or inf scored every hypothesis nan (or -0.0) and exited 0, from the CLI and the hub
@pytest.mark.cli
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_length_penalty_that_is_not_finite_is_refused(wmt_bin, trained, value):
    proc = run_cli(*_generate(wmt_bin, trained, "--lenpen", value), check=False, timeout=300)
    assert_user_error(proc, "fairseq-generate", f"--lenpen {value} is not a finite number")


def test_the_hubs_length_penalty_is_checked_too(wmt_bin, trained):
    from fairseq_define.errors import UserError

    hub = _hub(wmt_bin, trained)
    with pytest.raises(UserError, match="--lenpen nan is not a finite number"):
        hub.translate("the house", beam=2, lenpen=float("nan"))
    assert hub.translate("the house", beam=2, lenpen=0.5, max_len_b=5)  # a finite penalty, below 1 too


# fairseq applies from_pretrained's keyword arguments as overrides and dropped a name no setting
# has, where --model-overrides refuses it
@pytest.mark.parametrize("kwargs,expected", [
    ({"dropuot": 0.3}, "'dropuot' (did you mean 'dropout'?) is not a setting"),
    ({"define_cache_onload": True}, "'define_cache_onload' (did you mean 'define_cache_on_load'?)"),
    ({"bogus_option": 3}, "from_pretrained: 'bogus_option' is not a setting"),
])
def test_misspelt_hub_keyword_arguments_are_refused(wmt_bin, trained, kwargs, expected):
    import re

    from fairseq_define.errors import UserError

    with pytest.raises(UserError, match=re.escape(expected)):
        _hub(wmt_bin, trained, **kwargs)


def test_hub_keyword_arguments_that_name_settings_load(wmt_bin, trained):
    hub = _hub(wmt_bin, trained, dropout=0.3, beam=3, bpe="subword_nmt", bpe_codes=str(wmt_bin / "codes"))
    assert hub.cfg.model.dropout == 0.3 and hub.cfg.generation.beam == 3


# the hub's export() of an ensemble wrote the first model alone
def test_the_hub_refuses_to_export_an_ensemble(wmt_bin, trained, tmp_path):
    from fairseq_define.errors import UserError

    hub = _hub(wmt_bin, trained, checkpoint_file="checkpoint_last.pt:checkpoint_best.pt")
    assert len(hub.models) == 2
    with pytest.raises(UserError, match="export\\(\\) writes one model, and this hub holds an ensemble of 2"):
        hub.export(tmp_path / "out.pt")
    assert not (tmp_path / "out.pt").exists()


# resuming with new optimizer settings kept the checkpoint's (torch's load_state_dict put them
# back) while the new checkpoint stored the new ones as applied
@pytest.mark.cli
def test_a_resumed_optimizer_runs_with_the_commands_settings(lm, tmp_path):
    from fairseq.checkpoint_utils import safe_torch_load

    data, ckpt = lm
    train = ("fairseq-train", data, "--user-dir", USER_DIR, "--task", "language_modeling", "--arch",
             "define_transformer_lm_tiny", "--tokens-per-sample", "32", "--max-tokens", "256", "--max-update", "3",
             "--cpu", "--optimizer", "adam", "--lr", "1e-3", "--no-epoch-checkpoints", "--restore-file", ckpt)
    same = run_in_process(*train, "--save-dir", tmp_path / "same").stdout
    assert "resuming with this command's" not in same  # the settings it trained with: nothing to say
    out = run_in_process(*train, "--save-dir", tmp_path / "new", "--weight-decay", "0.1", "--adam-eps", "1e-6",
                         "--adam-betas", "(0.8, 0.9)").stdout
    assert "resuming with this command's weight_decay 0.1 (the checkpoint's optimizer ran with 0.0)" in out
    state = safe_torch_load(str(tmp_path / "new" / "checkpoint_last.pt"))
    group = state["last_optimizer_state"]["param_groups"][0]
    assert (tuple(group["betas"]), group["eps"], group["weight_decay"]) == ((0.8, 0.9), 1e-6, 0.1)
    stored = state["cfg"]["optimizer"]
    assert (stored["weight_decay"], stored["adam_eps"]) == (0.1, 1e-6)  # what ran


def _hypotheses(out):
    return sorted(l for l in out.splitlines() if l.startswith("H-"))


# LayerDrop pruning took the DeFINE unit's layers.N for the Transformer's (and dropped the
# stack that was not pruned), then called the intact checkpoint damaged
@pytest.mark.cli
def test_layer_pruning_keeps_the_unit_and_the_other_stack(wmt_bin, trained, lm):
    def generate(overrides):
        return run_in_process(*_generate(wmt_bin, trained, "--model-overrides", overrides)).stdout

    full = _hypotheses(run_in_process(*_generate(wmt_bin, trained)).stdout)
    assert _hypotheses(generate("{'encoder_layers_to_keep': '0,1', 'decoder_layers_to_keep': '0,1'}")) == full
    assert len(_hypotheses(generate("{'decoder_layers_to_keep': '1'}"))) == 40
    out = run_in_process(*_eval_lm(lm, "--model-overrides", "{'decoder_layers_to_keep': '0'}")).stdout
    assert _scores("eval-lm", out)


@pytest.mark.cli
@pytest.mark.parametrize(
    "flags,expected",
    [
        (
            ["--model-overrides", "{'encoder_layers_to_keep': '5'}"],
            "--encoder-layers-to-keep '5' names layer 5, and this checkpoint's encoder has layers 0-1",
        ),
        (
            ["--model-overrides", "{'decoder_layers_to_keep': 'x'}"],
            "--decoder-layers-to-keep 'x' is not a list of layer numbers",
        ),
    ],
)
def test_layers_to_keep_that_the_checkpoint_lacks_are_one_line(wmt_bin, trained, flags, expected):
    assert_user_error(
        run_cli(*_generate(wmt_bin, trained, *flags), check=False, timeout=300), "fairseq-generate", expected
    )


@pytest.mark.cli
def test_layers_to_keep_at_training_is_one_line(wmt_bin, tmp_path):
    from .helpers import TINY

    proc = run_cli("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
                   "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500", "--max-update", "1", "--cpu",
                   "--save-dir", tmp_path / "ck", "--encoder-layers-to-keep", "0", check=False, timeout=300)
    assert_user_error(proc, "fairseq-train", "--encoder-layers-to-keep prunes a model trained with LayerDrop",
                      "--model-overrides")
    assert not list(tmp_path.rglob("*.pt"))  # refused as the model is built, before any checkpoint


# contiguous_lm's line advised {'tokens_per_sample': 64}, which a Transformer-XL's evaluation
# ignores (its segment length is the model's tgt_len)
def test_the_context_window_line_names_the_override_that_sets_the_segment_length():
    from argparse import Namespace

    from fairseq.data import Dictionary

    from fairseq_define.errors import UserError
    from fairseq_define.tasks.contiguous_lm import ContiguousLMTask

    task = ContiguousLMTask(Namespace(eval_context=-1, tokens_per_sample=16, output_dictionary_size=-1, data=None),
                            Dictionary())
    with pytest.raises(UserError, match="--model-overrides \"{'mem_len': 640, 'tgt_len': 64}\""):
        task.eval_lm_dataloader(None, context_window=4)
