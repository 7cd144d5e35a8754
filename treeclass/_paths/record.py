"""Paths in a tree: what `where` functions read (`lambda m: m.layers[1].w`), and
following them through an object.

- Recording: `record(where, root)` calls `where` on a stand-in (`_Read`) that records
  each attribute and item read as one step of a path: `lambda m: m.layers[1].w` gives
  `(("layers", ATTR), (1, ITEM), ("w", ATTR))`. Anything else (a call, arithmetic, a
  comparison, `bool()`, `len()`) raises at once, naming the node it was applied to.
- Following: `follow(obj, path, root)` reads the path from the object step by step: a
  field of a treeclass (static ones too) or NamedTuple, an entry of a tuple, list or
  dict. It returns each step's parent, how the node was read from it and the key, which
  is what `replace_at` needs to rebuild the parent; where a step has no node it raises
  the error that names the path so far (`MLP.layers[5]: index out of range`).

Why record on every call, with no cache of paths: a path may depend on more than the
code of `where` (`lambda m: m.layers[i].w` reads `i` from a closure), and recording
costs less than the `replace()` calls it leads to (benchmarks/RESULTS.md,
"whole_models").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NoReturn

from jax.tree_util import DictKey, GetAttrKey

from treeclass._core.checks import closest
from treeclass._core.layout import LAYOUT, layout_of
from treeclass._core.show import describe
from treeclass._core.walk import path_str

__all__ = ["ATTR", "DICT", "ITEM", "LIST", "NAMEDTUPLE", "TREECLASS", "TUPLE"]
__all__ += ["Path", "follow", "probe", "record", "show"]

ATTR: Final = False  # a step read as an attribute: m.w
ITEM: Final = True  # a step read as an item: m[1], m["w"]
Path = tuple[tuple[Any, bool], ...]  # steps: (key, ATTR or ITEM)

# How a node was read from its parent, which says how `replace_at` rebuilds the parent.
TREECLASS, NAMEDTUPLE, TUPLE, LIST, DICT = range(5)
Parent = tuple[Any, int, Any]  # (parent, kind, key as stored: a field name or an index)

_MSG_NOT_READ: Final = """\
{path}: `where` {did}, but it may only read fields and entries.

replace_at records the path that `where` reads (`lambda m: m.layers[1].w`) and replaces
the node at its end; to compute a new value from the old one, pass a function:

    tc.replace_at(obj, lambda m: m.layers[1].w, fn=lambda w: w * 2)"""

_MSG_RETURN: Final = """\
`where` returned {what}; it must return a node read from its argument, or a tuple of
them: lambda m: m.layers[1].w  or  lambda m: (m.layers[0].w, m.layers[1].w)"""


def show(root: str, path: Path) -> str:
    """`MLP.layers[1].w`, in the one path format of treeclass's messages."""
    return path_str(root, tuple(DictKey(key) if item else GetAttrKey(key) for key, item in path))


# --- Recording ---------------------------------------------------------------------------


class _Read:
    """What `where` receives: one recorded read, holding the path that led to it."""

    # `(root name, path)`. Field names cannot start with `_tc_` (treeclass reserves the
    # prefix), so this slot never hides a field.
    __slots__ = ("_tc_at",)
    _tc_at: tuple[str, Path]

    def __getattribute__(self, name: str) -> Any:
        # Every attribute read lands here. (`__getattr__` would run only after the
        # normal lookup had raised and caught an AttributeError: 3x slower per read.)
        if name[:1] == "_" and (name[:4] == "_tc_" or name[:2] == "__" == name[-2:]):
            # Our own slot and methods, and dunders: probes such as
            # hasattr(x, "__array_interface__") from numpy or JAX find nothing, as no
            # field has a dunder name.
            return object.__getattribute__(self, name)
        root, path = _at(self)
        return _read(root, (*path, (name, ATTR)))

    def __getitem__(self, key: Any) -> _Read:
        root, path = _at(self)
        if type(key) is _Read:
            key._tc_refuse("used it as an index")
        if isinstance(key, slice):
            at = show(root, path)
            msg = (
                f"{at}[{key.start}:{key.stop}]: `where` sliced {at}, but it may only select "
                f"single entries; select several as a tuple: lambda m: ({show('m', path)}[0], ...)"
            )
            raise TypeError(msg)
        return _read(root, (*path, (key, ITEM)))

    def __repr__(self) -> str:
        return f"<replace_at path {show(*_at(self))}>"

    def _tc_refuse(self, did: str) -> NoReturn:
        raise TypeError(_MSG_NOT_READ.format(path=show(*_at(self)), did=did))


# The slot's own getter and setter, called directly: `__getattribute__` is ours.
_slot: Any = vars(_Read)["_tc_at"]
_at: Final[Callable[[_Read], tuple[str, Path]]] = _slot.__get__
_set_at: Final[Callable[[_Read, tuple[str, Path]], None]] = _slot.__set__


def _read(root: str, path: Path) -> _Read:
    node = object.__new__(_Read)
    _set_at(node, (root, path))
    return node


def _refusing(did: str) -> Callable[..., NoReturn]:
    def method(self: _Read, *args: object, **kwargs: object) -> NoReturn:
        self._tc_refuse(did)

    return method


# Everything but a read raises, naming the node and what `where` did to it.
_SYMBOLS: Final = {
    "add": "+", "sub": "-", "mul": "*", "matmul": "@", "truediv": "/", "floordiv": "//",
    "mod": "%", "pow": "**", "lshift": "<<", "rshift": ">>", "and": "&", "or": "|",
    "xor": "^", "divmod": "divmod()",
}  # fmt: skip
_REFUSED: Final = {
    "__call__": "called it",
    "__bool__": "took its truth value (an `if`, `and`, `or` or `not`)",
    "__hash__": "hashed it (used it as a dict key?)",
    "__iter__": "iterated over it (select entries by index: m.layers[0])",
    "__len__": "took its len()",
    "__contains__": "tested membership (`in`) on it",
    "__index__": "used it as an index",
    "__array__": "passed it to a NumPy function",
    **{f"__{op}__": f"computed with it ({sym})" for op, sym in _SYMBOLS.items()},
    **{f"__r{op}__": f"computed with it ({sym})" for op, sym in _SYMBOLS.items()},
    **{f"__{op}__": f"computed with it (__{op}__)" for op in
       ("neg", "pos", "abs", "invert", "int", "float", "complex", "round")},
    **{f"__{op}__": f"compared it ({sym})" for op, sym in
       {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}.items()},
}  # fmt: skip
for _name, _did in _REFUSED.items():
    setattr(_Read, _name, _refusing(_did))


# --- Following a path --------------------------------------------------------------------


class _NoNode(Exception):  # noqa: N818 - internal: carries the reason up to follow()
    """Raised by `_step`; `reason(at)` words it given the path to the parent, which
    `follow` formats only then: on the way there, no message is built."""

    def __init__(self, error: type[Exception], reason: Callable[[str], str]) -> None:
        self.error, self.reason = error, reason


def _no_field(node: Any, name: str, names: tuple[str, ...]) -> NoReturn:
    close = closest(name, names)
    hint = f", did you mean {close!r}?" if close else "."
    fields = f"{type(node).__name__}'s fields: {', '.join(names)}."
    raise _NoNode(AttributeError, lambda at: f"no such field{hint} {fields}")


def _out_of_range(n: int) -> NoReturn:
    raise _NoNode(IndexError, lambda at: f"index out of range ({at} has {n} entries).")


def _step(node: Any, key: Any, item: bool) -> tuple[int, Any]:
    """`(kind, key as stored)` for reading `key` from `node`; `_NoNode` where there is
    no such node."""
    layout = None if item else layout_of(type(node))
    if layout is not None:
        if key not in layout.names:
            _no_field(node, key, layout.names)
        return TREECLASS, key
    cls = type(node)
    fields: tuple[str, ...] | None = getattr(cls, "_fields", None) if isinstance(node, tuple) else None
    if fields is not None and (not item or isinstance(key, int)):
        if item:  # `nt[0]` and `nt.a` are one node, rebuilt by _replace()
            if not -len(fields) <= key < len(fields):
                _out_of_range(len(fields))
            return NAMEDTUPLE, fields[key]
        if key not in fields:
            _no_field(node, str(key), fields)
        return NAMEDTUPLE, key
    if item and isinstance(node, tuple | list):
        if not isinstance(key, int):
            raise _NoNode(TypeError, lambda at: f"{at} is {describe(node)}; index it with an int.")
        n = len(node)
        if not -n <= key < n:
            _out_of_range(n)
        return (LIST if isinstance(node, list) else TUPLE), key % n
    if item and isinstance(node, dict):
        if key not in node:
            keys = ", ".join(repr(k) for k in node)
            raise _NoNode(KeyError, lambda at: f"no such key; the keys are: {keys}.")
        return DICT, key
    if item and layout_of(cls) is not None:
        treeclass = f"a treeclass ({cls.__name__}); read its fields as attributes, not items."
        raise _NoNode(TypeError, lambda at: f"{at} is {treeclass}")
    did = "indexed it" if item else "read an attribute of it"
    fix = "; to change part of an array, pass fn=lambda x: x.at[...].set(...)"
    rest = (
        f"holds {describe(node)}, and `where` {did}. replace_at walks treeclass fields and "
        "the entries of tuples, lists, dicts and NamedTuples, and replaces whole nodes"
        f"{fix if hasattr(node, 'shape') else ''}."
    )
    raise _NoNode(TypeError, lambda at: f"{at} {rest}")


def follow(obj: Any, path: Path, root: str) -> tuple[list[Parent], Any]:
    """The `(parent, kind, key)` of each step of `path` in `obj`, and the node at its
    end. Raises the error naming the path where a step has no node."""
    parents: list[Parent] = []
    node = obj
    for depth, (key, item) in enumerate(path):
        # The common cases inline: a treeclass field, an index into a tuple.
        layout = None if item else type(node).__dict__.get(LAYOUT)
        if layout is not None and key in layout.names:
            parents.append((node, TREECLASS, key))
            node = getattr(node, key)
            continue
        if item and type(node) is tuple and type(key) is int and 0 <= key < len(node):
            parents.append((node, TUPLE, key))
            node = node[key]
            continue
        try:
            kind, key = _step(node, key, item)
        except _NoNode as bad:
            msg = f"{show(root, path[: depth + 1])}: {bad.reason(show(root, path[:depth]))}"
            raise bad.error(msg) from None
        parents.append((node, kind, key))
        node = getattr(node, key) if kind <= NAMEDTUPLE else node[key]
    return parents, node


def _paths(selected: Any) -> list[Path] | None:
    """The paths of the nodes in what `where` returned (a node, or a tuple or list of
    them); None if it returned anything else."""
    items: list[Any] = list(selected) if isinstance(selected, tuple | list) else [selected]
    if any(type(s) is not _Read for s in items):
        return None
    return [_at(s)[1] for s in items]


def record(where: Callable[[Any], Any], root: str) -> Path | list[Path]:
    """The path `where` selects (a tuple of steps), or the paths (a list of them) when
    it returns a tuple or list of nodes; `root` names the root in messages."""
    stand_in: Any = _read(root, ())
    selected = where(stand_in)
    if type(selected) is _Read:  # one node, the common case
        return _at(selected)[1]
    paths = _paths(selected)
    if paths is None:
        items = selected if isinstance(selected, tuple | list) else [selected]
        bad = next(s for s in items if type(s) is not _Read)
        what = describe(bad, shape=False)
        what = what if bad is selected else f"a {type(selected).__name__} holding {what}"
        raise TypeError(_MSG_RETURN.format(what=what))
    return paths


def probe(where: Callable[[Any], Any], root: str) -> list[Path] | None:
    """The paths `where` selects if it is a selector in `replace_at`'s form (it returns
    a node, or a tuple or list of nodes, read from its argument); None if it is anything
    else, such as a predicate on leaves (`lambda x: x.dtype == jnp.bfloat16` compares
    on the stand-in, which refuses; `tc.is_inexact_array` returns False)."""
    stand_in: Any = _read(root, ())
    try:
        selected = where(stand_in)
    except Exception:  # noqa: BLE001 - a predicate that cannot run on the stand-in
        return None
    return _paths(selected) or None  # an empty tuple selects nothing: not a selector
