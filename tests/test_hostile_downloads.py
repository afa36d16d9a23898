"""Downloads: run_scripts/corpora.py's checked archives (a damaged or oversized one refused in
one line and removed) and unique temporary files, and run_scripts/lib.sh's fetch: a link
planted at the old fixed temporary name is not followed."""

import io
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .helpers import BIN, ROOT


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
