"""LSTM / AWD-LSTM language models end to end on a slice of PTB: fairseq-train with the
contiguous_lm task, AWD-LSTM's loss and NT-ASGD (validation and checkpoints on the averaged
weights), fairseq-eval-lm against training's validation, cached tables, resume, the hub,
and the parameter tables."""

import re

import pytest
import torch

from .helpers import USER_DIR, head, ptb_style, run_cli, run_in_process, target_scores

pytestmark = pytest.mark.cli  # starts fairseq's command-line tools or a recipe

LSTM = ["--user-dir", USER_DIR, "--task", "contiguous_lm", "--arch", "define_lstm_tiny",
        "--tokens-per-sample", "20", "--cpu", "--no-epoch-checkpoints", "--log-format", "simple",
        "--log-interval", "20", "--seed", "3"]
AWD = ["--criterion", "awd_lm_loss", "--optimizer", "nt_asgd", "--lr-scheduler", "nt_asgd", "--lr", "5",
       "--clip-norm", "0.25", "--dropout", "0.2", "--dropout-hidden", "0.1", "--dropout-input", "0.2",
       "--dropout-embedding", "0.05", "--weight-drop", "0.2", "--define-transform", "define"]


@pytest.fixture(scope="session")
def ptb_bin(tmp_path_factory):
    d = tmp_path_factory.mktemp("ptb")
    head(ptb_style("train"), d / "train.txt", 0, 600)
    head(ptb_style("valid"), d / "valid.txt", 0, 80)
    head(ptb_style("test"), d / "test.txt", 0, 80)
    run_in_process("fairseq-preprocess", "--only-source", "--trainpref", d / "train.txt", "--validpref",
                   d / "valid.txt", "--testpref", d / "test.txt", "--destdir", d / "bin", "--workers", "1")
    return d / "bin"


@pytest.fixture(scope="session")
def awd_trained(ptb_bin, tmp_path_factory):
    """3 epochs of AWD-LSTM training; NT-ASGD averages from the first validation on."""
    ckpt = tmp_path_factory.mktemp("lstm_ckpt")
    out = run_in_process("fairseq-train", ptb_bin, *LSTM, *AWD, "--nonmono", "0", "--batch-size", "8",
                         "--max-epoch", "3", "--save-dir", ckpt).stdout
    return ckpt, out


def eval_lm(ptb_bin, ckpt, *extra, check=True):
    path = ckpt if str(ckpt).endswith(".pt") else ckpt / "checkpoint_last.pt"
    run = run_in_process if check else run_cli  # a refusal's exit code and message need the process
    return run("fairseq-eval-lm", ptb_bin, "--user-dir", USER_DIR, "--task", "contiguous_lm", "--cpu",
               "--path", path, "--gen-subset", "valid", *extra, check=check)


def loss_base2(out):
    return float(re.search(r"Loss \(base 2\): ([0-9.]+)", out).group(1))


def test_awd_lstm_trains_with_ar_tar_and_switches_to_averaged_sgd(awd_trained):
    ckpt, out = awd_trained
    assert "define_lstm_tiny: DeFINE 0.0" in out and "train: 8 streams per GPU" in out
    assert "LSTM: input-weight gradients of layer(s) 0 centred" in out  # the default
    assert re.search(r"\| ar [0-9.]+ \| tar [0-9.]+", out)  # AR and TAR are logged beside the NLL
    assert "epoch 1: validation loss" in out and "switching to averaged SGD" in out
    assert out.count("validating the averaged (NT-ASGD) weights") == 2  # epochs 2 and 3
    train_losses = [float(x) for x in re.findall(r"\| train \| epoch \d+ \| loss ([0-9.]+)", out)]
    assert len(train_losses) == 3 and train_losses[-1] < train_losses[0]


def test_checkpoint_holds_the_validated_average_and_the_iterate_to_resume_from(awd_trained):
    from fairseq.checkpoint_utils import safe_torch_load

    ckpt, _ = awd_trained
    state = safe_torch_load(str(ckpt / "checkpoint_last.pt"))
    opt = state["last_optimizer_state"]
    assert opt["param_groups"][0]["swapped"] and opt["param_groups"][0]["averaged_steps"] > 1
    weights = list(state["model"].values())
    saved = opt["state"]
    assert any(not torch.equal(saved[i]["average"], saved[i]["iterate"]) for i in saved)
    # the model weights saved after validation are the average, in parameter order
    averages = [saved[i]["average"] for i in sorted(saved)]
    matched = sum(any(w.shape == a.shape and torch.equal(w, a) for w in weights) for a in averages)
    assert matched == len(averages)


def test_eval_lm_reproduces_validation_of_the_averaged_weights(ptb_bin, awd_trained):
    ckpt, out = awd_trained
    valid = float(re.findall(r"valid on 'valid' subset \| loss ([0-9.]+)", out)[-1])
    at_8 = eval_lm(ptb_bin, ckpt, "--batch-size", "8").stdout
    assert abs(loss_base2(at_8) - valid) <= 1e-3, (loss_base2(at_8), valid)
    # cached DeFINE tables at load time give the same perplexity
    cached = eval_lm(ptb_bin, ckpt, "--batch-size", "8", "--model-overrides", "{'define_cache_on_load': True}").stdout
    assert "replaced by cached tables" in cached
    assert abs(loss_base2(cached) - loss_base2(at_8)) <= 1e-4


def test_resume_after_the_switch_is_exact(ptb_bin, tmp_path):
    """Stopped after epoch 2 (a checkpoint saved with the average swapped in) and resumed,
    epoch 3 logs the same losses as an uninterrupted run."""
    args = [ptb_bin, *LSTM, *AWD, "--nonmono", "0", "--batch-size", "8", "--dropout", "0", "--dropout-hidden", "0",
            "--dropout-input", "0", "--dropout-embedding", "0", "--weight-drop", "0"]
    full = run_in_process("fairseq-train", *args, "--max-epoch", "3", "--save-dir", tmp_path / "full").stdout
    run_in_process("fairseq-train", *args, "--max-epoch", "2", "--save-dir", tmp_path / "split")
    resumed = run_in_process("fairseq-train", *args, "--max-epoch", "3", "--save-dir", tmp_path / "split").stdout
    assert "Loaded checkpoint" in resumed

    def epoch3(out):
        return re.search(r"\| train \| epoch 003 \| loss ([0-9.]+)", out).group(1), \
            re.findall(r"valid on 'valid' subset \| loss ([0-9.]+)", out)[-1]

    assert epoch3(resumed) == epoch3(full)


def test_nt_asgd_schedule_needs_its_optimizer(ptb_bin, tmp_path):
    out = run_cli("fairseq-train", ptb_bin, *LSTM, "--criterion", "awd_lm_loss", "--optimizer", "sgd",
                  "--lr-scheduler", "nt_asgd", "--lr", "1", "--batch-size", "4", "--max-update", "1",
                  "--save-dir", tmp_path, check=False)
    assert out.returncode != 0 and "needs --optimizer nt_asgd" in out.stdout and "Traceback" not in out.stdout
    assert not list(tmp_path.glob("*.pt"))


def test_a_table_architecture_trains_through_fairseq_train(ptb_bin, tmp_path):
    """Table 1a R4 at full size (4 x 1024 LSTM, N=7 DeFINE), cutoffs fitted to the slice."""
    out = run_in_process(
        "fairseq-train",
        ptb_bin,
        *LSTM[:5],
        "define_lstm_wt103_r4_define_n384",
        *LSTM[6:],
        "--adaptive-cutoff",
        "500,1000",
        "--criterion",
        "projected_adaptive_loss",
        "--optimizer",
        "sgd",
        "--lr",
        "1",
        "--batch-size",
        "2",
        "--max-update",
        "2",
        "--disable-validation",
        "--save-dir",
        tmp_path,
    ).stdout
    assert "define_lstm_wt103_r4_define_n384: DeFINE 4.6" in out and "num_updates 2" in out


def test_hub_samples_and_scores(ptb_bin, awd_trained):
    from fairseq_define.models.lstm_lm import LSTMLanguageModel

    ckpt, _ = awd_trained
    lm = LSTMLanguageModel.from_pretrained(str(ckpt), "checkpoint_last.pt", data_name_or_path=str(ptb_bin))
    torch.manual_seed(0)
    text = lm.sample("the company said", sampling=True, sampling_topk=10, max_len_b=10, min_len=6)
    assert text.startswith("the company said") and len(text.split()) > 3
    lm.score("a new york company")  # a score must not depend on what was scored before
    scored = lm.score("the company said it expects")
    # each word's log-probability given the ones before, recomputed one token at a time
    # (incremental state, not the scorer's one forward pass) and scored by the adaptive
    # softmax's target path (the training criterion's), not the full distribution

    words = lm.encode("the company said it expects")[:-1]  # without the trailing eos
    torch.testing.assert_close(scored["positional_scores"], target_scores(lm.models[0], words), atol=1e-5, rtol=1e-5)


def test_cached_checkpoint_evaluates_and_scores_the_same(ptb_bin, awd_trained, tmp_path):
    """fairseq-define-cache-tables on an AWD-LSTM checkpoint: eval-lm prints the same loss,
    the hub's per-token scores agree within 1e-5, as does define_cache_on_load."""
    from fairseq_define.models.lstm_lm import LSTMLanguageModel

    ckpt, _ = awd_trained
    cached = tmp_path / "cached.pt"
    out = run_in_process("fairseq-define-cache-tables", "--path", ckpt / "checkpoint_last.pt", "--output",
                         cached).stdout
    assert "replaced by cached tables of" in out
    base = eval_lm(ptb_bin, ckpt, "--batch-size", "8").stdout
    assert re.search(r"Loss \(base 2\): .*", eval_lm(ptb_bin, cached, "--batch-size", "8").stdout).group(0) == \
        re.search(r"Loss \(base 2\): .*", base).group(0)
    lms = [LSTMLanguageModel.from_pretrained(str(ckpt), "checkpoint_last.pt", data_name_or_path=str(ptb_bin)),
           LSTMLanguageModel.from_pretrained(str(tmp_path), "cached.pt", data_name_or_path=str(ptb_bin)),
           LSTMLanguageModel.from_pretrained(str(ckpt), "checkpoint_last.pt", data_name_or_path=str(ptb_bin),
                                             define_cache_on_load=True)]
    assert all(lm.models[0].decoder.embed_tokens.unit is None for lm in lms[1:])
    sentences = (ptb_bin.parent / "valid.txt").read_text(encoding="utf-8").splitlines()[:4]
    want = lms[0].score(sentences)
    for lm in lms[1:]:
        for got, ref in zip(lm.score(sentences), want):
            torch.testing.assert_close(got["positional_scores"], ref["positional_scores"], atol=1e-5, rtol=0)


def test_authors_style_trains_evaluates_and_caches(ptb_bin, tmp_path):
    """The authors' unit in an LSTM LM through fairseq-train, fairseq-eval-lm and the cache
    tool: the cached checkpoint evaluates to the same loss."""
    out = run_in_process("fairseq-train", ptb_bin, *LSTM, "--define-transform", "define", "--define-style", "authors",
                         "--define-dropout", "0.1", "--criterion", "projected_adaptive_loss", "--optimizer", "adam",
                         "--lr", "3e-3", "--batch-size", "8", "--max-update", "8", "--disable-validation",
                         "--save-dir", tmp_path).stdout
    assert re.search(r"define_lstm_tiny: DeFINE 0\.0[1-9]M", out) and "num_updates 8" in out
    run_in_process("fairseq-define-cache-tables", "--path", tmp_path / "checkpoint_last.pt", "--output",
                   tmp_path / "c.pt")
    base = loss_base2(eval_lm(ptb_bin, tmp_path, "--batch-size", "8").stdout)
    assert loss_base2(eval_lm(ptb_bin, tmp_path / "c.pt", "--batch-size", "8").stdout) == base


def test_params_reproduce_tables_1a_and_1c():
    out = run_cli("fairseq-define-params", "--paper-table", "1a").stdout
    for row, cols in {"R1 standard": ("23.36", "68.81"), "R2 adaptive": ("23.36", "9.25"),
                      "R3 DeFINE": ("23.36", "9.25"), "R4 DeFINE": ("24.73", "13.90"),
                      "R5 DeFINE": ("26.24", "18.55")}.items():
        line = next(l for l in out.splitlines() if l.startswith(row))
        assert re.search(rf"{cols[0]} \({cols[0]}\)\s+{cols[1]} \({cols[1]}\)", line), line
    assert "unit: define (skip=mix): Expand 384->" in out
    out = run_in_process("fairseq-define-params", "--paper-table", "1c").stdout  # 1a above: the console script
    assert re.search(r"AWD-LSTM\s+DeFINE 0.00M .* total 24.22M", out)
    assert re.search(r"AWD-LSTM \+ DeFINE\s+DeFINE [0-9.]+M .*\(paper: 20M\)", out)
    assert re.search(r"AWD-LSTM \+ DeFINE \(authors\)\s+DeFINE 2\.18M .*total 21\.85M", out)


def test_compressed_checkpoint_evaluates_close_to_the_original(ptb_bin, awd_trained, tmp_path):
    """Table 5's pipeline: cached DeFINE table and tied map as 32 x 16 compositional codes."""
    ckpt, _ = awd_trained
    out_path = tmp_path / "compressed.pt"
    out = run_in_process("fairseq-define-compress", "--path", ckpt / "checkpoint_last.pt", "--output", out_path,
                         "--cache-define").stdout  # the refusals below: the console script's
    sizes = re.search(r"look-up tables ([0-9.]+) MB -> ([0-9.]+) MB", out)
    assert sizes and float(sizes.group(2)) < float(sizes.group(1))
    base = loss_base2(eval_lm(ptb_bin, ckpt, "--batch-size", "8").stdout)
    compressed = eval_lm(ptb_bin, out_path, "--batch-size", "8").stdout
    assert "stored as compositional codes" in compressed
    # measured 7.763 -> 7.770 bits (perplexity 217.3 -> 218.2); 0.005 of the loss is ~3% perplexity
    assert abs(loss_base2(compressed) - base) <= 0.005 * base
    again = run_cli("fairseq-define-compress", "--path", ckpt / "checkpoint_last.pt", "--output", out_path, check=False)
    assert again.returncode == 2 and "exists" in again.stdout
    bad = run_cli("fairseq-define-compress", "--path", ckpt / "checkpoint_last.pt", "--output", tmp_path / "x.pt",
                  "--refine-rounds", "-1", check=False)
    assert bad.returncode == 2 and "--refine-rounds at least 0" in bad.stdout and not (tmp_path / "x.pt").exists()
