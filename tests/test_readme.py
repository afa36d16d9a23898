"""The README and docs/architectures.md name architectures as the plugin registers them: the
generated list is current, and every name the README's architecture table gives (braces
expanded) is registered, so a renamed or removed architecture cannot linger on the front page."""

import itertools
import re
from pathlib import Path

from fairseq.models import ARCH_CONFIG_REGISTRY

import fairseq_define  # noqa: F401  (registers the architectures)
from fairseq_define.tools.params import architectures_markdown

ROOT = Path(__file__).resolve().parent.parent


def expand(pattern: str):
    """``a_{x,y}_b{1,2}`` -> a_x_b1, a_x_b2, a_y_b1, a_y_b2 (shell brace expansion)."""
    parts = re.split(r"\{([^}]*)\}", pattern)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def readme_architecture_table() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("| family | `--arch`")
    return text[start:text.index("\n\n", start)]


def test_docs_architectures_is_the_generated_list():
    assert (ROOT / "docs" / "architectures.md").read_text(encoding="utf-8") == architectures_markdown(), (
        "regenerate: fairseq-define-params --list-archs > docs/architectures.md")


def test_every_architecture_the_readme_names_is_registered():
    names = [n for code in re.findall(r"`(define_[a-z0-9_{},]+)`", readme_architecture_table()) for n in expand(code)]
    assert len(names) > 40
    assert [n for n in names if n not in ARCH_CONFIG_REGISTRY] == []


def test_expand():
    assert expand("a_{x,y}_b{1,2}") == ["a_x_b1", "a_x_b2", "a_y_b1", "a_y_b2"]


def test_readme_is_a_front_page_that_reaches_every_doc():
    """The README stays short (issue 50: a front page of about 150 lines, depth in docs/) and
    links every page of docs/, so the depth moved there stays one click away."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 165
    linked = set(re.findall(r"\]\((docs/[\w/.-]+\.md)(?:#[\w-]*)?\)", text))
    assert sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md") if f"docs/{p.name}" not in linked) == []
