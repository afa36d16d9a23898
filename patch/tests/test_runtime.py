"""The patch's runtime modules (fairseq_define_patch/runtime/), imported directly: the code
that --apply copies into fairseq as fairseq/_define_runtime/, tested where it is written.
The stock command-line tools run in test_stock_cli.py; the plugin's suite runs them with its
models too (its test_hostile_*.py, test_bad_input.py, test_mistakes.py, ...)."""

import argparse
import io
from argparse import Namespace

import fairseq
import numpy as np
import pytest
import torch

from fairseq_define_patch.runtime import (
    checkpoint_fit,
    checkpoint_loading,
    checkpoint_misfit,
    checkpoint_weights,
    config_literals,
    hub_archives,
    model_budget,
)


class _RunsCode:
    def __reduce__(self):
        import os

        return (os.system, ("true",))


def test_safe_load_reads_a_checkpoint_and_refuses_code(tmp_path):
    good = tmp_path / "good.pt"
    torch.save({"model": {"w": torch.ones(2)}, "args": Namespace(arch="x")}, good)
    state = checkpoint_loading.safe_torch_load(str(good))
    assert state["args"].arch == "x" and state["model"]["w"].tolist() == [1.0, 1.0]
    bad = tmp_path / "bad.pt"
    torch.save({"model": {}, "x": _RunsCode()}, bad)
    with pytest.raises(checkpoint_loading.CheckpointLoadError, match="holds code") as e:
        checkpoint_loading.safe_torch_load(str(bad))
    assert isinstance(e.value, fairseq.UserError) and "posix.system" in str(e.value)


def test_safe_load_bounds_what_a_file_asks_for():
    budget = checkpoint_loading.CheckpointBudget("f.pt", 10)
    budget.charge(checkpoint_loading.CHECKPOINT_MEMORY_SLACK, "most of the slack")
    with pytest.raises(checkpoint_loading.CheckpointLoadError, match="more memory than a checkpoint of 10 bytes"):
        budget.charge(100, "more")
    with pytest.raises(checkpoint_loading.CheckpointLoadError, match="truncated, corrupt"):
        checkpoint_loading.safe_torch_load(io.BytesIO(b"PK\x03\x04 not a zip"))


def test_load_checks_say_what_the_file_is(tmp_path):
    with pytest.raises(checkpoint_loading.CheckpointLoadError, match="is a folder"):
        checkpoint_loading.check_checkpoint_source(str(tmp_path), str(tmp_path), None)
    with pytest.raises(fairseq.UserError, match="--model-overrides must be a dict"):
        checkpoint_loading.check_checkpoint_source("c.pt", str(tmp_path / "c.pt"), "beam=5")
    with pytest.raises(checkpoint_loading.CheckpointLoadError, match="plain state_dict"):
        checkpoint_loading.check_is_checkpoint({"w": torch.ones(1)}, "c.pt")
    with pytest.raises(checkpoint_loading.CheckpointLoadError, match=r"not a complete fairseq checkpoint \(KeyError"):
        checkpoint_loading.upgrade_checked(lambda state: state["args"], {"model": {}}, "c.pt")
    cfg = Namespace(restore_file=str(tmp_path / "missing.pt"), finetune_from_model=None, save_dir="ck")
    with pytest.raises(fairseq.UserError, match="does not exist: give a checkpoint file"):
        checkpoint_loading.check_restore_file(cfg, cfg.restore_file)


def test_pickle_globals_are_read_without_unpickling(tmp_path):
    path = tmp_path / "p.pt"
    torch.save({"x": _RunsCode(), "ns": argparse.Namespace()}, path)
    names = checkpoint_loading.checkpoint_pickle_globals(str(path))
    assert "posix.system" in names and "argparse.Namespace" in names
    assert checkpoint_loading.resolve_checkpoint_global("posix.system") == ("code", None)
    assert checkpoint_loading.resolve_checkpoint_global("argparse.Namespace")[0] == "safe"


def test_config_literals_are_data_never_code():
    parse = config_literals.parse_config_literal
    assert parse("[(512, 3)] * 2 + [(256, 1)]") == [(512, 3), (512, 3), (256, 1)]
    assert parse("-0.5") == -0.5 and parse("{'a': (1, 2)}") == {"a": (1, 2)}
    for code in ("__import__('os').system('true')", "[0] * 10**12", "[" * 200 + "]" * 200):
        with pytest.raises(config_literals.ConfigLiteralError):
            parse(code)
    with pytest.raises(TypeError):
        parse(3)  # as eval: callers rely on it
    assert issubclass(config_literals.ConfigLiteralError, fairseq.UserError)


def test_a_misfit_is_one_user_error_caused_by_the_load_error():
    error = RuntimeError("Error(s) in loading state_dict for M:\n\tMissing key(s): w")
    cfg = Namespace(arch="no_such_arch", layers=2)
    raised = checkpoint_misfit.checkpoint_misfit("c.pt", {"args": cfg}, Namespace(arch="no_such_arch", layers=3), error)
    assert isinstance(raised, fairseq.UserError) and raised.__cause__ is error
    assert "--layers 2 in the checkpoint, 3 here" in str(raised)
    already = fairseq.UserError("one line")
    assert checkpoint_misfit.checkpoint_misfit("c.pt", {}, cfg, already) is already


def test_user_errors_and_readers_give_one_line(monkeypatch):
    from fairseq_define_patch.runtime import user_error

    assert user_error.user_error_line(user_error.UserError("bad: fix it")) == "bad: fix it"
    assert user_error.user_error_line(KeyError("x")) is None  # a bug: the traceback
    monkeypatch.setattr(user_error, "_USER_ERROR_READERS", [])
    user_error.add_user_error_reader(lambda e: "read" if isinstance(e, KeyError) else None)
    assert user_error.user_error_line(KeyError("x")) == "read"
    monkeypatch.setattr("sys.argv", ["python"])  # not a fairseq-* tool: no hook
    hook = __import__("sys").excepthook
    user_error.install_user_error_hook()
    assert __import__("sys").excepthook is hook


def test_plugin_names_and_user_dirs(tmp_path):
    from fairseq_define_patch.runtime import plugin_names

    assert plugin_names.is_plugin_name("define_transformer") and not plugin_names.is_plugin_name("transformer")
    assert "fairseq-define plugin, which is not loaded" in str(
        plugin_names.unknown_name_error("task", "contiguous_lm", "--task"))
    assert "check --arch" in str(plugin_names.unknown_name_error("model architecture", "nope", "--arch"))
    with pytest.raises(fairseq.UserError, match="no --task"):
        plugin_names.check_task_known(None)
    (tmp_path / "fairseq_define").mkdir()
    (tmp_path / "fairseq_define" / "__init__.py").write_text("")
    with pytest.raises(fairseq.UserError, match="did you mean .*fairseq_define"):
        plugin_names.check_user_dir(str(tmp_path), str(tmp_path))
    assert "does not exist" in str(plugin_names.user_dir_not_found("nowhere"))


def test_training_numbers_are_checked():
    from omegaconf import OmegaConf

    from fairseq_define_patch.runtime import training_settings

    def cfg(**optimization):
        return OmegaConf.create({"optimization": {"lr": [0.1], "update_freq": [1], **optimization},
                                 "criterion": {"label_smoothing": 0.1}})

    training_settings.check_training_numbers(cfg())
    with pytest.raises(fairseq.UserError, match="--update-freq 0 must be at least 1"):
        training_settings.check_training_numbers(cfg(update_freq=[0]))
    with pytest.raises(fairseq.UserError, match="--lr inf is not a finite number"):
        training_settings.check_training_numbers(cfg(lr=[float("inf")]))


def test_preprocess_inputs_are_checked_before_writing(tmp_path):
    from fairseq_define_patch.runtime import preprocess_inputs

    (tmp_path / "train.de").write_text("a b\nc\n")
    (tmp_path / "train.en").write_text("a\n")
    args = Namespace(only_source=False, joined_dictionary=False, trainpref=str(tmp_path / "train"),
                     validpref=None, testpref=None, srcdict=None, tgtdict=None, source_lang="de",
                     target_lang="en", destdir=str(tmp_path / "bin"))
    with pytest.raises(fairseq.UserError, match="has 2 lines but .* has 1: source and target"):
        preprocess_inputs.check_inputs(args, lambda prefix, lang: f"{prefix}.{lang}",
                                       lambda lang, destdir: f"{destdir}/dict.{lang}.txt")
    assert not (tmp_path / "bin").exists()


def test_hub_archive_members_outside_the_folder_are_refused(tmp_path):
    import tarfile

    from fairseq_define_patch.runtime import hub_archives

    archive = tmp_path / "m.tar.gz"
    (tmp_path / "f").write_text("x")
    with tarfile.open(archive, "w:gz") as t:
        t.add(tmp_path / "f", arcname="model/../../evil")
    with pytest.raises(fairseq.UserError, match="is a path outside the folder"):
        hub_archives.extract_checked(str(archive), str(tmp_path / "out"), "gz")
    assert not (tmp_path / "out").exists()
    assert "from_pretrained takes a folder" in str(hub_archives.archive_not_found("x.tar.gz"))


def test_checkpoint_writes_are_atomic_and_the_save_dir_is_checked(tmp_path):
    from fairseq_define_patch.runtime import checkpoint_writes

    target = tmp_path / "checkpoint_last.pt"
    target.write_bytes(b"old")

    def fail(f, tmp):
        f.write(b"half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        checkpoint_writes._write_atomically(str(target), fail)
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["checkpoint_last.pt"]
    checkpoint_writes.copy_checkpoint(str(target), str(tmp_path / "checkpoint_best.pt"))
    assert (tmp_path / "checkpoint_best.pt").read_bytes() == b"old"
    with pytest.raises(fairseq.UserError, match="is a file, not a folder"):
        checkpoint_writes.check_save_dir(str(target))


def test_dataset_files_are_checked_whole(tmp_path):
    from fairseq_define_patch.runtime import dataset_files

    index = tmp_path / "train.idx"
    index.write_bytes((1).to_bytes(8, "little") + bytes([4]) + (5).to_bytes(8, "little"))  # 5 sentences, no sizes
    with open(index, "rb") as stream:
        with pytest.raises(fairseq.UserError, match="damaged or truncated: its 17 bytes"):
            dataset_files.read_index_header(stream, str(index), {4: np.int32})
    (tmp_path / "dict.de.txt").write_text("")
    with pytest.raises(fairseq.UserError, match=r"no dict.txt \(it holds translation data: dict.de.txt\)"):
        dataset_files.check_lm_data(str(tmp_path))
    assert "it holds language-model data" not in str(dataset_files.language_pair_error(str(tmp_path)))


def test_generation_inputs(tmp_path):
    from fairseq_define_patch.runtime import generation_inputs

    with pytest.raises(fairseq.UserError, match="--beam 0 must be at least 1"):
        generation_inputs.check_beam_size(0)
    text = tmp_path / "in.txt"
    text.write_text("a \nb\nc\n")
    batches = generation_inputs.read_input_batches(str(text), 2)
    assert next(batches) == ["a", "b"]
    with pytest.raises(StopIteration) as rest:
        next(batches)
    assert rest.value.value == ["c"]  # the partial batch: buffered_read yields it
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin1"))
    for path, why in ((tmp_path, "is a folder"), (tmp_path / "latin1.txt", "is not UTF-8 text")):
        with pytest.raises(fairseq.UserError, match=why):
            next(generation_inputs.read_input_batches(str(path), 2))


def test_bf16_flags_are_settled():
    from fairseq_define_patch.runtime import bf16_devices

    args = Namespace(bf16=True, tpu=False, fp16=False, amp=False, cpu=True)
    bf16_devices.settle_bf16(args)
    assert not args.tpu
    for flag, why in (("fp16", "--bf16 and --fp16"), ("amp", "--bf16 and --amp")):
        with pytest.raises(fairseq.UserError, match=why):
            bf16_devices.settle_bf16(Namespace(**dict(vars(args), **{flag: True})))


def test_the_fast_path_copies_are_dropped_from_a_state_dict():
    from fairseq_define_patch.runtime import encoder_fastpath

    state = {f"l.{n}": torch.zeros(1) for n in encoder_fastpath.FASTPATH_COPIES} | {"l.fc1.weight": torch.zeros(1)}
    encoder_fastpath.drop_fastpath_copies(state, "l.")
    assert list(state) == ["l.fc1.weight"]


# -- model budget, checkpoint form, integrity (issue 41) -------------------------------------

BASE = dict(arch="transformer", encoder_embed_dim=512, decoder_embed_dim=512, encoder_ffn_embed_dim=2048,
            decoder_ffn_embed_dim=2048, encoder_layers=6, decoder_layers=6, max_source_positions=1024,
            max_target_positions=1024)
VOCAB = Namespace(source_dictionary=list(range(10000)), target_dictionary=list(range(10000)))


@pytest.mark.parametrize("setting,value,expected", [
    ("decoder_ffn_embed_dim", 10**9, "decoder_ffn_embed_dim=1,000,000,000 is larger than fairseq builds"),
    ("max_source_positions", 10**9, "max_source_positions=1,000,000,000 is larger"),
    ("encoder_layers", 100000, "encoder_layers=100,000 is larger"),
    ("adaptive_input_factor", 0.001, "adaptive_input_factor=0.001 must be at least 1"),
    ("div_val", 0.5, "div_val=0.5 must be at least 1"),
    ("encoder_embed_dim", 65536, "largest part is encoder_layers=6 x encoder_embed_dim=65,536"),
    ("decoder_ffn_embed_dim", 1 << 20, "more than the limit of 1,073,741,824"),
])
def test_the_model_budget_names_the_setting(setting, value, expected):
    cfg = Namespace(**{**BASE, setting: value})
    with pytest.raises(model_budget.ModelBudgetError, match=expected):
        model_budget.check_model_budget(cfg, VOCAB)


def test_the_budget_passes_real_models_and_its_limit_can_be_raised(monkeypatch):
    cfg = Namespace(**BASE)
    assert model_budget.check_model_budget(cfg, VOCAB) is cfg
    total, _ = model_budget.estimate_parameters(vars(cfg), 10000)
    assert 60e6 < total < 200e6  # the model holds ~60M: an upper estimate, not a wild one
    big = Namespace(**{**BASE, "encoder_embed_dim": 65536})
    monkeypatch.setenv(model_budget.LIMIT_VARIABLE, "1e12")
    model_budget.check_model_budget(big, VOCAB)
    monkeypatch.setenv(model_budget.LIMIT_VARIABLE, "lots")
    with pytest.raises(model_budget.ModelBudgetError, match="FAIRSEQ_DEFINE_MAX_PARAMETERS='lots'"):
        model_budget.check_model_budget(cfg, VOCAB)


@pytest.mark.parametrize("cutoff,factor,expected", [
    ("5000,1000", 4.0, "must be increasing positive word counts"),
    ("100,1000,5000", 40.0, "leaves the last band 512 // 40.0\\*\\*3 = 0 wide"),
])
def test_adaptive_bands_are_at_least_one_wide(cutoff, factor, expected):
    cfg = Namespace(**BASE, adaptive_softmax_cutoff=cutoff, adaptive_softmax_factor=factor)
    with pytest.raises(model_budget.ModelBudgetError, match=expected):
        model_budget.check_model_budget(cfg, VOCAB)


def test_only_settings_that_change_the_function_are_compared():
    saved = {"_name": "m", "dropout": 0.1, "attention_dropout": 0.0, "define_output_layer": "untied", "layers": 2}
    here = {"_name": "m", "dropout": 0.3, "attention_dropout": 0.1, "define_output_layer": "tied_map", "layers": 2,
            "new_option": 1}
    assert checkpoint_fit.function_settings_that_differ(saved, here) == [("define_output_layer", "untied", "tied_map")]
    state = {"model": {}, "cfg": {"model": saved}}
    with pytest.raises(
        checkpoint_fit.CheckpointFormError, match="--define-output-layer untied in the checkpoint, tied_map here"
    ):
        checkpoint_fit.check_checkpoint_form("c.pt", state, here)
    checkpoint_fit.check_checkpoint_form("c.pt", state, {**saved, "dropout": 0.5})  # dropout is no other model
    with pytest.raises(
        checkpoint_fit.CheckpointFormError,
        match=r"--model-overrides define_output_layer='tied_map' \(trained with 'untied'\)",
    ):
        checkpoint_fit.check_overrides_fit(state, {"define_output_layer": "tied_map", "dropout": 0.0}, "c.pt")
    checkpoint_fit.check_overrides_fit(state, {"dropout": 0.0, "beam": 5, "define_output_layer": "untied"}, "c.pt")


def test_tied_keys_must_hold_equal_values():
    model = torch.nn.Module()
    model.a, model.b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
    model.b.weight = model.a.weight  # tied
    state = {k: v.clone() for k, v in model.state_dict().items()}
    assert checkpoint_weights.check_tied_values(model, state) is state
    state["b.weight"] = state["b.weight"] + 1  # trained apart: another form
    with pytest.raises(checkpoint_fit.CheckpointFormError, match="different values for a.weight and b.weight"):
        checkpoint_weights.check_tied_values(model, state)


def test_a_misfit_of_rows_names_the_dictionary_not_the_dropout():
    error = RuntimeError(
        "Error(s) in loading state_dict for M:\n\tsize mismatch for decoder.embed_tokens.weight: copying a param "
        "with shape torch.Size([60, 16]) from checkpoint, the shape in current model is torch.Size([70, 16])."
    )
    state = {"args": Namespace(arch="no_such_arch", dropout=0.1)}
    line = str(checkpoint_misfit.checkpoint_misfit("c.pt", state, Namespace(arch="no_such_arch", dropout=0.3), error))
    assert "60 rows in the checkpoint but 70 here" in line and "dictionary" in line and "dropout" not in line


def test_a_flipped_byte_fails_the_crc(tmp_path):
    path = tmp_path / "c.pt"
    torch.save({"model": {"w": torch.arange(1000.0)}}, path)
    data = bytearray(path.read_bytes())
    at = data.find(torch.arange(1000.0).numpy().tobytes()[400:416])
    data[at + 3] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(checkpoint_loading.CheckpointLoadError, match="the file is damaged .* fails its CRC-32"):
        checkpoint_loading.safe_torch_load(str(path))


def _tar_header(name, kind, size):
    import tarfile

    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(format=tarfile.GNU_FORMAT)


@pytest.mark.parametrize("kind,what", [(b"L", "long-name"), (b"x", "pax")])
def test_archive_metadata_is_bounded_before_tarfile_reads_it(tmp_path, kind, what):
    import gzip

    path = tmp_path / "m.tar.gz"  # claims 200 MB of name: refused from its header
    path.write_bytes(gzip.compress(_tar_header("././@LongLink", kind, 200 << 20) + b"a" * 4096))
    with pytest.raises(fairseq.UserError, match=f"a 209,715,200-byte {what} record"):
        hub_archives._scan_headers(str(path), "gz", 1 << 30)


def test_archive_metadata_counts_in_the_size_bound(tmp_path):
    import gzip

    path = tmp_path / "m.tar.gz"
    path.write_bytes(gzip.compress(_tar_header("model/x", b"0", 10_000) + bytes(10_240) + bytes(1024)))
    hub_archives._scan_headers(str(path), "gz", 20_000)
    with pytest.raises(fairseq.UserError, match="unpack to more than 5,000"):
        hub_archives._scan_headers(str(path), "gz", 5_000)


@pytest.mark.parametrize("model_group", ["dictconfig", "namespace"])
def test_a_task_setting_overridden_where_the_command_line_builds_the_task_is_refused(monkeypatch, model_group):
    """fairseq-generate, -interactive and -eval-lm take their task from their command line: an
    override of a setting only the task holds changes nothing there; the model's own settings
    pass, whether the stored model group is a DictConfig or a Namespace (an architecture
    without a dataclass)."""
    from omegaconf import OmegaConf

    from fairseq_define_patch.runtime import model_overrides

    model = {"_name": "transformer", "encoder_layers_to_keep": None, "max_source_positions": 1024}
    cfg = OmegaConf.create({"task": {"_name": "translation", "max_source_positions": 1024, "data": "bin"},
                            "model": Namespace(**model) if model_group == "namespace" else model},
                           flags={"allow_objects": True})
    monkeypatch.setattr("sys.argv", ["fairseq-generate"])
    model_overrides.check_model_overrides({"encoder_layers_to_keep": "0", "max_source_positions": 512}, cfg)
    with pytest.raises(fairseq.UserError, match="'data': is the task's, which fairseq-generate builds from its own "
                                                "command line, so the override would change nothing; give x \\(the "
                                                "data directory, first positional argument\\) instead"):
        model_overrides.check_model_overrides({"data": "x"}, cfg)
    monkeypatch.setattr("sys.argv", ["fairseq-validate"])  # its task is the stored one, overrides applied
    model_overrides.check_model_overrides({"data": "x"}, cfg)
