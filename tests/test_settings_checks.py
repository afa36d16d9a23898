"""Every setting checked where it enters (issue 53, classes 5 and 6), one parametrized table a
class, in process where the check is a function: --model-overrides (keys, nested groups,
unknown names, kinds of value) through fairseq's own loader; training settings whose shape the
ranges cannot say (betas, seed, positions, tri_stage's phases, --optimizer-overrides); a world
size without its processes; adaptive cutoffs against the vocabulary and the padding index; a
resume under another --arch. One CLI test runs the stock commands once: no warning a user
cannot act on, and standard input that is not UTF-8. One line each, naming the problem and the
fix (docs/errors.md)."""

from pathlib import Path

import pytest
import torch

LEGACY = Path(__file__).parent / "legacy_checkpoints" / "legacy_shared.pt"  # a model kept as a Namespace


def one_line(run):
    """The message of the fairseq.UserError that ``run()`` raises (one line)."""
    from fairseq import UserError

    with pytest.raises(UserError) as info:
        run()
    assert "\n" not in str(info.value)
    return str(info.value)


@pytest.fixture(scope="module")
def lstm_checkpoint(tmp_path_factory):
    """A checkpoint of a model with a dataclass config (define_lstm_lm), saved before
    lstm_layers existed: its stored model config lacks it."""
    path = tmp_path_factory.mktemp("lstm") / "checkpoint.pt"
    cfg = {"model": {"_name": "define_lstm_lm", "lstm_hidden_dim": 8, "dropout": 0.1},
           "task": {"_name": "language_modeling", "data": "x"}, "bpe": None}
    history = [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "Adam", "lr_scheduler_state": {},
                "num_updates": 0}]
    torch.save({"model": {}, "cfg": cfg, "optimizer_history": history, "extra_state": {}, "last_optimizer_state": None},
               path)
    return path


def overrides_of(path, overrides):
    """What fairseq-generate does with --model-overrides: load with them, then check them."""
    from fairseq.checkpoint_utils import load_checkpoint_to_cpu

    from fairseq_define_patch.runtime.model_overrides import check_model_overrides

    state = load_checkpoint_to_cpu(str(path), arg_overrides=overrides)
    check_model_overrides(overrides, state["cfg"])
    return state


def test_nested_groups_are_applied(lstm_checkpoint):
    """fairseq's nested form ({'model': {...}}) set nothing where the group was a Namespace
    (an architecture without a dataclass) and never reached an old checkpoint's args; it is
    applied as its names, a missing model option included."""
    state = overrides_of(LEGACY, {"model": {"dropout": 0.3}, "task": {"data": "elsewhere"}})
    assert state["cfg"].model.dropout == 0.3 and state["cfg"].task.data == "elsewhere"
    assert not hasattr(state["cfg"].model, "model")  # the group itself is no setting
    cfg = overrides_of(lstm_checkpoint, {"model": {"lstm_layers": 2, "dropout": 0.25}})["cfg"]
    assert cfg.model.lstm_layers == 2 and cfg.model.dropout == 0.25
    # the same names flat give the same config
    flat = overrides_of(lstm_checkpoint, {"lstm_layers": 2, "dropout": 0.25})["cfg"]
    assert flat.model == cfg.model


# (checkpoint, overrides, what the one line says)
MODEL_OVERRIDE_MISTAKES = [
    ("legacy", {1: 2}, "--model-overrides: the key 1 (int) is not a setting's name"),
    ("legacy", {True: 1}, "the key True (bool) is not a setting's name"),
    ("legacy", {"model": {1: 2}}, "the key 1 (int) is not a setting's name"),
    ("legacy", {"model": {"bogus": 1}}, "'bogus' is not a setting of this checkpoint's model group"),
    ("legacy", {"model": {"dropoutt": 0.1}}, "'dropoutt' (did you mean 'dropout'?) is not a setting"),
    ("lstm", {"task": {"lstm_layers": 2}}, "'lstm_layers' is not a setting of this checkpoint's task group"),
    ("lstm", {"bpe": {"bpe_codes": "codes"}}, "this checkpoint's config has no bpe group (it is unset)"),
    ("legacy", {"model": {"dropout": {"p": 0.1}}}, "nests deeper than a config group"),
    ("legacy", {"dropout": 0.2, "model": {"dropout": 0.3}}, "gives dropout twice (dropout=0.2, model.dropout=0.3)"),
    ("legacy", {"dropout": "x"}, "dropout='x' must be a number (the checkpoint's dropout is"),
    ("legacy", {"dropout": {0.1}}, "dropout={0.1} must be a number"),
    ("lstm", {"model": {"dropout": "0.1"}}, "dropout='0.1' must be a number (the checkpoint's dropout is 0.1)"),
    ("legacy", {"dropout": float("nan")}, "dropout=nan is not a finite number"),
    ("legacy", {"checkpoint_activations": "yes"}, "checkpoint_activations='yes' must be True or False"),
    ("legacy", {"arch": 3}, "arch=3 must be a string"),
]


@pytest.mark.parametrize("path,overrides,expected", MODEL_OVERRIDE_MISTAKES,
                         ids=[repr(o) for _, o, _ in MODEL_OVERRIDE_MISTAKES])
def test_model_overrides_are_checked_before_they_are_applied(lstm_checkpoint, path, overrides, expected):
    assert expected in one_line(lambda: overrides_of(LEGACY if path == "legacy" else lstm_checkpoint, overrides))


def training_cfg(*flags):
    """fairseq-train's config for ``flags`` (a stock Transformer; the data folder is not read)."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["DATA", "--arch", "transformer", "--optimizer", "adam",
                                                "--max-tokens", "100", *flags])
    return convert_namespace_to_omegaconf(args)


# fairseq-train's numbers whose shape the range table cannot say, and ranges it lacked: (flags, the line)
TRAINING_SHAPE_MISTAKES = [
    (["--adam-betas", "x"], "--adam-betas 'x' is not two numbers: give two values in [0, 1)"),
    (["--adam-betas", "(0.9,)"], "--adam-betas '(0.9,)' is not two numbers"),
    (["--adam-betas", "(0.9, 0.98, 0.99)"], "is not two numbers"),
    (["--optimizer", "adamax", "--adamax-betas", "0.9"], "--adamax-betas '0.9' is not two numbers"),
    (["--seed", "-1"], "--seed -1 is not a seed: give a whole number from 0 to 4294967295"),
    (["--seed", "4294967296"], "--seed 4294967296 is not a seed"),
    (["--max-source-positions", "0"], "--max-source-positions 0 must be at least 1"),
    (["--max-target-positions", "-3"], "--max-target-positions -3 must be at least 1"),
    (
        ["--lr-scheduler", "tri_stage", "--phase-ratio", "(0.5, 0.5, 0.5)", "--max-update", "10"],
        "--phase-ratio (0.5, 0.5, 0.5) adds up to 1.5, not 1",
    ),
    (
        ["--lr-scheduler", "tri_stage", "--phase-ratio", "(0.5, 0.5)", "--max-update", "10"],
        "--phase-ratio (0.5, 0.5) is not three fractions in [0, 1]",
    ),
    (["--lr-scheduler", "tri_stage", "--phase-ratio", "(0.1, 0.4, 0.5)"], "--phase-ratio needs --max-update N"),
    (
        ["--lr-scheduler", "tri_stage", "--phase-ratio", "(0.5, 0.5, 0)", "--max-update", "10"],
        "leaves no update of --max-update 10 to the decay phase",
    ),
    (["--lr-scheduler", "tri_stage"], "--lr-scheduler tri_stage needs --phase-ratio"),
    (["--optimizer-overrides", "{'lr':"], "--optimizer-overrides \"{'lr':\" is not a dict of settings (SyntaxError)"),
    (["--optimizer-overrides", "x"], "--optimizer-overrides 'x' is not a dict of settings (ValueError)"),
    (["--optimizer-overrides", "{1: 2}"], "--optimizer-overrides '{1: 2}' is not a dict of settings by name"),
    # epoch E shuffles with --seed + E: a seed numpy takes at the start crashed at epoch 2
    (
        ["--seed", "4294967294", "--max-epoch", "2"],
        "--seed 4294967294 is too large for this run: it shuffles epoch E with --seed + E, up to --max-epoch 2",
    ),
    (["--seed", "4294967290", "--max-update", "10"], "give a seed of at most 4294967285"),
    (
        ["--seed", "3000000000"],
        "without --max-epoch or --max-update, and numpy takes seeds up to 4294967295 (2**32 - 1); "
        "give a seed of at most 2147483647",
    ),
]


@pytest.mark.parametrize(
    "flags,expected", TRAINING_SHAPE_MISTAKES, ids=[" ".join(f) for f, _ in TRAINING_SHAPE_MISTAKES]
)
def test_training_settings_of_the_wrong_shape(flags, expected):
    from fairseq_define_patch.runtime.training_settings import check_training_numbers

    assert expected in one_line(lambda: check_training_numbers(training_cfg(*flags)))


@pytest.mark.parametrize("flags", [
    ["--adam-betas", "(0.9, 0.98)", "--seed", "0", "--max-source-positions", "1"],
    ["--lr-scheduler", "tri_stage", "--phase-ratio", "(0.1, 0.2, 0.7)", "--max-update", "10"],  # 1.0000000000000002
    ["--lr-scheduler", "tri_stage", "--warmup-steps", "2", "--decay-steps", "5"],
    ["--optimizer-overrides", "{'lr': 1e-4}", "--seed", "4294967293", "--max-epoch", "2"],
], ids=lambda f: " ".join(f))
def test_training_settings_of_the_right_shape_pass(flags):
    from fairseq_define_patch.runtime.training_settings import check_training_numbers

    check_training_numbers(training_cfg(*flags))


def test_tri_stage_takes_phases_that_add_up_to_one_within_rounding():
    """fairseq compared the sum with == 1: (0.1, 0.2, 0.7) was an AssertionError."""
    from fairseq.optim.lr_scheduler.tri_stage_lr_scheduler import TriStageLRSchedule, TriStageLRScheduleConfig
    from omegaconf import OmegaConf

    schedule = TriStageLRScheduleConfig(phase_ratio=(0.1, 0.2, 0.7), max_update=10, lr=[1.0])
    from argparse import Namespace

    from fairseq.optim.sgd import SGD

    optimizer = SGD(Namespace(lr=[1.0], momentum=0.0, weight_decay=0.0), [torch.zeros(1, requires_grad=True)])
    sched = TriStageLRSchedule(OmegaConf.structured(schedule), optimizer)
    assert (sched.warmup_steps, sched.hold_steps, sched.decay_steps) == (1, 2, 7)
    schedule.phase_ratio = (0.5, 0.5, 0.5)
    assert "adds up to 1.5" in one_line(lambda: TriStageLRSchedule(OmegaConf.structured(schedule), optimizer))


@pytest.mark.parametrize("overrides,expected", [
    ({"betas": (0.9,)}, "--optimizer-overrides: betas (0.9,) is not two numbers"),
    ({"betas": "x"}, "--optimizer-overrides: betas 'x' is not two numbers"),
], ids=["one_beta", "not_numbers"])
def test_optimizer_override_betas(overrides, expected):
    from fairseq_define_patch.runtime.training_settings import check_optimizer_overrides

    group = torch.optim.Adam([torch.zeros(2, requires_grad=True)]).param_groups[0]
    assert expected in one_line(lambda: check_optimizer_overrides(group, overrides))


@pytest.mark.parametrize("gpus,size,expected", [
    (0, 2, "--distributed-world-size 2 needs 2 processes, and this machine has no GPU to start them on: start them "
           "with torchrun (torchrun --nproc_per_node 2"),
    (2, 4, "--distributed-world-size 4 is more than the 2 GPUs of this machine: lower it to 2"),
], ids=["no_gpu", "fewer_gpus"])
def test_a_world_size_without_its_processes(monkeypatch, gpus, size, expected):
    """fairseq's single-node start (no torchrun, no Slurm) asserted the world size against the
    GPUs: --cpu --distributed-world-size 2 without torchrun was an AssertionError."""
    from fairseq.distributed import utils as distributed_utils
    from omegaconf import OmegaConf

    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    for key in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(key, raising=False)
    from fairseq.dataclass.configs import DistributedTrainingConfig

    def cfg(size):
        return OmegaConf.structured(DistributedTrainingConfig(distributed_world_size=size, tpu=False))

    assert expected in one_line(lambda: distributed_utils.infer_init_method(cfg(size)))
    distributed_utils.infer_init_method(cfg(gpus or 1))  # as many processes as GPUs: spawned


@pytest.mark.parametrize("size", [0, -1])
def test_a_world_size_below_one(size):
    """fairseq sharded the data by it: a ValueError (shard_id) in generate, train and interactive."""
    from fairseq.dataclass.configs import DistributedTrainingConfig
    from omegaconf import OmegaConf

    from fairseq_define_patch.runtime.training_settings import check_world_size_positive

    cfg = OmegaConf.structured(DistributedTrainingConfig(distributed_world_size=size, tpu=False))
    assert one_line(lambda: check_world_size_positive(cfg)) == (
        f"--distributed-world-size {size} must be at least 1 (the number of processes; 1 runs in this one)")


def generation_cfg(*flags, interactive=False):
    """fairseq-generate's (or -interactive's) config for ``flags`` (nothing is read)."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_interactive_generation_parser() if interactive else options.get_generation_parser()
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(parser, ["DATA", "--path", "x.pt", *flags]))
    if interactive:  # what fairseq-interactive's main does first
        cfg.interactive.buffer_size = max(cfg.interactive.buffer_size, 1)
    return cfg


# fairseq-generate's and -interactive's settings, each a traceback of fairseq's (an assertion, a
# ZeroDivisionError after the test set, a KeyError) or a limit silently off: (flags, the line)
GENERATION_MISTAKES = [
    (["--nbest", "0"], "--nbest 0 must be at least 1"),
    (["--unkpen", "nan"], "--unkpen nan is not a finite number"),
    (["--max-len-a", "nan"], "--max-len-a nan is not a finite number"),
    (["--max-len-b", "-5"], "--max-len-b -5 is below --min-len 1: the longest output is --max-len-a * source length + "
                            "--max-len-b tokens; give a --max-len-b of at least 1"),
    (["--max-len-b", "10", "--min-len", "20"], "--max-len-b 10 is below --min-len 20"),
    (["--beam", "4", "--diverse-beam-groups", "3"], "--diverse-beam-groups 3 does not divide --beam 4"),
    (["--beam", "1", "--sampling", "--temperature", "0"], "--temperature 0.0 must be positive"),
    (["--beam", "1", "--sampling", "--sampling-topk", "-2"], "--sampling-topk -2 must be at least 1 (the most likely "
                                                             "tokens sampled from), or -1 for no limit"),
    (["--beam", "1", "--sampling", "--sampling-topp", "-0.5"], "--sampling-topp -0.5 is not a probability mass"),
    (["--sampling-topp", "0.9"], "--sampling-topp 0.9 needs --sampling"),
    (["--beam", "2", "--sampling"], "--sampling draws --beam samples and prints --nbest of them, which must be equal: "
                                    "give --nbest 2 (or --beam 1)"),
    (["--sampling", "--beam", "2", "--nbest", "2", "--diverse-beam-groups", "2"],
     "--sampling and --diverse-beam-groups choose different searches"),
    (["--retain-iter-history"], "--retain-iter-history keeps the steps of iterative refinement"),
    (["--print-step"], "--print-step prints the number of steps of iterative refinement"),
    (["--seed", "-1"], "--seed -1 is not a seed: give a whole number from 0 to 4294967295"),
    (["--seed", "4294967296"], "--seed 4294967296 is not a seed"),
    (["--distributed-world-size", "0"], "--distributed-world-size 0 must be at least 1"),
]


@pytest.mark.parametrize("interactive", [False, True], ids=["generate", "interactive"])
@pytest.mark.parametrize("flags,expected", GENERATION_MISTAKES, ids=[" ".join(f) for f, _ in GENERATION_MISTAKES])
def test_generation_settings_get_one_line(flags, expected, interactive):
    from fairseq_define_patch.runtime.generation_inputs import check_generation_command

    assert expected in one_line(lambda: check_generation_command(generation_cfg(*flags, interactive=interactive),
                                                                 interactive=interactive))


@pytest.mark.parametrize("flags", [
    [], ["--beam", "1", "--sampling", "--sampling-topk", "10", "--temperature", "0.7", "--seed", "4294967295"],
    ["--beam", "4", "--diverse-beam-groups", "2"], ["--max-len-a", "1.2", "--max-len-b", "-5"],  # checked per batch
    ["--batch-size", "4", "--buffer-size", "4"],
], ids=lambda f: " ".join(f) or "defaults")
def test_generation_settings_fairseq_takes_pass(flags):
    from fairseq_define_patch.runtime.generation_inputs import check_generation_command

    check_generation_command(generation_cfg(*flags, interactive=True), interactive=True)


def test_interactive_batch_size_above_its_buffer():
    from fairseq_define_patch.runtime.generation_inputs import check_generation_command

    cfg = generation_cfg("--batch-size", "4", interactive=True)
    assert one_line(lambda: check_generation_command(cfg, interactive=True)) == (
        "--batch-size 4 is larger than --buffer-size 1: interactive translates the lines it has read, --buffer-size at "
        "a time; give --buffer-size 4 (or a smaller --batch-size)")
    check_generation_command(cfg)  # fairseq-generate has no buffer


# the hub's keyword arguments reach the generator unparsed: (settings, the line)
@pytest.mark.parametrize("settings,expected", [
    ({"beam": "2"}, "--beam '2' must be an integer"),
    ({"beam": 2.0}, "--beam 2.0 must be an integer"),
    ({"nbest": True}, "--nbest True must be an integer"),
    ({"unkpen": "x"}, "--unkpen 'x' must be a number"),
    ({"lenpen": 1.0, "temperature": -1.0}, "--temperature -1.0 must be positive"),
], ids=lambda x: repr(x) if isinstance(x, dict) else "")
def test_hub_generation_settings_are_told_their_kind(settings, expected):
    from fairseq.dataclass.configs import GenerationConfig
    from omegaconf import OmegaConf, open_dict

    from fairseq_define_patch.runtime.generation_inputs import check_generation_settings

    # a checkpoint's config is plain (no types); GeneratorHubInterface.generate sets its keyword arguments in it
    gen = OmegaConf.create(OmegaConf.to_container(OmegaConf.structured(GenerationConfig())))
    with open_dict(gen):
        for k, v in settings.items():
            setattr(gen, k, v)
    assert one_line(lambda: check_generation_settings(gen)).startswith(expected)


def adaptive_input(vocab, cutoff, padding_idx=1):
    from fairseq.modules import AdaptiveInput

    return AdaptiveInput(vocab, padding_idx, 16, 2.0, 16, cutoff)


def adaptive_softmax(vocab, cutoff):
    from fairseq.modules import AdaptiveSoftmax

    return AdaptiveSoftmax(vocab, 16, cutoff, 0.0)


# fairseq's adaptive layers and the plugin's, built with cutoffs that cannot be: (builds, the line)
ADAPTIVE_MISTAKES = [
    (
        "softmax_beyond_vocab",
        lambda: adaptive_softmax(50, [10, 60]),
        "--adaptive-softmax-cutoff 10,60 goes beyond the vocabulary of 50 words",
    ),
    (
        "input_beyond_vocab",
        lambda: adaptive_input(50, [10, 60]),
        "--adaptive-input-cutoff 10,60 goes beyond the vocabulary",
    ),
    (
        "input_below_padding",
        lambda: adaptive_input(50, [1, 20]),
        "--adaptive-input-cutoff 1,20: the first band must hold the padding symbol (index 1)",
    ),
    (
        "softmax_not_increasing",
        lambda: adaptive_softmax(50, [20, 10]),
        "--adaptive-softmax-cutoff 20,10 must be increasing",
    ),
    ("plugin_below_padding", lambda: projected_input([1, 20], 2.0), "--adaptive-cutoff 1,20: the first band must hold"),
    (
        "plugin_factor_1e308",
        lambda: projected_input([10, 20], 1e308),
        "--div-val 1e+308 for each of the 2 cutoffs leaves a band",
    ),
]


def projected_input(cutoff, factor):
    from fairseq_define.modules.lm.adaptive_io import ProjectedAdaptiveInput

    return ProjectedAdaptiveInput(50, 1, 16, factor, 16, cutoff)


@pytest.mark.parametrize("name,build,expected", ADAPTIVE_MISTAKES, ids=[m[0] for m in ADAPTIVE_MISTAKES])
def test_adaptive_cutoffs_against_the_vocabulary_and_padding(name, build, expected):
    assert expected in one_line(build)


def test_adaptive_cutoffs_fairseq_takes_still_build():
    """The last cutoff may equal the vocabulary (fairseq appends it otherwise)."""
    assert adaptive_softmax(50, [10, 50]).cutoff == [10, 50] and adaptive_input(50, [10, 20]).cutoff == [10, 20, 50]


def test_a_huge_factor_is_a_band_too_narrow():
    from fairseq_define_patch.runtime.adaptive_bands import band_width

    assert band_width(64, 4.0, 3) == 1 and band_width(64, 4.0, 4) == 0 and band_width(64, 1e308, 3) == 0


@pytest.fixture(scope="module")
def translation_slice(tmp_path_factory):
    """60 sentence pairs of tests/data's WMT news, binarized with fairseq-preprocess (its output
    returned too, for the warnings test)."""
    from .helpers import TEST_DATA, head, run_cli

    d = tmp_path_factory.mktemp("settings_cli")
    for split, count in (("train", 60), ("valid", 12)):
        for lang in ("en", "de"):
            head(TEST_DATA / "wmt_news" / f"{split}.{lang}", d / f"{split}.{lang}", 0, count)
    out = run_cli("fairseq-preprocess", "-s", "en", "-t", "de", "--trainpref", d / "train", "--validpref", d / "valid",
                  "--destdir", d / "bin", "--joined-dictionary", "--workers", "1").stdout
    return d, out


def interactive(d, text):
    import subprocess

    from .helpers import BIN

    return subprocess.run(
        [
            str(BIN / "fairseq-interactive"),
            str(d / "bin"),
            "--path",
            str(d / "ck" / "checkpoint_last.pt"),
            "--cpu",
            "--beam",
            "1",
            "--max-len-b",
            "3",
            "--source-lang",
            "en",
            "--target-lang",
            "de",
        ],
        input=text,
        capture_output=True,
        timeout=300,
    )


@pytest.mark.cli
def test_stock_commands_print_no_warning_a_user_cannot_act_on(translation_slice):
    """Under torch 2.13 every fairseq-train printed three warnings from fairseq's own calls
    (pin_memory without an accelerator, torch.cuda.amp.autocast deprecated, mismatched
    key_padding_mask and attn_mask) and generate and interactive torch's nested-tensor notice
    (compat/torch_warnings.py). The stock commands on a CPU, as the tensorboardX line is
    tested (tests/test_cli_end_to_end.py); standard input that is not UTF-8 is one line naming
    the line, not translated as <unk>."""
    import re

    from .helpers import TINY_STOCK_TRANSFORMER, run_cli

    d, preprocess = translation_slice
    train = run_cli(
        "fairseq-train",
        d / "bin",
        *TINY_STOCK_TRANSFORMER,
        "--optimizer",
        "adam",
        "--lr",
        "1e-3",
        "--max-tokens",
        "500",
        "--max-update",
        "1",
        "--cpu",
        "--save-dir",
        d / "ck",
        "--no-epoch-checkpoints",
    )
    generate = run_cli(
        "fairseq-generate",
        d / "bin",
        "--path",
        d / "ck" / "checkpoint_last.pt",
        "--gen-subset",
        "valid",
        "--beam",
        "2",
        "--batch-size",
        "3",
        "--max-len-b",
        "3",
        "--cpu",
    )
    translated = interactive(d, b"the house\nwe said it\n")
    assert translated.returncode == 0 and len(re.findall(rb"^H-\d+\t", translated.stdout, re.M)) == 2
    for name, out in (("preprocess", preprocess), ("train", train.stdout), ("generate", generate.stdout),
                      ("interactive", (translated.stdout + translated.stderr).decode())):
        noise = [line for line in out.splitlines() if re.search(r"\w+Warning\b|tensorboardX", line)]
        assert not noise, f"fairseq-{name}: {noise}"
    latin1 = interactive(d, b"the house\ncaf\xe9 ok\n")
    err = latin1.stderr.decode()
    assert latin1.returncode != 0 and "Traceback" not in err
    assert "fairseq-interactive: error: standard input line 2 is not UTF-8 text (byte 0xe9)" in err


def test_a_model_resumed_under_another_architecture_is_told_which():
    """Two architectures of one model class (a language model's presets) differ in sizes: the
    refusal listed the sizes and named no --arch."""
    from omegaconf import OmegaConf

    from fairseq_define_patch.runtime.checkpoint_fit import check_checkpoint_form

    state = {
        "model": {},
        "cfg": {"model": {"_name": "transformer_lm_gpt", "decoder_layers": 12, "decoder_embed_dim": 768}},
    }
    here = OmegaConf.create({"_name": "transformer_lm_gpt2_small", "decoder_layers": 24, "decoder_embed_dim": 1024})
    line = one_line(lambda: check_checkpoint_form("ck.pt", state, here))
    assert line.startswith(
        "checkpoint ck.pt does not fit this model: --arch transformer_lm_gpt in the checkpoint, "
        "transformer_lm_gpt2_small here, whose settings differ: --decoder-layers 12 in the checkpoint"
    )
    assert "resume or fine-tune with --arch transformer_lm_gpt," in line


def test_attention_with_a_boolean_padding_mask_computes_what_torch_did():
    """The decoder's self-attention gives torch a float future mask and a boolean padding
    mask; the patch makes the padding mask float first, as torch itself did (with a warning):
    the same numbers, and no warning."""
    import warnings

    import torch.nn.functional as F
    from fairseq.modules import MultiheadAttention

    torch.manual_seed(0)
    attn = MultiheadAttention(8, 2, self_attention=True).eval()
    x = torch.randn(5, 3, 8)  # [T, B, C]
    padding = torch.zeros(3, 5, dtype=torch.bool)  # [B, T]
    padding[1, 3:] = True
    future = torch.triu(torch.full((5, 5), float("-inf")), 1)  # [T, T]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, _ = attn(x, x, x, key_padding_mask=padding, attn_mask=future, need_weights=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own conversion of the boolean mask, and its warning
        want, _ = F.multi_head_attention_forward(
            x, x, x, 8, 2, torch.empty([0]), torch.cat((attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias)),
            None, None, False, 0.0, attn.out_proj.weight, attn.out_proj.bias, False, padding, False, future,
            use_separate_proj_weight=True, q_proj_weight=attn.q_proj.weight, k_proj_weight=attn.k_proj.weight,
            v_proj_weight=attn.v_proj.weight)
    assert torch.equal(got, want)
