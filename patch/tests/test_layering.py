"""The patch's layers: nothing of it imports the plugin (fairseq_define) or runs without it
only by chance; its modules import one another without a loop; the fixes and the mechanics
never import ``runtime/`` (it runs as fairseq's copy, ``fairseq._define_runtime``, which
``installed.py`` reaches by name when called). The files are read, not imported (``ast``), so
an import inside a function counts."""

import ast
from pathlib import Path
from typing import Dict, Iterator, Set, Tuple

import pytest

PACKAGE = "fairseq_define_patch"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE


def modules() -> Dict[str, Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path) -> Iterator[Tuple[str, int]]:
    """(imported module, line) of every import in the file, relative ones resolved."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            # `from . import x`: x may be a module of the package
            yield base, node.lineno
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno


def internal_graph() -> Dict[str, Set[str]]:
    known = modules()
    graph = {}
    for name, path in known.items():
        graph[name] = {target for target, _ in imports(name, path) if target in known and target != name}
    return graph


def test_nothing_imports_the_plugin():
    found = [f"{path.relative_to(ROOT.parent)}:{line} imports {target}"
             for name, path in modules().items() for target, line in imports(name, path)
             if target.split(".")[0] == "fairseq_define"]
    assert not found, "\n".join(found)


def _cycle(graph: Dict[str, Set[str]]):
    """One import loop of the graph, or None (depth-first search)."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_two_modules_import_each_other_directly_or_round_a_loop():
    graph = internal_graph()
    # a package's __init__ re-exporting its submodules and a submodule reading its package's
    # name are not the loops this guards against: imports of a package itself are left out
    packages = {name for name, path in modules().items() if path.name == "__init__.py"}
    graph = {name: {t for t in targets if t not in packages} for name, targets in graph.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


@pytest.mark.parametrize("graph, loop", [
    ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
    ({"a": {"b"}, "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
])
def test_the_loop_finder(graph, loop):
    assert _cycle(graph) == loop


def test_only_runtime_imports_runtime():
    runtime = f"{PACKAGE}.runtime"
    found = [f"{name} imports {target}" for name, targets in internal_graph().items()
             if not name.startswith(runtime) for target in targets if target.startswith(runtime + ".")]
    assert not found, "\n".join(found)


def test_the_relative_import_resolution():
    """``from .checkpoint_fit import x`` in runtime/checkpoint_weights.py is that module."""
    name = f"{PACKAGE}.runtime.checkpoint_weights"
    found = {t for t, _ in imports(name, modules()[name])}
    assert f"{PACKAGE}.runtime.checkpoint_fit" in found
