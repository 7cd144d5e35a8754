"""A reference model of the treeclass contract: slow, small, obviously correct.

An instance is a plain dataclass, `RefObj(decl, values)`, built from the declaration
(tests/class_strategies.py) by following the contract step by step:

1. the `__init__` that builds the class runs: the generated one takes each parameter or
   its default; a hand-written one sets the fields it assigns (after its parent's, when
   it calls `super().__init__(...)`); a field it leaves unset gets its default;
2. every converter runs once, on the value its field ended up with;
3. `__post_init__` runs once (each class's body once, through `super()`), deriving the
   `init=False` fields;
4. each `__check_init__` of the hierarchy runs once, base first.

`replace` is `dataclasses.replace` on that: the changed fields converted, every other
field shared, then steps 3 and 4. The flatten is explicit: the dynamic fields in
declaration order, a nested instance flattened in place, `None` an empty subtree, tuples
and lists by index, key paths written as `jax.tree_util.keystr` writes them. Each step
also records the event its user code appends (`convert a0`, `post_init Gen1`, ...), so
the model gives the exact log a construction must produce.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
from class_source import DERIVED_ARRAY
from class_strategies import Call, ClassDecl, Val, init_owner, params


@dataclasses.dataclass
class RefObj:
    decl: ClassDecl
    values: dict[str, Any]


def value(v: Val | Call, ns: dict[str, Any]) -> Any:
    """The value `v` describes, a nested instance built by the model."""
    if isinstance(v, Val):
        return eval(v.src, ns)
    return construct(v.decl, {k: value(x, ns) for k, x in v.kwargs}, ns)[0]


def _default(decl: ClassDecl, name: str, ns: dict[str, Any]) -> Any:
    f = decl.field(name)
    if f.default == "factory":
        return eval(f.default_src, ns)()
    assert f.has_default, f"{decl.name}.{name} has no value and no default"
    return eval(f.default_src, ns)


def _run_init(owner: ClassDecl, kwargs: dict[str, Any], events: list[str]) -> dict[str, Any]:
    """What the `__init__` of `owner` assigns."""
    if owner.init == "generated":
        return {k: v for k, v in kwargs.items() if k in params(owner)}
    events.append(f"init {owner.name}")
    assigned: dict[str, Any] = {}
    if owner.init == "super" and owner.parent:
        up = init_owner(owner.parent)
        assigned.update(_run_init(up, {k: kwargs[k] for k in params(owner.parent)}, events))
    assigned.update({k: kwargs[k] for k in owner.assigns})
    return assigned


def _finish(decl: ClassDecl, values: dict[str, Any], events: list[str]) -> None:
    """Steps 3 and 4: `__post_init__` (the nearest one; each calls its parent's first)
    and every `__check_init__`, base first."""
    for k in reversed(decl.chain):
        if k.post_init:
            for c in k.chain:  # the super() chain, base first
                if c.post_init:
                    events.append(f"post_init {c.name}")
                    for f in c.own:
                        if f.derived:
                            values[f.name] = "derived" if f.static else DERIVED_ARRAY
            break
    events += [f"check_init {k.name}" for k in decl.chain if k.check_init]


def _order(decl: ClassDecl, values: dict[str, Any]) -> dict[str, Any]:
    return {f.name: values[f.name] for f in decl.fields}


def construct(decl: ClassDecl, kwargs: dict[str, Any], ns: dict[str, Any]) -> tuple[RefObj, list[str]]:
    """`decl(**kwargs)` in the model, and the events it logs."""
    events: list[str] = []
    assigned = _run_init(init_owner(decl), kwargs, events)
    values: dict[str, Any] = {}
    for f in decl.fields:
        if f.derived:
            continue
        v = assigned[f.name] if f.name in assigned else _default(decl, f.name, ns)
        if f.converter:
            events.append(f"convert {f.name}")
            v = v + 1
        values[f.name] = v
    _finish(decl, values, events)
    return RefObj(decl, _order(decl, values)), events


def replace(obj: RefObj, changes: dict[str, Any]) -> tuple[RefObj, list[str]]:
    """`obj.replace(**changes)` in the model, and the events it logs."""
    events: list[str] = []
    values = dict(obj.values)
    for name, v in changes.items():
        if obj.decl.field(name).converter:
            events.append(f"convert {name}")
            v = v + 1
        values[name] = v
    _finish(obj.decl, values, events)
    return RefObj(obj.decl, _order(obj.decl, values)), events


def replace_at(obj: RefObj, path: tuple[str, ...], new: Any) -> tuple[RefObj, list[str]]:
    """The hand chain `obj.replace(a=obj.a.replace(b=new))`, innermost first."""
    if len(path) == 1:
        return replace(obj, {path[0]: new})
    inner, events = replace_at(obj.values[path[0]], path[1:], new)
    outer, more = replace(obj, {path[0]: inner})
    return outer, events + more


def _leaves(v: Any, path: str, out: list[tuple[str, Any, bool]], trainable: bool) -> None:
    if isinstance(v, RefObj):
        out += flatten(v, path, trainable)
    elif isinstance(v, (tuple, list)):
        for i, x in enumerate(v):
            _leaves(x, f"{path}[{i}]", out, trainable)
    elif v is not None:
        out.append((path, v, trainable))


def flatten(obj: RefObj, prefix: str = "", trainable: bool = True) -> list[tuple[str, Any, bool]]:
    """(key path, leaf, under trainable fields only) for every leaf, in order."""
    out: list[tuple[str, Any, bool]] = []
    for f in obj.decl.fields:
        if not f.static:
            _leaves(obj.values[f.name], f"{prefix}.{f.name}", out, trainable and f.trainable)
    return out


def statics(obj: RefObj, prefix: str = "") -> list[tuple[str, Any]]:
    """(key path, value) of every static field, nested instances' included."""
    out: list[tuple[str, Any]] = []
    for f in obj.decl.fields:
        v = obj.values[f.name]
        if f.static:
            out.append((f"{prefix}.{f.name}", v))
        elif isinstance(v, RefObj):
            out += statics(v, f"{prefix}.{f.name}")
    return out


def is_inexact(leaf: Any) -> bool:
    """A float array, or a Python float (not a bool or int)."""
    if isinstance(leaf, float):
        return True
    return isinstance(leaf, jax.Array) and bool(np.issubdtype(leaf.dtype, np.inexact))


def selected(obj: RefObj, under: str = "") -> list[str]:
    """The paths the one selection rule picks: trainable inexact leaves under `under`."""
    return [p for p, leaf, trainable in flatten(obj) if trainable and is_inexact(leaf)
            and (p == under or p.startswith(under + ".") or p.startswith(under + "["))]


def describe(x: Any) -> str:
    if isinstance(x, (jax.Array, np.ndarray)):
        weak = "weak " if getattr(x, "weak_type", False) else ""
        return f"{type(x).__name__} {weak}{x.dtype}{list(x.shape)} {np.asarray(x).tolist()}"
    return f"{type(x).__name__} {x!r}"


def leaf_diff(got: Any, want: Any, weak: bool = True) -> str:
    """'' when `got` is `want`'s kind (Python scalar or array), dtype, weak type, shape
    and value; else both described."""
    if isinstance(want, (jax.Array, np.ndarray)):
        same = (isinstance(got, jax.Array) and got.shape == want.shape and got.dtype == want.dtype
                and (not weak or got.weak_type == getattr(want, "weak_type", False))
                and bool(np.array_equal(np.asarray(got), np.asarray(want))))
    else:
        same = type(got) is type(want) and got == want
    return "" if same else f"got {describe(got)}, expected {describe(want)}"


# -- the owner rule: what each library makes of its own nodes ----------------------------
#
# For the generated models of tests/class_strategies.py (`MixedCase`): each component is
# judged by its own library's rule, never by treeclass's code. Inside an equinox Module,
# equinox's own tests decide (`eqx.is_array`, `eqx.is_inexact_array`); elsewhere plain
# JAX's: a float array or a Python float is differentiated (`jax.grad` takes a float), an
# int array is state, a function is no data at all.


def categories(kind: str, component: Any) -> list[tuple[str, Any, str]]:
    """(key path within the component, leaf, "param" / "state" / "config") of each leaf."""
    import equinox as eqx
    from class_strategies import EQUINOX_KINDS

    out = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(component)[0]:
        if kind in EQUINOX_KINDS:
            category = ("param" if eqx.is_inexact_array(leaf) else "state") if eqx.is_array(leaf) else "config"
        elif callable(leaf) and not isinstance(leaf, jax.Array):
            category = "config"
        else:
            category = "param" if is_inexact(leaf) else "state"
        out.append((jax.tree_util.keystr(path), leaf, category))
    return out
