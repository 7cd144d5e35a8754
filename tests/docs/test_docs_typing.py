"""The examples users copy type-check: every python block of README.md and docs/ that
tests/docs/test_docs.py runs passes pyright and mypy under the project's strict settings
(pyproject.toml: strict, less what only echoes jax's missing annotations) with no
error at all.

Each markdown file becomes one module, its blocks in order, as the doctest runs them
(one namespace), after the imports of what the doctest namespace predefines (`jax`,
`jnp`, `np`, `tc`).

`>>>` examples contribute their source; an expression statement shown for its output
(`>>> n.tau`) becomes `_ = n.tau`, so strict pyright does not call it unused. A class
or function defined again by a later block (docs often show a second version of
`Neuron`) is renamed from there on (`Neuron__2`), as two modules would see it.

A block that shows a type error on purpose says so in its info string:

    ```python type-error

and then at least one of the checkers must flag it, so the marker cannot go stale; its
diagnostics are not counted as failures.
"""

from __future__ import annotations

import ast
import dataclasses
import doctest
import importlib.util
import io
import json
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
from doc_blocks import DOC_FILES, FENCE, ROOT, runs

pytestmark = [pytest.mark.typing, pytest.mark.newest_jax]

# The doctest namespace (tests/docs/test_docs.py), as imports; a page that writes one of
# these imports itself does not get it twice (pyright flags a duplicate import).
PREDEFINED = ("import jax", "import jax.numpy as jnp", "import numpy as np", "import treeclass as tc")
ERROR_MARK = "type-error"


@dataclasses.dataclass
class Module:
    """One markdown file as a python module, with a map back to the markdown lines."""

    doc: Path
    name: str
    lines: list[str] = dataclasses.field(default_factory=list)
    origin: list[int | None] = dataclasses.field(default_factory=list)  # markdown line (1-based)
    error_blocks: list[range] = dataclasses.field(default_factory=list)  # markdown lines

    def add(self, text: str, md_line: int | None) -> None:
        for i, line in enumerate(text.splitlines()):
            self.lines.append(line)
            self.origin.append(None if md_line is None else md_line + i)

    @property
    def label(self) -> str:
        return str(self.doc.relative_to(ROOT))


def _expression_statements_assigned(source: str) -> str:
    """`n.tau` -> `_ = n.tau` for each top-level expression statement that is not a
    call (a call may be there for its effect; pyright accepts an unused call result)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source  # the checkers report it, at this line
    lines = source.splitlines(keepends=True)
    for node in reversed(tree.body):
        if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Call | ast.Await):
            row = node.lineno - 1
            lines[row] = lines[row][: node.col_offset] + "_ = " + lines[row][node.col_offset :]
    return "".join(lines)


def _module(doc: Path) -> Module | None:
    text = doc.read_text(encoding="utf-8")
    module = Module(doc, "docs_" + "_".join(doc.relative_to(ROOT).with_suffix("").parts).replace("-", "_"))
    parser = doctest.DocTestParser()
    blocks = 0
    for match in FENCE.finditer(text):
        words = match["info"].split()
        if not runs(words):
            continue
        blocks += 1
        body = match["body"]
        first = text.count("\n", 0, match.start("body")) + 1  # markdown line of the body
        if ERROR_MARK in words:
            module.error_blocks.append(range(first, first + body.count("\n")))
        if ">>>" in body:
            for example in parser.get_examples(body):
                module.add(_expression_statements_assigned(example.source), first + example.lineno)
        else:
            module.add(body, first)
    if not blocks:
        return None
    header = [line for line in PREDEFINED if line.split()[-1] not in _imported(module.lines)]
    names = [line.split()[-1] for line in header]
    # `_ = (...)` uses each predefined name, as the doctest namespace may go unused.
    header.append(f"_ = ({', '.join(names)},)" if names else "")
    module.lines[:0] = header
    module.origin[:0] = [None] * len(header)
    return module


def _imported(lines: list[str]) -> set[str]:
    """The names the page's own import statements bind (`import jax, jax.numpy as jnp`
    binds `jax` and `jnp`)."""
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return set()
    return {
        alias.asname or alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }


def _rename_redefinitions(source: str) -> str:
    """From its second module-level `class`/`def` on, a name is `name__2`, `name__3`."""
    tree = ast.parse(source)
    starts: dict[str, list[int]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            starts.setdefault(node.name, []).append(node.lineno)
    again = {name: rows for name, rows in starts.items() if len(rows) > 1}
    if not again:
        return source
    out: list[tokenize.TokenInfo] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        # `eqx.nn.Linear` is an attribute, not the page's `Linear`: names after a dot stay.
        after_dot = bool(out) and out[-1].type == tokenize.OP and out[-1].string == "."
        if token.type == tokenize.NAME and token.string in again and not after_dot:
            version = sum(1 for row in again[token.string] if row <= token.start[0])
            if version > 1:
                token = token._replace(string=f"{token.string}__{version}")
        out.append(token)
    return tokenize.untokenize(out)


@dataclasses.dataclass(frozen=True)
class Finding:
    module: str
    line: int  # in the generated module
    rule: str
    message: str


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Module], dict[str, list[Finding]]]:
    out = tmp_path_factory.mktemp("docs_typing")
    modules = {}
    for doc in DOC_FILES:
        module = _module(doc)
        if module is None:
            continue
        source = _rename_redefinitions("\n".join(module.lines) + "\n")
        (out / f"{module.name}.py").write_text(source)
        modules[module.name] = module
    files = [str(out / f"{name}.py") for name in modules]
    commands = {
        "pyright": [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable, *files],
        # --allow-redefinition: `x = 1` then `x = jnp.ones(2)` in a later block is two
        # examples, not a bug.
        "mypy": [sys.executable, "-m", "mypy", "--strict", "--allow-redefinition", "--output", "json", *files],
    }
    running = {
        name: subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, command in commands.items()
        if importlib.util.find_spec(name) is not None
    }
    found: dict[str, list[Finding]] = {}
    for name, proc in running.items():
        stdout, stderr = proc.communicate(timeout=600)
        if proc.returncode not in (0, 1):
            pytest.fail(f"{name} exited {proc.returncode}:\n{stderr}\n{stdout[-2000:]}")
        if name == "pyright":
            found[name] = [
                Finding(Path(d["file"]).stem, d["range"]["start"]["line"] + 1, d.get("rule", ""), d["message"])
                for d in json.loads(stdout)["generalDiagnostics"]
                if d["severity"] == "error"
            ]
        else:
            found[name] = [
                Finding(Path(d["file"]).stem, d["line"], d["code"] or "", d["message"])
                for d in map(json.loads, filter(lambda s: s.startswith("{"), stdout.splitlines()))
                if d["severity"] == "error"
            ]
    return modules, found


def _where(modules: dict[str, Module], f: Finding) -> tuple[str, int | None]:
    module = modules[f.module]
    line = module.origin[f.line - 1] if f.line - 1 < len(module.origin) else None
    return module.label, line


def _intended(modules: dict[str, Module], f: Finding) -> bool:
    _, line = _where(modules, f)
    return line is not None and any(line in block for block in modules[f.module].error_blocks)


# The pages with python blocks (api.md, changelog.md and a few more have none).
TYPED_DOCS = [str(p.relative_to(ROOT)) for p in DOC_FILES if _module(p) is not None]


@pytest.mark.parametrize("checker", ["pyright", "mypy"])
@pytest.mark.parametrize("doc", TYPED_DOCS)
def test_docs_examples_type_check(docs, checker, doc):
    modules, found = docs
    if checker not in found:
        pytest.skip(f"{checker} is not installed (pip install -e '.[test]')")
    bad = [
        f for f in found[checker]
        if f.module in modules and modules[f.module].label == doc and not _intended(modules, f)
    ]
    shown = "\n".join(
        f"{label}:{line or 'header'}: [{f.rule}] {f.message}"
        for f in bad
        for label, line in [_where(modules, f)]
    )
    assert not bad, f"{checker}: {len(bad)} error(s) in {doc}'s examples\n{shown}"


def test_type_error_blocks_show_an_error(docs):
    modules, found = docs
    flagged = {
        (f.module, block.start)
        for findings in found.values()
        for f in findings
        if f.module in modules
        for block in modules[f.module].error_blocks
        if _where(modules, f)[1] in block
    }
    silent = [
        f"{m.label}:{block.start}"
        for m in modules.values()
        for block in m.error_blocks
        if (m.name, block.start) not in flagged
    ]
    assert not silent, f"blocks marked {ERROR_MARK!r} that no checker flags: {silent}"


def test_docs_are_collected(docs):
    # Guards the collection: the README and the quickstart are among the checked files.
    modules, _ = docs
    labels = {m.label for m in modules.values()}
    assert {"README.md", "docs/quickstart.md"} <= labels
