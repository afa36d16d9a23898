"""Crafted checkpoints against the safe loader and fairseq-define-trust-checkpoint: no module
a file names is imported, no crash, no memory a file's size does not pay for, no traceback.
Each file is built byte by byte as an attacker would (docs/checkpoints.md)."""

import io
import os
import pickle
import re
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.checkpoint_utils import CheckpointLoadError, safe_torch_load

from fairseq_define.tools import trust_checkpoint

from .helpers import BIN, ROOT


def zip_checkpoint(path, data_pkl, deflate=False, payload=None):
    """A torch.save zip whose data.pkl is ``data_pkl`` (the other records of a real file)."""
    buf = io.BytesIO()
    torch.save({"x": torch.zeros(2) if payload is None else payload}, buf)
    with (
        zipfile.ZipFile(buf) as src,
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as dst,
    ):
        for name in src.namelist():
            dst.writestr(name, data_pkl if data_pkl is not None and name.endswith("data.pkl") else src.read(name))
    return path


def pickle_of(body):
    """``{"x": <body>}`` as protocol-2 pickle bytes; body is the opcodes that push one object."""
    return b"\x80\x02}X\x01\x00\x00\x00x" + body + b"s."


def global_(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def int_(n):
    return b"J" + struct.pack("<i", n)


def nested_lists(depth):
    return b"]" * depth + b"a" * (depth - 1)


def shared_reference_bomb(levels=12, fanout=40):
    """Each list holds ``fanout`` references to the one before: a tree of fanout**levels nodes
    in a few kilobytes (what a walk without memo, or a copy, would expand); all levels end up
    in one tuple (torch's unpickler has no POP)."""
    out = b"(]q\x00"
    for i in range(1, levels + 1):
        out += b"](" + (b"h" + bytes([i - 1])) * fanout + b"eq" + bytes([i])
    return out + b"t"


NUMPY_F8 = pickle.dumps(np.array([1.0]), protocol=2)[2:-1]  # opcodes that push the array


def test_numpy_opcodes_are_what_the_crafted_files_edit():
    assert b"X\x02\x00\x00\x00f8" in NUMPY_F8 and b"K\x00tq" in NUMPY_F8


# (name, data.pkl) of checkpoints that the safe loader and the trust tool both refuse
BOMBS = {
    "bytearray": pickle_of(global_("__builtin__", "bytearray") + int_(400_000_000) + b"\x85R"),
    "tensor_class": pickle_of(global_("torch", "FloatTensor") + int_(100_000_000) + b"\x85R"),
    "storage": pickle_of(global_("torch.storage", "UntypedStorage") + int_(400_000_000) + b"\x85R"),
    "nested": pickle_of(nested_lists(100_000)),
    "shared_references": pickle_of(shared_reference_bomb()),
}
BOMB_MESSAGES = {"nested": "nested deeper than 100 levels", "shared_references": "references"}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_the_safe_loader_bounds_what_a_file_builds(tmp_path, name):
    path = zip_checkpoint(tmp_path / f"{name}.pt", BOMBS[name])
    with pytest.raises(CheckpointLoadError, match=BOMB_MESSAGES.get(name, "asks for more memory than a checkpoint")):
        safe_torch_load(str(path))


def test_a_stride_zero_view_is_charged_its_full_size(tmp_path):
    """torch.save itself writes such a file: one element stored, 10**11 described."""
    path = tmp_path / "expanded.pt"
    torch.save({"x": torch.zeros(1).expand(10**6, 10**5)}, path)
    with pytest.raises(CheckpointLoadError, match="a tensor of shape \\(1000000, 100000\\)"):
        safe_torch_load(str(path))


def test_a_compressed_zip_entry_is_refused(tmp_path):
    path = zip_checkpoint(tmp_path / "deflated.pt", None, deflate=True, payload=torch.zeros(200_000))
    assert os.path.getsize(path) < 100_000
    with pytest.raises(CheckpointLoadError, match="zip entries unpack to"):
        safe_torch_load(str(path))


def test_every_allowed_constructor_is_bounded_or_proportional():
    """A torch that adds a constructor to its weights-only allow-list fails here until it is
    classified (bounded_constructors or CHECKPOINT_PROPORTIONAL_GLOBALS)."""
    from torch._weights_only_unpickler import _get_allowed_globals

    allowed = _get_allowed_globals()
    bounded = checkpoint_utils.bounded_constructors(allowed, checkpoint_utils.CheckpointBudget("x", 0))
    unclassified = [k for k, v in allowed.items() if callable(v) and not isinstance(v, torch.dtype)
                    and k not in bounded and k not in checkpoint_utils.CHECKPOINT_PROPORTIONAL_GLOBALS]
    assert unclassified == []
    assert {"builtins.bytearray", "torch.FloatTensor", "torch._utils._rebuild_qtensor"} <= set(bounded)


def test_genuine_checkpoints_still_load(tmp_path):
    import argparse
    import collections

    state = {"model": collections.OrderedDict(w=torch.randn(64, 32), b=torch.nn.Parameter(torch.zeros(32))),
             "args": argparse.Namespace(lr=[0.1]), "shared": [torch.ones(3)] * 3, "blob": bytearray(b"abc"),
             "sparse": torch.eye(3).to_sparse(), "view": torch.arange(10.0)[2:5]}
    for legacy in (False, True):
        torch.save(state, tmp_path / "ok.pt", _use_new_zipfile_serialization=not legacy)
        loaded = safe_torch_load(str(tmp_path / "ok.pt"))
        assert torch.equal(loaded["model"]["w"], state["model"]["w"]) and loaded["blob"] == bytearray(b"abc")
        assert torch.equal(loaded["sparse"].to_dense(), torch.eye(3)) and loaded["view"].tolist() == [2.0, 3.0, 4.0]


@pytest.fixture
def planted_fairseq_module(tmp_path, monkeypatch):
    """A module ``fairseq.planted_by_a_file`` whose import leaves a marker file."""
    import fairseq

    folder = tmp_path / "planted"
    folder.mkdir()
    marker = tmp_path / "imported"
    (folder / "planted_by_a_file.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass Thing:\n    pass\n")
    monkeypatch.setattr(fairseq, "__path__", list(fairseq.__path__) + [str(folder)])
    yield marker
    sys.modules.pop("fairseq.planted_by_a_file", None)


def test_no_module_a_file_names_is_imported(tmp_path, planted_fairseq_module):
    marker = planted_fairseq_module
    assert checkpoint_utils.resolve_checkpoint_global("fairseq.planted_by_a_file.Thing") == ("code", None)
    path = zip_checkpoint(tmp_path / "names.pt", pickle_of(global_("fairseq.planted_by_a_file", "Thing") + b")\x81"))
    with pytest.raises(CheckpointLoadError, match="holds code"):
        safe_torch_load(str(path))
    assert trust_checkpoint.main([str(path), str(tmp_path / "new.pt")]) == 2
    assert not marker.exists() and "fairseq.planted_by_a_file" not in sys.modules


def test_enums_resolve_only_from_imported_modules():
    from fairseq.data.text_compressor import TextCompressionLevel

    assert checkpoint_utils.resolve_checkpoint_global("fairseq.data.text_compressor.TextCompressionLevel") == (
        "data", TextCompressionLevel)
    for name in ("fairseq.data.text_compressor.TextCompressor",  # a class, not an enum
                 "fairseq.examples.textless_nlp.gslm.unit2speech.multiproc.os",
                 "omegaconf.not_a_module.Enum"):
        assert checkpoint_utils.resolve_checkpoint_global(name) == ("code", None)
    assert "fairseq.examples.textless_nlp.gslm.unit2speech.multiproc" not in sys.modules


def convert(tmp_path, data_pkl, capsys):
    src = zip_checkpoint(tmp_path / "src.pt", data_pkl)
    rc = trust_checkpoint.main([str(src), str(tmp_path / "new.pt")])
    return rc, capsys.readouterr().err


# (name, data.pkl, what the one-line refusal says) for the trust tool
TRUST_REFUSALS = [
    ("object_array", pickle_of(pickle.dumps(np.array([1, "a"], dtype=object), protocol=2)[2:-1]), "numpy dtype 'O8'"),
    ("structured", pickle_of(pickle.dumps(np.zeros(2, dtype=[("a", "i4")]), protocol=2)[2:-1]), "numpy dtype 'V4'"),
    (
        "short_data",
        pickle_of(NUMPY_F8.replace(b"X\t\x00\x00\x00\x00\x00\x00\x00\x00\x00\xc3\xb0?", b"X\x02\x00\x00\x00\xc3\xb0")),
        "does not match its shape",
    ),
    ("bare_class", pickle_of(global_("numpy", "ndarray")), "a bare ndarray"),
] + [(name, data, BOMB_MESSAGES.get(name, "asks for more memory")) for name, data in sorted(BOMBS.items())]


@pytest.mark.parametrize("name,data,expected", TRUST_REFUSALS, ids=[r[0] for r in TRUST_REFUSALS])
def test_the_trust_tool_refuses_with_one_line(tmp_path, capsys, name, data, expected):
    rc, err = convert(tmp_path, data, capsys)
    assert rc == 2 and err.count("\n") == 1 and expected in err, err
    assert not (tmp_path / "new.pt").exists()


def test_the_trust_tool_converts_text_arrays(tmp_path, capsys):
    arrays = pickle.dumps(np.array([["ab", "c"]]), protocol=2)[2:-1]
    rc, err = convert(tmp_path, pickle_of(arrays), capsys)
    assert rc == 0, err
    assert safe_torch_load(str(tmp_path / "new.pt"))["x"] == [["ab", "c"]]


@pytest.mark.cli  # starts a command
def test_the_trust_tool_on_crafted_files_from_the_command_line(tmp_path):
    """An object dtype whose flags say plain bytes (numpy read a pointer the file chose: a
    segfault), and a module with import-time effects (it created a folder named after argv)."""
    crafted = {
        "pointer": pickle_of(NUMPY_F8.replace(b"X\x02\x00\x00\x00f8", b"X\x02\x00\x00\x00O8")),
        "import": pickle_of(global_("fairseq.examples.textless_nlp.gslm.unit2speech.multiproc", "os")),
    }
    for name, data in crafted.items():
        src = zip_checkpoint(tmp_path / f"{name}.pt", data)
        proc = subprocess.run([str(BIN / "fairseq-define-trust-checkpoint"), str(src), "NEW.pt"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (name, proc.returncode, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr and "GPU log directory" not in proc.stdout
        assert proc.stderr.count("fairseq-define-trust-checkpoint: error:") == 1, proc.stderr[-2000:]
        assert not (tmp_path / "NEW.pt").exists()


# -- config strings (parse_config_literal): bounded in size, depth and length --------------

CONFIG_BOMBS = [
    ("joined_repeats", "+".join(["[0] * 1000000"] * 20), "builds more than 1000000 items"),
    ("long_sum", "+".join(["1"] * 3000), "nested deeper than 100 levels"),
    ("unary_chain", "-" * 50_000 + "1", "nested deeper than 100 levels"),
    ("nested_lists", "[" * 150 + "]" * 150, "refusing to evaluate"),
    ("long_string", "1" + " " * 200_000, "characters long, more than 100000"),
    ("repeated_string", "'ab' * 400000 + 'c' * 400000", "builds more than 1000000 items"),
]


@pytest.mark.parametrize("value,expected", [c[1:] for c in CONFIG_BOMBS], ids=[c[0] for c in CONFIG_BOMBS])
def test_config_strings_are_bounded(value, expected):
    from fairseq.utils import ConfigLiteralError, parse_config_literal

    with pytest.raises(ConfigLiteralError, match=expected):
        parse_config_literal(value)


def test_config_strings_within_the_bounds_still_parse():
    from fairseq.utils import parse_config_literal

    assert parse_config_literal("[0] * 1000000") == [0] * 1000000
    assert parse_config_literal("+".join(["[(512, 3)]"] * 40)) == [(512, 3)] * 40
    assert parse_config_literal("-" * 40 + "1") == 1


# -- hub archives (fairseq.file_utils.load_archive_file, used by from_pretrained) ----------

def make_archive(path, members, compression="gz"):
    """A .tar.gz (or another ``compression`` of tarfile's) with ``members``: (name, kind,
    content or link target)."""
    import tarfile

    with tarfile.open(path, "w:" + compression) as tar:
        for name, kind, value in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = value if isinstance(value, bytes) else value.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.type = {"symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE}[kind]
                info.linkname = value
                tar.addfile(info)
    return path


def hostile_archives(outside):
    """name -> members; each tries to write ``outside`` (a path beyond the extraction folder)."""
    escape = os.path.relpath(outside, "/tmp/x/y")  # from a folder made under /tmp by mkdtemp
    return {
        "dotdot": [("model", "dir", ""), ("model/" + "../" * 12 + escape.lstrip("./"), "file", "import os")],
        "absolute": [("model", "dir", ""), (str(outside), "file", "import os")],
        "symlink": [("model", "dir", ""), ("model/link", "symlink", str(outside.parent))],
        "hardlink": [("model", "dir", ""), ("model/link", "hardlink", "/etc/passwd")],
        "fifo": [("model", "dir", ""), ("model/pipe", "fifo", "")],
    }


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink", "hardlink", "fifo"])
def test_hub_archives_with_members_outside_are_refused(tmp_path, kind):
    from fairseq import UserError, file_utils

    outside = tmp_path / "site" / "evil.pth"
    outside.parent.mkdir()
    archive = make_archive(tmp_path / "model.tar.gz", hostile_archives(outside)[kind])
    with pytest.raises(UserError, match="refusing to extract .*model.tar.gz: its member"):
        file_utils.load_archive_file(str(archive))
    assert not outside.exists() and archive.is_file()


def test_hub_archives_of_files_are_extracted_and_kept(tmp_path):
    from fairseq import file_utils

    archive = make_archive(tmp_path / "model.tar.gz", [("model", "dir", ""), ("model/dict.txt", "file", "a 1\n")])
    folder = file_utils.load_archive_file(str(archive))
    assert (Path(folder) / "dict.txt").read_text() == "a 1\n" and archive.is_file()
    (tmp_path / "bad.tar.gz").write_bytes(b"not gzip")
    from fairseq import UserError

    with pytest.raises(UserError, match="cannot extract .*bad.tar.gz"):
        file_utils.load_archive_file(str(tmp_path / "bad.tar.gz"))


def test_hub_archive_bombs_are_refused_before_extracting(tmp_path, monkeypatch):
    """An archive that unpacks to more than 50 times its size (at least 1 MB allowed), or holds
    more members than a model does, is refused before anything is written; the temporary
    folder goes with the refusal."""
    from fairseq import UserError, file_utils

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    bomb = make_archive(tmp_path / "bomb.tar.gz", [("model", "dir", ""), ("model/zeros", "file", bytes(60 << 20))])
    assert bomb.stat().st_size < 1 << 20
    # refused while its headers are read, before tarfile or the extraction (_scan_headers)
    with pytest.raises(
        UserError, match=r"refusing to extract .*bomb.tar.gz: its \d[\d,]* bytes unpack to more than 52,428,800"
    ):
        file_utils.load_archive_file(str(bomb))
    from fairseq._define_runtime import hub_archives  # where load_archive_file's checks live

    monkeypatch.setattr(hub_archives, "_ARCHIVE_MAX_MEMBERS", 3)
    many = make_archive(
        tmp_path / "many.tar.gz", [("model", "dir", "")] + [(f"model/{i}", "file", "") for i in range(4)]
    )
    with pytest.raises(UserError, match="refusing to extract .*many.tar.gz: it holds more than 3 members"):
        file_utils.load_archive_file(str(many))
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.cli  # starts a Python process
def test_hub_archive_copy_goes_with_the_process(tmp_path):
    """The user's archive is kept, and its extracted copy is removed when the process ends."""
    import subprocess
    import sys

    archive = make_archive(tmp_path / "model.tar.gz", [("model", "dir", ""), ("model/dict.txt", "file", "a 1\n")])
    code = "import sys; from fairseq import file_utils; print(file_utils.load_archive_file(sys.argv[1]))"
    out = subprocess.run([sys.executable, "-c", code, str(archive)], capture_output=True, text=True, check=True)
    folder = Path(out.stdout.strip().splitlines()[-1])
    assert folder.name == "model" and not folder.parent.exists() and archive.is_file()


def test_hub_with_a_missing_folder(tmp_path):
    from fairseq import UserError, hub_utils

    with pytest.raises(UserError, match="missing_dir does not exist: from_pretrained takes a folder"):
        hub_utils.from_pretrained(str(tmp_path / "missing_dir"))


# -- corpora.py downloads: checked archives, unique temporary files -------------------------

def corpus_file(tmp_path, archive_name, archive_bytes, member, text=b"the text\n"):
    """A DataFile whose archive is already in the download cache (no network)."""
    import corpora

    cache = tmp_path / "root" / "downloads"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / archive_name).write_bytes(archive_bytes)
    import hashlib

    checksum = "sha256:" + hashlib.sha256(text).hexdigest()
    return corpora.DataFile("toy", "toy/t.txt", checksum, (f"https://example.invalid/{archive_name}",), member)


def gz(data):
    import gzip

    return gzip.compress(data)


def test_corpora_fetch_writes_through_a_fresh_file(tmp_path):
    import corpora

    f = corpus_file(tmp_path, "t.txt.gz", gz(b"the text\n"), "gunzip")
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    (tmp_path / "root" / "toy").mkdir()
    (tmp_path / "root" / "toy" / "t.txt.tmp").symlink_to(victim)  # the old fixed name, planted
    corpora.fetch([f], tmp_path / "root")
    assert (tmp_path / "root" / "toy" / "t.txt").read_bytes() == b"the text\n" and victim.read_text() == "mine\n"
    assert sorted(p.name for p in (tmp_path / "root" / "toy").iterdir()) == ["t.txt", "t.txt.tmp"]


def zip_bytes(name, data):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, data)
    return buf.getvalue()


DAMAGED_ARCHIVES = [
    ("bomb_gz", "t.txt.gz", gz(b"\0" * 20_000_000), "gunzip", "unpacks to more than 50 times its size"),
    ("bomb_zip", "t.zip", zip_bytes("t.txt", b"\0" * 20_000_000), "t.txt", "unpacks to more than 50 times its size"),
    ("truncated_gz", "t.txt.gz", gz(b"the text\n" * 1000)[:40], "gunzip", "is damaged (EOFError"),
    ("garbage_zip", "t.zip", b"PK\x03\x04 not a zip at all", "t.txt", "is damaged (BadZipFile"),
    ("garbage_tgz", "t.tgz", b"\x1f\x8b garbage", "t.txt", "is damaged ("),
    ("garbage_gz", "t.txt.gz", b"not gzip", "gunzip", "is damaged (BadGzipFile"),
]


@pytest.mark.parametrize("name,archive,data,member,expected", DAMAGED_ARCHIVES, ids=[d[0] for d in DAMAGED_ARCHIVES])
def test_corpora_refuses_damaged_archives_with_one_line(tmp_path, name, archive, data, member, expected):
    import corpora

    f = corpus_file(tmp_path, archive, data, member)
    with pytest.raises(corpora.DataError, match=re.escape(expected)) as e:
        corpora.fetch([f], tmp_path / "root")
    assert "\n" not in str(e.value) and "it was removed" in str(e.value)
    assert not (tmp_path / "root" / "downloads" / archive).exists()
    assert list((tmp_path / "root" / "toy").iterdir()) == []  # nothing half-written


@pytest.mark.cli  # starts a command
def test_corpora_command_line_reports_a_damaged_archive(tmp_path):
    """corpora.py fetch on a data root whose cached archive is broken: one line, exit 2."""
    import corpora

    f = corpora.read_table()[0]
    cache = tmp_path / "downloads"
    cache.mkdir()
    (cache / Path(f.sources[0]).name).write_bytes(b"garbage")
    if f.sources[0].startswith(("sacrebleu:", "local")) or f.member == "-":
        pytest.skip("the first corpus is not an archive")
    proc = subprocess.run(
        [sys.executable, str(Path(corpora.__file__)), "fetch", f.dataset, "--data-root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().count("\n") == 0 and "is damaged" in proc.stderr, proc.stderr


# -- one rule for outputs: an existing file is replaced only with --overwrite ---------------

OUTPUT_COMMANDS = {
    "correlations": ["correlations", "--path", "missing.pt", "--output", "{out}.png"],
    "curves": ["curves", "--output", "{out}.png", "a=missing.log"],
    "table": ["table", "--table", "1a", "--workdir", "{dir}", "--output", "{out}.md"],
}


@pytest.mark.parametrize("command", sorted(OUTPUT_COMMANDS))
def test_results_outputs_are_not_overwritten_unless_asked(tmp_path, capsys, command):
    from fairseq_define.tools import results

    args = [a.format(out=tmp_path / "out", dir=tmp_path) for a in OUTPUT_COMMANDS[command]]
    existing = Path(args[args.index("--output") + 1])
    existing.write_text("mine\n")
    assert results.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists; choose a new file name, or pass --overwrite" in err, err
    assert existing.read_text() == "mine\n"
    if command == "table":  # asked: replaced
        assert results.main(args + ["--overwrite"]) == 0 and existing.read_text() != "mine\n"


def test_a_study_refuses_an_existing_report(tmp_path):
    import argparse

    from fairseq_define.errors import UserError
    from studies.common import resolve_dirs

    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "results.md").write_text("published\n")
    args = argparse.Namespace(quick=False, workdir=str(tmp_path / "w"), out=str(tmp_path / "report"), overwrite=False)
    with pytest.raises(UserError, match="results.md exists .*--overwrite"):
        resolve_dirs(args, "lm_ptb")
    args.overwrite = True
    assert resolve_dirs(args, "lm_ptb")[1] == tmp_path / "report"
    quick = argparse.Namespace(quick=True, workdir=str(tmp_path / "w"), out=None, overwrite=False)
    (tmp_path / "w" / "report").mkdir(parents=True)
    (tmp_path / "w" / "report" / "results.md").write_text("quick\n")
    assert resolve_dirs(quick, "lm_ptb")[1] == tmp_path / "w" / "report"  # its own work folder: resumed


@pytest.mark.cli  # starts a command
def test_results_cli_refuses_an_existing_figure(tmp_path):
    (tmp_path / "corr.png").write_bytes(b"mine")
    proc = subprocess.run([str(BIN / "fairseq-define-results"), "correlations", "--path", str(tmp_path / "x.pt"),
                           "--output", str(tmp_path / "corr.png")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "corr.png exists; choose a new file name, or pass --overwrite" in proc.stderr
    assert (tmp_path / "corr.png").read_bytes() == b"mine"


@pytest.mark.cli  # starts a command
def test_script_downloads_write_through_a_fresh_file(tmp_path):
    """run_scripts/lib.sh's fetch: a link planted at the old fixed name DEST.part is not followed."""
    import shutil

    if not shutil.which("curl"):
        pytest.skip("curl is not installed")

    (tmp_path / "src.txt").write_text("downloaded\n")
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.txt.part").symlink_to(victim)
    script = f'source {ROOT}/run_scripts/lib.sh; fetch "file://{tmp_path}/src.txt" "{tmp_path}/d/x.txt"'
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "d" / "x.txt").read_text() == "downloaded\n" and victim.read_text() == "mine\n"
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["x.txt", "x.txt.part"]  # no temporary left


# -- issue 41: a model budget, checkpoints loaded only into their own form, integrity, hub ----
# archives as stock fairseq read them (docs/checkpoints.md)

FAMILIES = Path(__file__).parent / "legacy_checkpoints" / "families"


def nmt_checkpoint(tmp_path, edit=None):
    """The legacy nmt_untied checkpoint (define_transformer_tiny, n=8, d=32), its config edited
    by ``edit(model_cfg)``, and the overrides that find its dictionaries in tmp_path."""
    import shutil

    for name in ("dict.en.txt", "dict.de.txt"):
        shutil.copyfile(FAMILIES / "nmt.dict.txt", tmp_path / name)
    state = safe_torch_load(str(FAMILIES / "nmt_untied.pt"))
    if edit is not None:
        edit(state["cfg"]["model"])
    path = tmp_path / "checkpoint.pt"
    torch.save(state, path)
    return str(path), {"data": str(tmp_path), "source_lang": "en", "target_lang": "de"}


STORED_BUDGET = [  # a stored config's sizes: refused before anything is allocated
    ("ffn", "decoder_ffn_embed_dim", 10**9, "decoder_ffn_embed_dim=1,000,000,000 is larger than fairseq builds"),
    ("positions", "max_source_positions", 10**9, "max_source_positions=1,000,000,000 is larger"),
    ("layers", "encoder_layers", 100000, "encoder_layers=100,000 is larger"),
    ("wide", "decoder_embed_dim", 65536,
     "more than the limit of 1,073,741,824; the largest part is decoder.layers \\(decoder_embed_dim=65,536"),
]


@pytest.mark.parametrize("setting,value,expected", [c[1:] for c in STORED_BUDGET], ids=[c[0] for c in STORED_BUDGET])
def test_a_stored_config_is_held_to_the_model_budget(tmp_path, setting, value, expected):
    import tracemalloc

    from fairseq import UserError

    path, overrides = nmt_checkpoint(tmp_path, lambda cfg: setattr(cfg, setting, value))
    with pytest.raises(UserError, match=expected):  # first: the modules a build imports are no model memory
        checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)
    tracemalloc.start()
    with pytest.raises(UserError, match=expected):
        checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 << 20  # refused before the model is built (counted without memory: model_budget.py)


COUNTED_BUDGET = [  # sizes each within its own bound whose product is too large: the count refuses them (issue 53)
    ("define unit", {"define_map_dim": 65536, "define_expand_dim": 65536},
     "the largest part is encoder.embed_tokens (encoder_embed_dim=32, define_map_dim=65,536, define_expand_dim=65,536"),
    ("define depth", {"define_expand_dim": 65536, "define_depth": 3}, "more than the limit of 1,073,741,824"),
]


@pytest.mark.parametrize("settings,expected", [c[1:] for c in COUNTED_BUDGET], ids=[c[0] for c in COUNTED_BUDGET])
def test_a_stored_config_is_counted_as_what_it_builds(tmp_path, settings, expected):
    """A checkpoint's stored config whose DeFINE unit its schedule makes too large is one
    line, before any weight is allocated (the model is counted on the meta device; heads x
    head width: tests/test_model_budget.py)."""
    from fairseq import UserError

    path, overrides = nmt_checkpoint(tmp_path, lambda cfg: [setattr(cfg, k, v) for k, v in settings.items()])
    with pytest.raises(UserError, match=re.escape(expected)):
        checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)


@pytest.mark.cli
@pytest.mark.parametrize("tool,args", [
    ("fairseq-define-export", ["{path}", "{out}"]),
    ("fairseq-define-cache-tables", ["--path", "{path}", "--output", "{out}"]),
    ("fairseq-define-compress", ["--path", "{path}", "--output", "{out}"]),
])
@pytest.mark.parametrize("flag", ["--max-model-parameters", "--max-model"])
def test_the_tools_take_the_flag_their_budget_line_names(tmp_path, tool, args, flag):
    """The budget's line names --max-model-parameters; the project's tools that build a model
    take it as fairseq's do (a limit below the tiny model's ~20K parameters: refused, nothing
    written), abbreviated too, as their parsers take every option (the limit was ignored)."""
    from .helpers import assert_user_error

    path, _ = nmt_checkpoint(tmp_path)
    (tmp_path / "train.en-de.en.idx").touch()  # the language pair, as fairseq-preprocess names its files
    out = tmp_path / "out.pt"
    proc = subprocess.run(
        [str(BIN / tool), *[a.format(path=path, out=out) for a in args], "--data", str(tmp_path),
         flag, "1000"],
        capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if k != "FAIRSEQ_DEFINE_MAX_PARAMETERS"})
    assert_user_error(proc, tool, "more than the limit of 1,000", "--max-model-parameters")
    assert not out.exists()


@pytest.mark.cli
@pytest.mark.parametrize("limit,expected", [
    ("1000", "more than the limit of 1,000; the largest part is"),  # the flag sets the limit, below or above
    ("lots", "--max-model-parameters 'lots' must be a positive number of parameters"),
    ("0", "--max-model-parameters '0' must be a positive number of parameters"),
])
def test_the_budget_limit_is_a_command_line_flag(tmp_path, limit, expected):
    """--max-model-parameters on a stock CLI (fairseq-interactive on the tiny NMT checkpoint,
    which holds ~20K parameters): one line, before the model is built."""
    from .helpers import USER_DIR, assert_user_error

    path, _ = nmt_checkpoint(tmp_path)
    proc = subprocess.run(
        [str(BIN / "fairseq-interactive"), str(tmp_path), "--user-dir", USER_DIR, "--path", path, "--source-lang",
         "en", "--target-lang", "de", "--cpu", "--max-model-parameters", limit],
        input="a house\n", capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if k != "FAIRSEQ_DEFINE_MAX_PARAMETERS"})
    assert_user_error(proc, "fairseq-interactive", expected)


def test_the_budget_flag_is_read_before_the_model_and_listed_in_help(monkeypatch):
    """parse_args_and_arch hands --max-model-parameters on as the limit (workers fairseq spawns
    inherit it) and --help lists it; without the flag the limit stays where it was."""
    from fairseq import options
    from fairseq._define_runtime import model_budget

    # set (empty: no limit given) through monkeypatch, so that what the parse writes into the
    # environment is undone after the test
    monkeypatch.setenv(model_budget.LIMIT_VARIABLE, "")
    parser = options.get_training_parser()
    options.parse_args_and_arch(parser, ["data", "--arch", "transformer", "--max-model-parameters", "5e9"])
    assert model_budget.parameter_limit() == 5 * 10**9
    monkeypatch.setenv(model_budget.LIMIT_VARIABLE, "")
    options.parse_args_and_arch(options.get_training_parser(), ["data", "--arch", "transformer"])
    assert model_budget.parameter_limit() == model_budget.MAX_PARAMETERS
    help_text = subprocess.run([str(BIN / "fairseq-generate"), "--help"], capture_output=True, text=True,
                               timeout=120).stdout
    assert "--max-model-parameters N" in help_text


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


def test_a_damaged_checkpoint_is_refused_by_its_crc(tmp_path):
    state = safe_torch_load(str(FAMILIES / "nmt_untied.pt"))
    path = tmp_path / "damaged.pt"
    torch.save(state, path)
    weights = state["model"]["decoder.output_projection.weight"]
    data = bytearray(path.read_bytes())
    at = data.find(weights.numpy().tobytes()[:64])
    assert at > 0
    data[at + 5] ^= 0x10  # one bit of one weight
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointLoadError, match="damaged.* fails its CRC-32 check"):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))


AVERAGING = [  # (name, how the second checkpoint differs, expected line)
    ("other_form", lambda s: s["cfg"]["model"].update(define_output_layer="tied_map"),
     "--define-output-layer untied in one, tied_map in the other"),
    ("compressed", lambda s: s["model"].update({"emb.codes": torch.zeros(4, 2, dtype=torch.uint8)}), "is compressed"),
    ("cached", lambda s: s["cfg"]["model"].update(define_cached_table=True), "holds cached DeFINE tables"),
    ("integers", lambda s: s["model"].update(steps=torch.tensor([7])), "integer tensor steps"),
]


def averaging_inputs(tmp_path, change=None):
    paths = []
    for i in range(2):
        state = {"model": {"w": torch.full((3,), float(i)), "steps": torch.tensor([5])},
                 "cfg": {"model": {"_name": "define_transformer", "define_output_layer": "untied", "dropout": 0.1 * i}}}
        if i and change is not None:
            change(state)
        paths.append(str(tmp_path / f"c{i}.pt"))
        torch.save(state, paths[-1])
    return paths


@pytest.mark.parametrize("change,expected", [c[1:] for c in AVERAGING], ids=[c[0] for c in AVERAGING])
def test_averaging_refuses_what_has_no_mean(tmp_path, capsys, change, expected):
    from fairseq_define.tools import average_checkpoints

    paths = averaging_inputs(tmp_path, change)
    assert average_checkpoints.main(["--inputs", *paths, "--output", str(tmp_path / "avg.pt")]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1, err
    assert not (tmp_path / "avg.pt").exists()


def test_averaging_keeps_equal_integers_and_ignores_dropout(tmp_path):
    from fairseq_define.tools import average_checkpoints

    state = average_checkpoints.average(averaging_inputs(tmp_path))
    assert torch.equal(state["model"]["steps"], torch.tensor([5]))
    torch.testing.assert_close(state["model"]["w"], torch.full((3,), 0.5))


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


HUB_ARCHIVES = [  # archives stock fairseq 0.12.2 loads
    ("dot_prefix", [("./model", "dir", ""), ("./model/dict.txt", "file", "a 1\n")]),  # tar czf m.tgz ./model
    ("no_folder_member", [("model/dict.txt", "file", "a 1\n"), ("model/extra.txt", "file", "")]),
    ("one_file", [("model/dict.txt", "file", "a 1\n")]),
]


@pytest.mark.parametrize("members", [c[1] for c in HUB_ARCHIVES], ids=[c[0] for c in HUB_ARCHIVES])
def test_hub_archives_that_stock_fairseq_loads(tmp_path, members):
    from fairseq import file_utils

    archive = make_archive(tmp_path / "model.tar.gz", members)
    folder = Path(file_utils.load_archive_file(str(archive)))
    assert folder.name == "model" and (folder / "dict.txt").read_text() == "a 1\n"


# every compression tarfile opens, each through the same header scan: (suffix, tarfile's
# name for it, the compressor)
HUB_COMPRESSIONS = [
    ("tar.gz", "gz", "gzip"),
    ("tar.bz2", "bz2", "bz2"),
    ("tar.xz", "xz", "lzma"),
    ("tar", "tar", None),
]


@pytest.mark.parametrize("suffix,compression,compressor", HUB_COMPRESSIONS, ids=[c[0] for c in HUB_COMPRESSIONS])
@pytest.mark.parametrize("kind", ["gnu_long_name", "pax"])
def test_hub_archive_metadata_is_bounded_cheaply(tmp_path, kind, suffix, compression, compressor):
    """A small archive whose long name (or pax record) claims 200 MB: refused from its header,
    before tarfile reads the record into memory, whatever the compression."""
    import importlib
    import tarfile
    import tracemalloc

    from fairseq import UserError, file_utils

    info = tarfile.TarInfo("././@LongLink")
    info.type, info.size = (tarfile.GNUTYPE_LONGNAME if kind == "gnu_long_name" else tarfile.XHDTYPE), 200 << 20
    data = info.tobuf(format=tarfile.GNU_FORMAT) + b"a" * (1 << 20)
    archive = tmp_path / f"model.{suffix}"
    archive.write_bytes(importlib.import_module(compressor).compress(data) if compressor else data)
    assert archive.stat().st_size < (200_000 if compressor else 2 << 20)
    tracemalloc.start()
    tracemalloc.reset_peak()  # (a test that failed while tracing left it started)
    with pytest.raises(UserError, match=f"refusing to extract .*model.{suffix}: it holds a 209,715,200-byte"):
        file_utils.load_archive_file(str(archive))
    assert tracemalloc.get_traced_memory()[1] < 16 << 20
    tracemalloc.stop()


@pytest.mark.parametrize(
    "suffix,compression", [c[:2] for c in HUB_COMPRESSIONS[:3]], ids=[c[0] for c in HUB_COMPRESSIONS[:3]]
)
def test_hub_archive_bombs_of_every_compression_are_refused_from_their_headers(tmp_path, suffix, compression):
    from fairseq import UserError, file_utils

    bomb = make_archive(tmp_path / f"bomb.{suffix}", [("model", "dir", ""), ("model/zeros", "file", bytes(60 << 20))],
                        compression)
    assert bomb.stat().st_size < 1 << 20
    with pytest.raises(
        UserError, match=rf"refusing to extract .*bomb.{suffix}: its \d[\d,]* bytes unpack to more than"
    ):
        file_utils.load_archive_file(str(bomb))
    folder = file_utils.load_archive_file(str(make_archive(
        tmp_path / f"model.{suffix}", [("model", "dir", ""), ("model/dict.txt", "file", "a 1\n")], compression)))
    assert (Path(folder) / "dict.txt").read_text() == "a 1\n"  # a genuine one of each loads


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


@pytest.mark.cli  # starts fairseq-train
def test_a_run_resumes_with_another_budget_limit(wmt_bin, trained, tmp_path):
    """--max-model-parameters is kept in a legacy model's stored args but changes no weight: a
    run resumes under another limit (the form check does not name it) and trains on."""
    import shutil

    from .helpers import TINY, TINY_TIED, USER_DIR, run_cli

    (tmp_path / "ck").mkdir()
    shutil.copy(trained / "checkpoint_last.pt", tmp_path / "ck")
    out = run_cli(
        "fairseq-train",
        wmt_bin / "bin",
        "--user-dir",
        USER_DIR,
        "--arch",
        "define_transformer_tiny",
        *TINY,
        *TINY_TIED,
        "--optimizer",
        "adam",
        "--lr",
        "1e-3",
        "--max-tokens",
        "1500",
        "--max-update",
        "14",
        "--save-dir",
        tmp_path / "ck",
        "--cpu",
        "--no-epoch-checkpoints",
        "--max-model-parameters",
        "5e9",
    ).stdout
    assert "Loaded checkpoint" in out and "@ 12 updates" in out and "num_updates 14" in out, out[-2000:]


# -- issue 53: damaged weights, each named for what is wrong with it, in every loader ----------

def _set(key, value):
    return lambda m: m.__setitem__(key, value(m[key]) if callable(value) else value)


def _nan_at(t, value=float("nan")):
    t = t.clone()
    t.view(-1)[3] = value
    return t


FC1 = "decoder.layers.0.fc1.weight"
DAMAGED_WEIGHTS = [  # (name, edit of the state dict, the one line)
    ("nan", _set(FC1, _nan_at), f"the checkpoint is damaged: its weight {FC1} holds 1 NaN value (of 2,048)"),
    ("inf", _set(FC1, lambda t: _nan_at(t, float("-inf"))), f"its weight {FC1} holds 1 infinite value (of 2,048)"),
    (
        "missing",
        lambda m: m.pop("decoder.layers.0.fc1.bias"),
        "the checkpoint lacks decoder.layers.0.fc1.bias, which this model has",
    ),
    (
        "extra",
        _set("decoder.layers.0.extra.weight", torch.zeros(2)),
        "the checkpoint holds decoder.layers.0.extra.weight, which this model has no place for",
    ),
    (
        "ffn_shape",
        _set(FC1, lambda t: torch.zeros(65, 32)),  # rows only, but not a dictionary's: not blamed on it
        f"the checkpoint's weight {FC1} is [65, 32], but [64, 32] in the model its settings build",
    ),
    (
        "one_table",
        _set("decoder.output_projection.weight", lambda t: t[:-8].clone()),  # the other tables fit the data
        "the checkpoint's weight decoder.output_projection.weight is [296, 32], but [304, 32] in the model",
    ),
    ("not_a_tensor", _set(FC1, "weights"), f"the checkpoint is damaged: its entry {FC1} is a str, not a tensor"),
]


def damaged_checkpoint(tmp_path, edit):
    """nmt_checkpoint with its weights edited by ``edit``; its task names the data in tmp_path
    (the tools read no --model-overrides)."""
    path, overrides = nmt_checkpoint(tmp_path)
    state = safe_torch_load(path)
    edit(state["model"])
    state["cfg"]["task"].update(overrides)
    torch.save(state, path)
    return path, overrides


@pytest.mark.parametrize("edit,expected", [c[1:] for c in DAMAGED_WEIGHTS], ids=[c[0] for c in DAMAGED_WEIGHTS])
def test_damaged_weights_are_named_by_the_loader(tmp_path, edit, expected):
    """What fairseq-generate, -interactive, -eval-lm and the hub load through: one line naming
    the tensor, before the model runs (a NaN weight ended a beam search in AssertionError)."""
    from fairseq import UserError

    path, overrides = damaged_checkpoint(tmp_path, edit)
    with pytest.raises(UserError) as e:
        checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)
    assert expected in str(e.value) and "\n" not in str(e.value), str(e.value)


@pytest.mark.parametrize("edit,expected", [c[1:] for c in DAMAGED_WEIGHTS[:3]], ids=[c[0] for c in DAMAGED_WEIGHTS[:3]])
def test_damaged_weights_are_named_by_the_export(tmp_path, capsys, edit, expected):
    """The export loads through the same check: the line names the weight (a NaN model was
    called "not an exact form"), and nothing is written."""
    from fairseq_define.tools import export

    path, overrides = damaged_checkpoint(tmp_path, edit)
    assert export.main([path, str(tmp_path / "export.pt"), "--data", overrides["data"]]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1 and "exact form" not in err, err
    assert not (tmp_path / "export.pt").exists()


@pytest.mark.parametrize("changed,table", [(("en", "de"), "encoder.embed_tokens.map.weight"),
                                           (("de",), "decoder.embed_tokens.map.weight")], ids=["both", "target"])
def test_another_dictionary_is_named_for_every_table_it_changes(tmp_path, changed, table):
    """Every table of a dictionary's rows differs: the dictionary, not a damaged file."""
    from fairseq import UserError

    path, overrides = nmt_checkpoint(tmp_path)
    for lang in changed:
        with open(tmp_path / f"dict.{lang}.txt", "a", encoding="utf-8") as f:
            f.write("".join(f"extra{i} 1\n" for i in range(8)))
    with pytest.raises(UserError, match=rf"does not fit the data: {table} has 304 rows in the "
                                        r"checkpoint but 312 here.*use the dictionary \(dict.\*.txt\)"):
        checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)


def test_a_nan_in_a_tied_tensor_is_damage_not_another_form():
    """NaN never equals NaN: the tied keys' comparison named another output layer."""
    from fairseq import UserError

    from fairseq_define_patch.runtime.checkpoint_weights import check_tied_values

    from .test_define_transformer import tiny_model

    tied, _ = tiny_model("--define-map-dim", "32", "--define-output-layer", "tied_map")
    state = {k: v.clone() for k, v in tied.state_dict().items()}
    key = "decoder.output_projection.weight"
    state[key] = _nan_at(state[key])
    for load in (lambda: tied.load_state_dict(state, strict=False), lambda: check_tied_values(tied, state)):
        with pytest.raises(UserError, match=f"damaged: its weight {key} holds 1 NaN value") as e:
            load()
        assert "output layer" not in str(e.value)


def test_a_resumed_checkpoint_with_damaged_weights_names_its_file():
    from fairseq_define_patch.runtime.checkpoint_misfit import checkpoint_misfit
    from fairseq_define_patch.runtime.checkpoint_weights import CheckpointWeightsError, check_state_dict

    def misfit(expected, state):
        with pytest.raises(CheckpointWeightsError) as e:
            check_state_dict(expected, state)
        return str(checkpoint_misfit("ck/checkpoint_last.pt", {}, None, e.value))

    w = torch.zeros(3)
    line = misfit({"w": w}, {"w": torch.tensor([0.0, float("inf"), 1.0])})
    assert line.startswith("checkpoint ck/checkpoint_last.pt is damaged: its weight w holds 1 infinite value"), line
    line = misfit({"w": w, "b": w}, {"w": w})
    assert line.startswith("checkpoint ck/checkpoint_last.pt does not fit this model: the checkpoint lacks b"), line


def test_fairseqs_uninitialised_dtype_buffer_is_not_a_weight():
    """Sinusoidal positions keep torch.FloatTensor(1), whatever bits it holds."""
    from fairseq_define_patch.runtime.checkpoint_weights import check_finite

    check_finite({"decoder.embed_positions._float_tensor": torch.tensor([float("nan")])})


@pytest.mark.parametrize("change,expected", [
    (lambda m: m.update(w=torch.tensor([0.0, float("nan"), 1.0])), "c1.pt is damaged: its weight w holds 1 NaN value"),
    (lambda m: m.update(w=torch.zeros(4)), "c1.pt's weight w is [4], but [3] in"),
    (lambda m: m.pop("w"), "c1.pt lacks w, which"),
], ids=["nan", "shape", "missing"])
def test_averaging_refuses_damaged_weights(tmp_path, capsys, change, expected):
    from fairseq_define.tools import average_checkpoints

    paths = averaging_inputs(tmp_path, lambda s: change(s["model"]))
    assert average_checkpoints.main(["--inputs", *paths, "--output", str(tmp_path / "avg.pt")]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1, err
    assert not (tmp_path / "avg.pt").exists()


def test_the_hubs_export_of_a_half_precision_model_is_float32(tmp_path):
    """hub.bfloat16(); hub.export(...) was refused as "not an exact form": the export probes a
    float32 copy (each bfloat16 value converts exactly); a NaN in memory is named as damage."""
    from fairseq import UserError

    from fairseq_define.models.define_transformer import DefineTransformerModel

    path, overrides = nmt_checkpoint(tmp_path)
    hub = DefineTransformerModel.from_pretrained(str(tmp_path), "checkpoint.pt", overrides.pop("data"), **overrides)
    hub.bfloat16()
    hub.export(str(tmp_path / "export.pt"))
    exported = safe_torch_load(str(tmp_path / "export.pt"))["model"]
    fc1 = "decoder.layers.0.fc1.weight"
    assert {v.dtype for v in exported.values() if v.is_floating_point()} == {torch.float32}
    assert torch.equal(exported[fc1], hub.models[0].state_dict()[fc1].float())
    assert next(hub.models[0].parameters()).dtype == torch.bfloat16  # the hub's own model is left as it was
    with torch.no_grad():
        hub.models[0].decoder.layers[0].fc1.weight[0, 0] = float("nan")
    with pytest.raises(UserError, match=f"the model is damaged: its weight {fc1} holds 1 NaN value") as e:
        hub.export(str(tmp_path / "nan.pt"))
    assert "exact form" not in str(e.value) and not (tmp_path / "nan.pt").exists()


@pytest.mark.cli  # starts fairseq-interactive
@pytest.mark.parametrize("edit,expected", [DAMAGED_WEIGHTS[0][1:], DAMAGED_WEIGHTS[2][1:]], ids=["nan", "missing"])
def test_damaged_weights_from_the_command_line(tmp_path, edit, expected):
    """fairseq-interactive on a damaged checkpoint: one line naming the weight, no traceback."""
    from .helpers import USER_DIR, assert_user_error

    path, _ = damaged_checkpoint(tmp_path, edit)
    proc = subprocess.run(
        [str(BIN / "fairseq-interactive"), str(tmp_path), "--user-dir", USER_DIR, "--path", path, "--source-lang",
         "en", "--target-lang", "de", "--cpu"], input="a house\n", capture_output=True, text=True, timeout=300)
    assert_user_error(proc, "fairseq-interactive", expected)
