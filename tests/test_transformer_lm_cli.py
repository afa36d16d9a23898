"""define_transformer_lm through fairseq's stock command-line tools on a slice of WikiText-2,
as fairseq's own transformer_lm is used: fairseq-train --task language_modeling (cross
entropy over the n-dim table, or fairseq's adaptive_loss over the adaptive map; the untied and
unit-tied output forms too), fairseq-eval-lm
with and without --context-window, cached DeFINE tables and compression evaluating through
eval-lm, and two torchrun processes (gloo, CPU) equal to one. Generation (hub, fairseq-generate,
incremental state) is in test_lm_generation.py."""

import re

import pytest
from fairseq.checkpoint_utils import safe_torch_load

from .helpers import BIN, USER_DIR, assert_same_model, free_port, losses, result, run_cli, run_in_process

pytestmark = pytest.mark.cli  # starts fairseq's command-line tools or a recipe

COMMON = ["--user-dir", USER_DIR, "--task", "language_modeling", "--arch", "define_transformer_lm_tiny",
          "--tokens-per-sample", "32", "--optimizer", "adam", "--lr", "2e-3", "--cpu", "--no-epoch-checkpoints",
          "--log-format", "simple", "--seed", "2"]
# the two maps, each with one unit style: a standard n-dim table with the paper's unit, and
# fairseq's adaptive input of width n with the authors' unit (fairseq's adaptive_loss)
MODELS = {
    "standard": ["--define-style", "paper"],
    "adaptive": ["--define-style", "authors", "--adaptive-input", "--adaptive-input-cutoff", "1000,4000",
                 "--criterion", "adaptive_loss", "--ddp-backend", "legacy_ddp"],
    # the other output forms: fairseq's adaptive softmax at d of its own; a full softmax over the unit's outputs
    "untied": ["--define-output-layer", "untied", "--adaptive-input", "--adaptive-input-cutoff", "1000,4000",
               "--criterion", "adaptive_loss", "--ddp-backend", "legacy_ddp"],
    "tied_unit": ["--define-output-layer", "tied_unit"],
}


@pytest.fixture(scope="module")
def trained(wt2_bin, tmp_path_factory):  # noqa: F811
    """{model: (checkpoint folder, training's last validation loss in base 2)}."""
    d = tmp_path_factory.mktemp("tlm")
    runs = {}
    for name, flags in MODELS.items():
        out = run_in_process("fairseq-train", wt2_bin, *COMMON, *flags, "--batch-size", "8", "--max-update", "30",
                             "--save-dir", d / name).stdout
        assert re.search(r"parameters \(paper's distribution\): define_transformer_lm_tiny: DeFINE 0\.0[1-9]M", out)
        runs[name] = d / name, float(re.findall(r"valid on 'valid' subset \| loss ([0-9.]+)", out)[-1])
    return runs


def eval_lm(data, path, *extra):
    return result(run_in_process("fairseq-eval-lm", data, "--user-dir", USER_DIR, "--path", path,
                                 "--gen-subset", "valid", "--tokens-per-sample", "32", "--batch-size", "4", "--cpu",
                                 *extra).stdout)


@pytest.fixture(scope="module")
def evaluated(wt2_bin, trained):  # noqa: F811
    """{model: (tokens, loss)} of fairseq-eval-lm on the trained checkpoint, no context window."""
    return {name: eval_lm(wt2_bin, ckpt / "checkpoint_last.pt") for name, (ckpt, _) in trained.items()}


@pytest.mark.parametrize("name", list(MODELS))
def test_eval_lm_with_and_without_context_window(wt2_bin, trained, evaluated, name):  # noqa: F811
    ckpt, valid_loss = trained[name]
    tokens, loss = evaluated[name]
    assert abs(loss - valid_loss) <= 0.01  # training's validation scored the same blocks
    tokens_cw, loss_cw = eval_lm(wt2_bin, ckpt / "checkpoint_last.pt", "--context-window", "16")
    assert tokens_cw == tokens and loss_cw != loss  # the same tokens, each with more context


@pytest.mark.parametrize("name", list(MODELS))
def test_cached_tables_evaluate_as_the_live_unit(wt2_bin, trained, evaluated, name, tmp_path):  # noqa: F811
    ckpt, _ = trained[name]
    out = run_in_process("fairseq-define-cache-tables", "--path", ckpt / "checkpoint_last.pt", "--output",
                         tmp_path / "cached.pt").stdout
    assert "replaced by cached tables of" in out
    assert eval_lm(wt2_bin, tmp_path / "cached.pt") == evaluated[name]


def test_compressed_adaptive_softmax_reads_the_coded_table(wt2_bin, trained, tmp_path):  # noqa: F811
    """fairseq's adaptive softmax tied to a compressed band table scores with the decoded
    rows: the checkpoint holds the codes, not a second, uncompressed copy for the output."""
    ckpt, _ = trained["adaptive"]
    run_in_process("fairseq-define-compress", "--path", ckpt / "checkpoint_last.pt", "--output", tmp_path / "c.pt",
                   "--refine-rounds", "2")
    state = safe_torch_load(str(tmp_path / "c.pt"))["model"]
    assert "decoder.embed_tokens.map.embeddings.0.0.codes" in state
    assert not any(k.startswith("decoder.adaptive_softmax.head.word_proj") for k in state)
    tokens, loss = eval_lm(wt2_bin, tmp_path / "c.pt")
    assert tokens > 1000 and 0 < loss < 20


def test_two_processes_equal_one_process_with_update_freq_2(wt2_bin, tmp_path):  # noqa: F811
    common = [wt2_bin, *COMMON, *MODELS["adaptive"], "--dropout", "0", "--batch-size", "4", "--max-update", "3",
              "--log-interval", "1", "--disable-validation"]
    dist = run_cli("torchrun", "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
                   BIN / "fairseq-train", *common, "--save-dir", tmp_path / "d", "--distributed-backend", "gloo",
                   timeout=900).stdout
    single = run_in_process("fairseq-train", *common, "--update-freq", "2", "--save-dir", tmp_path / "s").stdout
    d, s = losses(dist), losses(single)
    assert sorted(d) == sorted(s) == [1, 2, 3]
    for u in d:
        assert abs(d[u] - s[u]) <= 1e-3, (u, d[u], s[u])
    assert_same_model(tmp_path / "d", tmp_path / "s")
