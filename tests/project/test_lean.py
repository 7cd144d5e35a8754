"""The core stays small enough to read in one sitting: `treeclass/` without `treeclass/migrate/`
(the codemod, never imported by `import treeclass`) holds at most CEILING statements.

Statements, not lines: `ast.stmt` nodes, so a docstring is one statement however long, a
parenthesised `from m import (a as a, b as b)` is one, and a message wrapped over four lines
is one. Squeezing code onto fewer lines changes nothing here; what lowers the count is
logic written once: no duplicated branches, no dead code, no helper that only wraps a call."""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).parents[2] / "treeclass"
CEILING = 3300

_HOW = """\
treeclass/ outside migrate/ holds {count} statements; the ceiling is {ceiling}.

The ceiling keeps the core small enough to read top to bottom (treeclass/README.md maps
it). Count as this test does, from the repository root:

    python3 - <<'PY'
    import ast, pathlib
    print(sum(sum(isinstance(n, ast.stmt) for n in ast.walk(ast.parse(p.read_text())))
              for p in pathlib.Path('treeclass').rglob('*.py') if 'migrate' not in p.parts))
    PY

and make room by removing logic written twice or never reached, not by joining lines
(`;`, tuple assignments, dropped names or docstrings): the formatter lays out the rest."""


def statements(path: pathlib.Path) -> int:
    """The `ast.stmt` nodes of one module, nested ones included."""
    return sum(isinstance(node, ast.stmt) for node in ast.walk(ast.parse(path.read_text())))


def core_statements() -> int:
    return sum(statements(p) for p in PACKAGE.rglob("*.py") if "migrate" not in p.parts)


def test_a_statement_is_a_node_not_a_line():
    # What the ceiling counts: a docstring and a wrapped import are one statement each,
    # two statements joined by `;` are still two.
    source = '"""Three\nlines."""\nfrom m import (\n    a as a,\n    b as b,\n)\nx = 1; y = 2\n'
    assert sum(isinstance(node, ast.stmt) for node in ast.walk(ast.parse(source))) == 4


def test_the_count_covers_the_core_and_leaves_migrate_out():
    counted = {p.relative_to(PACKAGE).parts[0] for p in PACKAGE.rglob("*.py")}
    assert {"_core", "_jit", "_checkpoint", "__init__.py"} <= counted
    migrate = sum(statements(p) for p in (PACKAGE / "migrate").rglob("*.py"))
    assert migrate > 0
    total = sum(statements(p) for p in PACKAGE.rglob("*.py"))
    assert core_statements() == total - migrate


def test_the_core_stays_under_its_statement_ceiling():
    count = core_statements()
    assert count <= CEILING, _HOW.format(count=f"{count:,}", ceiling=f"{CEILING:,}")
