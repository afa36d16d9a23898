#!/usr/bin/env python3
"""Where the corpora of the small modes, examples, benchmarks and tests are, checked against
the published files' checksums, and downloaded when asked. The list of files, checksums and
sources is corpora.tsv beside this script; the shell scripts call this script, the
benchmarks and tests import it.

The data root: --data-root DIR, else $FAIRSEQ_DEFINE_DATA, else the first of these default
locations that holds the data set: shared/data next to the checkout (a developers' layout),
then work/data in the checkout. --download fetches a missing set into the given root (else
work/data). Files keep their published names: PTB in ROOT/ptb/, WikiText-2 in
ROOT/wikitext-2/, the WMT test sets in ROOT/wmt14_en_de/test/, Multi30k in ROOT/multi30k/raw/.

  python3 run_scripts/corpora.py path ptb [--data-root DIR] [--download]
      prints the folder that holds the set, once every file's checksum matches
  python3 run_scripts/corpora.py verify ptb DIR      checks DIR's copies of the set's files
  python3 run_scripts/corpora.py list                the sets, their files and sources
"""

import argparse
import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TABLE = HERE / "corpora.tsv"
ENV = "FAIRSEQ_DEFINE_DATA"
DEFAULT_ROOTS = (ROOT.parent / "shared" / "data", ROOT / "work" / "data")
DOWNLOAD_ROOT = ROOT / "work" / "data"


class DataError(Exception):
    """A problem the user fixes (missing, changed or undownloadable data): one line."""


@dataclass(frozen=True)
class DataFile:
    dataset: str
    path: str  # under the data root
    checksum: str  # ALGO:HEX
    sources: tuple  # URLs tried in turn, ("sacrebleu:SET:PAIR:SIDE",) or ("local",)
    member: str  # path inside the archive, "gunzip" or "-"


def read_table(table=None):
    files = []
    for line in Path(table or TABLE).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            dataset, path, checksum, sources, member = line.split("\t")
            files.append(DataFile(dataset, path, checksum, tuple(sources.split()), member))
    return files


def dataset_files(dataset):
    files = [f for f in read_table() if f.dataset == dataset]
    if not files:
        names = sorted({f.dataset for f in read_table()})
        raise DataError(f"unknown data set '{dataset}' (known: {', '.join(names)})")
    return files


def folder(files):
    """The set's folder relative to the data root (where its first file lies)."""
    return Path(files[0].path).parent


def digest(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check(path, checksum):
    algo, want = checksum.split(":")
    got = digest(path, algo)
    if got != want:
        raise DataError(
            f"checksum mismatch for {path}: {algo} {got}, expected {want}: not the published file "
            "(delete it to download it again, or pass --no-verify for a copy of your own)"
        )


def verify(dataset, directory, verify_sums=True):
    """Check that ``directory`` holds the set's files (by their names) with the published
    checksums."""
    for f in dataset_files(dataset):
        p = Path(directory) / Path(f.path).name
        if not p.is_file() or p.stat().st_size == 0:
            raise DataError(f"missing or empty {p} (a {dataset} folder holds "
                            f"{', '.join(Path(x.path).name for x in dataset_files(dataset))})")
        if verify_sums:
            check(p, f.checksum)


def roots(data_root=None):
    """The roots searched, in order: the one given (flag, else environment), else the
    defaults."""
    given = data_root or os.environ.get(ENV)
    return [Path(given)] if given else list(DEFAULT_ROOTS)


def locate(dataset, data_root=None, download=False, verify_sums=True):
    """The folder holding ``dataset`` (verified), downloading it into the data root when
    ``download`` and it is nowhere."""
    files = dataset_files(dataset)
    searched = roots(data_root)
    for r in searched:
        if all((r / f.path).is_file() for f in files):
            verify(dataset, r / folder(files), verify_sums)
            return (r / folder(files)).resolve()
    if download:
        target = Path(data_root or os.environ.get(ENV) or DOWNLOAD_ROOT)
        fetch(files, target, verify_sums)
        return (target / folder(files)).resolve()
    source = files[0].sources[0].replace("sacrebleu:", "sacreBLEU ")
    how = (
        f"{dataset} has no public download as one file: copy it there"
        if source == "local"
        else f"or download it from {source}, checked, with --download "
        f"(or: python3 run_scripts/corpora.py fetch {dataset})"
    )
    raise DataError(
        f"{dataset} not found under {' or '.join(str(r) for r in searched)}: pass --data-root DIR or set "
        f"{ENV}=DIR to a folder holding {files[0].path} and its other files; {how}"
    )


def fresh_temp(dest):
    """A new, exclusively created file next to ``dest`` (never a fixed name a planted link could
    redirect); the caller renames it over ``dest`` or removes it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    return Path(tmp)


def download(url, dest):
    logger_line(f"downloading {url}")
    part = fresh_temp(dest)
    try:
        with urllib.request.urlopen(url, timeout=60) as r, open(part, "wb") as out:
            shutil.copyfileobj(r, out)
        part.replace(dest)
    finally:
        part.unlink(missing_ok=True)


# An extracted file may be at most this many times its archive's size: text compresses 3 to 5
# times; a crafted archive (a few MB that unpack to GBs) is stopped before it fills the disk.
MAX_EXPANSION = 50


def copy_bounded(src, out, limit, archive):
    written = 0
    while chunk := src.read(1 << 20):
        written += len(chunk)
        if written > limit:
            raise DataError(f"{archive} unpacks to more than {MAX_EXPANSION} times its size: not the published "
                            "archive (a decompression bomb?); it was removed: run again to download it afresh")
        out.write(chunk)


def logger_line(msg):
    print(f"  {msg}", file=sys.stderr, flush=True)


def fetch(files, target, verify_sums=True):
    """Download the set's files into ``target`` (each written whole, then checked: a file that
    does not match is deleted and refused)."""
    cache = target / "downloads"
    cache.mkdir(parents=True, exist_ok=True)
    for f in files:
        dest = target / f.path
        if dest.is_file():
            if verify_sums:
                check(dest, f.checksum)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        kind = f.sources[0]
        if kind == "local":
            raise DataError(f"{f.dataset} has no public download as one file: copy it into {dest.parent} "
                            f"(pass --data-root DIR or set {ENV}=DIR to where it is)")
        tmp = fresh_temp(dest)
        try:
            fetch_one(f, cache, tmp, verify_sums)
            tmp.replace(dest)
        finally:
            tmp.unlink(missing_ok=True)


def fetch_one(f, cache, tmp, verify_sums):
    """Write ``f`` into ``tmp``, checked."""
    kind = f.sources[0]
    if kind.startswith("sacrebleu:"):
        _, test_set, pair, side = kind.split(":")
        proc = subprocess.run([sys.executable, "-m", "sacrebleu", "-t", test_set, "-l", pair, "--echo", side],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if proc.returncode != 0:
            raise DataError(f"sacreBLEU could not fetch {test_set} {pair} (no network?): "
                            f"{proc.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
        tmp.write_bytes(proc.stdout)
    else:
        archive = cache / Path(f.sources[0]).name
        if not archive.is_file():
            errors = []
            for url in f.sources:
                try:
                    download(url, archive)
                    break
                except OSError as e:
                    errors.append(f"{url}: {e}")
            else:
                raise DataError(f"could not download {f.dataset} ({'; '.join(errors)}): download it yourself "
                                f"and pass --data-root DIR")
        try:
            if f.member == "gunzip":
                with gzip.open(archive, "rb") as src, open(tmp, "wb") as out:
                    copy_bounded(src, out, MAX_EXPANSION * archive.stat().st_size, archive)
            elif f.member != "-":
                extract(archive, f.member, tmp)
            else:
                shutil.copyfile(archive, tmp)
        except (tarfile.TarError, zipfile.BadZipFile, gzip.BadGzipFile, EOFError, zlib.error) as e:
            archive.unlink()
            raise DataError(
                f"the downloaded {archive} is damaged ({type(e).__name__}: {(str(e).splitlines() or [''])[0]}); it was "
                f"removed: "
                "run again to download it afresh"
            ) from None
        except DataError:
            archive.unlink()
            raise
    if verify_sums:
        try:
            check(tmp, f.checksum)
        except DataError:
            tmp.unlink()
            raise DataError(f"the downloaded {f.path} does not match its published checksum {f.checksum}: "
                            "the source changed or the download broke; delete "
                            f"{cache} and run again") from None


def extract(archive, member, dest):
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as z:
            if member not in z.namelist():
                raise DataError(
                    f"{archive} holds no {member}: not the published archive (it was removed: run again to download it "
                    f"afresh)"
                )
            with z.open(member) as src, open(dest, "wb") as out:
                copy_bounded(src, out, MAX_EXPANSION * archive.stat().st_size, archive)
    else:
        with tarfile.open(archive) as t:
            # archives name their members with or without a leading "./"
            names = {m.name.removeprefix("./"): m for m in t.getmembers() if m.isfile()}
            if member not in names:
                raise DataError(
                    f"{archive} holds no {member}: not the published archive (it was removed: run again to download it "
                    f"afresh)"
                )
            with t.extractfile(names[member]) as src, open(dest, "wb") as out:
                copy_bounded(src, out, MAX_EXPANSION * archive.stat().st_size, archive)


def main(argv=None):
    p = argparse.ArgumentParser(prog="corpora.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("path", "fetch"):
        s = sub.add_parser(name)
        s.add_argument("dataset")
        s.add_argument("--data-root", help=f"the data root (default ${ENV}, else shared/data next to the "
                                           "checkout, else work/data)")
        s.add_argument("--download", action="store_true", help="fetch a missing set into the data root")
        s.add_argument("--no-verify", action="store_true", help="skip the checksums (your own, different files)")
    s = sub.add_parser("verify")
    s.add_argument("dataset")
    s.add_argument("directory")
    s.add_argument("--no-verify", action="store_true")
    sub.add_parser("list")
    args = p.parse_args(argv)
    try:
        if args.cmd in ("path", "fetch"):
            print(locate(args.dataset, args.data_root, args.download or args.cmd == "fetch", not args.no_verify))
        elif args.cmd == "verify":
            verify(args.dataset, args.directory, not args.no_verify)
        else:
            for f in read_table():
                print(f"{f.dataset:15s} {f.path:45s} {f.checksum[:12]}...  {f.sources[0]}")
    except DataError as e:
        print(f"corpora.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
