"""Checkpoints loaded only into their own form (issue 41, docs/checkpoints.md): --model-overrides
that change the trained function, an untied checkpoint into a tied model, a resume on another
architecture, dictionary or inference-only checkpoint; compressed codes kept within their
codebooks and out of training; the tied unit table."""

import pytest
import torch
from fairseq import checkpoint_utils

from .helpers import nmt_checkpoint

OVERRIDES_OF_THE_FORM = [  # --model-overrides that change the trained function: blamed on the override
    ("output_form", {"define_output_layer": "tied_map"}, r"define_output_layer='tied_map' \(trained with 'untied'\)"),
    ("width", {"decoder_embed_dim": 65536}, r"decoder_embed_dim=65536 \(trained with 32\)"),
    ("map", {"define_map_dim": 16}, r"define_map_dim=16 \(trained with 8\)"),
]


@pytest.mark.parametrize(
    "extra,expected", [c[1:] for c in OVERRIDES_OF_THE_FORM], ids=[c[0] for c in OVERRIDES_OF_THE_FORM]
)
def test_overrides_that_change_the_model_are_refused(tmp_path, extra, expected):
    from fairseq import UserError

    path, overrides = nmt_checkpoint(tmp_path)
    with pytest.raises(UserError, match="--model-overrides " + expected + ".* cannot be overridden at load time"):
        checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides={**overrides, **extra})
    # dropout and the positions are no other model
    checkpoint_utils.load_model_ensemble_and_task(
        [path], arg_overrides={**overrides, "dropout": 0.3, "max_source_positions": 512}
    )


def test_an_untied_checkpoint_does_not_load_into_a_tied_model_of_equal_shapes():
    """n = d: the untied output layer and the map have equal shapes; the tied model would hold
    one of the two tables (every translation changes), so the load is refused."""
    from fairseq import UserError

    from .test_define_transformer import tiny_model

    untied, _ = tiny_model("--define-map-dim", "32", "--define-output-layer", "untied")
    tied, _ = tiny_model("--define-map-dim", "32", "--define-output-layer", "tied_map")
    state = untied.state_dict()
    assert state["decoder.output_projection.weight"].shape == state["decoder.embed_tokens.map.weight"].shape
    with pytest.raises(UserError, match="different values for decoder.* which this model ties"):
        tied.load_state_dict(state, strict=False)
    tied.load_state_dict(tied.state_dict())  # its own form loads


def test_resuming_names_the_form_the_arch_and_inference_only_not_the_dropout():
    from fairseq._define_runtime.checkpoint_fit import check_checkpoint_form

    from fairseq_define.errors import UserError

    lm = {"_name": "transformer_lm", "decoder_layers": 2, "dropout": 0.1}
    with pytest.raises(
        UserError,
        match="--arch transformer_lm in the checkpoint, define_lstm_lm here "
        "\\(a TransformerLanguageModel, not a LSTMLanguageModel\\)",
    ):
        check_checkpoint_form("c.pt", {"cfg": {"model": lm}}, {"_name": "define_lstm_lm", "lstm_layers": 2})
    check_checkpoint_form("c.pt", {"cfg": {"model": lm}}, {**lm, "dropout": 0.3})
    with pytest.raises(UserError, match=r"is for inference only \(its tables are compositional codes"):
        check_checkpoint_form(
            "c.pt", {"cfg": {"model": lm}, "extra_state": {"inference_only": "its tables are compositional codes"}}, lm
        )


def test_compressed_codes_stay_within_their_codebook_and_out_of_training():
    from fairseq_define.errors import UserError
    from fairseq_define.modules.compression.compositional_codes import (
        CompositionalEmbedding,
        restore_compressed_embeddings,
    )

    model = torch.nn.Module()
    model.emb = torch.nn.Embedding(6, 4)
    codes = torch.tensor([[0, 1]] * 6, dtype=torch.uint8)
    state = {"emb.codes": codes, "emb.codebooks": torch.zeros(2, 4, 4)}
    with pytest.raises(UserError, match="damaged: emb.codes holds code 200 but its codebooks have 4 codes"):
        restore_compressed_embeddings(model, {**state, "emb.codes": codes.clone().fill_(200)})
    with pytest.raises(UserError, match="do not form a compressed \\[6, 4\\] table"):
        restore_compressed_embeddings(model, {**state, "emb.codes": codes[:3]})
    assert restore_compressed_embeddings(model, state) == 1
    assert isinstance(model.emb, CompositionalEmbedding) and not model.eval().emb.training
    with pytest.raises(UserError, match="for inference only"):
        model.train()


def test_the_tied_unit_table_follows_edits_through_data():
    from .test_define_transformer import tiny_model

    model, _ = tiny_model("--define-output-layer", "tied_unit")
    out, emb = model.decoder.output_projection, model.decoder.embed_tokens
    with torch.no_grad():
        first = out.weight
        assert out.weight is first  # reused while nothing changes
        emb.map.weight.data.mul_(2)  # bumps no version counter
        torch.testing.assert_close(out.weight, emb.vocabulary_table())
        assert not torch.equal(out.weight, first)


@pytest.mark.cli  # starts fairseq-train and fairseq-generate
def test_resume_with_another_dictionary_and_dropout_names_the_dictionary(wmt_bin, trained, tmp_path):
    """The trained fixture's checkpoint (tied at n, shared) resumed on a dictionary 8 words
    shorter and another --dropout: the line names the rows (the dictionary), not the dropout;
    and generate with an override of the output form names the override."""
    import shutil

    from .helpers import TINY, TINY_TIED, USER_DIR, assert_user_error, run_cli

    bin_dir = tmp_path / "bin"
    shutil.copytree(wmt_bin / "bin", bin_dir)
    for name in ("dict.en.txt", "dict.de.txt"):
        lines = (bin_dir / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (bin_dir / name).write_text("".join(lines[:-8]), encoding="utf-8")
    (tmp_path / "ck").mkdir()
    shutil.copy(trained / "checkpoint_last.pt", tmp_path / "ck")
    proc = run_cli("fairseq-train", bin_dir, "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
                   *TINY_TIED, "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500", "--max-update", "20",
                   "--save-dir", tmp_path / "ck", "--cpu", "--dropout", "0.3", check=False)
    assert_user_error(
        proc, "fairseq-train", "does not fit this model", "rows in the checkpoint", "dictionary (dict.*.txt)"
    )
    line = [l for l in proc.stdout.splitlines() if l.startswith("fairseq-train: error:")][-1]
    assert "dropout" not in line, line
    proc = run_cli(
        "fairseq-generate",
        wmt_bin / "bin",
        "--user-dir",
        USER_DIR,
        "--path",
        trained / "checkpoint_last.pt",
        "--gen-subset",
        "test",
        "--beam",
        "2",
        "--cpu",
        "--model-overrides",
        "{'define_output_layer': 'untied'}",
        check=False,
    )
    assert_user_error(
        proc, "fairseq-generate", "--model-overrides define_output_layer='untied' (trained with 'tied_map')"
    )
