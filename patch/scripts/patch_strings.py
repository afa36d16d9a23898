"""Lines of Python held in string constants in fairseq_define_patch/ (issue 44 of fairseq-define).

The patch's logic belongs in ordinary modules (fairseq_define_patch/runtime/, copied whole
into fairseq), where it can be imported, linted and tested; what is left in strings is the
text of its edits. This counts the lines of every string constant of five lines or more
that is not a docstring (implicitly concatenated literals count as one constant), and the
largest single edit: the lines it writes (an inserted hook, a replacement) and the lines of
fairseq's text it matches (a span is matched by its first and last line only). tests/test_patch.py
holds both to a bound.

    python patch/scripts/patch_strings.py [--all]
"""

import ast
import sys
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fairseq_define_patch"  # ROOT: the patch's folder, patch/
MIN_LINES = 5


def _docstrings(tree: ast.AST) -> set:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def string_blocks(package: Path = PACKAGE) -> List[Tuple[int, str]]:
    """(lines, "path:line") of each non-docstring string constant of MIN_LINES lines or more."""
    blocks = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                lines = node.value.count("\n")
                if lines >= MIN_LINES:
                    blocks.append((lines, f"{path.relative_to(package.parent)}:{node.lineno}"))
    return sorted(blocks, reverse=True)


def edit_sides() -> dict:
    """Lines of the edits' new texts (what the patch writes into fairseq's files) and of their
    old texts (fairseq's own text they match, which --revert restores), with the largest of each."""
    sys.path.insert(0, str(PACKAGE.parent))
    import fairseq_define_patch as fp

    edits = [(e, p.path) for p in fp.PATCHES for e in p.edits]
    new = [(e.new.count("\n"), path) for e, path in edits]
    old = [(e.old.count("\n") + e.through.count("\n"), path) for e, path in edits]
    return {"edits": len(edits), "new": sum(n for n, _ in new), "largest new": max(new),
            "old": sum(n for n, _ in old), "largest old": max(old)}


def largest_edit() -> Tuple[int, str]:
    """(lines, file) of the edit whose new text is longest."""
    return edit_sides()["largest new"]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    blocks = string_blocks()
    for lines, where in blocks if "--all" in argv else blocks[:15]:
        sys.stdout.write(f"{lines:5d}  {where}\n")
    sides = edit_sides()
    sys.stdout.write(
        f"total: {sum(n for n, _ in blocks)} lines in {len(blocks)} strings of {MIN_LINES}+ lines; "
        f"{sides['edits']} edits write {sides['new']} lines (largest: {sides['largest new'][0]}, "
        f"{sides['largest new'][1]}) over {sides['old']} lines of fairseq's text (largest: "
        f"{sides['largest old'][0]}, {sides['largest old'][1]})\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
