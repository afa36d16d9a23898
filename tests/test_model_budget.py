"""The model budget (fairseq_define_patch/runtime/model_budget.py) counts what each registered
family builds: its count of every architecture fairseq and the plugin register agrees with the
model built on the meta device, it refuses what is too large to build and passes the largest
real models (issue 53); its bounds are the one table (runtime/size_bounds.py) that the
plugin's config_bounds.py reads too."""

import copy
import logging
from argparse import Namespace

import pytest
import torch
from fairseq import options
from fairseq._define_runtime import model_budget, size_bounds  # the copies fairseq runs
from fairseq.data import Dictionary
from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_DATACLASS_REGISTRY, FairseqEncoderDecoderModel

import fairseq_define_patch.installed as installed
from fairseq_define.modules import config_bounds

_DICTIONARIES = {}


def _task(vocab):
    """Just enough of a task for build_model: one dictionary of ``vocab`` words, both sides."""
    if vocab not in _DICTIONARIES:
        d = Dictionary()
        for i in range(vocab - len(d)):
            d.add_symbol(f"w{i}")
        _DICTIONARIES[vocab] = d
    d = _DICTIONARIES[vocab]
    return Namespace(source_dictionary=d, target_dictionary=d, dictionary=d, output_dictionary=d)


def _config(arch, extra=()):
    """The model config fairseq.models.build_model hands the budget: the parsed options, a
    dataclass model's defaults filled in."""
    task = "translation" if issubclass(ARCH_MODEL_REGISTRY[arch], FairseqEncoderDecoderModel) else "language_modeling"
    args = options.parse_args_and_arch(options.get_training_parser(default_task=task),
                                       input_args=["-", "--task", task, "--arch", arch, *extra])
    if arch in MODEL_DATACLASS_REGISTRY:
        return MODEL_DATACLASS_REGISTRY[arch].from_namespace(args)
    return args


def _built_parameters(arch, cfg, task, device="meta"):
    """Parameters of the model built on ``device``: "meta" (or fake tensors, where a family's
    initialisation copies through the CPU) holds shapes and no memory."""
    try:
        with torch.device(device):
            model = ARCH_MODEL_REGISTRY[arch].build_model(copy.deepcopy(cfg), task)
    except NotImplementedError:
        with model_budget._fake_tensors():
            model = ARCH_MODEL_REGISTRY[arch].build_model(copy.deepcopy(cfg), task)
    return sum(p.numel() for p in model.parameters())


def _counted_parameters(cfg, task, arch):
    parts = model_budget.count_model(cfg, task, ARCH_MODEL_REGISTRY[arch])
    return sum(p[0] for p in parts if len(p) == 2)  # a third field marks a buffer


# a vocabulary every architecture's default cutoffs fit in (the WikiText-103 models' adaptive
# bands end at 200,000)
TEST_VOCAB = 1000
CUTOFF_VOCAB = 267_744


def _vocab_for(arch):
    return CUTOFF_VOCAB if "wt103" in arch or "wiki103" in arch or arch.startswith("define_txl_small") \
        or arch.startswith("define_txl_wt") else TEST_VOCAB


# families whose builds take 5 to 25 s (weight-normalised convolutions on the meta device, a
# language adapter per language and layer): one architecture, the quickest, stands for each
_ONE_PER_FAMILY = {"FConvModel": "fconv_iwslt_de_en", "FConvLanguageModel": "fconv_lm",
                   "FConvModelSelfAtt": "fconv_self_att", "XMODModel": "xmod_base_13"}


def _architectures():
    return [arch for arch in sorted(ARCH_MODEL_REGISTRY)
            if _ONE_PER_FAMILY.get(ARCH_MODEL_REGISTRY[arch].__name__, arch) == arch]


@pytest.mark.parametrize("arch", _architectures())
def test_the_count_of_every_architecture_is_what_it_builds(arch, caplog):
    """Counted within 2% of the parameters the built model holds: by the family's counter
    where it has one (fairseq's transformers, bart, the language models: a formula checked
    against the build), else by the budget's own build without memory (which must succeed:
    no family falls back to the rough estimate). Architectures this environment cannot build
    without their own task or package (speech, wav2vec, megatron, fairscale, transformers, a
    pretrained file) are skipped, with the reason."""
    caplog.set_level(logging.ERROR)
    task = _task(_vocab_for(arch))
    try:
        cfg = _config(arch)
        real = _built_parameters(arch, cfg, task)
    except Exception as e:  # the architecture needs more than a dictionary task to build
        pytest.skip(f"{arch} does not build from a dictionary task here: {type(e).__name__}: {str(e)[:80]}")
    counted = _counted_parameters(cfg, task, arch)
    assert abs(counted - real) <= 0.02 * real, (arch, counted, real)


@pytest.mark.parametrize("arch", ["define_transformer_tiny", "define_transformer_lm_tiny", "define_lstm_tiny",
                                  "define_txl_tiny", "lstm_wiseman_iwslt_de_en", "transformer_lm_gpt2_tiny"])
def test_a_build_without_memory_holds_what_a_real_build_holds(arch):
    """The meta device's parameters are the CPU's, for the plugin's families and fairseq's."""
    cfg, task = _config(arch), _task(TEST_VOCAB)
    assert _built_parameters(arch, cfg, task, "cpu") == _counted_parameters(cfg, task, arch)


@pytest.mark.parametrize(
    "arch,extra",
    [
        ("transformer_wmt_en_de", []),
        ("transformer_vaswani_wmt_en_de_big", ["--share-all-embeddings"]),
        ("transformer_iwslt_de_en", ["--share-decoder-input-output-embed"]),
        (
            "transformer",
            [
                "--decoder-embed-dim",
                "256",
                "--decoder-ffn-embed-dim",
                "1024",
                "--decoder-attention-heads",
                "4",
                "--encoder-learned-pos",
                "--decoder-learned-pos",
                "--encoder-normalize-before",
            ],
        ),
        ("mbart_large", []),
        ("transformer_lm_wiki103", []),
        ("transformer_lm_gpt2_small", []),
        ("transformer_lm", ["--adaptive-softmax-cutoff", "300,600", "--decoder-learned-pos"]),
        (
            "transformer_lm",
            [
                "--adaptive-input",
                "--adaptive-input-cutoff",
                "300,600",
                "--adaptive-softmax-cutoff",
                "300,600",
                "--tie-adaptive-weights",
                "--decoder-input-dim",
                "256",
                "--decoder-output-dim",
                "256",
            ],
        ),
    ],
)
def test_a_family_counter_counts_exactly(arch, extra):
    """fairseq's transformers are counted from their settings, without a build: shared tables
    once, encoder and decoder layers each as they are, adaptive input and softmax by band."""
    vocab = CUTOFF_VOCAB if "wiki103" in arch else TEST_VOCAB
    cfg, task = _config(arch, extra), _task(vocab)
    counter = model_budget.parameter_counter(ARCH_MODEL_REGISTRY[arch])
    parts = counter(model_budget._values(cfg), task)
    assert parts is not None
    assert sum(p[0] for p in parts if len(p) == 2) == _built_parameters(arch, cfg, task)


@pytest.mark.parametrize("arch,extra,vocab,parameters", [
    ("transformer_vaswani_wmt_en_de_big", ["--share-all-embeddings"], 300_000, 484e6),
    ("mbart_large", [], 250_027, 610e6),
    ("transformer_lm_gpt", [], 250_000, None),
    ("roberta_large", [], 250_002, 560e6),  # XLM-R large's vocabulary
])
def test_real_models_at_large_vocabularies_are_not_refused(arch, extra, vocab, parameters, monkeypatch):
    """The largest models fairseq registers for one GPU, at realistic vocabularies, build
    without a flag, counted as what they are (the issue's numbers where it gives them)."""
    monkeypatch.delenv(model_budget.LIMIT_VARIABLE, raising=False)
    cfg, task = _config(arch, extra), _task(vocab)
    assert model_budget.check_model_budget(cfg, task) is cfg
    parameters = parameters or _built_parameters(arch, cfg, task)
    assert abs(_counted_parameters(cfg, task, arch) - parameters) < 0.02 * parameters


@pytest.mark.parametrize("arch,extra,vocab,expected", [
    # the shared table counted once, but this one holds 1.5 billion parameters
    ("transformer_lm_gpt2_big", [], 250_000, "more than the limit of 1,073,741,824"),
    # the DeFINE unit counted from what it builds (each size within its own bound)
    ("define_transformer_tiny", ["--define-map-dim", "65536", "--define-expand-dim", "65536"], TEST_VOCAB,
     "more than the limit"),
    ("define_transformer_lm_tiny", ["--define-expand-dim", "65536", "--define-depth", "3"], TEST_VOCAB,
     "more than the limit"),
    # attention heads times their width
    ("define_txl_tiny", ["--decoder-attention-heads", "60000", "--decoder-head-dim", "1000"], TEST_VOCAB,
     "more than the limit"),
    ("define_txl_tiny", ["--decoder-attention-heads", "100000", "--decoder-head-dim", "1000"], TEST_VOCAB,
     "decoder_attention_heads=100,000 is larger than fairseq builds \\(a head count: at most 65,536\\)"),
])
def test_models_too_large_to_build_are_refused_before_they_are_built(arch, extra, vocab, expected, monkeypatch):
    monkeypatch.delenv(model_budget.LIMIT_VARIABLE, raising=False)
    cfg, task = _config(arch, extra), _task(vocab)
    with pytest.raises(model_budget.ModelBudgetError, match=expected):
        model_budget.check_model_budget(cfg, task)


@pytest.mark.parametrize("arch,extra,named", [
    # an LSTM's weights are 4 x hidden x (input + hidden): named by its embedding width alone before
    ("lstm", ["--encoder-hidden-size", "2000"], "the largest part is encoder.lstm (encoder_hidden_size=2,000, "),
    # fconv's stack is its list of layers: named by its widths alone before
    ("fconv_iwslt_de_en", ["--decoder-layers", "[(512, 3)] * 12"],
     "the largest part is decoder.convolutions (decoder_layers='[(512, 3)] * 12', "),
], ids=["lstm_hidden_size", "fconv_layers"])
def test_the_advice_names_the_settings_that_make_the_largest_part(arch, extra, named, monkeypatch):
    monkeypatch.setenv(model_budget.LIMIT_VARIABLE, "100000")
    with pytest.raises(model_budget.ModelBudgetError) as info:
        model_budget.check_model_budget(_config(arch, extra), _task(TEST_VOCAB))
    assert named in str(info.value)


def test_the_plugin_reads_the_one_table_of_bounds():
    """config_bounds.py's bounds are the runtime table's rows, read through the patch's public
    function; no second table."""
    assert (
        config_bounds.MAX_DEFINE_WIDTH == size_bounds.size_bound("define_width") == installed.size_bound("define_width")
    )
    assert config_bounds.MAX_DEFINE_DEPTH == size_bounds.size_bound("define_depth")
    assert config_bounds.MAX_VOCAB_SIZE == size_bounds.size_bound("vocabulary")
    assert model_budget.MAX_WIDTH == size_bounds.size_bound("width")


def test_a_registered_counter_is_the_count_of_its_class(monkeypatch):
    """A plugin's counter (installed.register_parameter_counter) replaces the meta build for
    its class."""
    cls = ARCH_MODEL_REGISTRY["define_transformer_tiny"]
    monkeypatch.setattr(model_budget, "_COUNTERS", dict(model_budget._COUNTERS))
    installed.register_parameter_counter(cls, lambda settings, task: [(2 * 10**9, "a part named by the plugin")])
    with pytest.raises(model_budget.ModelBudgetError, match="the largest part is a part named by the plugin"):
        model_budget.check_model_budget(_config("define_transformer_tiny"), _task(TEST_VOCAB))
