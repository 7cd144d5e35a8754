"""Applies the plans to a module's concrete syntax tree (libcst), so that everything
the plans do not touch (formatting, comments, other classes) is left byte for byte.

Per converted class: its registering decorators and bases go, `tc.TreeClass` (or
`@tc.treeclass`) comes in, fields are declared (hand-written classes) or rewritten
in place (dataclasses), the flatten methods and a plain `__init__` are removed, and a
kept `__init__` writes its fields with `object.__setattr__`. Per module: the
registration statements and flatten functions go; then `_imports.py` removes the
imports only the removed code used and adds `import treeclass as tc` (and
`typing.Any` where a field needs it).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

import libcst as cst

from treeclass.migrate import _names
from treeclass.migrate._imports import fix_imports, is_docstring
from treeclass.migrate._namedtuple import HEAD, imports, tuple_protocol
from treeclass.migrate._plan import Field, Plan

__all__ = ["rewrite"]

_NO_SPACE = cst.AssignEqual(
    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
)


class _Names(cst.CSTVisitor):
    """The names a piece of code reads (to find the imports it used)."""

    def __init__(self) -> None:
        self.found: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.found.add(node.value)


def _names_in(nodes: Sequence[cst.CSTNode]) -> set[str]:
    visitor = _Names()
    for node in nodes:
        node.visit(visitor)
    return visitor.found


class _SetAttr(cst.CSTTransformer):
    """`self.x = v` -> `object.__setattr__(self, "x", v)` in a kept __init__ (not in
    nested functions or classes, whose `self` is another object)."""

    def __init__(self, me: str) -> None:
        self.me = me
        self.depth = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.depth += 1
        return self.depth == 1

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        self.depth -= 1
        return updated_node

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def _attr(self, node: cst.BaseExpression) -> str | None:
        if (
            isinstance(node, cst.Attribute)
            and isinstance(node.value, cst.Name)
            and node.value.value == self.me
        ):
            return node.attr.value
        return None

    def _call(self, attr: str, value: cst.BaseExpression) -> cst.Expr:
        args = [cst.Arg(cst.Name(self.me)), cst.Arg(cst.SimpleString(f'"{attr}"')), cst.Arg(value)]
        return cst.Expr(cst.Call(cst.parse_expression("object.__setattr__"), args))

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.FlattenSentinel[cst.SimpleStatementLine]:
        out: list[cst.BaseSmallStatement] = []
        for stmt in updated_node.body:
            if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0].target
                attr = self._attr(target)
                if attr is not None:
                    out.append(self._call(attr, stmt.value))
                    continue
                if isinstance(target, cst.Tuple) and isinstance(stmt.value, cst.Tuple):
                    pairs = [
                        (self._attr(t.value), v.value)
                        for t, v in zip(target.elements, stmt.value.elements, strict=True)
                    ]
                    out += [self._call(a, v) for a, v in pairs if a is not None]
                    continue
            if isinstance(stmt, cst.AnnAssign) and stmt.value is not None:
                attr = self._attr(stmt.target)
                if attr is not None:
                    out.append(self._call(attr, stmt.value))
                    continue
            out.append(stmt)
        if len(out) == len(updated_node.body) or len(updated_node.body) != 1:
            return updated_node.with_changes(body=out)
        # A tuple assignment split in several calls: one line each, the comment on the last.
        lines = [cst.SimpleStatementLine([s]) for s in out]
        lines[0] = lines[0].with_changes(leading_lines=updated_node.leading_lines)
        lines[-1] = lines[-1].with_changes(trailing_whitespace=updated_node.trailing_whitespace)
        return cst.FlattenSentinel(lines)


def _ann_name(stmt: cst.BaseStatement) -> str | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        small = stmt.body[0]
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
            return small.target.value
    return None


def _declaration(field: Field, moved: cst.SimpleStatementLine | None) -> cst.SimpleStatementLine:
    annotation = cst.Annotation(cst.parse_expression(field.annotation or "Any"))
    if moved is not None:
        small = moved.body[0]
        assert isinstance(small, cst.AnnAssign)
        return moved.with_changes(body=[small.with_changes(annotation=annotation)])
    value = f" = {field.value}" if field.value else ""
    line = cst.parse_statement(f"{field.name}: {field.annotation}{value}\n")
    assert isinstance(line, cst.SimpleStatementLine)
    return line


def _rewrite_field(stmt: cst.SimpleStatementLine, field: Field) -> cst.SimpleStatementLine:
    small = stmt.body[0]
    assert isinstance(small, cst.AnnAssign)
    if field.annotation is not None:
        small = small.with_changes(
            annotation=small.annotation.with_changes(
                annotation=cst.parse_expression(field.annotation)
            )
        )
    if field.value == "":
        small = small.with_changes(value=None, equal=cst.MaybeSentinel.DEFAULT)
    elif field.value is not None:
        small = small.with_changes(value=cst.parse_expression(field.value))
    return stmt.with_changes(body=[small])


def _block(node: cst.ClassDef) -> cst.IndentedBlock:
    """The class's body as an indented block: `class C(Base): ...` (the body on the
    header line) becomes the same statements on their own line."""
    if isinstance(node.body, cst.IndentedBlock):
        return node.body
    suite = node.body
    assert isinstance(suite, cst.SimpleStatementSuite)
    line = cst.SimpleStatementLine(list(suite.body), trailing_whitespace=suite.trailing_whitespace)
    return cst.IndentedBlock([line])


def _body(
    node: cst.ClassDef, plan: Plan, removed: list[cst.CSTNode], indent: str
) -> list[cst.BaseStatement]:
    fields = {f.name: f for f in plan.fields}
    moved: dict[str, cst.SimpleStatementLine] = {}
    body: list[cst.BaseStatement] = []
    for stmt in _block(node).body:
        name = _ann_name(stmt)
        if isinstance(stmt, cst.FunctionDef) and (
            stmt.name.value in plan.remove_methods
            or (stmt.name.value == "__init__" and not plan.keep_init)
        ):
            removed.append(stmt)
        elif name in plan.moved_annotations and isinstance(stmt, cst.SimpleStatementLine):
            moved[name] = stmt
        elif (
            name in fields and not plan.declare_fields and isinstance(stmt, cst.SimpleStatementLine)
        ):
            removed.append(stmt)
            body.append(_rewrite_field(stmt, fields[name]))
        elif isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
            me = stmt.params.params[0].name.value
            body.append(stmt.visit(_SetAttr(me)))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
        else:
            body.append(stmt)
    if plan.declare_fields and plan.fields:
        at = 1 if body and is_docstring(body[0]) else 0
        block = [_declaration(f, moved.get(f.name)) for f in plan.fields]
        if at and not block[0].leading_lines:
            block[0] = block[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        following = body[at] if at < len(body) else None
        if (
            isinstance(following, cst.SimpleStatementLine | cst.BaseCompoundStatement)
            and not following.leading_lines
        ):
            body[at] = following.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        body[at:at] = block
    if plan.tuple_protocol is not None:
        body += _tuple_protocol(plan, indent)
    if not body:
        body = [cst.SimpleStatementLine([cst.Pass()])]
    return body


def _tuple_protocol(plan: Plan, indent: str) -> list[cst.BaseStatement]:
    """A converted NamedTuple's tuple protocol (_namedtuple.py), one blank line before
    each method and the comment before the first, parsed with the module's indent so it
    prints as the module's."""
    config = cst.PartialParserConfig(default_indent=indent)
    added: list[cst.BaseStatement] = []
    fields = list(plan.tuple_protocol or ())
    for code in tuple_protocol(plan.cls, fields, set(plan.defined), indent):
        (stmt,) = cst.parse_module(code, config=config).body
        lines = [cst.EmptyLine(indent=False)]
        if not added:
            lines += [cst.EmptyLine(comment=cst.Comment(c)) for c in HEAD]
        added.append(stmt.with_changes(leading_lines=lines))
    return added


def _class(
    node: cst.ClassDef,
    plan: Plan,
    tc: str,
    form: str,
    removed: list[cst.CSTNode],
    indent: str = "    ",
) -> cst.ClassDef:
    options = [
        cst.Arg(cst.parse_expression(v), keyword=cst.Name(k), equal=_NO_SPACE)
        for k, v in plan.options.items()
    ]
    decorators = list(node.decorators)
    removed += [decorators[i] for i in plan.remove_decorators]
    kept_bases = [
        b.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        for i, b in enumerate(node.bases)
        if i not in plan.remove_bases
    ]
    removed += [b for i, b in enumerate(node.bases) if i in plan.remove_bases]
    if form == "decorator":
        decorator = cst.Decorator(cst.parse_expression(f"{tc}.treeclass"))
        if options:
            decorator = decorator.with_changes(decorator=cst.Call(decorator.decorator, options))
        at = min(plan.remove_decorators, default=len(decorators))
        decorators = [d for i, d in enumerate(decorators) if i not in plan.remove_decorators]
        decorators.insert(min(at, len(decorators)), decorator)
        keywords = [] if plan.drop_keywords else list(node.keywords)
    else:
        decorators = [d for i, d in enumerate(decorators) if i not in plan.remove_decorators]
        if plan.add_base:
            kept_bases.insert(0, cst.Arg(cst.parse_expression(f"{tc}.TreeClass")))
        keywords = [*([] if plan.drop_keywords else node.keywords), *options]
    changes: dict[str, object] = {
        "decorators": decorators,
        "bases": kept_bases,
        "keywords": keywords,
    }
    if not kept_bases and not keywords:
        changes.update(lpar=cst.MaybeSentinel.DEFAULT, rpar=cst.MaybeSentinel.DEFAULT)
    changes["body"] = _block(node).with_changes(body=_body(node, plan, removed, indent))
    return node.with_changes(**changes)


def _is_registration(
    stmt: cst.BaseStatement, plans: dict[str, Plan], names: dict[str, str]
) -> bool:
    if not (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
    ):
        return False
    call = stmt.body[0].value
    if not (isinstance(call, cst.Call) and call.args and isinstance(call.args[0].value, cst.Name)):
        return False
    plan = plans.get(call.args[0].value.value)
    registering = {*_names.REGISTER_CLASS, *_names.REGISTER_FUNCTION, *_names.REGISTER_DATACLASS}
    if plan is None or not plan.remove_registration:
        return False
    # What the function is named, read as `_names.dotted` reads every name of the tool.
    func = ast.parse(cst.Module([]).code_for_node(call.func).strip(), mode="eval").body
    return _names.dotted(func, names) in registering


# Where each name the new code may import is already imported from, under that name.
_SAME = {
    name: (f"typing.{name}", f"typing_extensions.{name}", f"collections.abc.{name}")
    for name in ("Any", "ClassVar", "Iterator", "Iterable")
}


def rewrite(
    module: cst.Module,
    plans: list[Plan],
    names: dict[str, str],
    *,
    tc: str,
    form: str,
    also_used: frozenset[str] | set[str] = frozenset(),
    own: str = "",
) -> cst.Module:
    """`module` with the plans applied (unchanged if `plans` is empty); `also_used`: the
    names that code not in `module` reads (see _skeleton)."""
    if not plans:
        return module
    by_name = {p.cls: p for p in plans}
    functions = {f for p in plans for f in p.remove_functions}
    removed: list[cst.CSTNode] = []
    body: list[cst.BaseStatement] = []
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef) and stmt.name.value in by_name:
            plan = by_name[stmt.name.value]
            body.append(_class(stmt, plan, tc, form, removed, module.default_indent))
        elif (
            isinstance(stmt, cst.FunctionDef) and stmt.name.value in functions
        ) or _is_registration(stmt, by_name, names):
            removed.append(stmt)
        else:
            body.append(stmt)
    added: dict[str, set[str]] = {}  # module -> the names the new code reads from it
    if any(f.annotation in ("Any", f"{tc}.Static[Any]") for p in plans for f in p.fields):
        added["typing"] = {"Any"}
    for p in plans:
        if p.tuple_protocol is not None:
            for source, wanted in imports(list(p.tuple_protocol), set(p.defined)).items():
                added.setdefault(source, set()).update(wanted)
    added = {  # less those the module imports already
        source: {n for n in wanted if names.get(n) not in _SAME[n]}
        for source, wanted in added.items()
    }
    # `import treeclass as tc` only where the new code names it (a subclass of a class
    # converted in another module may need nothing).
    uses_tc = form == "decorator" or any(p.add_base for p in plans)
    uses_tc = uses_tc or any(
        f"{tc}." in (f.annotation or "") + (f.value or "") for p in plans for f in p.fields
    )
    has_tc = names.get(tc) == "treeclass" or not uses_tc
    new = module.with_changes(body=body)
    return fix_imports(
        new,
        _names_in(removed),
        tc=tc,
        has_tc=has_tc,
        added={source: wanted for source, wanted in added.items() if wanted},
        also_used=also_used,
        own=own,
    )
