"""Paths in a tree: what `where` functions read (`lambda m: m.layers[1].w`), and
following them through an object.

- Recording: `record(where, root)` calls `where` on a stand-in (`_Read`) that records
  each attribute and item read as one step of a path: `lambda m: m.layers[1].w` gives
  `(("layers", ATTR), (1, ITEM), ("w", ATTR))`. `where` never sees the object, so it
  runs no code on its leaves; anything but a read (a call, arithmetic, a comparison,
  a slice, `bool()`, `len()`, iteration) raises a TypeError naming the read it was
  applied to.
- Following: `follow(obj, path, root)` reads the path from the object step by step,
  through the nodes JAX flattens: fields of a treeclass (static ones too) and of a
  NamedTuple, entries of a tuple, list, dict, OrderedDict or defaultdict. It returns
  each step's parent, how the node was read from it and the key, which is what
  `replace_at` needs to rebuild the parent; where a step has no such node it raises
  the error that names the path so far (`MLP.layers[5]: index out of range`). A
  container that JAX treats as a leaf (a subclass of dict, list or tuple, a mapping)
  or a custom pytree node is a node to replace whole, not to reach into: a rebuilt
  copy could not keep its type, or JAX's structure, for certain.

Why record on every call, with no cache of paths: a path may depend on more than the
code of `where` (`lambda m: m.layers[i].w` reads `i` from a closure), and recording
costs less than the `replace()` calls it leads to (benchmarks/RESULTS.md,
"whole_models").
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any, Final, NoReturn

from jax.tree_util import DictKey, GetAttrKey

from treeclass._core.checks import closest
from treeclass._core.layout import LAYOUT
from treeclass._core.show import describe
from treeclass._core.walk import ARRAY_TYPES, path_str

__all__ = ["ATTR", "DICT", "ITEM", "LIST", "NAMEDTUPLE", "TREECLASS", "TUPLE", "Path", "follow", "probe", "record", "show"]

ATTR: Final = False  # a step read as an attribute: m.w
ITEM: Final = True  # a step read as an item: m[1], m["w"]
Path = tuple[tuple[Any, bool], ...]  # steps: (key, ATTR or ITEM)

# How a node was read from its parent, which says how `replace_at` rebuilds the parent.
TREECLASS, NAMEDTUPLE, TUPLE, LIST, DICT = range(5)
Parent = tuple[Any, int, Any]  # (parent, kind, key as stored: a field name or an index)
_KINDS: Final = {tuple: TUPLE, list: LIST, dict: DICT, collections.OrderedDict: DICT, collections.defaultdict: DICT}

_MSG_NOT_READ: Final = """\
{path}: `where` did more than read it; it may only read fields and entries.

`where` selects nodes by the path it reads (lambda m: m.layers[1].w); it never sees
their values, so it cannot call, compute with, compare, slice, iterate over, or take
len() or the truth value of them. Select several nodes as a tuple:
lambda m: (m.layers[0], m.layers[1]); in replace_at, compute a new value from the
old one with fn=:

    tc.replace_at(obj, lambda m: m.layers[1].w, fn=lambda w: w * 2)"""

_MSG_RETURN: Final = """\
`where` returned {what}; it must return a node read from its argument, or a tuple of
them: lambda m: m.layers[1].w  or  lambda m: (m.layers[0].w, m.layers[1].w)"""


def show(root: str, path: Path) -> str:
    """`MLP.layers[1].w`, in the one path format of treeclass's messages."""
    return path_str(root, tuple(DictKey(key) if item else GetAttrKey(key) for key, item in path))


# --- Recording ---------------------------------------------------------------------------


class _Read:
    """What `where` receives: the node at `_tc_path`. Reading an attribute or an item
    gives the node one step further; `_tc_last` (one list per recording) holds the path
    of the latest read, which is what an operation that fails names.

    It has no other methods, so an operator, a call, `len()` or `<` finds none on the
    type and raises TypeError; those `object` or the `__getitem__` protocol would
    answer (`==`, `bool()`, `hash()`, iteration, NumPy's `__array__`) are None, which
    raises TypeError too. Field names never start with `_tc_` (reserved) or `__`."""

    __slots__ = ("_tc_last", "_tc_path")
    __eq__ = __bool__ = __iter__ = __array__ = None  # type: ignore[assignment]
    __hash__ = None  # type: ignore[assignment]

    def __getattr__(self, name: str) -> _Read:
        # Runs only after the normal lookup failed, which costs most of a read on
        # Python 3.11: so the first read of a name makes it a property of the class,
        # and every later one finds that. (Probes such as `__array_interface__` find
        # nothing: no field has a dunder name.)
        if name[:2] == "__" == name[-2:]:
            raise AttributeError(name)
        step = (name, ATTR)
        setattr(_Read, name, property(lambda read: _then(read, step)))
        return _then(self, step)

    def __getitem__(self, key: Any) -> _Read:
        if type(key) is slice or type(key) is _Read:  # a slice of self, or a read used as a key
            self._tc_last[0] = key._tc_path if type(key) is _Read else self._tc_path
            raise TypeError  # worded by record()
        return _then(self, (key, ITEM))

    def __repr__(self) -> str:
        return f"<where reads {show('m', self._tc_path)}>"


def _then(read: _Read, step: tuple[Any, bool]) -> _Read:
    """The stand-in one `step` on from `read`."""
    new = _new(_Read)  # not _Read(...): an __init__ call would cost more than the rest
    new._tc_path = read._tc_last[0] = (*read._tc_path, step)
    new._tc_last = read._tc_last
    return new


_new: Final = object.__new__


def record(where: Callable[[Any], Any], root: str) -> Path | list[Path]:
    """The path `where` selects (a tuple of steps), or the paths (a list of them) when
    it returns a tuple or list of nodes; `root` names the root in messages."""
    stand_in = _new(_Read)
    stand_in._tc_path, stand_in._tc_last = (), [()]
    try:
        selected = where(stand_in)
    except TypeError as error:  # an operation on a stand-in: name the node it read last
        raise TypeError(_MSG_NOT_READ.format(path=show(root, stand_in._tc_last[0]))) from error
    if type(selected) is _Read:  # one node, the common case
        return selected._tc_path
    if not isinstance(selected, tuple | list):
        raise TypeError(_MSG_RETURN.format(what=describe(selected, shape=False)))
    bad = [s for s in selected if type(s) is not _Read]
    if bad:
        what = f"a {type(selected).__name__} holding {describe(bad[0], shape=False)}"
        raise TypeError(_MSG_RETURN.format(what=what))
    return [s._tc_path for s in selected]


# --- Following a path --------------------------------------------------------------------


class _NoNode(Exception):  # noqa: N818 - internal: carries the reason up to follow()
    """Raised where a step has no node; `reason(at)` words it given the path to the
    parent, which `follow` formats only then: on the way there, no message is built."""

    def __init__(self, error: type[Exception], reason: Callable[[str], str]) -> None:
        self.error, self.reason = error, reason


def _no_field(node: Any, name: str, names: tuple[str, ...]) -> NoReturn:
    close = closest(name, names)
    hint = f", did you mean {close!r}?" if close else "."
    fields = f"{type(node).__name__}'s fields: {', '.join(names)}."
    raise _NoNode(AttributeError, lambda at: f"no such field{hint} {fields}")


def _index(node: Any, key: Any) -> int:
    n = len(node)
    if type(key) is not int:
        raise _NoNode(TypeError, lambda at: f"{at} is {describe(node, shape=False)}; index it with an int.")
    if not -n <= key < n:
        raise _NoNode(IndexError, lambda at: f"index out of range ({at} has {n} entries).")
    return key % n


def _other(node: Any, key: Any, item: bool) -> tuple[int, Any]:
    """`(kind, key as stored)` for reading `key` from a NamedTuple; for anything else,
    `_NoNode` with the reason it has no such node."""
    cls = type(node)
    # Only the node's type is asked here, never the node: it may be a leaf of any kind.
    fields: tuple[str, ...] | None = getattr(cls, "_fields", None) if issubclass(cls, tuple) else None
    if fields is not None:  # a NamedTuple, as JAX tells one: `nt[0]` and `nt.a` are one node
        if item:
            return NAMEDTUPLE, fields[_index(node, key)]
        if key not in fields:
            _no_field(node, key, fields)
        return NAMEDTUPLE, key
    if item and LAYOUT in cls.__dict__:
        treeclass = f"a treeclass ({cls.__name__}); read its fields as attributes, not items."
        raise _NoNode(TypeError, lambda at: f"{at} is {treeclass}")
    did = "indexed it" if item else "read an attribute of it"
    array = issubclass(cls, ARRAY_TYPES)
    fix = "fn=lambda x: x.at[...].set(...)" if array else "fn=lambda old: <old, changed>"
    rest = (
        f"holds {describe(node, shape=array)}, and `where` {did}. `where` reaches into treeclasses, "
        "NamedTuples and the containers JAX flattens (tuple, list, dict, OrderedDict, defaultdict; "
        f"not their subclasses, which JAX takes for leaves); it replaces anything else whole: pass {fix}"
    )
    raise _NoNode(TypeError, lambda at: f"{at} {rest}")


def follow(obj: Any, path: Path, root: str) -> tuple[list[Parent], Any]:
    """The `(parent, kind, key as stored)` of each step of `path` in `obj`, and the node
    at its end. Raises the error naming the path where a step has no node."""
    parents: list[Parent] = []
    node, depth = obj, 0
    try:
        for depth, (key, item) in enumerate(path):  # noqa: B007 - depth is read on error
            cls = type(node)
            layout = None if item else cls.__dict__.get(LAYOUT)  # layout_of(), inline
            kind = TREECLASS if layout is not None else _KINDS.get(cls) if item else None
            stored = key
            if kind is None:
                kind, stored = _other(node, key, item)
            elif kind == TREECLASS:
                if key not in layout.names:
                    _no_field(node, key, layout.names)
            elif kind == DICT:
                if key not in node:
                    keys = ", ".join(repr(k) for k in node)
                    raise _NoNode(KeyError, lambda at: f"no such key; the keys are: {keys}.")
            else:
                stored = _index(node, key)
            parents.append((node, kind, stored))
            node = getattr(node, stored) if kind <= NAMEDTUPLE else node[stored]
    except _NoNode as bad:
        msg = f"{show(root, path[: depth + 1])}: {bad.reason(show(root, path[:depth]))}"
        raise bad.error(msg) from None
    return parents, node


def probe(where: Callable[[Any], Any], root: str) -> list[Path] | None:
    """The paths `where` selects if it is a selector, else None. Kept only for
    `_train/select.py`, which guesses with it; the helper rewriting select.py drops the
    call, and this goes with it at merge (issue #27: `where=` is never guessed)."""
    try:
        paths = record(where, root)
    except Exception:  # noqa: BLE001 - a predicate that cannot run on the stand-in
        return None
    return [paths] if isinstance(paths, tuple) else paths or None
