"""The output layer forms of define_transformer (--define-output-layer untied, the default of
define_transformer_tiny, and tied_unit; the other CLI tests train tied_map) through
the stock CLIs and our tools: train, generate and --score-reference, interactive, cached
tables, compression, checkpoint averaging and the hub, on the real WMT slice."""

import math
import re
from pathlib import Path

import pytest
import torch
from fairseq.checkpoint_utils import safe_torch_load

from .helpers import TINY, USER_DIR, made_once, run_in_process, subprocess_run_interactive

# untied: a table per side and the paper's d-wide output layer; tied_unit: one shared embedding
FORMS = {"untied": [], "tied_unit": ["--share-all-embeddings"]}


def hypotheses(output):
    return {int(i): (float(s), h) for i, s, h in re.findall(r"^H-(\d+)\t([-0-9.e]+)\t(.*)$", output, re.M)}


def positional(output):
    return {int(i): [float(x) for x in s.split()] for i, s in re.findall(r"^P-(\d+)\t(.*)$", output, re.M)}


@pytest.fixture(scope="module", params=list(FORMS))
def run_dir(request, wmt_bin, tmp_path_factory):
    """define_transformer_tiny with the form, 8 updates, checkpoints at 4 and 8: (form, its
    folder, fairseq-train's output)."""
    form = request.param

    def train(folder):
        out = run_in_process("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR,
                             "--arch", "define_transformer_tiny", *TINY, "--define-output-layer", form, *FORMS[form],
                             "--optimizer", "adam", "--lr", "1e-3",
                             "--max-tokens", "1500", "--max-update", "8", "--save-dir", folder, "--cpu",
                             "--save-interval-updates", "4", "--no-epoch-checkpoints", "--log-format", "simple",
                             "--log-interval", "4", "--seed", "3").stdout
        return str(folder), out

    folder, out = made_once(tmp_path_factory, f"form_{form}", train)
    return form, Path(folder), out


def generate(wmt_bin, path, *extra):
    return run_in_process("fairseq-generate", wmt_bin / "bin", "--user-dir", USER_DIR, "--path", path,
                          "--gen-subset", "test", "--beam", "2", "--max-len-b", "15", "--batch-size", "20", "--cpu",
                          *extra).stdout


def test_training_logs_the_form_and_its_parameters(run_dir):
    form, folder, out = run_dir
    assert f"output layer: {'untied' if form == 'untied' else 'tied to the DeFINE unit'}" in out
    state = safe_torch_load(str(folder / "checkpoint_last.pt"))
    keys = [k for k in state["model"] if k.startswith("decoder.output_projection")]
    if form == "untied":
        assert state["model"]["decoder.output_projection.weight"].shape[1] == 64  # d_model wide
        # a DeFINE map and unit per side (without --share-all-embeddings)
        assert not torch.equal(state["model"]["encoder.embed_tokens.map.weight"],
                               state["model"]["decoder.embed_tokens.map.weight"])
    else:
        assert keys == []  # no parameters of its own
    assert state["cfg"]["model"].define_output_layer == form


def test_generate_scores_equal_score_reference_and_the_hub(wmt_bin, run_dir):
    from fairseq_define.models.define_transformer import DefineTransformerModel

    form, folder, _ = run_dir
    ref = generate(wmt_bin, folder / "checkpoint_last.pt", "--score-reference")
    scores = hypotheses(ref)
    assert len(scores) == 40 and all(math.isfinite(s) for s, _ in scores.values())
    hub = DefineTransformerModel.from_pretrained(
        str(folder),
        "checkpoint_last.pt",
        data_name_or_path=str(wmt_bin / "bin"),
        bpe="subword_nmt",
        bpe_codes=str(wmt_bin / "codes"),
    )
    sources = wmt_bin.joinpath("test.tok.en").read_text(encoding="utf-8").splitlines()
    targets = wmt_bin.joinpath("test.tok.de").read_text(encoding="utf-8").splitlines()
    for i, hypo in enumerate(hub.score(sources, targets=targets)):
        assert abs(hypo["score"].item() / math.log(2) - scores[i][0]) <= 1e-4, i
    assert isinstance(hub.translate(sources[0], beam=2, max_len_b=10), str)
    assert len(hypotheses(generate(wmt_bin, folder / "checkpoint_last.pt"))) == 40


def test_interactive_translates(wmt_bin, run_dir):

    _, folder, _ = run_dir
    lines = "".join(wmt_bin.joinpath("test.bpe.en").read_text(encoding="utf-8").splitlines(True)[:3])
    assert len(hypotheses(subprocess_run_interactive(wmt_bin, folder / "checkpoint_last.pt", lines).stdout)) == 3


def test_cached_tables_score_as_the_live_units(wmt_bin, run_dir, tmp_path):
    _, folder, _ = run_dir
    cached = tmp_path / "cached.pt"
    run_in_process("fairseq-define-cache-tables", "--path", folder / "checkpoint_last.pt", "--output", cached,
                   "--data", wmt_bin / "bin")
    live = positional(generate(wmt_bin, folder / "checkpoint_last.pt", "--score-reference"))
    got = positional(generate(wmt_bin, cached, "--score-reference"))
    assert got.keys() == live.keys() and len(live) == 40
    for i in live:
        assert max(abs(a - b) for a, b in zip(got[i], live[i])) <= 1e-4, i


def test_compression_keeps_the_untied_output_layer(wmt_bin, run_dir, tmp_path):
    form, folder, _ = run_dir
    compressed = tmp_path / "compressed.pt"
    run_in_process("fairseq-define-compress", "--path", folder / "checkpoint_last.pt", "--output", compressed,
                   "--data", wmt_bin / "bin", "--refine-rounds", "2")
    out = generate(wmt_bin, compressed)
    assert "stored as compositional codes" in out and len(hypotheses(out)) == 40
    before, after = (safe_torch_load(str(p))["model"] for p in (folder / "checkpoint_last.pt", compressed))
    if form == "untied":  # not a DeFINE table: left as it is
        assert torch.equal(after["decoder.output_projection.weight"], before["decoder.output_projection.weight"])
    assert not any(k.endswith("map.weight") for k in after)  # the maps are coded


def test_averaged_checkpoints_generate(wmt_bin, run_dir, tmp_path):
    _, folder, _ = run_dir
    avg = tmp_path / "avg.pt"
    run_in_process(
        "fairseq-define-average-checkpoints",
        "--inputs",
        folder / "checkpoint_1_4.pt",
        folder / "checkpoint_1_8.pt",
        "--output",
        avg,
    )
    a, b, m = (
        safe_torch_load(str(p))["model"] for p in (folder / "checkpoint_1_4.pt", folder / "checkpoint_1_8.pt", avg)
    )
    for k in m:
        torch.testing.assert_close(m[k], (a[k] + b[k]) / 2)
    assert len(hypotheses(generate(wmt_bin, avg))) == 40
