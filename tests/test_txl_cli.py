"""Transformer-XL end to end on a slice of WikiText-2: fairseq-train and fairseq-eval-lm
with --task contiguous_lm, evaluation that does not depend on the batch size, the
reference's evaluation settings as model overrides, resume, the hub, and Table 2."""

import math
import re
from argparse import Namespace

import pytest
import torch

from .helpers import BIN, USER_DIR, assert_same_model, free_port, losses, result, run_cli, run_in_process, target_scores

pytestmark = pytest.mark.cli  # starts fairseq's command-line tools or a recipe

TXL = ["--user-dir", USER_DIR, "--task", "contiguous_lm", "--arch", "define_txl_tiny",
       "--define-map-dim", "16", "--adaptive-cutoff", "1000,4000", "--tokens-per-sample", "8",
       "--criterion", "projected_adaptive_loss", "--optimizer", "adam", "--lr", "2e-3",
       "--cpu", "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "10", "--seed", "2"]


@pytest.fixture(scope="session")
def txl_trained(wt2_bin, tmp_path_factory):
    ckpt = tmp_path_factory.mktemp("txl_ckpt")
    out = run_in_process("fairseq-train", wt2_bin, *TXL, "--batch-size", "8", "--max-update", "60", "--save-dir", ckpt)
    assert "parameters (paper's distribution): define_txl_tiny: DeFINE 0.00M" in out.stdout
    assert "train: 8 streams per GPU" in out.stdout
    valid = re.findall(r"valid on 'valid' subset \| loss ([0-9.]+)", out.stdout)
    assert valid
    return ckpt, float(valid[-1])


def eval_lm(wt2_bin, ckpt, *extra, check=True):
    run = run_in_process if check else run_cli  # a refusal's exit code and message need the process
    return run("fairseq-eval-lm", wt2_bin, "--user-dir", USER_DIR, "--task", "contiguous_lm", "--cpu",
               "--path", ckpt / "checkpoint_last.pt", "--gen-subset", "valid", *extra, check=check)


def test_eval_lm_perplexity_does_not_depend_on_batch_size(wt2_bin, txl_trained):
    ckpt, valid_loss = txl_trained
    results = {b: result(eval_lm(wt2_bin, ckpt, "--batch-size", b).stdout) for b in (1, 3, 8)}
    n_tokens = {tokens for tokens, _ in results.values()}
    assert len(n_tokens) == 1  # every token but the first, at any batch size
    losses = [loss for _, loss in results.values()]
    assert max(losses) - min(losses) <= 2e-4, results
    # training's validation (criterion path, batch 8) and eval-lm (full softmax) agree
    assert abs(results[8][1] - valid_loss) <= 1e-3


def test_eval_lm_takes_the_reference_settings_as_model_overrides(wt2_bin, txl_trained):
    ckpt, _ = txl_trained
    out = eval_lm(wt2_bin, ckpt, "--batch-size", "4", "--model-overrides",
                  "{'tgt_len': 4, 'mem_len': 24, 'clamp_len': 12, 'same_length': True}").stdout
    assert "segments of 4 tokens" in out
    tokens, loss = result(out)
    assert math.isfinite(loss) and tokens > 1000


def test_eval_lm_takes_the_segment_length_from_tokens_per_sample(wt2_bin, txl_trained):
    """As tgt_len does (the model trained on 8): the same segments, the same loss."""
    ckpt, _ = txl_trained
    out = eval_lm(wt2_bin, ckpt, "--batch-size", "4", "--tokens-per-sample", "4").stdout
    assert "segments of 4 tokens" in out
    by_tgt_len = eval_lm(wt2_bin, ckpt, "--batch-size", "4", "--model-overrides", "{'tgt_len': 4}").stdout
    assert result(out) == result(by_tgt_len)


def test_an_override_of_a_task_setting_names_the_option_that_reaches_the_task(wt2_bin, txl_trained):
    """fairseq-eval-lm builds its task from its command line: the override changed nothing."""
    ckpt, _ = txl_trained
    out = eval_lm(wt2_bin, ckpt, "--model-overrides", "{'tokens_per_sample': 4}", check=False)
    assert out.returncode != 0 and "Traceback" not in out.stdout  # stderr merged into stdout
    assert out.stdout.strip().splitlines()[-1] == (
        "fairseq-eval-lm: error: --model-overrides 'tokens_per_sample': is the task's, which fairseq-eval-lm "
        "builds from its own command line, so the override would change nothing; give --tokens-per-sample 4 instead")


def test_eval_lm_refuses_context_window_with_a_clear_error(wt2_bin, txl_trained):
    ckpt, _ = txl_trained
    out = eval_lm(wt2_bin, ckpt, "--batch-size", "2", "--context-window", "4", check=False)
    assert out.returncode != 0
    assert "drop --context-window" in out.stdout and "Traceback" not in out.stdout


def test_define_txl_trains_and_resumes(wt2_bin, tmp_path):
    args = [wt2_bin, *TXL, "--define-transform", "define", "--define-expand-dim", "64",
            "--max-tokens", "64", "--save-dir", tmp_path]
    out = run_in_process("fairseq-train", *args, "--max-update", "6").stdout
    assert re.search(r"define_txl_tiny: DeFINE 0\.0[1-9]M", out)  # a unit on the embedding
    out = run_in_process("fairseq-train", *args, "--max-update", "10").stdout
    assert "Loaded checkpoint" in out and "num_updates 10" in out


def test_hub_samples_and_scores(wt2_bin, txl_trained):
    from fairseq_define.models.transformer_xl import TransformerXLLanguageModel

    ckpt, _ = txl_trained
    lm = TransformerXLLanguageModel.from_pretrained(str(ckpt), "checkpoint_last.pt", data_name_or_path=str(wt2_bin))
    torch.manual_seed(0)
    text = lm.sample("The game", sampling=True, sampling_topk=10, max_len_b=12)
    assert text.startswith("The game") and len(text.split()) > 2
    lm.score("The first game")  # a score must not depend on what was scored before
    scored = lm.score("The game was released in Japan")
    # each word's log-probability given the ones before, recomputed one token at a time
    # (incremental state, not the scorer's one forward pass) and scored by the adaptive
    # softmax's target path (the training criterion's), not the full distribution

    words = lm.encode("The game was released in Japan")[:-1]  # without the trailing eos
    torch.testing.assert_close(scored["positional_scores"], target_scores(lm.models[0], words), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("style", ["paper", "authors"])
def test_cached_checkpoint_evaluates_and_scores_the_same(wt2_bin, tmp_path, style):
    """fairseq-define-cache-tables on a DeFINE Transformer-XL checkpoint (the unit on the
    projected adaptive input) of either unit style: eval-lm prints the same loss, the hub's
    per-token scores agree within 1e-5, as does define_cache_on_load."""
    from fairseq_define.models.transformer_xl import TransformerXLLanguageModel

    ckpt = tmp_path / "define_txl"
    out = run_in_process("fairseq-train", wt2_bin, *TXL, "--define-transform", "define", "--define-expand-dim", "64",
                         "--define-style", style, "--batch-size", "8", "--max-update", "30", "--disable-validation",
                         "--save-dir", ckpt).stdout
    assert re.search(r"define_txl_tiny: DeFINE 0\.0[1-9]M", out) and "num_updates 30" in out
    cached = tmp_path / "cached.pt"
    out = run_in_process("fairseq-define-cache-tables", "--path", ckpt / "checkpoint_last.pt", "--output",
                         cached).stdout
    assert "replaced by cached tables of" in out
    base = result(eval_lm(wt2_bin, ckpt, "--batch-size", "4").stdout)
    assert result(run_in_process("fairseq-eval-lm", wt2_bin, "--user-dir", USER_DIR, "--task", "contiguous_lm", "--cpu",
                                 "--path", cached, "--gen-subset", "valid", "--batch-size", "4").stdout) == base
    lms = [TransformerXLLanguageModel.from_pretrained(str(ckpt), "checkpoint_last.pt", data_name_or_path=str(wt2_bin)),
           TransformerXLLanguageModel.from_pretrained(str(tmp_path), "cached.pt", data_name_or_path=str(wt2_bin)),
           TransformerXLLanguageModel.from_pretrained(str(ckpt), "checkpoint_last.pt", data_name_or_path=str(wt2_bin),
                                                      define_cache_on_load=True)]
    assert lms[0].models[0].decoder.embed_tokens.unit is not None
    assert all(lm.models[0].decoder.embed_tokens.unit is None for lm in lms[1:])
    sentences = [line.strip() for line in (wt2_bin.parent / "valid.txt").read_text(encoding="utf-8").splitlines()
                 if len(line.split()) > 5][:4]
    want = lms[0].score(sentences)
    for lm in lms[1:]:
        for got, ref in zip(lm.score(sentences), want):
            torch.testing.assert_close(got["positional_scores"], ref["positional_scores"], atol=1e-5, rtol=0)


def test_params_reproduce_table_2():
    out = run_in_process("fairseq-define-params", "--paper-table", "2").stdout
    rows = {
        "Standard d=410": ("41.07", "110.04"), "Standard d=384": ("36.25", "103.08"),
        "Projective n=256": ("36.25", "69.20"), "Projective n=128": ("36.25", "34.73"),
        "Projective n=64": ("36.25", "17.50"), "DeFINE n=128": ("36.25", "34.73"),
    }
    for row, (context, io) in rows.items():
        line = next(l for l in out.splitlines() if l.startswith(row))
        assert re.search(rf"{context} \({context}\)\s+{io} \({io}\)", line), line
    assert "DeFINE unit (every DeFINE row" in out and "Expand 384->" in out


@pytest.fixture(scope="module")
def eval_task(wt2_bin):
    from fairseq import options, tasks

    parser = options.get_eval_lm_parser()
    args = options.parse_args_and_arch(parser, [str(wt2_bin), "--task", "contiguous_lm", "--tokens-per-sample", "4"])
    task = tasks.setup_task(args)
    task.load_dataset("test")
    return task


def total_log_prob(task, model, batch_size):
    total, count = 0.0, 0
    with torch.no_grad():
        for sample in task.eval_lm_dataloader(task.dataset("test"), batch_size=batch_size):
            net_out = model(**sample["net_input"])
            lp = model.get_normalized_probs(net_out, log_probs=True)  # [B, T, V]
            keep = sample["target"].ne(task.dictionary.pad())
            total += lp.gather(-1, sample["target"].unsqueeze(-1)).squeeze(-1)[keep].sum().item()
            count += int(keep.sum())
    return total, count


def test_stream_evaluation_is_exact_at_any_batch_size(eval_task):
    """In float64: with the default context (the model's memory span) every batch size gives
    the single stream's log-likelihood; without context it would not."""
    cfg = Namespace(arch="define_txl_tiny", decoder_embed_dim=16, decoder_head_dim=8, decoder_ffn_embed_dim=32,
                    define_map_dim=8, dropout=0.0, mem_len=6, tgt_len=4, adaptive_cutoff="500")
    torch.manual_seed(0)
    model = eval_task.build_model(cfg).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)  # sharp attention: context matters
    eval_task.args.eval_context = -1
    single, n = total_log_prob(eval_task, model, 1)
    assert n == len(eval_task.dataset("test")) - 1
    for b in (2, 5):
        lp, m = total_log_prob(eval_task, model, b)
        assert m == n and abs(lp - single) <= 1e-9 * abs(single), (b, lp, single)
    eval_task.args.eval_context = 0
    lp, _ = total_log_prob(eval_task, model, 5)
    assert abs(lp - single) > 1e-6 * abs(single)


def test_two_processes_split_the_rows_of_one_batch(wt2_bin, tmp_path):
    """torchrun with 2 gloo processes x 4 streams = one process with 8 streams: the same rows,
    the same losses (memory carried in each process)."""

    common = [wt2_bin, *TXL, "--dropout", "0", "--max-update", "5", "--log-interval", "1",
              "--disable-validation", "--ddp-backend", "legacy_ddp"]
    dist = run_cli("torchrun", "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
                   BIN / "fairseq-train", *common, "--batch-size", "4", "--save-dir", tmp_path / "d",
                   "--distributed-backend", "gloo", timeout=900).stdout
    single = run_in_process("fairseq-train", *common, "--batch-size", "8", "--save-dir", tmp_path / "s").stdout
    d, s = losses(dist), losses(single)
    assert sorted(d) == sorted(s) == [1, 2, 3, 4, 5]
    for u in d:  # logged with 3 decimals: equal values may print one digit apart
        assert abs(d[u] - s[u]) <= 1.5e-3, (u, d[u], s[u])
    assert_same_model(tmp_path / "d", tmp_path / "s")  # every parameter within 1e-4
