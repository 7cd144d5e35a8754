"""Reads a hand-written flatten and unflatten (methods, module-level functions or
lambdas) with `ast`.

`read_flatten` turns `return (self.a, self.b), (self.k,)` into children `["a", "b"]`
and aux `Aux("tuple", ["k"])`: one attribute per child, one per static value. It
refuses anything else, with the reason: control flow (structure that depends on
values), computed aux data, a child that is not an attribute, a variable-length
sequence of children.

`read_unflatten` turns the unflatten into where each value goes: the arguments of a
`cls(...)` call, or the attributes a bypass (`object.__new__(cls)`) sets, each as a
`Slot` of the flattened data (child 1, aux key "k").
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Literal

from treeclass.migrate import _messages
from treeclass.migrate._names import dotted

__all__ = ["Aux", "Flattened", "Refused", "Slot", "Unflattened", "read_flatten", "read_unflatten"]

# ("c", i): child i; ("a", None): the aux data itself; ("a", j) / ("a", "key"): an
# element of an aux tuple or dict.
Slot = tuple[Literal["c", "a"], int | str | None]


class Refused(Exception):  # noqa: N818 - a decision, not an error
    """The analysis refuses the class; `args[0]` is the reason."""


@dataclasses.dataclass(frozen=True)
class Aux:
    kind: Literal["none", "single", "tuple", "dict"]
    attrs: list[str]
    keys: list[str] = dataclasses.field(default_factory=list[str])  # dict keys, with attrs

    def slots(self) -> dict[str, Slot]:
        if self.kind == "single":
            return {self.attrs[0]: ("a", None)}
        if self.kind == "tuple":
            return {attr: ("a", i) for i, attr in enumerate(self.attrs)}
        return {attr: ("a", key) for key, attr in zip(self.keys, self.attrs, strict=True)}


@dataclasses.dataclass(frozen=True)
class Flattened:
    children: list[str]
    aux: Aux
    keys: list[str | None] | None = None  # GetAttrKey names, for flatten_with_keys

    def slots(self) -> dict[str, Slot]:
        return {**{attr: ("c", i) for i, attr in enumerate(self.children)}, **self.aux.slots()}


@dataclasses.dataclass(frozen=True)
class Unflattened:
    kind: Literal["call", "bypass"]
    args: list[Slot]  # call: positional arguments
    kwargs: dict[str, Slot]  # call: keyword arguments; bypass: attribute -> slot


def _code(node: ast.AST) -> str:
    return " ".join(ast.unparse(node).split())


def _body(fn: ast.FunctionDef | ast.Lambda) -> list[ast.stmt]:
    if isinstance(fn, ast.Lambda):
        return [ast.Return(fn.body, lineno=fn.lineno, col_offset=fn.col_offset)]
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return body


_CONTROL: dict[type[ast.AST], str] = {
    ast.If: "an `if`",
    ast.For: "a `for` loop",
    ast.While: "a `while` loop",
    ast.Try: "a `try`",
    ast.Match: "a `match`",
    ast.IfExp: "a conditional expression",
    ast.AugAssign: "an augmented assignment (`+=`)",
}


def _locals(fn: ast.FunctionDef | ast.Lambda, where: str) -> tuple[dict[str, ast.expr], ast.expr]:
    """The single-assignment local names of a flatten, and its return value."""
    env: dict[str, ast.expr] = {}
    body = _body(fn)
    for node in (n for stmt in body for n in ast.walk(stmt)):
        for kind, what in _CONTROL.items():
            if isinstance(node, kind):
                line = getattr(node, "lineno", 0)
                raise Refused(_messages.VALUE_DEPENDENT.format(what=what, where=where, line=line))
    for stmt in body[:-1]:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            name = stmt.targets[0].id
            if name in env:
                raise Refused(_messages.FLATTEN_SHAPE.format(code=f"`{name}` assigned twice"))
            env[name] = stmt.value
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Tuple):
            target, value = stmt.targets[0], stmt.value
            if not (isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts)):
                raise Refused(_messages.FLATTEN_SHAPE.format(code=_code(stmt)))
            for t, v in zip(target.elts, value.elts, strict=True):
                if not isinstance(t, ast.Name):
                    raise Refused(_messages.FLATTEN_SHAPE.format(code=_code(stmt)))
                env[t.id] = v
        else:
            raise Refused(_messages.FLATTEN_SHAPE.format(code=_code(stmt)))
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        raise Refused(_messages.FLATTEN_SHAPE.format(code="no final `return children, aux`"))
    return env, body[-1].value


def _resolve(node: ast.expr, env: dict[str, ast.expr]) -> ast.expr:
    seen = 0
    while isinstance(node, ast.Name) and node.id in env and seen < 20:
        node, seen = env[node.id], seen + 1
    return node


def _attr(node: ast.expr, obj: str) -> str | None:
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == obj
    ):
        return node.attr
    return None


def _read_aux(node: ast.expr, obj: str, env: dict[str, ast.expr]) -> Aux:
    node = _resolve(node, env)
    if isinstance(node, ast.Constant) and node.value is None:
        return Aux("none", [])
    if isinstance(node, ast.Tuple | ast.List):
        attrs = [_attr(_resolve(e, env), obj) for e in node.elts]
        for element, attr in zip(node.elts, attrs, strict=True):
            if attr is None:
                raise Refused(_messages.AUX_COMPUTED.format(code=_code(element)))
        return Aux("none" if not attrs else "tuple", [a for a in attrs if a is not None])
    if isinstance(node, ast.Dict):
        keys: list[str] = []
        values: list[str] = []
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:  # `{**self._kwargs}`: keys the code cannot read (ott-jax)
                raise Refused(_messages.AUX_SPREAD.format(code=_code(value)))
            attr = _attr(_resolve(value, env), obj)
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)) or attr is None:
                raise Refused(_messages.AUX_COMPUTED.format(code=_code(value)))
            keys.append(key.value)
            values.append(attr)
        return Aux("dict" if values else "none", values, keys)
    attr = _attr(node, obj)
    if attr is None:
        raise Refused(_messages.AUX_COMPUTED.format(code=_code(node)))
    return Aux("single", [attr])


def _read_children(
    node: ast.expr, obj: str, env: dict[str, ast.expr], *, keyed: bool
) -> tuple[list[str], list[str | None]]:
    node = _resolve(node, env)
    whole = _attr(node, obj)
    if whole is not None:
        raise Refused(
            _messages.VARIABLE_CHILDREN.format(what=f"`{obj}.{whole}` itself", attr=whole)
        )
    if not isinstance(node, ast.Tuple | ast.List):
        raise Refused(_messages.FLATTEN_SHAPE.format(code=_code(node)))
    children: list[str] = []
    keys: list[str | None] = []
    for i, element in enumerate(node.elts):
        element = _resolve(element, env)
        if isinstance(element, ast.Starred):
            raise Refused(
                _messages.VARIABLE_CHILDREN.format(
                    what=f"`{_code(element)}`", attr=_code(element.value).split(".")[-1]
                )
            )
        key: str | None = None
        if keyed:
            if not (isinstance(element, ast.Tuple) and len(element.elts) == 2):
                raise Refused(_messages.FLATTEN_SHAPE.format(code=_code(element)))
            key_node, element = element.elts
            is_attr_key = isinstance(key_node, ast.Call) and (
                dotted(key_node.func, {}) or ""
            ).endswith("GetAttrKey")
            arg = key_node.args[0] if isinstance(key_node, ast.Call) and key_node.args else None
            if is_attr_key and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                key = arg.value
            else:
                key = f"<{_code(key_node)}>"
        attr = _attr(element, obj)
        if attr is None:
            raise Refused(_messages.CHILD_NOT_ATTRIBUTE.format(index=i, code=_code(element)))
        children.append(attr)
        keys.append(key)
    return children, keys


def read_flatten(fn: ast.FunctionDef | ast.Lambda, where: str, *, keyed: bool = False) -> Flattened:
    """Children and aux of a flatten (`keyed`: a flatten_with_keys)."""
    args = fn.args.posonlyargs + fn.args.args
    if len(args) != 1 or fn.args.vararg or fn.args.kwarg:
        raise Refused(_messages.FLATTEN_SHAPE.format(code=f"{where} takes {len(args)} arguments"))
    obj = args[0].arg
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("tree_flatten", "tree_flatten_with_keys")
        ):
            raise Refused(_messages.SUPER_FLATTEN)
    env, value = _locals(fn, where)
    value = _resolve(value, env)
    if not (isinstance(value, ast.Tuple) and len(value.elts) == 2):
        raise Refused(_messages.FLATTEN_SHAPE.format(code=_code(value)))
    children, keys = _read_children(value.elts[0], obj, env, keyed=keyed)
    aux = _read_aux(value.elts[1], obj, env)
    every = children + aux.attrs
    for attr in every:
        if every.count(attr) > 1:
            raise Refused(_messages.REPEATED.format(attr=attr))
    return Flattened(children, aux, keys if keyed else None)


def _is_new(node: ast.expr, cls_names: set[str]) -> bool:
    """`object.__new__(cls)`, `cls.__new__(cls)`, `Cls.__new__(Cls)`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "__new__"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id in cls_names
    )


class _Reader:
    def __init__(self, flat: Flattened, aux_name: str, children_name: str) -> None:
        self.flat = flat
        self.env: dict[str, Slot | str] = {aux_name: "aux", children_name: "children"}

    def slot(self, node: ast.expr) -> Slot | str:
        if isinstance(node, ast.Name) and node.id in self.env:
            return self.env[node.id]
        if (
            isinstance(node, ast.Call)
            and dotted(node.func, {}) in ("tuple", "list")
            and len(node.args) == 1
        ):
            inner = self.slot(node.args[0])
            if inner == "children":
                return inner
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            whole, index = self.slot(node.value), node.slice.value
            if (
                whole == "children"
                and isinstance(index, int)
                and 0 <= index < len(self.flat.children)
            ):
                return ("c", index)
            aux = self.flat.aux
            if (
                whole == "aux"
                and aux.kind == "tuple"
                and isinstance(index, int)
                and 0 <= index < len(aux.attrs)
            ):
                return ("a", index)
            if whole == "aux" and aux.kind == "dict" and index in aux.keys:
                return ("a", index)
        raise Refused(
            _messages.UNFLATTEN.format(detail=f"`{_code(node)}` is not one child or one aux value")
        )

    def whole(self, value: Slot | str) -> Slot:
        if value == "aux" and self.flat.aux.kind == "single":
            return ("a", None)
        if isinstance(value, tuple):
            return value
        raise Refused(_messages.UNFLATTEN.format(detail=f"all of `{value}` passed as one value"))

    def unpack(self, target: ast.Tuple | ast.List, value: Slot | str) -> None:
        if value == "children":
            slots: list[Slot] = [("c", i) for i in range(len(self.flat.children))]
        elif value == "aux" and self.flat.aux.kind == "tuple":
            slots = [("a", i) for i in range(len(self.flat.aux.attrs))]
        else:
            raise Refused(_messages.UNFLATTEN.format(detail=f"`{_code(target)}` unpacks `{value}`"))
        if len(target.elts) != len(slots) or not all(isinstance(t, ast.Name) for t in target.elts):
            raise Refused(
                _messages.UNFLATTEN.format(detail=f"`{_code(target)}` unpacks {len(slots)} values")
            )
        for t, s in zip(target.elts, slots, strict=True):
            self.env[t.id] = s  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]

    def expand(self, node: ast.expr) -> list[Slot]:
        value = self.slot(node)
        if value == "children":
            return [("c", i) for i in range(len(self.flat.children))]
        if value == "aux" and self.flat.aux.kind in ("tuple", "none"):
            return [("a", i) for i in range(len(self.flat.aux.attrs))]
        raise Refused(_messages.UNFLATTEN.format(detail=f"`*{_code(node)}`"))


def read_unflatten(
    fn: ast.FunctionDef | ast.Lambda, flat: Flattened, cls_names: set[str], *, method: bool
) -> Unflattened:
    """Where each argument of a `cls(...)` call, or each attribute of a bypass, comes from."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if method:
        params = params[1:]
        cls_names = {*cls_names, (fn.args.posonlyargs + fn.args.args)[0].arg}
    if len(params) != 2 or fn.args.vararg or fn.args.kwarg:
        raise Refused(_messages.UNFLATTEN.format(detail=f"it takes {len(params)} arguments"))
    reader = _Reader(flat, params[0], params[1])
    bypass: str | None = None
    attrs: dict[str, Slot] = {}
    for stmt in _body(fn):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name) and _is_new(stmt.value, cls_names):
                bypass = target.id
            elif isinstance(target, ast.Name):
                reader.env[target.id] = reader.slot(stmt.value)
            elif isinstance(target, ast.Tuple | ast.List) and all(
                isinstance(t, ast.Name) for t in target.elts
            ):
                reader.unpack(target, reader.slot(stmt.value))
            elif (
                bypass
                and isinstance(target, ast.Tuple | ast.List)
                and all(_attr(t, bypass) for t in target.elts)
            ):
                names = ast.Tuple(
                    [ast.Name(f"_tc_{i}", ast.Store()) for i in range(len(target.elts))]
                )
                reader.unpack(names, reader.slot(stmt.value))
                for i, t in enumerate(target.elts):
                    attrs[_attr(t, bypass) or ""] = reader.whole(reader.env[f"_tc_{i}"])
            elif bypass and _attr(target, bypass):
                attrs[_attr(target, bypass) or ""] = reader.whole(reader.slot(stmt.value))
            else:
                raise Refused(_messages.UNFLATTEN.format(detail=f"`{_code(stmt)}`"))
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and bypass:
            call = stmt.value
            name = call.args[1] if len(call.args) == 3 else None
            if (
                dotted(call.func, {}) == "object.__setattr__"
                and isinstance(call.args[0], ast.Name)
                and call.args[0].id == bypass
                and isinstance(name, ast.Constant)
                and isinstance(name.value, str)
            ):
                attrs[name.value] = reader.whole(reader.slot(call.args[2]))
            else:
                raise Refused(_messages.UNFLATTEN.format(detail=f"`{_code(stmt)}`"))
        elif isinstance(stmt, ast.Delete) and all(isinstance(t, ast.Name) for t in stmt.targets):
            continue  # `del aux_data`: says the argument is unused
        elif isinstance(stmt, ast.Return) and stmt.value is not None:
            value = stmt.value
            if bypass and isinstance(value, ast.Name) and value.id == bypass:
                return Unflattened("bypass", [], attrs)
            if (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id in cls_names
            ):
                args: list[Slot] = []
                for arg in value.args:
                    args += (
                        reader.expand(arg.value)
                        if isinstance(arg, ast.Starred)
                        else [reader.whole(reader.slot(arg))]
                    )
                kwargs: dict[str, Slot] = {}
                for kw in value.keywords:
                    if kw.arg is not None:
                        kwargs[kw.arg] = reader.whole(reader.slot(kw.value))
                    elif reader.slot(kw.value) == "aux" and flat.aux.kind in ("dict", "none"):
                        kwargs.update({key: ("a", key) for key in flat.aux.keys})
                    else:
                        raise Refused(_messages.UNFLATTEN.format(detail=f"`**{_code(kw.value)}`"))
                return Unflattened("call", args, kwargs)
            raise Refused(_messages.UNFLATTEN.format(detail=f"it returns `{_code(value)}`"))
        else:
            raise Refused(_messages.UNFLATTEN.format(detail=f"`{_code(stmt)}`"))
    raise Refused(_messages.UNFLATTEN.format(detail="no return of the rebuilt instance"))
