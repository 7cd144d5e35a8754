"""Paths in a tree: `record(where, root)` calls `where` on a stand-in that records each read;
`follow(obj, path, root)` reads it through the nodes JAX flattens (another library's through its
key paths), giving each step's parent, kind and key, by which `put` rebuilds the parent and
`key_path` names the step as JAX does. See docs/how-it-works.md."""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn

import jax
from jax.tree_util import DictKey, GetAttrKey, SequenceKey

from treeclass._core.checks import closest
from treeclass._core.layout import LAYOUT
from treeclass._core.show import describe
from treeclass._core.walk import ARRAY_TYPES, KeyPath, children, node_def, path_str

ATTR: Final = False  # a step read as an attribute: m.w
ITEM: Final = True  # a step read as an item: m[1], m["w"]
Path = tuple[tuple[Any, bool], ...]  # steps: (key, ATTR or ITEM)

# How a node was read from its parent, which says how `put` rebuilds the parent.
# FOREIGN: a node of another library, its key as stored is JAX's key entry (GetAttrKey("w")).
TREECLASS, NAMEDTUPLE, TUPLE, LIST, DICT, FOREIGN = range(6)
Parent = tuple[Any, int, Any]  # (parent, kind, key as stored: a field name, an index, a key entry)
_DICTS: Final[tuple[type, ...]] = (dict, collections.OrderedDict, collections.defaultdict)
_KINDS: Final[dict[type, int]] = {tuple: TUPLE, list: LIST} | dict.fromkeys(_DICTS, DICT)
# A key as stored, as the key entry JAX's key paths hold (another library's is one already).
_ENTRY: Final = {DICT: DictKey, NAMEDTUPLE: GetAttrKey, TREECLASS: GetAttrKey}

_MSG_NOT_READ: Final = """\
{path}: `where` did more than read it; it may only read fields and entries.

`where` selects nodes by the path it reads; it never sees their values, so it cannot
call, compute with, compare, slice, iterate over, or take len() or the truth value of
them. Select several nodes as a tuple: lambda m: (m.layers[0], m.layers[1])"""
_MSG_NOT_READ_FN: Final = """; compute a
new value from the old one with fn=:

    tc.replace_at(obj, lambda m: m.layers[1].w, fn=lambda w: w * 2)"""

_MSG_NOT_ENTERED: Final = (
    "holds {what}, and `where` {did}. `where` reaches into treeclasses, NamedTuples, the "
    "containers JAX flattens (tuple, list, dict, OrderedDict, defaultdict; not their "
    "subclasses, which JAX takes for leaves) and the nodes JAX flattens with key paths "
    "(equinox Modules, flax.struct and chex dataclasses), and no further: {fix}"
)
# The fix each caller can take: (for a node, for an array); `{at}` is the node's path.
FIX_REPLACE: Final = (
    "replace it whole, pass fn=lambda old: <old, changed>",
    "replace it whole, pass fn=lambda x: x.at[...].set(...)",
)
FIX_SELECT: Final = (
    "select {at} itself",
    "select {at} itself, and narrow its leaves with filter=",
)
_MSG_NO_KEYS: Final = (
    "holds {what}, which JAX flattens without key paths, so `where` cannot tell its "
    "children apart: {fix}"
)

_MSG_RETURN: Final = """\
`where` {did}; it must return a node read from its argument, or a tuple of
them: lambda m: m.layers[1].w  or  lambda m: (m.layers[0].w, m.layers[1].w)"""


def show(root: str, path: Path) -> str:
    """`MLP.layers[1].w`, in the one path format of treeclass's messages."""
    return path_str(root, tuple(DictKey(key) if item else GetAttrKey(key) for key, item in path))


class _Read:
    """The node at `_tc_path`; `_tc_last` holds the recording's latest path; all but reads raise."""

    __slots__ = ("_tc_last", "_tc_path")
    _tc_last: list[Path]
    _tc_path: Path
    __eq__ = __bool__ = __iter__ = __array__ = __hash__ = None  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]

    def __getattr__(self, name: str) -> _Read:
        # The failed normal lookup is most of a read's cost on 3.11: the first read of a name
        # makes it a property (up to _PROPERTIES names, so memory stays bounded).
        if name[:2] == "__" == name[-2:] or name[:4] == "_tc_":  # `__array_interface__`
            raise AttributeError(name, name=name, obj=self)  # and other probes, our slots
        if len(_INSTALLED) < _PROPERTIES:
            _INSTALLED.add(name)
            setattr(_Read, name, property(functools.partial(_then, (name, ATTR))))
        return _then((name, ATTR), self)

    def __getitem__(self, key: Any) -> _Read:
        if type(key) is slice or type(key) is _Read:  # a slice of self, or a read as a key
            self._tc_last[0] = key._tc_path if type(key) is _Read else self._tc_path
            raise TypeError  # worded by record()
        return _then((key, ITEM), self)


def _then(step: tuple[Any, bool], read: _Read) -> _Read:
    new = _new(_Read)  # not _Read(...): an __init__ call would cost more than the rest
    new._tc_path = read._tc_last[0] = (*read._tc_path, step)
    new._tc_last = read._tc_last
    return new


_new: Final = object.__new__
_PROPERTIES: Final = 512
_INSTALLED: Final[set[str]] = set()  # the names made properties of _Read


def record(
    where: Callable[[Any], Any],
    root: str,
    *,
    replacing: bool = True,
    last: list[Path] | None = None,
) -> Path | list[Path]:
    """The path(s) `where` reads; `replacing`: errors advise `fn=`; `last` gets the latest read."""
    if not callable(where):  # `replace_at(m, "w", ...)`: not "did more than read"
        did = f"is {describe(where, shape=False)}, not a function"
        raise TypeError(_MSG_RETURN.format(did=did))
    stand_in = _new(_Read)
    stand_in._tc_path, stand_in._tc_last = (), [()] if last is None else last
    msg = _MSG_NOT_READ + (_MSG_NOT_READ_FN if replacing else ".")
    try:
        selected = where(stand_in)
    except TypeError as error:  # an operation on a stand-in: name the latest read
        raise TypeError(msg.format(path=show(root, stand_in._tc_last[0]))) from error
    except AttributeError as error:  # `m.__dict__`: not a field, whatever it is
        read = error.obj
        if type(read) is not _Read:
            raise
        path = show(root, (*read._tc_path, (error.name, ATTR)))
        raise AttributeError(msg.format(path=path)) from error
    if type(selected) is _Read:  # one node, the common case
        return selected._tc_path
    many = isinstance(selected, tuple | list)
    bad = [s for s in selected if type(s) is not _Read] if many else [selected]
    if bad:
        what = describe(bad[0], shape=False)
        held = f"a {type(selected).__name__} holding " if many else ""
        raise TypeError(_MSG_RETURN.format(did=f"returned {held}{what}"))
    return [s._tc_path for s in selected]


class _NoNode(Exception):  # noqa: N818 - a step has no node; `reason(at)` words it for follow()
    def __init__(self, error: type[Exception], reason: Callable[[str], str]) -> None:
        self.error, self.reason = error, reason


def _no_field(
    node: Any, name: str, names: Sequence[str], what: str = "field", held: str = ""
) -> NoReturn:
    close = closest(name, names)
    hint = f", did you mean {close!r}?" if close else "."
    held = held or f"{type(node).__name__}'s fields: {', '.join(names)}."
    raise _NoNode(AttributeError, lambda at: f"no such {what}{hint} {held}")


def _index(node: Any, key: Any) -> int:
    n = len(node)
    if type(key) is not int:
        what = describe(node, shape=False)
        raise _NoNode(TypeError, lambda at: f"{at} is {what}; index it with an int.")
    if not -n <= key < n:
        raise _NoNode(IndexError, lambda at: f"index out of range ({at} has {n} entries).")
    return key % n


def _other(node: Any, key: Any, item: bool, fix: tuple[str, str]) -> tuple[int, Any, Any]:
    """`(kind, key as stored, child)` for a NamedTuple or a node JAX flattens with key paths."""
    cls = type(node)
    fields = getattr(cls, "_fields", None) if issubclass(cls, tuple) else None
    if fields is not None:  # a NamedTuple, as JAX tells one: `nt[0]` and `nt.a` are one node
        if item:
            return NAMEDTUPLE, fields[_index(node, key)], node[key]
        if key not in fields:
            _no_field(node, key, fields)
        return NAMEDTUPLE, key, getattr(node, key)
    if item and LAYOUT in cls.__dict__:
        treeclass = f"a treeclass ({cls.__name__}); read its fields as attributes, not items."
        raise _NoNode(TypeError, lambda at: f"{at} is {treeclass}")
    if item and _KINDS.get(cls) == DICT:  # (only a missing key leads here)
        keys = ", ".join(repr(k) for k in node)
        raise _NoNode(KeyError, lambda at: f"no such key; the keys are: {keys}.")
    array = issubclass(cls, ARRAY_TYPES)
    pairs = None if array or node is None or cls in _KINDS else children(node)
    what, did = describe(node, shape=array), "indexed it" if item else "read an attribute of it"
    if pairs is None:  # a leaf to JAX
        rest = _MSG_NOT_ENTERED.format(what=what, did=did, fix=fix[array])
        raise _NoNode(TypeError, lambda at: f"{at} {rest}")
    want = (SequenceKey(key) if type(key) is int else DictKey(key)) if item else GetAttrKey(key)
    for entry, child in pairs:  # another library's node
        if entry == want:
            return FOREIGN, entry, child
    names = [e.name for e, _ in pairs if type(e) is GetAttrKey]
    if len(names) < len(pairs) and not any(type(e) in (SequenceKey, DictKey) for e, _ in pairs):
        rest = _MSG_NO_KEYS.format(what=what, fix=fix[0])
        raise _NoNode(TypeError, lambda at: f"{at} {rest}")
    if item:
        keys = ", ".join(jax.tree_util.keystr((e,)) for e, _ in pairs) or "none"
        raise _NoNode(KeyError, lambda at: f"no such entry; {at}'s entries: {keys}.")
    held = f"{type(node).__name__}'s children, as JAX flattens it: {', '.join(names) or 'none'}"
    _no_field(node, str(key), names, "child", f"{held} (static fields are not children).")


def follow(
    obj: Any, path: Path, root: str, fix: tuple[str, str] = FIX_REPLACE
) -> tuple[list[Parent], Any]:
    """Each step's `(parent, kind, key as stored)` and the end node; `fix` words the way out."""
    parents: list[Parent] = []
    node, depth = obj, 0
    try:
        for depth, (key, item) in enumerate(path):  # noqa: B007 - read on error
            cls = type(node)
            layout = None if item else cls.__dict__.get(LAYOUT)  # layout_of(), inline
            kind = _KINDS.get(cls) if item else TREECLASS if layout is not None else None
            parent, stored = node, key
            if kind is None or (kind == DICT and key not in node):
                kind, stored, node = _other(node, key, item, fix)
            elif layout is not None:
                if key not in layout.names:
                    _no_field(node, key, layout.names)
                node = getattr(node, key)
            else:
                stored = key if kind == DICT else _index(node, key)
                node = node[stored]
            parents.append((parent, kind, stored))
    except _NoNode as bad:
        at = show(root, path[:depth])
        msg = f"{show(root, path[: depth + 1])}: {bad.reason(at).replace('{at}', at)}"
        raise bad.error(msg) from None
    return parents, node


def key_path(parents: list[Parent]) -> KeyPath:
    """The key path, as `walk()` gives it, of the node `follow` reached through `parents`."""
    return tuple(
        key if kind == FOREIGN else _ENTRY.get(kind, SequenceKey)(key) for _, kind, key in parents
    )


def put(parent: Any, kind: int, changes: dict[Any, Any]) -> Any:
    """`parent` with the entries `changes` (keys as stored) replaced."""
    if kind == TREECLASS:  # replace(): converters and checks on these fields, __post_init__
        return parent.replace(**changes)
    if kind == NAMEDTUPLE:
        return parent._replace(**changes)
    if kind == DICT:  # a copy of its own type: OrderedDict, defaultdict (its factory too)
        return parent | changes
    if kind == FOREIGN:  # another library's node, rebuilt by its unflatten (as eqx.tree_at)
        new = [changes.get(entry, child) for entry, child in children(parent) or ()]
        return node_def(parent).unflatten(new)
    items = [changes.get(i, item) for i, item in enumerate(parent)]
    return items if kind == LIST else tuple(items)
