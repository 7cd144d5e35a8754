"""docs/guarantees.md cannot rot: every test it names (`tests/test_x.py::test_name`)
is a test function defined at the top level of that file, every guarantee names at
least one, and the page is in the site's nav."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PAGE = ROOT / "docs" / "guarantees.md"
# A pytest node id as the page writes it, in a code span: `tests/test_x.py::test_name`.
_NODE = re.compile(r"`(?P<file>tests/[\w/]+\.py)::(?P<name>\w+)`")


def _tests_defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


def _guarantees(text: str) -> list[str]:
    """The page's list items, each with its continuation lines."""
    items: list[str] = []
    for line in text.splitlines():
        if line.startswith("- "):
            items.append(line)
        elif items and line.startswith("  "):
            items[-1] += "\n" + line
    return items


def _missing(text: str) -> list[str]:
    """The tests `text` names that are not defined where it says."""
    defined: dict[Path, set[str]] = {}
    missing = []
    for m in _NODE.finditer(text):
        path = ROOT / m["file"]
        if not path.is_file():
            missing.append(f"{m['file']} (no such file)")
        elif m["name"] not in defined.setdefault(path, _tests_defined(path)):
            missing.append(f"{m['file']}::{m['name']}")
    return missing


def test_every_named_test_exists() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert len(_NODE.findall(text)) > 100, "the page names tests as `tests/test_x.py::test_name`"
    missing = _missing(text)
    assert not missing, f"docs/guarantees.md names tests that do not exist: {missing}"


def test_every_guarantee_names_a_test() -> None:
    items = _guarantees(PAGE.read_text(encoding="utf-8"))
    assert len(items) > 40
    untested = [item.splitlines()[0] for item in items if not _NODE.search(item)]
    assert not untested, f"guarantees without a test: {untested}"


def test_the_page_is_in_the_nav() -> None:
    assert re.search(r"^\s+- [^:\n]+: guarantees\.md$", (ROOT / "mkdocs.yml").read_text(), re.MULTILINE)


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("- a.\n  `tests/test_guarantees_page.py::test_every_named_test_exists`.\n", False),
        ("- a.\n  `tests/test_guarantees_page.py::test_no_such_test`.\n", True),
        ("- a.\n  `tests/test_no_such_file.py::test_x`.\n", True),
        # A helper of the file is no test.
        ("- a.\n  `tests/test_guarantees_page.py::_tests_defined`.\n", True),
    ],
)
def test_the_check_finds_a_missing_test(text: str, missing: bool) -> None:
    assert bool(_missing(text)) == missing
