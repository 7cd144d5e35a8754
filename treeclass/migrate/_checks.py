"""What a class body and the rest of the run forbid, for every family: methods a
treeclass owns (`replace`, `__setattr__`, a `__post_init__` that writes attributes),
and code elsewhere that assigns or mutates an instance's attributes after construction
or calls the flatten methods that go away with the conversion."""

from __future__ import annotations

import ast
from collections.abc import Iterable

from treeclass.migrate import _messages, _names
from treeclass.migrate._context import Context
from treeclass.migrate._facts import FLATTEN_METHODS, Site, own_first
from treeclass.migrate._flatten_code import Refused

__all__ = ["check_facts", "check_owned", "every"]

_OWNED = {
    "replace": "replace() returns a changed copy",
    "__replace__": "copy.replace() calls replace()",
    "__setattr__": "instances are frozen",
    "__delattr__": "instances are frozen",
    "__slots__": "fields live in the instance __dict__",
    "__post_init__": "a treeclass runs it at construction and replace()",
    "__init_subclass__": "tc.TreeClass makes each subclass a treeclass through it",
}


# Class decorators that do not look at what the class defines.
_SAFE_DECORATORS = frozenset(
    {
        "typing.final",
        "typing_extensions.final",
        "typing.runtime_checkable",
        "typing_extensions.runtime_checkable",
        "typing.type_check_only",
    }
)


def _is_dataclasses_replace(ctx: Context, fn: ast.FunctionDef) -> bool:
    """`def replace(self, **kw): return dataclasses.replace(self, **kw)` (a docstring allowed)."""
    body = [
        s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    a = fn.args
    if (
        len(body) != 1
        or not isinstance(body[0], ast.Return)
        or not isinstance(body[0].value, ast.Call)
    ):
        return False
    call, me = body[0].value, (a.posonlyargs + a.args)[0].arg if a.posonlyargs + a.args else None
    if len(a.posonlyargs + a.args) != 1 or a.vararg or a.kwonlyargs or a.kwarg is None:
        return False
    return (
        _names.dotted(call.func, ctx.names) in ("dataclasses.replace", "copy.replace")
        and len(call.args) == 1
        and isinstance(call.args[0], ast.Name)
        and call.args[0].id == me
        and len(call.keywords) == 1
        and call.keywords[0].arg is None
        and isinstance(call.keywords[0].value, ast.Name)
        and call.keywords[0].value.id == a.kwarg.arg
    )


def _validates(ctx: Context, fn: ast.FunctionDef) -> bool:
    """A `__post_init__` that only checks: it writes no attribute of anything."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
            return False
        if isinstance(node, ast.Call) and (_names.dotted(node.func, ctx.names) or "").split(".")[
            -1
        ] in ("setattr", "__setattr__", "delattr"):
            return False
    return True


def check_owned(ctx: Context) -> tuple[str, ...]:
    """Refuses a class that defines what a treeclass owns; returns the methods to remove
    (a `replace` equal to `dataclasses.replace`). A `__post_init__` that only validates
    is kept: a treeclass runs it at construction and replace()."""
    remove: list[str] = []
    for i, decorator in enumerate(ctx.found.node.decorator_list):
        qualified = _names.dotted(decorator, ctx.names) or ""
        if (
            i != ctx.found.decorator
            and qualified not in _names.DATACLASS
            and qualified not in _SAFE_DECORATORS
            and i not in ctx.harmless
        ):
            raise Refused(_messages.DECORATOR.format(code=ctx.code(decorator)))
    for stmt in ctx.found.node.body:
        names = [stmt.name] if isinstance(stmt, ast.FunctionDef | ast.ClassDef) else []
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
        for name in names:
            if (
                isinstance(stmt, ast.FunctionDef)
                and name == "replace"
                and _is_dataclasses_replace(ctx, stmt)
            ):
                remove.append(name)
            elif (
                isinstance(stmt, ast.FunctionDef)
                and name == "__post_init__"
                and _validates(ctx, stmt)
            ):
                continue
            elif name in _OWNED:
                raise Refused(
                    _messages.OWNED.format(cls=ctx.found.name, name=name, why=_OWNED[name])
                )
    return tuple(remove)


def check_facts(ctx: Context, attrs: list[str]) -> list[str]:
    """Every reason the run gives against converting: code that assigns or mutates
    these attributes of an instance after construction, or calls the flatten methods
    that go away."""
    facts, name, reasons = ctx.facts, ctx.found.name, []
    for (cls, attr), sites in facts.self_assigned.items():
        if cls == name:
            reasons.append(_messages.ASSIGNED.format(attr=attr, site=every(sites)))
    for attr in attrs:
        for table, message in (
            (facts.mutated, _messages.MUTATED),
            (facts.assigned, _messages.ASSIGNED),
        ):
            events = own_first(
                [e for e in table.get(attr, []) if e.owner is None or e.owner in ctx.related], name
            )
            if events:
                reasons.append(message.format(attr=attr, site=every(e.site for e in events)))
    other_classes = {f.name for f in ctx.found_in_module if f.name != name}
    # A class that defines none of the methods (a dataclass family, a class registered
    # with functions) is reached by no call of them, whatever the receiver.
    for method in (m for m in FLATTEN_METHODS if m in ctx.methods):
        calls = [
            e
            for e in facts.flatten_calls.get(method, [])
            if _reaches(e[0], ctx.related, other_classes)
        ]
        if calls:  # its own first: a call on an instance of it, of a base, then the rest
            ordered = sorted(
                calls, key=lambda e: (e[0] != f"self:{name}", not e[0].startswith("self:"))
            )
            site = every(site for _, site in ordered)
            reasons.append(_messages.CALLED.format(method=f"{method}()", site=site))
    return list(dict.fromkeys(reasons))


def every(sites: Iterable[Site]) -> str:
    """Every site of one reason, in order, each once: a user fixes them in one pass."""
    return "; ".join(str(s) for s in dict.fromkeys(sites))


def _reaches(owner: str, related: set[str], other_classes: set[str]) -> bool:
    """A flatten call on `owner` ("self:Cls", "name:x", "": any expression) may reach
    an instance of the class whose name and bases are `related`."""
    kind, _, who = owner.partition(":")
    return kind == "" or who in related or (kind == "name" and who not in other_classes)
