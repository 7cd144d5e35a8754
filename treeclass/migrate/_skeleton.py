"""Rewrites a module in time proportional to what changes: libcst parses and prints
only the top-level statements the plans touch (the converted classes, their
registrations and flatten functions, the imports and the docstring); every other run
of statements stands in as one placeholder line and comes back byte for byte.

Parsing and printing a whole module with libcst costs about 0.5 ms a line: a
6,000-line file with one pytree class took 5 s. The names the skipped code reads are
read with `ast` (already parsed) so that no import it needs is removed.
"""

from __future__ import annotations

import ast
import re

import libcst as cst

from treeclass.migrate import _rewrite
from treeclass.migrate._plan import Plan
from treeclass.migrate._text import LINE

__all__ = ["rewrite_source"]


def _touched(stmt: ast.stmt, plans: dict[str, Plan], functions: set[str], first: bool) -> bool:
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return True
    if first and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return True  # the docstring: the new imports go below it
    if isinstance(stmt, ast.ClassDef):
        return stmt.name in plans
    if isinstance(stmt, ast.FunctionDef):
        return stmt.name in functions
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        args = stmt.value.args
        return bool(args) and isinstance(args[0], ast.Name) and args[0].id in plans
    return False


def _names_read(stmts: list[ast.stmt], text: str, among: set[str]) -> set[str]:
    """The names of `among` (what the module's imports bind: all that the import pruning
    asks about) that code reads, those in string annotations included (see _imports).
    `text` is the code's source: a name it never writes as a word is not read, so the
    walk runs only where one of them is written."""
    among = {n for n in among if re.search(rf"\b{re.escape(n)}\b", text)}
    if not among:
        return set()
    used: set[str] = set()
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and len(node.value) < 200
            ):
                used |= set(re.findall(r"[A-Za-z_]\w*", node.value))
    return used & among


def _imported(tree: ast.Module) -> set[str]:
    """The names the module's top-level imports bind (`import a.b` binds `a`)."""
    out: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            out |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return out


def rewrite_source(
    source: str,
    tree: ast.Module,
    plans: list[Plan],
    names: dict[str, str],
    *,
    tc: str,
    form: str,
    own: str = "",
) -> str:
    """`source` with the plans applied."""
    by_name = {p.cls: p for p in plans}
    functions = {f for p in plans for f in p.remove_functions}
    lines = LINE.findall(source)
    newline = next(
        (line[len(line.rstrip("\r\n")) :] for line in lines if line.rstrip("\r\n") != line), "\n"
    )
    # Top-level statements grouped so that no two groups share a line (`a = 1; b = 2`).
    groups: list[
        tuple[int, int, bool, list[ast.stmt]]
    ] = []  # (first line, last line, touched, statements)
    for i, stmt in enumerate(tree.body):
        touched = _touched(stmt, by_name, functions, first=i == 0)
        start = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
        end = stmt.end_lineno or stmt.lineno
        if groups and start <= groups[-1][1]:
            first, last, was, stmts = groups.pop()
            groups.append((first, max(last, end), was or touched, [*stmts, stmt]))
        else:
            groups.append((start, end, touched, [stmt]))
    skeleton: list[str] = []
    kept: dict[str, str] = {}
    skipped: list[ast.stmt] = []
    at = 0
    for start, end, touched, stmts in groups:
        if touched:
            skeleton.append("".join(lines[at:end]))
        elif kept and skeleton[-1] in kept:  # extend the placeholder before it
            kept[skeleton[-1]] += "".join(lines[at:end])
            skipped += stmts
        else:
            # The blank lines and comments above stay outside the placeholder, where
            # libcst sees them (as the statement's leading lines).
            marker = f"__treeclass_migrate_kept_{len(kept)}__{newline}"
            kept[marker] = "".join(lines[start - 1 : end])
            skeleton += ["".join(lines[at : start - 1]), marker]
            skipped += stmts
        at = end
    skeleton.append("".join(lines[at:]))
    module = cst.parse_module("".join(skeleton))
    new = _rewrite.rewrite(
        module,
        plans,
        names,
        tc=tc,
        form=form,
        also_used=_names_read(skipped, "".join(kept.values()), _imported(tree)),
        own=own,
    ).code
    out: list[str] = LINE.findall(new)
    return "".join(kept.get(line, line) for line in out)
