"""The documentation runs: every ```python block of README.md and docs/*.md, and the
docstring example of every treeclass module, is executed as a doctest.

A block whose info string says `errors=type` shows errors raised by JAX or Python,
whose wording changes between releases: they are compared by type only (the message
stays on the page for readers, and no doctest directive shows there). A block whose
info string says `notest` is an illustration and is not run. A block that says `requires=NAME` (```python requires=flax) runs only where the module NAME
is installed, as `pytest.importorskip` does for a test: equinox, flax and chex come
with the `bench` extra, not with `test`, and the migration guide's "before" blocks
need them. Such a block must not define names that later blocks use.

The files are located relative to this file, and `treeclass` is the installed package
(the repository root is not on `sys.path`), so this checks what users install.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import inspect
import itertools
import pkgutil
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from doc_blocks import DOC_FILES, FENCE, ROOT, runs

import treeclass

# The examples are what users copy, so they run under JAX's defaults, not under the
# strict promotion the library's own tests use (conftest.py).
pytestmark = pytest.mark.usefixtures("jax_defaults")
# Every module of the package, subpackages walked (treeclass.migrate's modules have
# their own tests).
MODULES = [treeclass.__name__] + [
    m.name
    for m in pkgutil.walk_packages(treeclass.__path__, prefix=f"{treeclass.__name__}.")
    if not m.name.startswith(f"{treeclass.__name__}.migrate.")
]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


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
    for match in FENCE.finditer(text):
        words = match["info"].split()
        if not runs(words):
            continue
        body = match["body"]
        first_line = text.count("\n", 0, match.start("body"))
        if ">>>" in body:
            found = parser.get_examples(body, name=path.name)
        else:
            found = [doctest.Example(body, "")]
        for example in found:
            example.lineno += first_line
            if "errors=type" in words and example.exc_msg is not None:
                example.options[doctest.IGNORE_EXCEPTION_DETAIL] = True
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


def _attribute_doctests(module: Any) -> list[doctest.DocTest]:
    """The examples in docstrings of module-level assignments (`Static = ...` followed
    by a string). Python drops those strings and `DocTestFinder` never sees them, but
    the API page shows them (griffe reads them from the source), so they run too."""
    body = ast.parse(inspect.getsource(module)).body
    parser = doctest.DocTestParser()
    tests = []
    for assign, string in itertools.pairwise(body):
        target = (
            assign.targets[0] if isinstance(assign, ast.Assign) else getattr(assign, "target", None)
        )
        if (
            isinstance(target, ast.Name)
            and isinstance(string, ast.Expr)
            and isinstance(string.value, ast.Constant)
            and isinstance(string.value.value, str)
        ):
            name = f"{module.__name__}.{target.id}"
            test = parser.get_doctest(
                string.value.value, _globs(), name, module.__file__, string.lineno
            )
            if test.examples:
                tests.append(test)
    return tests


def _module_doctests(module: Any) -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [*finder.find(module, globs=_globs()), *_attribute_doctests(module)]


@pytest.mark.parametrize("name", MODULES)
def test_module_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    failures, report = _run(_module_doctests(module))
    assert failures == 0, f"{name}: {failures} failing example(s)\n{report}"


@pytest.mark.parametrize("name", treeclass.__all__)
def test_public_name_has_example(name: str) -> None:
    # STYLE.md rule 5: every public name's docstring ends with an Example that runs:
    # functions, classes (exceptions and warnings included) and `Static`. The module
    # test above runs it; this checks that there is one to run.
    obj = getattr(treeclass, name)
    if inspect.isfunction(obj) or inspect.isclass(obj):
        qualified = f"{obj.__module__}.{obj.__qualname__}"
        tests = _module_doctests(importlib.import_module(obj.__module__))
        found = any(t.name == qualified and t.examples for t in tests)
    else:  # an alias such as Static: its docstring follows the assignment
        qualified = f"treeclass._*.{name}"
        tests = [t for m in MODULES for t in _attribute_doctests(importlib.import_module(m))]
        found = any(t.name.endswith(f".{name}") and t.examples for t in tests)
    assert found, (
        f"treeclass.{name} has no docstring example (looked for doctests named {qualified})"
    )
