"""The plugin's layers point one way (issue 50; docs/code_map.md, "Layers"): every import in
``fairseq_define/``, at module level or inside a function, goes to its own layer or a lower
one, no two files import each other (directly or round a loop), and the plugin reaches the
fairseq patch through ``fairseq_define_patch``'s public functions, never through the copy it
installs (``fairseq._define_runtime``).

From the bottom: errors and bounds, modules, optim/tasks/criterions, models, the package
(whose ``__init__`` registers the models), the paper's facts, tools, then scripts, benchmarks
and studies (outside the package). ``fairseq_define_patch`` lies below them all.

The files are read, not imported (``ast``), so an import the test never runs still counts.
"""

import ast
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "fairseq_define"
RUNTIME = "fairseq._define_runtime"  # the patch's installed copy (fairseq_define_patch/runtime/)

# (layer, module prefixes): a module belongs to the layer of its longest matching prefix
LAYERS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("the fairseq patch", ("fairseq_define_patch",)),
    (
        "errors and bounds",
        ("fairseq_define.errors", "fairseq_define.output_files", "fairseq_define.modules.config_bounds"),
    ),
    ("modules", ("fairseq_define.modules", "fairseq_define.param_report")),
    ("optim, tasks, criterions", ("fairseq_define.optim", "fairseq_define.tasks", "fairseq_define.criterions")),
    ("models", ("fairseq_define.models",)),
    ("the package (registers the models)", ("fairseq_define",)),
    ("the paper's facts", ("fairseq_define.paper_tables",)),
    ("tools", ("fairseq_define.tools",)),
    ("scripts, benchmarks, studies", ("scripts", "benchmarks", "studies")),
)

# Imports that break the rules in the committed tree and that work in progress removes, each
# with its reason. Temporary: test_the_temporary_list_is_not_stale fails as soon as one is gone,
# so that the list is emptied (the lead empties it when issue 50 is done).
TEMPORARY: Dict[Tuple[str, str], str] = {}


class Import(NamedTuple):
    importer: str  # module name of the importing file
    imported: str  # module name of the imported file (or the outside module)
    line: int


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_files(root: Path, package: str = PACKAGE) -> Dict[str, Path]:
    """Every module of ``package`` under ``root``: name -> file."""
    return {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}


def _resolve(name: str, known: Set[str], outside: Optional[str] = None) -> str:
    """A module of the package: the longest known prefix of ``name`` (an imported name that is
    a class or function of a module is that module); outside the package, ``outside`` (the
    module named in ``from ... import``) or ``name``."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return name if outside is None or name == RUNTIME else outside


def imports_of(module: str, path: Path, known: Set[str]) -> Iterator[Import]:
    """Every import in the file, wherever it is (module level, functions, classes, branches)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, _resolve(alias.name, known), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(here[: len(here) - (node.level - 1)])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module
            for alias in node.names:
                # ``from x import y``: the module x.y if there is one, else a name of x
                yield Import(module, _resolve(f"{target}.{alias.name}", known, target), node.lineno)


def all_imports(root: Path = ROOT, package: str = PACKAGE) -> List[Import]:
    files = package_files(root, package)
    found = (imp for name, path in files.items() for imp in imports_of(name, path, set(files)))
    return list(dict.fromkeys(found))  # ``from m import a, b``: one import of m


def layer(module: str) -> Optional[int]:
    """The rank of ``module``'s layer; None for a module outside them (fairseq, torch, ...)."""
    best = None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (rank, len(prefix))
    return None if best is None else best[0]


def upward(imports: List[Import]) -> List[Import]:
    return [i for i in imports if layer(i.imported) is not None and layer(i.imported) > layer(i.importer)]


def runtime(imports: List[Import]) -> List[Import]:
    return [i for i in imports if i.imported == RUNTIME or i.imported.startswith(RUNTIME + ".")]


def cycles(imports: List[Import]) -> List[List[str]]:
    """The import loops between files: each strongly connected set of more than one file
    (Tarjan), sorted."""
    graph: Dict[str, Set[str]] = {}
    for i in imports:
        if i.imported != i.importer:
            graph.setdefault(i.importer, set()).add(i.imported)
            graph.setdefault(i.imported, set())
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _lines(imports: List[Import]) -> str:
    return "\n".join(f"  {i.importer} (line {i.line}) imports {i.imported}" for i in imports)


def _outstanding(imports: List[Import]) -> List[Import]:
    return [i for i in imports if (i.importer, i.imported) not in TEMPORARY]


IMPORTS = all_imports()


def test_every_file_has_a_layer():
    assert [m for m in package_files(ROOT) if layer(m) is None] == []


def test_no_import_goes_up_a_layer():
    found = _outstanding(upward(IMPORTS))
    assert not found, "imports of a higher layer:\n" + _lines(found)


def test_the_plugin_reaches_the_patch_through_its_package():
    found = _outstanding(runtime(IMPORTS))
    assert not found, f"imports of {RUNTIME} (use fairseq_define_patch.installed):\n" + _lines(found)


def test_no_import_cycle():
    found = cycles(_outstanding(IMPORTS))
    assert not found, "import cycles between files:\n" + "\n".join("  " + " <-> ".join(c) for c in found)


def test_the_temporary_list_is_not_stale():
    """Each entry of TEMPORARY still breaks a rule; one that does not is to leave the list."""
    breaking = {(i.importer, i.imported) for i in upward(IMPORTS) + runtime(IMPORTS)}
    assert sorted(set(TEMPORARY) - breaking) == []


# -- the checker itself, on a made-up package -----------------------------------------------


def _package(tmp_path, files: Dict[str, str]) -> List[Import]:
    for name, text in {"fairseq_define/__init__.py": "", **files}.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return all_imports(tmp_path)


@pytest.mark.parametrize("source, imported", [
    ("from ..tools.params import build_arch\n", "fairseq_define.tools.params"),
    ("def f():\n    from ..tools import params\n", "fairseq_define.tools.params"),
    ("import fairseq_define.tools.params as p\n", "fairseq_define.tools.params"),
    ("from .. import paper_tables\n", "fairseq_define.paper_tables"),
    ("from fairseq_define.paper_tables import TABLES\n", "fairseq_define.paper_tables"),
    ("class A:\n    def f(self):\n        import benchmarks.bench_define\n", "benchmarks.bench_define"),
])
def test_the_checker_finds_an_upward_import_anywhere(tmp_path, source, imported):
    found = upward(_package(tmp_path, {
        "fairseq_define/models/m.py": source,
        "fairseq_define/paper_tables.py": "",
        "fairseq_define/tools/__init__.py": "",
        "fairseq_define/tools/params.py": "from ..models import m\n",
    }))
    assert [(i.importer, i.imported) for i in found] == [("fairseq_define.models.m", imported)]


@pytest.mark.parametrize("source", [
    "from fairseq._define_runtime.checkpoint_fit import INFERENCE_ONLY\n",
    "def f():\n    from fairseq._define_runtime import checkpoint_fit\n",
    "import fairseq._define_runtime.checkpoint_fit\n",
])
def test_the_checker_finds_an_import_of_the_installed_runtime(tmp_path, source):
    found = runtime(_package(tmp_path, {"fairseq_define/tools/t.py": source}))
    assert [i.importer for i in found] == ["fairseq_define.tools.t"]


def test_the_checker_finds_a_cycle_within_a_layer_and_not_a_chain(tmp_path):
    imports = _package(tmp_path, {
        "fairseq_define/models/a.py": "from . import b\n",
        "fairseq_define/models/b.py": "def f():\n    from .c import g\n",
        "fairseq_define/models/c.py": "from .a import x\nfrom ..errors import E\n",
        "fairseq_define/errors.py": "",
        "fairseq_define/models/d.py": "from .a import x\n",
    })
    assert upward(imports) == []
    assert cycles(imports) == [["fairseq_define.models.a", "fairseq_define.models.b", "fairseq_define.models.c"]]


def test_the_checker_places_the_package_and_the_patch():
    assert layer("fairseq_define.modules.config_bounds") < layer("fairseq_define.modules.define.unit")
    assert layer("fairseq_define_patch") < layer("fairseq_define.errors")
    assert layer("fairseq_define.models.lstm_lm") < layer("fairseq_define") < layer("fairseq_define.paper_tables")
    assert layer("fairseq") is None and layer("fairseq_define_patchy") is None


# the folders whose files import the package by name (scripts, benchmarks, studies, tests)
IMPORTING_DIRS = ("fairseq_define", "benchmarks", "studies", "scripts", "run_scripts", "tests")


def _defined_names(path: Path) -> Set[str]:
    """The names a module's top level binds: functions, classes, assignments, imports."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):  # a guarded definition: read through once
            names |= {n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        for t in targets:
            names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def missing_names(root: Path = ROOT) -> List[str]:
    """``from fairseq_define.X import NAME`` anywhere in ``IMPORTING_DIRS`` where NAME is
    neither a submodule of X nor bound at X's top level: an ImportError waiting for the day
    the script runs (benchmarks/collapse_probe.py imported a class the stability refactor
    removed)."""
    found = []
    for top in IMPORTING_DIRS:
        for path in sorted((root / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                        and node.module.split(".")[0] == PACKAGE):
                    continue
                base = root.joinpath(*node.module.split("."))
                source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
                if not source.is_file():
                    found.append(f"{path.relative_to(root)}:{node.lineno}: no module {node.module}")
                    continue
                defined = _defined_names(source)
                for alias in node.names:
                    if alias.name != "*" and alias.name not in defined and not (base / f"{alias.name}.py").is_file() \
                            and not (base / alias.name).is_dir():
                        found.append(f"{path.relative_to(root)}:{node.lineno}: {node.module} has no {alias.name}")
    return found


def test_every_name_imported_from_the_package_exists():
    assert missing_names() == []


def test_a_missing_name_is_found(tmp_path):
    (tmp_path / PACKAGE / "modules").mkdir(parents=True)
    (tmp_path / PACKAGE / "__init__.py").write_text("")
    (tmp_path / PACKAGE / "modules" / "__init__.py").write_text("from .a import kept\n")
    (tmp_path / PACKAGE / "modules" / "a.py").write_text("def kept():\n    pass\n")
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "probe.py").write_text(
        "from fairseq_define.modules.a import kept, gone\nfrom fairseq_define.modules import a, kept\n")
    assert missing_names(tmp_path) == ["benchmarks/probe.py:1: fairseq_define.modules.a has no gone"]
