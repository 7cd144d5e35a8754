"""The imports of a rewritten module: remove those that only the removed code used,
add `import treeclass as tc` (and `from typing import Any` where a field or a converted
NamedTuple's methods need it).

Why not libcst's RemoveImportsVisitor / AddImportsVisitor: they compute scope metadata
over the whole module, about 0.7 s per module, which made a 10,000-line package take
over 10 s. An import is removed here only when the removed code used its name and no
name of the new code does (read with `ast`, string annotations included).
"""

from __future__ import annotations

import ast
import re
import sys
import warnings

import libcst as cst

__all__ = ["fix_imports", "is_docstring"]


def _bound(alias: cst.ImportAlias, *, from_import: bool) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    name = cst.Module([]).code_for_node(alias.name)
    return name if from_import else name.split(".")[0]


def _names_used(code: str) -> set[str]:
    """The names the code reads or binds, those in string annotations included."""
    with warnings.catch_warnings():  # see _engine.parse
        warnings.simplefilter("ignore")  # SyntaxWarning (3.12+), DeprecationWarning (3.11)
        tree = ast.parse(code)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for node in ast.walk(tree):
        annotations = [getattr(node, "annotation", None), getattr(node, "returns", None)]
        for a in annotations:
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                used |= set(re.findall(r"[A-Za-z_]\w*", a.value))
    return used


def _prune(
    stmt: cst.SimpleStatementLine, removed: set[str], used: set[str]
) -> cst.SimpleStatementLine | None:
    """The import statement without the aliases nothing uses any more (None: none left)."""
    if len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Import | cst.ImportFrom):
        return stmt
    small = stmt.body[0]
    if isinstance(small, cst.ImportFrom) and (
        isinstance(small.names, cst.ImportStar) or small.relative
    ):
        return stmt
    names = small.names
    assert not isinstance(names, cst.ImportStar)
    from_import = isinstance(small, cst.ImportFrom)
    keep = [a for a in names if _bound(a, from_import=from_import) not in removed - used]
    if len(keep) == len(names):
        return stmt
    if not keep:
        return None
    keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return stmt.with_changes(body=[small.with_changes(names=keep)])


def is_docstring(stmt: cst.BaseStatement) -> bool:
    """Whether `stmt` is a lone string expression: a module's or a class's docstring."""
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )


def _is_import(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body
    )


def fix_imports(
    module: cst.Module,
    removed: set[str],
    *,
    tc: str,
    has_tc: bool,
    added: dict[str, set[str]],
    also_used: frozenset[str] | set[str] = frozenset(),
    own: str = "",
) -> cst.Module:
    """`module` with the imports of `removed` names pruned and treeclass's added, and the
    standard library's names the new code reads (`added`: module -> names, as `from
    typing import Any, ClassVar`); `own`: the module's top-level package, whose imports
    come after the third-party ones."""
    used = _names_used(module.code) | set(also_used) if removed else set()
    body: list[cst.BaseStatement] = []
    carry: list[cst.EmptyLine] = []  # the comments above an import that went
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and _is_import(stmt) and removed:
            pruned = _prune(stmt, removed, used)
            if pruned is None:
                carry += list(stmt.leading_lines)
                continue
            stmt = pruned
        if carry:
            stmt = stmt.with_changes(leading_lines=_joined(carry, list(stmt.leading_lines)))
            carry = []
        body.append(stmt)
    # The statement now first, if the first went (an import): it must not start the file
    # with a blank line, unless an import is added above it (then it keeps its own).
    first = body[0] if body and module.body and body[0] is not module.body[0] else None
    # After the leading docstring and imports (before any code that uses the names), each
    # in its group: treeclass among the third-party imports, in name order, typing after
    # the standard library's; a name from a module the file imports from already joins
    # that import (`from typing import Any, NamedTuple`).
    end = 0
    while end < len(body) and (_is_import(body[end]) or (end == 0 and is_docstring(body[end]))):
        end += 1
    for source, names in sorted(added.items()):
        if not _join(body, end, source, names):
            line = f"from {source} import {', '.join(sorted(names))}\n"
            _insert(body, end, source, line, third_party=False, own=own)
            end += 1
    if not has_tc:
        line = "import treeclass\n" if tc == "treeclass" else f"import treeclass as {tc}\n"
        _insert(body, end, "treeclass", line, third_party=True, own=own)
    if (
        first is not None
        and body[0] is first
        and isinstance(first, cst.SimpleStatementLine | cst.BaseCompoundStatement)
    ):
        kept = list(first.leading_lines)
        while kept and kept[0].comment is None:
            kept.pop(0)
        body[0] = first.with_changes(leading_lines=kept)
    return module.with_changes(body=body)


def _isort(name: str) -> tuple[int, str]:
    """isort's (and ruff's) order of imported names: constants, classes, the rest."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def _joined(carried: list[cst.EmptyLine], own: list[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The leading lines of a statement after the imports above it went (`carried`, their
    leading lines): their comments stay, above its own lines; blank lines alone do not
    add up (two before a class and one before the import that went stay two), but the
    longer run is kept (one that separated two groups of imports still does)."""
    if any(line.comment is not None for line in carried):
        return [*carried, *own]
    return carried[: max(0, len(carried) - len(own))] + own


def _join(body: list[cst.BaseStatement], end: int, source: str, names: set[str]) -> bool:
    """Adds `names` to the file's `from source import ...` among its leading imports
    `body[:end]` (its names sorted if they were); False if it has none."""
    for i in range(end):
        stmt = body[i]
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            continue
        small = stmt.body[0]
        if (
            not isinstance(small, cst.ImportFrom)
            or small.relative
            or small.module is None
            or isinstance(small.names, cst.ImportStar)
            or cst.Module([]).code_for_node(small.module) != source
        ):
            continue
        aliases = list(small.names)
        bound = [_bound(a, from_import=True) for a in aliases]
        added = sorted(names - set(bound), key=_isort)
        merged = aliases + [cst.ImportAlias(name=cst.Name(n)) for n in added]
        if bound == sorted(bound, key=_isort):
            merged.sort(key=lambda a: _isort(_bound(a, from_import=True)))
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        merged = [a.with_changes(comma=comma) for a in merged[:-1]] + [
            merged[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        ]
        body[i] = stmt.with_changes(body=[small.with_changes(names=merged)])
        return True
    return False


def _group(top: str | None, own: str) -> int | None:
    """0: the standard library, 1: third-party, 2: the module's own package (relative or
    absolute); None: not an import."""
    if top is None:
        return None
    return (
        0
        if top in sys.stdlib_module_names or top == "__future__"
        else (2 if top in ("", own) else 1)
    )


def _insert(
    body: list[cst.BaseStatement], end: int, name: str, line: str, *, third_party: bool, own: str
) -> None:
    at = _place(body, end, name, third_party=third_party, own=own)
    stmt = cst.parse_statement(line)
    assert isinstance(stmt, cst.SimpleStatementLine)
    mine = 1 if third_party else 0
    blank = [cst.EmptyLine(indent=False)]
    if at == 0 or _group(_top(body[at - 1]), own) != mine:  # the first of its group
        stmt = stmt.with_changes(leading_lines=blank)
        following = body[at] if at < len(body) else None
        if isinstance(following, cst.SimpleStatementLine) and _group(_top(following), own) == mine:
            # Above an import of its group: it takes that one's blank lines and comments
            # (a header comment stays on top), and the group stays together.
            stmt = stmt.with_changes(leading_lines=following.leading_lines)
            body[at] = following.with_changes(leading_lines=[])
        elif (
            isinstance(following, cst.SimpleStatementLine | cst.BaseCompoundStatement)
            and not following.leading_lines
        ):
            body[at] = following.with_changes(leading_lines=blank)
    if at == 0:
        stmt = stmt.with_changes(leading_lines=[])
    body.insert(at, stmt)


def _top(stmt: cst.BaseStatement) -> str | None:
    """The top-level module an import statement imports from ("" for a relative one)."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and _is_import(stmt)):
        return None
    small = stmt.body[0]
    if isinstance(small, cst.ImportFrom):
        if small.relative or small.module is None:
            return ""
        return cst.Module([]).code_for_node(small.module).split(".")[0]
    assert isinstance(small, cst.Import)
    return cst.Module([]).code_for_node(small.names[0].name).split(".")[0]


def _place(
    body: list[cst.BaseStatement], end: int, name: str, *, third_party: bool, own: str
) -> int:
    """Where an import of `name` goes in the leading imports `body[:end]`: after the last
    import of its group that sorts before it, else before the first of the next group."""
    at = None
    for i in range(end):
        top = _top(body[i])
        if top is None:
            continue
        group = _group(top, own)
        assert group is not None
        mine = 1 if third_party else 0
        if group < mine or (group == mine and top <= name):
            at = i + 1
        elif at is None:
            at = i
    return end if at is None else at
