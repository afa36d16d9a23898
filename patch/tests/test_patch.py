"""The fairseq 0.12.2 patch: idempotent, checkable, all-or-nothing, refuses unknown files; its
runtime modules are copied whole, checked by hash, repaired and removed. Nothing here imports
fairseq-define: the patch is installable and tested alone (README.md)."""

import ast
import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fairseq_define_patch as fp

ROOT = Path(__file__).resolve().parents[1]  # the patch's folder (patch/)


def test_installed_fairseq_is_patched():
    assert all(s.state == "patched" for s in fp.statuses())
    assert fp.main(["--check"]) == 0


@pytest.fixture
def pristine_copy(tmp_path):
    """The patched files copied to tmp roots and reverted there: a shipped fairseq."""
    roots = {p.distribution: tmp_path / p.distribution for p in fp.PATCHES}
    for p in fp.PATCHES:
        copies = [(fp.site_root(p.distribution) / p.path, roots[p.distribution] / p.path)]
        if fp.shipped_copy(p).exists():  # what --revert restores a file with span edits from
            copies.append((fp.shipped_copy(p), fp.shipped_copy(p, roots)))
        for src, dst in copies:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    fp.apply(roots, reverse=True)
    assert all(s.state == "original" for s in fp.statuses(roots))  # the runtime modules: absent
    return roots


def edited_files(found):
    """The statuses of the edited files (not the copied runtime modules)."""
    return [s for s in found if isinstance(s.patch, fp.FilePatch)]


def test_apply_twice_is_a_no_op(pristine_copy):
    roots = pristine_copy
    assert all(s.state == "patched" for s in fp.apply(roots))
    mtimes = {s.path: s.path.stat().st_mtime_ns for s in fp.statuses(roots)}
    assert all(s.state == "patched" for s in fp.apply(roots))
    assert mtimes == {s.path: s.path.stat().st_mtime_ns for s in fp.statuses(roots)}


def test_patched_text_is_what_the_fixes_need(pristine_copy):
    roots = pristine_copy
    fp.apply(roots)
    configs = (roots["fairseq"] / "fairseq/dataclass/configs.py").read_text()
    assert "common: CommonConfig = field(default_factory=CommonConfig)" in configs
    ckpt = (roots["fairseq"] / "fairseq/checkpoint_utils.py").read_text()
    assert 'torch.load(f, map_location=torch.device("cpu"))' not in ckpt
    assert "from fairseq._define_runtime.checkpoint_loading import *" in ckpt
    runtime = roots["fairseq"] / "fairseq/_define_runtime/checkpoint_loading.py"
    assert "weights_only=True" in runtime.read_text()
    assert 'state = safe_torch_load(f, map_location=torch.device("cpu"))' in ckpt
    assert "np.compat" not in (roots["fairseq"] / "fairseq/data/token_block_dataset.py").read_text()


def test_unknown_content_is_refused_and_nothing_is_written(pristine_copy):
    roots = pristine_copy
    edited = roots["fairseq"] / "fairseq/data/data_utils.py"
    edited.write_text(edited.read_text() + "\n# a local edit\n")
    before = {s.path: s.path.read_bytes() for s in edited_files(fp.statuses(roots))}
    with pytest.raises(fp.FairseqPatchError, match="refusing to patch"):
        fp.apply(roots)
    assert before == {s.path: s.path.read_bytes() for s in edited_files(fp.statuses(roots))}
    assert not (roots["fairseq"] / fp.edits.RUNTIME_PACKAGE).exists()  # nor copied
    states = {s.patch.path: s.state for s in fp.statuses(roots)}
    assert states["fairseq/data/data_utils.py"] == "unknown" and states["fairseq/dataclass/configs.py"] == "original"


def test_check_mode_fails_on_unpatched(pristine_copy, monkeypatch):
    monkeypatch.setattr(fp, "site_root", lambda dist: pristine_copy[dist])
    assert fp.main(["--check"]) == 1
    assert fp.main(["--apply"]) == 0
    assert fp.main(["--check"]) == 0


@pytest.mark.parametrize("dist, version, named", [
    ("fairseq", None, "pip install --no-deps fairseq==0.12.2"),
    ("fairseq", "0.12.3", "pip install --no-deps fairseq==0.12.2"),
    # fairseq's own pins: what pip < 24.1 installed with fairseq 0.12.2
    ("hydra-core", "1.0.7", "'hydra-core>=1.3,<1.4'"),
    ("omegaconf", "2.0.6", "'omegaconf>=2.3,<2.4'"),
    ("omegaconf", "2.4.0", "'omegaconf>=2.3,<2.4'"),
    ("hydra-core", None, "'hydra-core>=1.3,<1.4'"),
])
def test_versions_outside_the_tested_range_get_one_line(monkeypatch, dist, version, named):
    """fairseq other than 0.12.2, or hydra-core/omegaconf outside the range the patched fairseq
    runs on: one line naming the install command, before any file is read."""
    real = importlib.metadata.version

    def version_of(name):
        if name != dist:
            return real(name)
        if version is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return version

    monkeypatch.setattr(importlib.metadata, "version", version_of)
    with pytest.raises(fp.FairseqPatchError) as caught:
        fp.check_versions()
    message = str(caught.value)
    assert "\n" not in message and named in message and dist in message


def test_the_package_requires_the_config_libraries_the_patch_accepts():
    """pyproject.toml lists fairseq's run-time requirements (fairseq itself goes in with
    --no-deps): its hydra-core and omegaconf ranges are the ones check_versions accepts."""
    from packaging.requirements import Requirement

    required = {r.name: r.specifier for r in map(Requirement, importlib.metadata.requires("fairseq-define-patch"))}
    assert "fairseq" not in required  # its metadata pins hydra-core 1.0 / omegaconf 2.0
    for dist in fp.CONFIG_LIBRARIES:
        assert required[dist] == Requirement(fp._requirement(dist).strip("'")).specifier


def test_an_edit_whose_sides_overlap_is_rejected():
    """Otherwise reverting the shipped text would "succeed" and drift (np.float -> np.np.float)."""
    with pytest.raises(ValueError, match="ambiguous edit"):
        fp.Edit('np.float("inf")', 'float("inf")')


def test_shipped_and_patched_texts_are_told_apart(pristine_copy):
    for st in edited_files(fp.statuses(pristine_copy)):
        text = st.path.read_text()
        with pytest.raises(fp.FairseqPatchError):
            fp.apply_edits(text, st.patch.edits, reverse=True)  # nothing to revert in shipped text
        patched = fp.apply_edits(text, st.patch.edits)
        with pytest.raises(fp.FairseqPatchError):
            fp.apply_edits(patched, st.patch.edits)  # nothing left to patch


def test_examples_with_dataclass_configs_import_on_python_311(monkeypatch):
    """fairseq's examples (in the package as fairseq/examples; --user-dir points there) had
    dataclass instances as field defaults, which Python 3.11 rejects when the module loads."""
    import importlib
    import sys

    import fairseq.examples

    monkeypatch.setitem(sys.modules, "examples", fairseq.examples)  # their imports use the source tree's name
    for name in ("data2vec.models.data2vec_text", "speech_recognition.new.decoders.decoder_config",
                 "wav2vec.unsupervised.models.wav2vec_u", "wav2vec.unsupervised.tasks.unpaired_audio_text"):
        importlib.import_module(f"fairseq.examples.{name}")


def test_huffman_coder_round_trips_with_bitarray_3():
    from fairseq.data.huffman import HuffmanCodeBuilder

    builder = HuffmanCodeBuilder()
    builder.add_symbols("a", "a", "a", "b", "c")
    coder = builder.build_code()
    text = ["a", "b", "a", "c", "a"]
    assert [n.symbol for n in coder.decode(coder.encode(text))] == text


def test_patched_packages_compile_without_warnings():
    """Python 3.12 prints a SyntaxWarning for an invalid escape sequence each time a file is
    compiled (3.11: a DeprecationWarning, hidden); none is left in the patched packages."""
    import warnings

    found = []
    for top in ("fairseq", "fairseq_cli", "hydra", "omegaconf", "antlr4"):
        for path in sorted(Path(importlib.util.find_spec(top).origin).parent.rglob("*.py")):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                compile(path.read_bytes(), str(path), "exec")
            found += [f"{path}:{w.lineno}: {w.message}" for w in caught
                      if issubclass(w.category, (SyntaxWarning, DeprecationWarning))]
    assert not found, "\n".join(found)


def test_runtime_modules_are_copied_checked_repaired_and_removed(pristine_copy, monkeypatch):
    """A copied module is ours: other content (a copy from another version of the patch, a
    hand edit) fails --check and is replaced by --apply; --revert removes the folder."""
    roots = pristine_copy
    monkeypatch.setattr(fp, "site_root", lambda dist: roots[dist])
    assert fp.main(["--apply"]) == 0
    folder = roots["fairseq"] / fp.edits.RUNTIME_PACKAGE
    for copy in fp.COPIES:
        assert (roots["fairseq"] / copy.path).read_bytes() == copy.source.read_bytes()
    stale = roots["fairseq"] / fp.COPIES[-1].path
    stale.write_text(stale.read_text() + "\n# another version\n")
    (folder / "gone_in_this_version.py").write_text("")
    assert {s.patch.path: s.state for s in fp.statuses(roots)}[fp.COPIES[-1].path] == "stale"
    assert fp.main(["--check"]) == 1
    assert fp.main(["--apply"]) == 0
    assert stale.read_bytes() == fp.COPIES[-1].source.read_bytes()
    assert not (folder / "gone_in_this_version.py").exists()
    assert fp.main(["--check"]) == 0
    (folder / "__pycache__").mkdir()
    assert fp.main(["--revert"]) == 0
    assert not folder.exists() and all(s.state == "original" for s in fp.statuses(roots))


def test_the_hash_table_covers_every_file():
    """Every edited file and every copied module has its hashes; a copy's is its source's."""
    import hashlib

    assert set(fp.SHA256) == {p.path for p in fp.PATCHES + fp.COPIES}
    for copy in fp.COPIES:
        assert fp.SHA256[copy.path] == (None, hashlib.sha256(copy.source.read_bytes()).hexdigest())
    assert {c.source.name for c in fp.COPIES} == {p.name for p in fp.edits.RUNTIME_SOURCE.glob("*.py")}


def test_runtime_modules_import_nothing_of_this_project():
    """Copied into fairseq, they must work without fairseq-define installed: the standard
    library, torch, numpy, omegaconf, fairseq and their siblings (relative imports) only."""
    allowed = set(sys.stdlib_module_names) | {"fairseq", "torch", "numpy", "omegaconf"}
    for source in sorted(fp.edits.RUNTIME_SOURCE.glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            bad = [n for n in names if n.split(".")[0] not in allowed]
            assert not bad, f"{source.name}:{node.lineno} imports {bad}"


def test_the_patch_holds_no_python_in_strings():
    """Issue 44: logic lives in runtime/ modules; the edits of fairseq's files are hooks of a
    few lines, and fairseq's own lines they replace are named by their first and last line."""
    spec = importlib.util.spec_from_file_location("patch_strings", ROOT / "scripts" / "patch_strings.py")
    patch_strings = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(patch_strings)
    assert patch_strings.string_blocks() == []  # no string constant of 5+ lines (1,537 once)
    sides = patch_strings.edit_sides()
    assert sides["largest new"][0] <= LARGEST_EDIT_LINES, sides["largest new"]
    assert sides["largest old"][0] <= LARGEST_EDIT_LINES, sides["largest old"]


# the lines of the largest text an edit writes into fairseq's files, or matches there
LARGEST_EDIT_LINES = 4


def _span_patch():
    return next(p for p in fp.PATCHES if not all(e.reversible for e in p.edits))


def test_span_edits_revert_from_the_shipped_copy(pristine_copy):
    """A span's replaced lines are not held here: --apply keeps the shipped file, --revert
    restores it; without that copy the file is "unrestorable" and nothing is touched."""
    roots = pristine_copy
    span = _span_patch()
    shipped = (roots[span.distribution] / span.path).read_bytes()
    fp.apply(roots)
    assert fp.shipped_copy(span, roots).read_bytes() == shipped
    fp.apply(roots, reverse=True)
    assert (roots[span.distribution] / span.path).read_bytes() == shipped
    assert not fp.shipped_copy(span, roots).exists()  # the runtime folder went whole
    fp.apply(roots)
    fp.shipped_copy(span, roots).write_text("not fairseq's text\n")
    states = {s.patch.path: s.state for s in fp.statuses(roots)}
    assert states[span.path] == "unrestorable"
    with pytest.raises(fp.FairseqPatchError, match="shipped copy"):
        fp.apply(roots, reverse=True)
    assert (roots[span.distribution] / span.path).read_bytes() != shipped  # untouched


@pytest.mark.parametrize("make, text, patched", [
    (lambda: fp.edits.insert_after("a\n", "x\n"), "a\nb\n", "a\nx\nb\n"),
    (lambda: fp.edits.insert_before("b\n", "x\n"), "a\nb\n", "a\nx\nb\n"),
    (lambda: fp.edits.replace_span("b\n", "d\n", "x\n"), "a\nb\nc\nd\ne\nd\n", "a\nx\ne\nd\n"),
    (lambda: fp.Edit("b\n", "x\n"), "a\nb\n", "a\nx\n"),
])
def test_edit_modes(make, text, patched):
    edit = make()
    assert fp.apply_edits(text, [edit]) == patched
    with pytest.raises(fp.FairseqPatchError):
        fp.apply_edits(patched, [edit])  # applied once only
    if edit.reversible:
        assert fp.apply_edits(patched, [edit], reverse=True) == text
    else:
        with pytest.raises(fp.FairseqPatchError, match="shipped copy"):
            fp.apply_edits(patched, [edit], reverse=True)


def test_a_span_must_end_and_must_not_rewrite_its_end():
    with pytest.raises(fp.FairseqPatchError, match="no 'z"):
        fp.apply_edits("a\nb\n", [fp.edits.replace_span("a\n", "z\n", "x\n")])
    with pytest.raises(ValueError, match="holds its end"):
        fp.edits.replace_span("a\n", "b\n", "x\nb\n")


def test_a_patched_fairseq_needs_nothing_from_this_project(tmp_path):
    """The runtime modules are copies inside fairseq: with fairseq-define uninstalled (both
    packages unimportable), fairseq, its CLIs' modules and the patched paths still import."""
    script = (
        "import sys\n"
        "sys.modules['fairseq_define_patch'] = sys.modules['fairseq_define'] = None  # uninstalled\n"
        "import fairseq, fairseq.checkpoint_utils, fairseq.trainer, fairseq.options, fairseq.file_utils\n"
        "import fairseq_cli.train, fairseq_cli.generate, fairseq_cli.interactive, fairseq_cli.preprocess\n"
        "import fairseq_cli.eval_lm, fairseq_cli.validate, fairseq.modules.transformer_layer\n"
        "assert fairseq.checkpoint_utils.safe_torch_load.__module__ == 'fairseq._define_runtime.checkpoint_loading'\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
