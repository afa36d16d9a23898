"""The stock fairseq CLIs on small slices of real corpora from the data root, with the
plugin loaded through --user-dir (absolute path), as a user runs them."""

import re
import shutil

import pytest

from .helpers import TINY, TINY_TIED, USER_DIR, head, ptb_style, run_cli, subprocess_run_interactive

pytestmark = pytest.mark.cli  # starts fairseq's command-line tools or a recipe


def test_generate_and_score(wmt_bin, trained):
    gen = run_cli("fairseq-generate", wmt_bin / "bin", "--user-dir", USER_DIR, "--path", trained / "checkpoint_last.pt",
                  "--gen-subset", "test", "--beam", "2", "--max-len-b", "20", "--batch-size", "20",
                  "--remove-bpe", "--cpu", "--prefix-size", "8")
    hyps = dict(re.findall(r"^H-(\d+)\t[-0-9.e]+\t(.*)$", gen.stdout, re.M))
    refs = dict(re.findall(r"^T-(\d+)\t(.*)$", gen.stdout, re.M))
    assert len(hyps) == len(refs) == 40
    sys_lines, ref_lines = [hyps[k] for k in sorted(hyps, key=int)], [refs[k] for k in sorted(refs, key=int)]
    # generate's BLEU4 is corpus BLEU-4 over the printed (BPE-removed) words: recomputed here,
    # the whole line. After 12 updates the model alone matches no n-gram (BLEU 0 whatever the
    # references); each hypothesis starts with 8 reference tokens (--prefix-size), so n-grams
    # of every order match and a wrong hypothesis or reference changes the numbers
    import sacrebleu

    want = sacrebleu.corpus_bleu(sys_lines, [ref_lines], tokenize="none")
    line = re.search(r"BLEU4 = ([0-9.]+), ([0-9./]+) \(BP=([0-9.]+), ratio=([0-9.]+), syslen=(\d+), reflen=(\d+)\)",
                     gen.stdout)
    assert line, gen.stdout[-2000:]
    bleu4, precisions, bp, ratio, syslen, reflen = line.groups()
    assert float(bleu4) > 0 and all(float(p) > 0 for p in precisions.split("/"))
    assert abs(float(bleu4) - want.score) <= 0.01
    for got, p in zip(precisions.split("/"), want.precisions):
        assert abs(float(got) - p) <= 0.051
    assert (int(syslen), int(reflen)) == (want.sys_len, want.ref_len)
    assert abs(float(bp) - want.bp) <= 6e-4 and abs(float(ratio) - want.sys_len / want.ref_len) <= 6e-4
    sys_file, ref_file = wmt_bin / "sys.txt", wmt_bin / "ref.txt"
    sys_file.write_text("".join(line + "\n" for line in sys_lines), encoding="utf-8")
    ref_file.write_text("".join(line + "\n" for line in ref_lines), encoding="utf-8")
    # fairseq-score prints sacreBLEU's line for the files it reads
    score = run_cli("fairseq-score", "--sys", sys_file, "--ref", ref_file, "--sacrebleu")
    want = sacrebleu.corpus_bleu(sys_lines, [ref_lines])
    assert want.score > 0 and re.search(r"^BLEU = .*$", score.stdout, re.M).group(0) == want.format()


def test_interactive_and_validate(wmt_bin, trained):
    lines = (wmt_bin / "test.bpe.en").read_text(encoding="utf-8").splitlines()[:3]
    proc = subprocess_run_interactive(wmt_bin, trained, "\n".join(lines) + "\n")
    assert len(re.findall(r"^H-\d+\t", proc.stdout, re.M)) == 3
    val = run_cli("fairseq-validate", wmt_bin / "bin", "--user-dir", USER_DIR, "--task", "translation",
                  "--path", trained / "checkpoint_last.pt", "--valid-subset", "valid", "--cpu", "--max-tokens", "2000")
    assert re.search(r"valid on 'valid' subset \| loss [0-9.]+", val.stdout)


def test_resume_from_checkpoint(wmt_bin, trained, tmp_path):
    ckpt = tmp_path / "resume"
    shutil.copytree(trained, ckpt)
    out = run_cli("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
                  *TINY_TIED, "--optimizer", "adam", "--lr", "1e-3",
                  "--max-tokens", "1500", "--max-update", "14", "--save-dir", ckpt, "--cpu", "--no-epoch-checkpoints",
                  "--log-format", "simple", "--seed", "3")
    assert "Loaded checkpoint" in out.stdout and "num_updates 14" in out.stdout


def test_paper_architecture_starts_training(wmt_bin, tmp_path):
    out = run_cli("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_wmt_en_de",
                  "--optimizer", "adam", "--lr", "1e-4", "--max-tokens", "400", "--max-update", "1",
                  "--save-dir", tmp_path / "ck", "--no-save", "--cpu", "--log-format", "simple", "--log-interval", "1",
                  "--disable-validation")
    assert "define_transformer_wmt_en_de: DeFINE" in out.stdout
    assert re.search(r"num_updates 1\b", out.stdout)


def test_language_model_cli_and_eval_lm(tmp_path):
    """fairseq-eval-lm (and --sample-break-mode eos, a numpy-2 fix) on a PTB slice."""
    head(ptb_style("train"), tmp_path / "train.txt", 0, 800)
    head(ptb_style("valid"), tmp_path / "valid.txt", 0, 100)
    run_cli("fairseq-preprocess", "--only-source", "--trainpref", tmp_path / "train.txt", "--validpref",
            tmp_path / "valid.txt", "--destdir", tmp_path / "bin", "--workers", "1")
    train = run_cli("fairseq-train", tmp_path / "bin", "--task", "language_modeling", "--arch", "transformer_lm",
                    "--decoder-layers", "1", "--decoder-embed-dim", "32", "--decoder-ffn-embed-dim", "64",
                    "--decoder-attention-heads", "2", "--decoder-input-dim", "32", "--decoder-output-dim", "32",
                    "--optimizer", "adam", "--lr", "1e-3", "--tokens-per-sample", "64", "--sample-break-mode", "eos",
                    "--max-tokens", "1024", "--max-update", "5", "--save-dir", tmp_path / "ck", "--cpu",
                    "--no-epoch-checkpoints", "--log-format", "simple").stdout
    out = run_cli("fairseq-eval-lm", tmp_path / "bin", "--path", tmp_path / "ck" / "checkpoint_last.pt",
                  "--gen-subset", "valid", "--max-tokens", "1024", "--sample-break-mode", "eos", "--cpu").stdout
    assert "tensorboardX" not in train + out  # test_no_tensorboardx_notice
    # the same sentences and tokens as training's final validation (base 2, 3 decimals there)
    loss = float(re.search(r"Loss \(base 2\): ([0-9.]+)", out).group(1))
    assert abs(loss - float(re.findall(r"valid on 'valid' subset \| loss ([0-9.]+)", train)[-1])) <= 2e-3
    assert abs(float(re.search(r"Perplexity: ([0-9.]+)", out).group(1)) - 2 ** loss) <= 0.01 * 2 ** loss


@pytest.mark.parametrize("tool", ["fairseq-preprocess", "fairseq-train", "fairseq-generate"])
def test_no_tensorboardx_notice(tool):
    """Every tool imports all of fairseq's tasks, and fairseq/tasks/text_to_speech.py logged
    "Please install tensorboardX" at import; the patch logs it at debug level. (The real runs
    of test_language_model_cli_and_eval_lm and tests/test_bf16.py check their output too.)"""
    out = run_cli(tool, "--help").stdout  # stderr merged in
    assert "usage:" in out and "tensorboardX" not in out


def test_hub_interface_translates(wmt_bin, trained):
    """from_pretrained needs no --user-dir: importing fairseq_define registered the model."""
    from fairseq_define.models.define_transformer import DefineTransformerModel

    hub = DefineTransformerModel.from_pretrained(
        str(trained), checkpoint_file="checkpoint_last.pt", data_name_or_path=str(wmt_bin / "bin"),
        bpe="subword_nmt", bpe_codes=str(wmt_bin / "codes"),
    )
    out = hub.translate("the European Parliament", beam=2, max_len_b=10)
    assert isinstance(out, str) and "@@" not in out
    assert isinstance(hub.models[0], DefineTransformerModel)
    import torch

    torch.manual_seed(0)
    samples = hub.sample(["the European Parliament"] * 2, sampling=True, sampling_topk=5, max_len_b=10)
    assert len(samples) == 2 and all(isinstance(x, str) for x in samples)
    # score: the hypothesis' log-probability, as generate reports it
    hyp = hub.generate(hub.encode("the European Parliament"), beam=2, max_len_b=10)[0]
    assert hyp["score"].item() < 0 and len(hyp["positional_scores"]) == len(hyp["tokens"])


def test_hub_scores_a_given_translation_as_generate_score_reference_does(wmt_bin, trained):
    import math

    import torch

    from fairseq_define.models.define_transformer import DefineTransformerModel

    hub = DefineTransformerModel.from_pretrained(
        str(trained), checkpoint_file="checkpoint_last.pt", data_name_or_path=str(wmt_bin / "bin"),
        bpe="subword_nmt", bpe_codes=str(wmt_bin / "codes"),
    )
    # the hub applies the BPE codes to tokenized text; generate reads the binarized BPE'd test set
    sources = (wmt_bin / "test.tok.en").read_text(encoding="utf-8").splitlines()
    targets = (wmt_bin / "test.tok.de").read_text(encoding="utf-8").splitlines()
    scored = hub.score(sources, targets=targets)
    one = hub.score(sources[3], targets=targets[3])
    torch.testing.assert_close(one["positional_scores"], scored[3]["positional_scores"], atol=1e-5, rtol=0)
    gen = run_cli("fairseq-generate", wmt_bin / "bin", "--user-dir", USER_DIR, "--path", trained / "checkpoint_last.pt",
                  "--gen-subset", "test", "--score-reference", "--batch-size", "16", "--cpu").stdout
    reference = {int(i): float(s) for i, s in re.findall(r"^H-(\d+)\t([-0-9.e]+)\t", gen, re.M)}
    assert len(reference) == len(scored) == 40
    for i, hypo in enumerate(scored):
        assert len(hypo["positional_scores"]) == len(hypo["tokens"]) and hypo["tokens"][-1] == hub.tgt_dict.eos()
        assert abs(hypo["score"].item() / math.log(2) - reference[i]) <= 1e-5, i
    with pytest.raises(ValueError, match="targets="):
        hub.score(sources[0])
    with pytest.raises(ValueError, match="one target per source"):
        hub.score(sources[:2], targets=targets[:1])
