"""Hub archives (fairseq.file_utils.load_archive_file, used by from_pretrained): members that
reach outside the extraction folder, links, bombs and oversized metadata refused, from their
headers, before anything is written; the archives stock fairseq 0.12.2 loads still load."""

import io
import os
from pathlib import Path

import pytest


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
