"""The two pytree designs treeclass rejected, built so that only the pytree part differs.

Both get an `__init__` and a `replace` that write the instance's `__dict__` key by key,
without treeclass's static-value checks, so construction and `replace` here are the
lower bound for any design that builds through `__dict__`:

(a) `dataclass_node(...)`: registered with `jax.tree_util.register_dataclass`. Flatten is
    JAX's C++ dataclass node (no Python frame); unflatten calls `cls(**fields)`, i.e.
    runs `__init__` (and would run `__post_init__` and converters, on tracers).
(b) `callback_node(...)`: registered with Python flatten/unflatten functions. Flatten
    reads the fields and builds `(children, statics)` on every call; unflatten is
    `object.__new__` and the same key-by-key `__dict__` writes.

treeclass is (b)'s design but for how the store is written: its flatten reads the
attributes as (b)'s does, and its `__init__`, `replace` and unflatten give the instance a
new dict in one step instead of writing `__dict__` key by key, which keeps the field read
fast on Python 3.11 and 3.12 (RESULTS.md, "Unflatten" and "Design measurements").
"""

from __future__ import annotations

from typing import Any

import jax

_MISSING = object()


def _fields(names: tuple[str, ...], target: str) -> str:
    return "".join(f"{target}[{n!r}], " for n in names)


def _class_source(name: str, dynamic: tuple[str, ...], static: tuple[str, ...]) -> str:
    names = (*dynamic, *static)
    init = [f"    def __init__(self, {', '.join(names)}):", "        d = self.__dict__"]
    init += [f"        d[{n!r}] = {n}" for n in names]
    replace = [f"    def replace(self, /, *, {', '.join(f'{n}=_MISSING' for n in names)}):"]
    replace.append("        d = self.__dict__")
    replace += [f"        if {n} is _MISSING: {n} = d[{n!r}]" for n in names]
    replace += ["        new = _new(_cls)", "        nd = new.__dict__"]
    replace += [f"        nd[{n!r}] = {n}" for n in names]
    replace.append("        return new")
    return f"class {name}:\n" + "\n".join(init + replace) + "\n"


def _generate(name: str, dynamic: tuple[str, ...], static: tuple[str, ...]) -> type:
    ns: dict[str, Any] = {"_MISSING": _MISSING, "_new": object.__new__}
    exec(_class_source(name, dynamic, static), ns)  # noqa: S102 - our own template
    cls: type = ns[name]
    ns["_cls"] = cls
    cls.__module__ = __name__
    return cls


def dataclass_node(name: str, dynamic: tuple[str, ...], static: tuple[str, ...] = ()) -> type:
    """Design (a): generated `__init__`, registered as JAX's C++ dataclass node."""
    cls = _generate(name, dynamic, static)
    jax.tree_util.register_dataclass(cls, data_fields=list(dynamic), meta_fields=list(static))
    return cls


def callback_node(name: str, dynamic: tuple[str, ...], static: tuple[str, ...] = ()) -> type:
    """Design (b): generated `__init__`, Python flatten/unflatten, no cached flat tuple."""
    cls = _generate(name, dynamic, static)
    keys = ", ".join(f"jax.tree_util.GetAttrKey({n!r})" for n in dynamic)
    source = f"""\
def flatten(obj):
    d = obj.__dict__
    return ({_fields(dynamic, "d")}), ({_fields(static, "d")})

def flatten_with_keys(obj, _keys=({keys}{"," if dynamic else ""})):
    children, aux = flatten(obj)
    return tuple(zip(_keys, children)), aux

def unflatten(aux, children, _new=object.__new__, _cls=_cls):
    self = _new(_cls)
    d = self.__dict__
    {_fields(dynamic, "d") or "_"} = children
    {_fields(static, "d") or "_"} = aux
    return self
"""
    ns: dict[str, Any] = {"jax": jax, "_cls": cls}
    exec(source, ns)  # noqa: S102 - our own template
    jax.tree_util.register_pytree_with_keys(
        cls, ns["flatten_with_keys"], ns["unflatten"], flatten_func=ns["flatten"]
    )
    return cls
