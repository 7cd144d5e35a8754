"""One step of a `replace_at` path: reading it from a node, checking it, and putting a
new node back.

`walk(obj, path)` follows a path (`_where.py`) through `obj`, step by step: a field of a
treeclass or NamedTuple, an entry of a tuple, list or dict. Where a step has no node
it raises the error that names the path so far (`MLP.layers[5]: index out of range`).
It returns each step's parent, how the node was read from it (its kind) and the key,
which is what `put` needs to rebuild the parent with one entry changed: a treeclass
through its generated `replace()` (converters, checks, `__post_init__`), a tuple, list
or dict by copy, a NamedTuple through `_replace()`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, Final, NoReturn

import jax

from treeclass import _path_function
from treeclass._walk import layout_of
from treeclass._where import Path, format_path

# How a node was read from its parent: what `put` does to put a new one back.
TREECLASS: Final = _path_function.TREECLASS  # a treeclass field: p.replace(name=new)
NAMEDTUPLE: Final = _path_function.NAMEDTUPLE  # a NamedTuple entry: p._replace(name=new)
TUPLE: Final = _path_function.TUPLE  # a tuple entry: (*p[:i], new, *p[i + 1:])
LIST: Final = _path_function.LIST  # a list entry: copy, then set
DICT: Final = _path_function.DICT  # a dict entry: copy, then set

# (parent, kind, key): one step of a walk, with the parent it was read from.
Parent = tuple[Any, int, Any]


def _closest(name: str, names: list[str] | tuple[str, ...]) -> str | None:
    """The field `name` was probably meant to be: a close spelling, else a field that
    abbreviates it or that it abbreviates (`weight` -> `w`, `b` -> `bias`)."""
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return close[0]
    return next((n for n in names if name.startswith(n) or n.startswith(name)), None)


def describe(value: object) -> str:
    """`a jax.Array of shape (3,)`, `a str`: what a node holds, for messages."""
    cls = type(value)
    name = "jax.Array" if isinstance(value, jax.Array) else cls.__name__
    if cls.__module__ == "numpy":
        name = f"numpy.{name}"
    shape = getattr(value, "shape", None)
    article = "an" if name[0] in "aeiouAEIOU" else "a"
    return f"{article} {name}" + ("" if shape is None else f" of shape {shape}")


class _BadStep(Exception):  # noqa: N818 - internal: carries the reason up to walk
    def __init__(self, error: type[Exception], reason: str) -> None:
        self.error, self.reason = error, reason


def _no_field(node: Any, name: str, names: list[str] | tuple[str, ...]) -> NoReturn:
    close = _closest(name, names)
    hint = f", did you mean {close!r}?" if close else "."
    fields = ", ".join(names)
    raise _BadStep(AttributeError, f"no such field{hint} {type(node).__name__}'s fields: {fields}.")


def _entry(node: Any, key: Any, item: bool, at: str) -> tuple[int, Any]:
    """(kind, key) for reading `key` from the non-treeclass `node`, or _BadStep."""
    cls = type(node)
    fields: tuple[str, ...] | None = getattr(cls, "_fields", None) if isinstance(node, tuple) else None
    if fields is not None and (not item or isinstance(key, int)):
        if item:  # `nt[0]` and `nt.a` are one node, rebuilt by _replace()
            if not -len(fields) <= key < len(fields):
                raise _BadStep(IndexError, f"index out of range ({at} has {len(fields)} entries).")
            return NAMEDTUPLE, fields[key]
        if key not in fields:
            _no_field(node, str(key), fields)
        return NAMEDTUPLE, key
    if item and isinstance(node, tuple | list):
        if not isinstance(key, int):
            raise _BadStep(TypeError, f"{at} is {describe(node)}; index it with an int.")
        n = len(node)
        if not -n <= key < n:
            raise _BadStep(IndexError, f"index out of range ({at} has {n} entries).")
        return (LIST if isinstance(node, list) else TUPLE), key % n
    if item and isinstance(node, dict):
        if key not in node:
            keys = ", ".join(repr(k) for k in node)
            raise _BadStep(KeyError, f"no such key; the keys are: {keys}.")
        return DICT, key
    if item and layout_of(cls) is not None:
        raise _BadStep(
            TypeError,
            f"{at} is a treeclass ({cls.__name__}); read its fields as attributes, not items.",
        )
    reason = (
        f"{at} holds {describe(node)}, and `where` "
        f"{'indexed it' if item else 'read an attribute of it'}. replace_at walks treeclass "
        "fields and the entries of tuples, lists, dicts and NamedTuples, and replaces whole nodes"
    )
    if hasattr(node, "shape"):
        reason += "; to change part of an array, pass fn=lambda x: x.at[...].set(...)"
    raise _BadStep(TypeError, reason + ".")


def walk(obj: Any, path: Path) -> tuple[list[Parent], Any]:
    """The (parent, kind, key) of each step of `path` in `obj`, and the node at its end.
    Raises an error naming the path where a step has no node."""
    parents: list[Parent] = []
    node = obj
    for key, item in path:
        try:
            layout = None if item else layout_of(node)
            if layout is not None:
                if key not in layout.names:
                    _no_field(node, key, layout.names)
                parents.append((node, TREECLASS, key))
                node = getattr(node, key)
            else:
                kind, key = _entry(node, key, item, format_path(type(obj).__name__, path[: len(parents)]))
                parents.append((node, kind, key))
                node = getattr(node, key) if kind == NAMEDTUPLE else node[key]
        except _BadStep as bad:
            at = format_path(type(obj).__name__, path[: len(parents) + 1])
            msg = f"{at}: {bad.reason}"
            raise bad.error(msg) from None
    return parents, node


# Calling replace() with `**{name: new}` was measured at 3x `p.replace(name=new)`: the
# generated replace() takes keyword-only parameters plus `**_tc_unknown`, and a dict of
# keywords goes through CPython's slow argument matching. So each field name gets a
# two-line setter, compiled once, that calls with a plain keyword. Keyed by the name
# alone (no class, no value), the cache cannot go stale.
setters: dict[str, Callable[[Any, Any], Any]] = {}


def setter(name: str) -> Callable[[Any, Any], Any]:
    source = f"def set_{name}(_tc_parent, _tc_new):\n    return _tc_parent.replace({name}=_tc_new)\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<treeclass replace_at setter {name}>", "exec"), namespace)  # noqa: S102 - source above
    fn = setters[name] = namespace[f"set_{name}"]
    return fn  # type: ignore[no-any-return]


def put(parent: Any, kind: int, changes: dict[Any, Any]) -> Any:
    """`parent` with the entries `changes` (keys as read) replaced."""
    if kind == TREECLASS:
        # The generated replace(): converters and checks on these fields, __post_init__.
        return type(parent).replace(parent, **changes)
    if kind == NAMEDTUPLE:
        return parent._replace(**changes)
    if kind == DICT:
        new = parent.copy()
        new.update(changes)
        return new
    items = list(parent)
    for i, value in changes.items():
        items[i] = value
    if type(parent) is list or type(parent) is tuple:
        return items if kind == LIST else tuple(items)
    return type(parent)(items)  # a subclass of list or tuple

