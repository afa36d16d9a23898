"""The patch's runtime modules (fairseq_define_patch/runtime/), imported directly: the code
that --apply copies into fairseq as fairseq/_define_runtime/, tested where it is written.
The end-to-end tests through the patched command-line tools are in the fixes' own test files
(test_hostile_files.py, test_bad_input.py, test_mistakes.py, ...)."""

import argparse
import io
import pickle
from argparse import Namespace

import numpy as np
import pytest
import torch

import fairseq
from fairseq_define_patch.runtime import checkpoint_loading, checkpoint_misfit, config_literals


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
