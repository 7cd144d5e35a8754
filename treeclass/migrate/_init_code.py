"""Reads a hand-written `__init__` with `ast`: its parameters, the attributes it sets
(and how), and whether it is plain enough for the generated `__init__` to replace it.

The question it answers for the analysis: when the old `tree_unflatten` calls
`cls(...)`, does `__init__` store each flattened value unchanged (then skipping it, as
a treeclass's unflatten does, changes nothing), or does it recompute something?
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Literal, TypeGuard

from treeclass.migrate import _messages
from treeclass.migrate._flatten_code import Refused, Slot
from treeclass.migrate._names import dotted
from treeclass.migrate._text import Text

__all__ = ["IDEMPOTENT_ANY", "Assigned", "Init", "Param", "bind", "passed_through", "read_init"]

# Conversions that return their argument unchanged when given their own output, so
# skipping them at unflatten changes nothing (a treeclass runs them at construction,
# as converters): jax's array conversions for any field (on a tracer, at unflatten under
# jit, the old code returned the tracer), the value constructors for static fields. For
# a child, `float(x)` or `np.asarray(x)` is no such thing: after `jax.device_put` the old
# unflatten turned the jax.Array back into a float (a numpy array), a treeclass keeps it.
IDEMPOTENT_ANY: frozenset[str] = frozenset({"jax.numpy.asarray", "jax.numpy.array", "tuple"})
_IDEMPOTENT_STATIC: frozenset[str] = frozenset(
    {"bool", "str", "frozenset", "int", "float", "numpy.asarray"}
)


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    kind: Literal["posonly", "pos", "kwonly", "varargs", "varkw"]
    default: ast.expr | None
    annotation: ast.expr | None


@dataclasses.dataclass(frozen=True)
class Assigned:
    attr: str
    value: ast.expr
    top_level: bool
    line: int
    annotation: ast.expr | None  # `self.x: T = ...`


@dataclasses.dataclass
class Init:
    node: ast.FunctionDef
    self_name: str
    params: list[Param]
    assigned: dict[str, list[Assigned]]
    rebound: set[str]  # parameter names assigned to in the body
    only_assignments: bool  # nothing but `self.x = ...` (and a docstring)
    has_docstring: bool
    super_calls: list[ast.Call]


def _params(fn: ast.FunctionDef) -> list[Param]:
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(
        a.defaults
    )
    params = [
        Param(arg.arg, "posonly" if i < len(a.posonlyargs) else "pos", default, arg.annotation)
        for i, (arg, default) in enumerate(zip(positional, defaults, strict=True))
    ][1:]
    if a.vararg:
        params.append(Param(a.vararg.arg, "varargs", None, a.vararg.annotation))
    params += [
        Param(arg.arg, "kwonly", d, arg.annotation)
        for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
    ]
    if a.kwarg:
        params.append(Param(a.kwarg.arg, "varkw", None, a.kwarg.annotation))
    return params


def read_init(fn: ast.FunctionDef, text: Text) -> Init:
    """What `fn` (an `__init__`) does; refuses assignment forms it cannot rewrite."""
    positional = fn.args.posonlyargs + fn.args.args
    if not positional:
        raise Refused(_messages.INIT_FORM.format(code="__init__ without self", line=fn.lineno))
    me = positional[0].arg
    body = fn.body
    has_docstring = (
        bool(body) and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    )
    init = Init(fn, me, _params(fn), {}, set(), True, has_docstring, [])
    top = set(map(id, body))

    def is_self_attr(node: ast.expr) -> TypeGuard[ast.Attribute]:
        return (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == me
        )

    def record(
        target: ast.Attribute, value: ast.expr, stmt: ast.stmt, annotation: ast.expr | None = None
    ) -> None:
        entry = Assigned(target.attr, value, id(stmt) in top, stmt.lineno, annotation)
        init.assigned.setdefault(target.attr, []).append(entry)

    def refuse(stmt: ast.AST) -> Refused:
        code = " ".join(text.code(stmt).split())
        return Refused(
            _messages.INIT_FORM.format(code=code, line=getattr(stmt, "lineno", fn.lineno))
        )

    def visit(stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.Assign):
                targets = stmt.targets
                touches_self = any(
                    is_self_attr(t)
                    or (isinstance(t, ast.Tuple) and any(is_self_attr(e) for e in t.elts))
                    for t in targets
                )
                if touches_self and len(targets) != 1:
                    raise refuse(stmt)
                target = targets[0]
                if is_self_attr(target):
                    record(target, stmt.value, stmt)
                    continue
                if isinstance(target, ast.Tuple) and any(is_self_attr(e) for e in target.elts):
                    value = stmt.value
                    reads_self = any(
                        isinstance(n, ast.Name) and n.id == me for n in ast.walk(value)
                    )
                    if (
                        not (isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts))
                        or reads_self
                    ):
                        raise refuse(stmt)
                    for t, v in zip(target.elts, value.elts, strict=True):
                        if not is_self_attr(t):
                            raise refuse(stmt)
                        record(t, v, stmt)
                    continue
            elif isinstance(stmt, ast.AnnAssign) and is_self_attr(stmt.target):
                if stmt.value is None:
                    raise refuse(stmt)
                record(stmt.target, stmt.value, stmt, stmt.annotation)
                continue
            elif isinstance(stmt, ast.AugAssign) and is_self_attr(stmt.target):
                raise refuse(stmt)
            elif isinstance(stmt, ast.Expr) and stmt is body[0] and has_docstring:
                continue
            init.only_assignments = False
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                        raise refuse(node)
                continue
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list):
                    visit(
                        [s for s in inner if isinstance(s, ast.stmt)]
                        + [s for h in inner if isinstance(h, ast.ExceptHandler) for s in h.body]
                    )
            for node in ast.walk(stmt):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.ctx, ast.Store)
                    and is_self_attr(node)
                    and not isinstance(stmt, ast.If | ast.For | ast.While | ast.With | ast.Try)
                ):
                    raise refuse(stmt)

    visit(body)
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "__init__"
        ):
            init.super_calls.append(node)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            init.rebound.add(node.id)
    return init


def bind(init: Init, args: list[Slot], kwargs: dict[str, Slot]) -> dict[str, Slot | None]:
    """Binds a `cls(*args, **kwargs)` call to the parameters, as Python does; None for
    a parameter left to its default."""
    bound: dict[str, Slot | None] = {}
    positional = [p for p in init.params if p.kind in ("posonly", "pos")]
    if len(args) > len(positional):
        msg = _messages.UNFLATTEN.format(
            detail=f"__init__ takes {len(positional)} positional arguments, "
            f"tree_unflatten passes {len(args)}"
        )
        raise Refused(msg)
    for param, slot in zip(positional, args, strict=False):
        bound[param.name] = slot
    by_name = {p.name: p for p in init.params if p.kind in ("pos", "kwonly")}
    for name, slot in kwargs.items():
        if name not in by_name or name in bound:
            raise Refused(
                _messages.UNFLATTEN.format(
                    detail=f"__init__ takes no keyword `{name}` (or takes it twice)"
                )
            )
        bound[name] = slot
    for param in init.params:
        if param.name not in bound and param.kind not in ("varargs", "varkw"):
            if param.default is None:
                raise Refused(
                    _messages.UNFLATTEN.format(detail=f"__init__'s `{param.name}` gets no value")
                )
            bound[param.name] = None
    return bound


def passed_through(
    init: Init, assigned: Assigned, names: dict[str, str], *, static: bool
) -> str | None:
    """The parameter whose value `self.x = ...` stores unchanged (up to an idempotent
    conversion), or None."""
    value = assigned.value
    if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
        allowed = IDEMPOTENT_ANY | (_IDEMPOTENT_STATIC if static else frozenset())
        if dotted(value.func, names) in allowed:
            value = value.args[0]
    params = {p.name for p in init.params if p.kind not in ("varargs", "varkw")}
    if isinstance(value, ast.Name) and value.id in params and value.id not in init.rebound:
        return value.id
    return None
