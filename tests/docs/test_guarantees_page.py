"""docs/guarantees.md cannot rot: every test it names (`tests/test_x.py::test_name`)
is a test function defined at the top level of that file, every guarantee names at
least one, and the page is in the site's nav. And the project stands alone: no code,
doc or test cites a document, tracker or path outside the repository; the guarantees
are stated on that page, and a comment states the behaviour it is about."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "guarantees.md"
# A pytest node id as the page writes it, in a code span: `tests/test_x.py::test_name`.
_NODE = re.compile(r"`(?P<file>tests/[\w/]+\.py)::(?P<name>\w+)`")
# Citations of what a reader of the repository cannot open: the contract document that
# lived beside it, the tracker's issues, its rounds of work, the machine's paths. Spelled
# in pieces so that this file does not cite them itself.
_OUTSIDE = re.compile(
    "|".join([r"\b" + "SP" + r"EC\b", r"(?i:\bissues? #?[0-9])", r"(?i:\bround [0-9])", "/" + "work/"])
)
_TEXT = (".py", ".pyi", ".md", ".yml", ".yaml", ".toml", ".cfg", ".txt")


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


def _project_files() -> list[Path]:
    """The project's own text files (what a build writes is left out)."""
    tops = [ROOT / name for name in ("README.md", "CHANGELOG.md", "mkdocs.yml", "pyproject.toml")]
    folders = ("treeclass", "tests", "docs", "examples", "benchmarks", ".ci")
    inside = [p for folder in folders for p in sorted((ROOT / folder).rglob("*"))]
    return [p for p in tops + inside if p.is_file() and (p.suffix in _TEXT or p.parent.name == ".ci")]


def test_nothing_cites_what_is_outside_the_repository() -> None:
    files = _project_files()
    assert ROOT / "treeclass" / "README.md" in files
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _OUTSIDE.search(line)
    ]
    assert not found, "state the behaviour, or name the docs page:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("line", "cites"),
    [
        ("# Regression (issue" + " 27, defect 6): a cache", True),
        ("# Issue" + " #34: a layer passed to two fields", True),
        ("### Round" + " 5: one restore", True),
        ("(" + "SP" + "EC §11)", True),
        ("see /" + "work/notes/x.md", True),
        ("FIELD_" + "SP" + "EC: Final = ...", False),
        ("jax.sharding.PartitionSpec", False),
        ("jnp.round(x, 2)", False),
        ("an issue with the shapes", False),
    ],
)
def test_the_citation_check_tells_a_citation(line: str, cites: bool) -> None:
    assert bool(_OUTSIDE.search(line)) == cites


def test_the_page_is_in_the_nav() -> None:
    assert re.search(r"^\s+- [^:\n]+: guarantees\.md$", (ROOT / "mkdocs.yml").read_text(), re.MULTILINE)


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("- a.\n  `tests/docs/test_guarantees_page.py::test_every_named_test_exists`.\n", False),
        ("- a.\n  `tests/docs/test_guarantees_page.py::test_no_such_test`.\n", True),
        ("- a.\n  `tests/test_no_such_file.py::test_x`.\n", True),
        # A helper of the file is no test.
        ("- a.\n  `tests/docs/test_guarantees_page.py::_tests_defined`.\n", True),
    ],
)
def test_the_check_finds_a_missing_test(text: str, missing: bool) -> None:
    assert bool(_missing(text)) == missing
