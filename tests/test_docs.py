"""The documentation runs: every ```python block of README.md and docs/*.md, and the
docstring example of every treeclass module, is executed as a doctest.

The files are located relative to this file, and `treeclass` is the installed package
(the repository root is not on `sys.path`), so this checks what users install.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treeclass

ROOT = Path(__file__).parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MODULES = [treeclass.__name__] + [
    f"{treeclass.__name__}.{m.name}" for m in pkgutil.iter_modules(treeclass.__path__)
]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

# A fenced block: ```python (or py/pycon) ... ```. The info string may carry `notest`
# for an illustration that is not meant to run (```python notest); GitHub highlights
# it from the first word only.
_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_PYTHON = {"python", "py", "pycon"}


def _globs() -> dict[str, Any]:
    # __name__ gives classes defined in the examples a module, as in a script.
    return {"jax": jax, "jnp": jnp, "tc": treeclass, "np": np, "__name__": "__main__"}


def _markdown_doctest(path: Path) -> doctest.DocTest:
    """One DocTest for the file: its python blocks, in order, in one namespace.

    Why not `doctest.testfile(path)`: it reads the whole file as one docstring, so
    the closing fence of a block is taken as expected output of the last example:

        >>> n.tau
        20.0
        ```            <- doctest expects this line to be printed too

    Here each block's body is parsed on its own. A block without `>>>` runs as one
    example that must print nothing.
    """
    text = path.read_text(encoding="utf-8")
    parser = doctest.DocTestParser()
    examples: list[doctest.Example] = []
    for match in _FENCE.finditer(text):
        words = match["info"].split()
        if not words or words[0] not in _PYTHON or "notest" in words:
            continue
        body = match["body"]
        first_line = text.count("\n", 0, match.start("body"))
        if ">>>" in body:
            found = parser.get_examples(body, name=path.name)
        else:
            found = [doctest.Example(body, "")]
        for example in found:
            example.lineno += first_line
        examples.extend(found)
    name = str(path.relative_to(ROOT))
    return doctest.DocTest(examples, _globs(), name, str(path), 0, text)


def _run(tests: list[doctest.DocTest]) -> tuple[int, str]:
    """Runs the tests; returns the failure count and doctest's report."""
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report: list[str] = []
    for test in tests:
        runner.run(test, out=report.append)
    return runner.failures, "".join(report)


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_examples_run(path: Path) -> None:
    test = _markdown_doctest(path)
    failures, report = _run([test])
    assert failures == 0, f"{path.name}: {failures} failing example(s)\n{report}"


def test_readme_has_examples() -> None:
    # Guards the block parser: a README whose examples were silently skipped would pass.
    assert len(_markdown_doctest(ROOT / "README.md").examples) >= 10


@pytest.mark.parametrize("name", MODULES)
def test_module_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, globs=_globs())
    failures, report = _run(tests)
    assert failures == 0, f"{name}: {failures} failing example(s)\n{report}"


@pytest.mark.parametrize(
    "name", [n for n in treeclass.__all__ if inspect.isfunction(getattr(treeclass, n))]
)
def test_public_function_has_example(name: str) -> None:
    # STYLE.md rule 5: every public function's docstring ends with an Example that runs.
    # The module test above runs it; this checks that there is one to run.
    fn = getattr(treeclass, name)
    module = importlib.import_module(fn.__module__)
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, globs=_globs())
    qualified = f"{fn.__module__}.{fn.__qualname__}"
    assert any(t.name == qualified and t.examples for t in tests), (
        f"treeclass.{name}() has no docstring example (looked for doctests named {qualified})"
    )
