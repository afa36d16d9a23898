"""Every file the docs, the README and the code's docstrings and comments name exists, so a moved
or renamed file cannot linger in the text that sends a reader to it (issue 50, item 5).

Read: docstrings and comments of the ``*.py`` files and comments of the ``*.sh`` files under
the package, the patch, benchmarks/, studies/, scripts/, run_scripts/, examples/ and tests/,
and of setup.py, the Makefile and .ci/run;
every line of the repository's markdown files (README.md, docs/, the data folders' READMEs), and
the targets of their relative links (with the heading an ``#anchor`` names).
A name is a ``*.py`` or ``*.sh`` file name, bare (``unit.py``) or as a path
(``fairseq_define/tools/export.py``), or a path under one of the repository's top-level folders
(``run_scripts/corpora.tsv``). It resolves when:

- a path: some file or folder of the repository ends with it (``models/lstm_lm.py`` is
  ``fairseq_define/models/lstm_lm.py``), or the installed fairseq does (``fairseq/...``,
  ``fairseq_cli/...``, ``examples/linformer/...``; ``fairseq/_define_runtime/X`` is the patch's
  ``runtime/X``); a link: its target relative to the linking file;
- a bare name: some file of that name is in the repository or the installed fairseq;
- or it is in the short allow-list below (other projects' files, placeholders).

Dotted names of this repository's modules (``fairseq_define.tools.params``,
``fairseq_define.errors.UserError``, ``python -m studies.lm_ptb``) are read too: each part is a
package or module down to the first that is not, which the module must define or import.
"""

import ast
import importlib.util
import io
import re
import tokenize
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE_DIRS = ("fairseq_define", "patch", "benchmarks", "studies", "scripts",
             "run_scripts", "examples", "tests")
TOP_DIRS = CODE_DIRS + ("docs", ".ci")
SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", "build", "work", "checkpoints"}

# Files of other projects, named where the text compares with or credits them; none is in this
# repository or the installed fairseq.
ALLOWED = {
    # flash-attention's Triton layer norm, the model issue 50 holds up for the fused unit
    "layer_norm.py",
    # sacmehta/delight (the authors' DeFINE code): their unit, embedding and model
    "dextra_unit.py", "dextra_emb.py", "delight_transformer.py", "nn_functions.py",
    "normalization_layers.py",
    # AWD-LSTM (salesforce/awd-lstm-lm): its data script; tensor2tensor's compound-split BLEU
    "getdata.sh", "get_ende_bleu.sh",
    # fairseq's repository outside the installed package: scripts/ and the v0.12.2 tests that
    # scripts/run_fairseq_tests.sh unpacks (patch/README.md lists what they cover)
    "scripts/average_checkpoints.py", "tests/test_dataclass_utils.py", "tests/speech",
    "test_binaries.py", "test_train.py", "test_file_io.py", "test_multihead_attention.py",
    "test_reproducibility.py", "test_distributed_timeout_wrapper.py",
}
# Placeholders in prose ("the patch's runtime/NAME.py", "runs/ARM.json", "tools.TOOL"), not files.
PLACEHOLDER = re.compile(r"(^|/)(X|NAME|ARM|TOOL)(/|\.|$)")

NAME = re.compile(
    r"(?<![\w./$<>*{-])"
    r"((?:[\w.-]+/)*[\w-]+\.(?:py|sh)"                      # a.py, dir/a.sh
    r"|(?:" + "|".join(re.escape(d) for d in TOP_DIRS) + r")/[\w./-]*[\w/])"  # run_scripts/x.tsv
    r"(?![\w(<>*{$-])")
LINK = re.compile(r"\]\(([^)\s]+)\)")
DOTTED = re.compile(r"(?<![\w./-])((?:fairseq_define_patch|fairseq_define|studies|benchmarks)(?:\.[A-Za-z_]\w*)+)")
FILE_SUFFIXES = {"md", "py", "sh", "txt", "json", "tsv", "png"}
PACKAGE_DIRS = {"fairseq_define_patch": "patch/fairseq_define_patch"}  # a package not at the top


def _walk(base: Path):
    for p in base.iterdir():
        if p.is_dir():
            if p.name in SKIP_DIRS or p.name.startswith(".venv") or p.name.endswith(".egg-info"):
                continue
            yield p
            yield from _walk(p)
        else:
            yield p


def _suffixes(paths, base: Path):
    out = set()
    for p in paths:
        parts = p.relative_to(base).parts
        out.update("/".join(parts[i:]) for i in range(len(parts)))
    return out


@lru_cache(maxsize=None)
def repo_names():
    return _suffixes(list(_walk(ROOT)), ROOT)


@lru_cache(maxsize=None)
def fairseq_names():
    """Files of the installed fairseq and fairseq_cli (not the patch's copied runtime)."""
    site = Path(importlib.util.find_spec("fairseq").origin).parent.parent
    paths = [p for top in ("fairseq", "fairseq_cli") for p in (site / top).rglob("*")
             if "__pycache__" not in p.parts and "_define_runtime" not in p.parts]
    names = _suffixes(paths, site)
    # fairseq's examples/ ship inside the package as fairseq/examples/
    names |= {n[len("fairseq/"):] for n in names if n.startswith("fairseq/examples/")}
    return names


def installed(name: str) -> bool:
    """A path into another installed package (``hydra/core/plugins.py``, which the patch edits)."""
    top = name.split("/")[0]
    if "/" not in name or not top.isidentifier() or top in TOP_DIRS:
        return False
    spec = importlib.util.find_spec(top)
    return spec is not None and spec.origin is not None and (
        Path(spec.origin).parent.parent / name).exists()


def resolves(name: str) -> bool:
    name = name.rstrip("/")
    if name in ALLOWED or PLACEHOLDER.search(name):
        return True
    if name.startswith("fairseq/_define_runtime/"):
        name = "fairseq_define_patch/runtime/" + name[len("fairseq/_define_runtime/"):]
    return name in repo_names() or name in fairseq_names() or installed(name)


@lru_cache(maxsize=None)
def _top_level_names(source: Path):
    names = set()
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def module_resolves(dotted: str) -> bool:
    """``a.b.c``: packages and modules of this repository down to the first part that is
    neither, which must be a name the module defines or imports."""
    parts = dotted.split(".")
    if parts[-1] in FILE_SUFFIXES or PLACEHOLDER.search("/".join(parts)):
        return True  # a file name (checked as one) or a placeholder
    here = ROOT / PACKAGE_DIRS.get(parts[0], parts[0])
    for part in parts[1:]:
        if here.is_dir() and (here / part).is_dir():
            here = here / part
        elif here.is_dir() and (here / f"{part}.py").is_file():
            here = here / f"{part}.py"
        else:
            source = here / "__init__.py" if here.is_dir() else here
            return source.is_file() and part in _top_level_names(source)
    return True


def _docstrings_and_comments(path: Path):
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":  # shell scripts, the Makefile, .ci/run: their comments
        for i, line in enumerate(text.splitlines(), 1):
            if "#" in line:
                yield i, line[line.index("#"):]
        return
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                yield node.body[0].lineno, doc


BUILD_FILES = ("setup.py", "Makefile", ".ci/run")


def code_files():
    return sorted([p for d in CODE_DIRS for p in _walk(ROOT / d)
                   if p.suffix in (".py", ".sh") and p != Path(__file__).resolve()]  # not this file's examples
                  + [ROOT / f for f in BUILD_FILES])


def doc_files():
    return sorted(p for p in _walk(ROOT) if p.suffix == ".md")


def names_in(text: str):
    return [name for _, name in _found(text)]


def _found(text: str):
    """(offset, name) of each name in text."""
    return [(m.start(), m.group(1).rstrip(".")) for m in NAME.finditer(text)]


def _stale(text: str):
    """(offset, name) of each name in text that does not resolve."""
    return sorted([(at, name) for at, name in _found(text) if not resolves(name)]
                  + [(m.start(), m.group(1)) for m in DOTTED.finditer(text) if not module_resolves(m.group(1))])


def stale_in_code(path: Path):
    return [f"{path.relative_to(ROOT)}:{line + text.count(chr(10), 0, at)}: {name}"
            for line, text in _docstrings_and_comments(path) for at, name in _stale(text)]


def github_anchor(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped but - and _, spaces -> -."""
    heading = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


@lru_cache(maxsize=None)
def anchors(path: Path):
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {github_anchor(m) for m in re.findall(r"^#+ (.*)$", text, flags=re.M)}


def stale_in_doc(path: Path):
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{i}"
        out += [f"{where}: {name}" for _, name in _stale(line)]
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                out.append(f"{where}: link {target}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                out.append(f"{where}: link {target} (no such heading)")
    return out


@pytest.mark.parametrize("path", code_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_code_names_only_files_that_exist(path):
    assert stale_in_code(path) == []


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_name_only_files_that_exist(path):
    assert stale_in_doc(path) == []


@pytest.mark.parametrize("text, names", [
    ("see `unit.py` and fairseq_define/tools/export.py.", ["unit.py", "fairseq_define/tools/export.py"]),
    ("run_scripts/corpora.tsv, scripts/gpu_check.sh", ["run_scripts/corpora.tsv", "scripts/gpu_check.sh"]),
    ("docs/studies/<study>/results.md and $OUT/x.py and a_{x,y}.py", ["docs/studies"]),
    ("self.unit.py_version, torch.py", ["torch.py"]),
])
def test_names_found(text, names):
    assert names_in(text) == names


@pytest.mark.parametrize("name, ok", [
    ("group_linear.py", True),                         # a bare name of this repository
    ("modules/define/group_linear.py", True),          # a path's tail
    ("fairseq_define/modules/define/group_linear.py", True),
    ("define_schedule.py", False),                     # moved long ago
    ("fairseq_define/define_unit.py", False),
    ("checkpoint_utils.py", True),                     # fairseq's own
    ("fairseq/models/transformer_lm.py", True),
    ("examples/linformer/linformer_src", True),        # fairseq's examples
    ("fairseq/_define_runtime/model_budget.py", True),  # the patch's runtime, as installed
    ("fairseq/_define_runtime/no_such_module.py", False),
    ("layer_norm.py", True),                           # allow-listed
    ("hydra/core/plugins.py", True),                   # another installed package's file
    ("hydra/core/no_such_file.py", False),
    ("fairseq_define_patch/runtime/NAME.py", True),    # a placeholder
])
def test_resolves(name, ok):
    assert resolves(name) is ok


def test_stale_links_and_names_are_found(tmp_path):
    (tmp_path / "other.md").write_text("# A heading\n", encoding="utf-8")
    doc = tmp_path / "doc.md"
    doc.write_text("[ok](other.md#a-heading) [gone](gone.md) [no heading](other.md#b)\n"
                   "[web](https://example.org/x.md) see `define_options.py`\n", encoding="utf-8")
    assert [s.split(": ", 1)[1] for s in stale_in_doc(doc)] == [
        "link gone.md", "link other.md#b (no such heading)", "define_options.py"]


@pytest.mark.parametrize("dotted, ok", [
    ("fairseq_define.tools.params", True),             # a module
    ("fairseq_define.errors.UserError", True),         # a name it imports
    ("fairseq_define.modules.define.unit.split_and_mix", True),  # a function it defines
    ("fairseq_define.tools.define_options", False),    # no such module
    ("fairseq_define.errors.NoSuchError", False),
    ("studies.lm_ptb", True),
    ("docs/studies.md", True),                         # a file name, not a module
])
def test_module_resolves(dotted, ok):
    assert module_resolves(dotted) is ok


def test_anchor():
    assert github_anchor("The translation model's output layer") == "the-translation-models-output-layer"
    assert github_anchor("What holds the authors' unit back: the mean it hands the LSTM") == (
        "what-holds-the-authors-unit-back-the-mean-it-hands-the-lstm")
