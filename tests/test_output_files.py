"""Output files: written through a fresh temporary file, never through a planted link, never
over a file the user did not ask to replace; a failed write leaves nothing behind (the tools'
helper fairseq_define/output_files.py and the patched fairseq checkpoint writes)."""

import errno
import os
import tempfile

import pytest
import torch

from fairseq_define.errors import UserError
from fairseq_define.output_files import OutputExistsError, atomic_write, save_checkpoint, write_text

from .helpers import assert_user_error, run_cli, run_in_process, snapshot


@pytest.fixture
def victim(tmp_path):
    """A file elsewhere that a planted link points at: it must never change."""
    d = tmp_path / "elsewhere"
    d.mkdir()
    v = d / "victim"
    v.write_bytes(b"precious")
    return v


@pytest.fixture
def predictable_names(monkeypatch):
    """tempfile's random names, made predictable: an attacker's best guess is always right."""
    names = iter(["guess1", "guess2", "guess3", "guess4"])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: names)
    return ["guess1", "guess2"]


def fixed_and_likely_names(out, guesses=()):
    return [out.parent / f"{out.name}.tmp", out.parent / f".{out.name}.tmp"] + [
        out.parent / f".{out.name}.{g}.tmp" for g in guesses
    ]


def plant_links(paths, target):
    for p in paths:
        os.symlink(target, p)


@pytest.mark.parametrize("overwrite", [False, True])
def test_planted_links_are_never_written_through(tmp_path, victim, predictable_names, overwrite):
    out = tmp_path / "out.pt"
    if overwrite:
        out.write_bytes(b"old")
    links = fixed_and_likely_names(out, predictable_names[:1])  # the first random name too
    plant_links(links, victim)
    save_checkpoint({"w": torch.ones(3)}, out, overwrite=overwrite)
    assert victim.read_bytes() == b"precious"
    assert not out.is_symlink() and torch.load(out)["w"].sum() == 3
    assert all(p.is_symlink() for p in links)  # left alone, not followed, not removed
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["elsewhere", "out.pt"] + [p.name for p in links])


def test_a_link_at_the_destination_is_an_existing_output(tmp_path, victim):
    out = tmp_path / "out.pt"
    os.symlink(victim, out)
    with pytest.raises(OutputExistsError, match="exists; choose a new file name, or pass --overwrite"):
        save_checkpoint({"w": torch.ones(3)}, out)
    save_checkpoint({"w": torch.ones(3)}, out, overwrite=True)  # replaces the link itself
    assert victim.read_bytes() == b"precious" and not out.is_symlink()


@pytest.mark.parametrize("exc,message", [
    (OSError(errno.ENOSPC, "No space left on device"), "no space left on the device while writing"),
    (OSError(errno.EIO, "Input/output error"), "cannot write"),
    (KeyboardInterrupt(), None),
])
@pytest.mark.parametrize("existing", [False, True])
def test_a_failed_write_leaves_no_temporary_file_and_the_old_file(tmp_path, exc, message, existing):
    out = tmp_path / "out.txt"
    if existing:
        out.write_text("old")

    def half_then_fail(f):
        f.write("half of the new content")
        raise exc

    with pytest.raises(UserError if message else type(exc), match=message):
        atomic_write(out, half_then_fail, binary=False, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == (["out.txt"] if existing else [])
    if existing:
        assert out.read_text() == "old"


def test_an_output_that_appears_meanwhile_is_not_replaced(tmp_path):
    out = tmp_path / "out.txt"

    def someone_else_writes(f):
        f.write("mine")
        out.write_text("theirs")

    with pytest.raises(OutputExistsError, match="appeared while it was written"):
        atomic_write(out, someone_else_writes, binary=False)
    assert out.read_text() == "theirs" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_written_files_get_the_usual_mode(tmp_path):
    write_text(tmp_path / "a.txt", "x")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize("case,message", [
    ("missing_folder", "does not exist; create it first"),
    ("folder", "is a folder; give a file name"),
])
def test_output_paths_refused_before_the_work(tmp_path, case, message):
    out = tmp_path / "missing" / "out.txt" if case == "missing_folder" else tmp_path
    with pytest.raises(UserError, match=message):
        write_text(out, "x")


# --- fairseq's own checkpoint writes, through the patch -----------------------------------


def test_fairseq_checkpoint_writes_never_follow_planted_links(tmp_path, victim, predictable_names):
    from fairseq import checkpoint_utils

    src, out = tmp_path / "checkpoint5.pt", tmp_path / "checkpoint_last.pt"
    links = fixed_and_likely_names(src, predictable_names[:1])
    plant_links(links, victim)
    checkpoint_utils.torch_persistent_save({"w": torch.ones(2)}, str(src))
    links2 = fixed_and_likely_names(out, predictable_names[2:3])
    plant_links(links2, victim)
    checkpoint_utils._copy_atomically(str(src), str(out))
    assert victim.read_bytes() == b"precious"
    assert torch.load(out)["w"].sum() == 2 and not out.is_symlink()


@pytest.mark.parametrize("exc", [OSError(errno.ENOSPC, "No space left on device"), RuntimeError("boom")])
def test_fairseq_failed_save_removes_its_temporary_file(tmp_path, monkeypatch, exc):
    from fairseq import UserError as FairseqUserError
    from fairseq import checkpoint_utils

    out = tmp_path / "checkpoint_best.pt"
    out.write_bytes(b"the previous best")
    calls = []

    def failing_save(obj, f, *args, **kwargs):
        calls.append(1)
        f.write(b"half")
        raise exc

    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(FairseqUserError if isinstance(exc, OSError) else RuntimeError) as info:
        checkpoint_utils.torch_persistent_save({"w": torch.ones(2)}, str(out))
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint_best.pt"]
    assert out.read_bytes() == b"the previous best"
    if isinstance(exc, OSError):
        assert len(calls) == 1  # a full disk is not retried
        assert "no space left on the device" in str(info.value) and "unchanged" in str(info.value)
    else:
        assert len(calls) == 3  # fairseq's retries, each on an empty file


# --- fairseq-define-average-checkpoints refuses an existing output -------------------------


def test_average_refuses_an_existing_output_unless_asked(trained, tmp_path):
    best = tmp_path / "checkpoint_best.pt"
    best.write_bytes(b"not one of the inputs")
    before = snapshot(tmp_path, trained)
    proc = run_cli("fairseq-define-average-checkpoints", "--inputs", trained / "checkpoint_last.pt",
                   trained / "checkpoint_best.pt", "--output", best, check=False)
    assert_user_error(proc, "fairseq-define-average-checkpoints", f"{best} exists", "pass --overwrite to replace it")
    assert snapshot(tmp_path, trained) == before
    run_in_process("fairseq-define-average-checkpoints", "--inputs", trained / "checkpoint_last.pt",
                   trained / "checkpoint_best.pt", "--output", best, "--overwrite")
    assert torch.load(best, weights_only=False)["model"]
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint_best.pt"]  # no temporary file left


def test_average_never_writes_through_a_planted_link(trained, tmp_path, victim):
    out = tmp_path / "avg.pt"
    plant_links(fixed_and_likely_names(out), victim)
    run_in_process("fairseq-define-average-checkpoints", "--inputs", trained / "checkpoint_last.pt", "--output", out)
    assert victim.read_bytes() == b"precious" and out.is_file() and not out.is_symlink()
