"""`replace_at()`: nested update along the path(s) that `where` reads.

Three steps, each a plain function of this module:

1. Recording: `where` is called on a stand-in (`_Read`) that records each attribute
   and item read as one step of a path: `lambda m: m.layers[1].w` gives
   `(("layers", ATTR), (1, ITEM), ("w", ATTR))`. Anything else (a call, arithmetic, a
   comparison, `bool()`, `len()`) raises at once, naming the node it was applied to.
2. `_follow`: the path is followed through the object, step by step: a field of a
   treeclass (static ones too) or NamedTuple, an entry of a tuple, list or dict. Where
   a step has no node it raises the error that names the path so far
   (`MLP.layers[5]: index out of range`).
3. `_put`, bottom-up: each parent on the path is rebuilt with one entry changed: a
   treeclass through its generated `replace()` (converters, checks on the changed
   fields, `__post_init__`), a NamedTuple through `_replace()`, a tuple, list or dict
   by copy. Everything off the path is shared, not copied.

Why not equinox's way (`tree_at` runs `where` on a copy whose leaves are sentinels, then
finds the sentinels by identity): it reaches only pytree children, so not static
fields; it rebuilds every node by unflatten, so no check runs and the result can hold
what no constructor would accept (`Linear.w = 'oops'`); and it flattens, maps and
unflattens the whole tree for one change.

Why record on every call, with no cache of paths: a path may depend on more than the
code of `where` (`lambda m: m.layers[i].w` reads `i` from a closure), and recording
costs less than the `replace()` calls it leads to. Under `jax.jit` all of this runs
once, at trace time. The eager cost against the hand-written chain of `replace()` calls
is measured in benchmarks/ (RESULTS.md, "whole_models").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NoReturn, TypeVar, overload

from jax.tree_util import DictKey, GetAttrKey

from treeclass._checks import closest
from treeclass._layout import LAYOUT, layout_of
from treeclass._repr import describe
from treeclass._walk import path_str

__all__ = ["replace_at"]

_T = TypeVar("_T")
_MISSING: Final[Any] = object()

ATTR: Final = False  # a step read as an attribute: m.w
ITEM: Final = True  # a step read as an item: m[1], m["w"]
Path = tuple[tuple[Any, bool], ...]  # steps: (key, ATTR or ITEM)

# How a node was read from its parent, which says how `_put` rebuilds the parent.
_TREECLASS, _NAMEDTUPLE, _TUPLE, _LIST, _DICT = range(5)
Parent = tuple[Any, int, Any]  # (parent, kind, key as stored: a field name or an index)

MSG_NOT_READ: Final = """\
{path}: `where` {did}, but it may only read fields and entries.

replace_at records the path that `where` reads (`lambda m: m.layers[1].w`) and replaces
the node at its end; to compute a new value from the old one, pass a function:

    tc.replace_at(obj, lambda m: m.layers[1].w, fn=lambda w: w * 2)"""

_MSG_RETURN: Final = """\
`where` returned {what}; it must return a node read from its argument, or a tuple of
them: lambda m: m.layers[1].w  or  lambda m: (m.layers[0].w, m.layers[1].w)"""


def _show(root: str, path: Path) -> str:
    """`MLP.layers[1].w`, in the one path format of treeclass's messages."""
    return path_str(root, tuple(DictKey(key) if item else GetAttrKey(key) for key, item in path))


# --- 1. Recording ------------------------------------------------------------------------


class _Read:
    """What `where` receives: one recorded read, holding the path that led to it."""

    # `(root name, path)`. Field names cannot start with `_tc_` (treeclass reserves the
    # prefix), so this slot never hides a field.
    __slots__ = ("_tc_at",)
    _tc_at: tuple[str, Path]

    def __getattribute__(self, name: str) -> Any:
        # Every attribute read lands here. (`__getattr__` would run only after the
        # normal lookup had raised and caught an AttributeError: 3x slower per read.)
        if name[0] == "_" and (name[:4] == "_tc_" or name[:2] == "__" == name[-2:]):
            # Our own slot and methods, and dunders: probes such as
            # hasattr(x, "__array_interface__") from numpy or JAX find nothing, as no
            # field has a dunder name.
            return object.__getattribute__(self, name)
        root, path = _at(self)
        node = _new(_Read)
        _set_at(node, (root, (*path, (name, ATTR))))
        return node

    def __getitem__(self, key: Any) -> _Read:
        root, path = _at(self)
        if type(key) is _Read:
            key._tc_refuse("used it as an index")
        if isinstance(key, slice):
            at = _show(root, path)
            msg = (
                f"{at}[{key.start}:{key.stop}]: `where` sliced {at}, but it may only select "
                f"single entries; select several as a tuple: lambda m: ({_show('m', path)}[0], ...)"
            )
            raise TypeError(msg)
        return _read(root, (*path, (key, ITEM)))

    def __repr__(self) -> str:
        return f"<replace_at path {_show(*_at(self))}>"

    def _tc_refuse(self, did: str) -> NoReturn:
        raise TypeError(MSG_NOT_READ.format(path=_show(*_at(self)), did=did))


_new: Final = object.__new__
# The slot's own getter and setter, called directly: `__getattribute__` is ours.
_slot: Any = vars(_Read)["_tc_at"]
_at: Final[Callable[[_Read], tuple[str, Path]]] = _slot.__get__
_set_at: Final[Callable[[_Read, tuple[str, Path]], None]] = _slot.__set__


def _read(root: str, path: Path) -> _Read:
    node = _new(_Read)
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


# --- 2. Following a path -----------------------------------------------------------------


class _NoNode(Exception):  # noqa: N818 - internal: carries the reason up to _follow
    """Raised by `_step`; `reason(at)` words it, given the path to the parent (`at`),
    which `_follow` formats only then: on the way there, no message is built."""

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
        return _TREECLASS, key
    cls = type(node)
    fields: tuple[str, ...] | None = getattr(cls, "_fields", None) if isinstance(node, tuple) else None
    if fields is not None and (not item or isinstance(key, int)):
        if item:  # `nt[0]` and `nt.a` are one node, rebuilt by _replace()
            if not -len(fields) <= key < len(fields):
                _out_of_range(len(fields))
            return _NAMEDTUPLE, fields[key]
        if key not in fields:
            _no_field(node, str(key), fields)
        return _NAMEDTUPLE, key
    if item and isinstance(node, tuple | list):
        if not isinstance(key, int):
            raise _NoNode(TypeError, lambda at: f"{at} is {describe(node)}; index it with an int.")
        n = len(node)
        if not -n <= key < n:
            _out_of_range(n)
        return (_LIST if isinstance(node, list) else _TUPLE), key % n
    if item and isinstance(node, dict):
        if key not in node:
            keys = ", ".join(repr(k) for k in node)
            raise _NoNode(KeyError, lambda at: f"no such key; the keys are: {keys}.")
        return _DICT, key
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


def _follow(obj: Any, path: Path, root: str) -> tuple[list[Parent], Any]:
    """The `(parent, kind, key)` of each step of `path` in `obj`, and the node at its
    end. Raises the error naming the path where a step has no node."""
    parents: list[Parent] = []
    node = obj
    for depth, (key, item) in enumerate(path):
        layout = None if item else type(node).__dict__.get(LAYOUT)
        if layout is not None and key in layout.names:  # a treeclass field: the common case
            parents.append((node, _TREECLASS, key))
            node = getattr(node, key)
            continue
        try:
            kind, key = _step(node, key, item)
        except _NoNode as bad:
            msg = f"{_show(root, path[: depth + 1])}: {bad.reason(_show(root, path[:depth]))}"
            raise bad.error(msg) from None
        parents.append((node, kind, key))
        node = getattr(node, key) if kind <= _NAMEDTUPLE else node[key]
    return parents, node


# --- 3. Putting new nodes back -----------------------------------------------------------


def _put(parent: Any, kind: int, changes: dict[Any, Any]) -> Any:
    """`parent` with the entries `changes` (keys as stored) replaced."""
    if kind == _TREECLASS:
        # The generated replace(): converters and checks on these fields, __post_init__.
        return type(parent).replace(parent, **changes)
    if kind == _NAMEDTUPLE:
        return parent._replace(**changes)
    if kind == _DICT:
        new = parent.copy()
        new.update(changes)
        return new
    items = list(parent)
    for i, value in changes.items():
        items[i] = value
    if type(parent) is list or type(parent) is tuple:
        return items if kind == _LIST else tuple(items)
    return type(parent)(items)  # a subclass of list or tuple


def _replace_many(obj: Any, root: str, paths: list[Path], news: list[Any]) -> Any:
    """Replaces several nodes, rebuilding each shared ancestor once with all of its
    changes (so a `__post_init__` that checks two fields together sees both new)."""
    # A trie of the steps: (kind, key) -> [the child read from the parent, the next
    # level or, at the end of a path, the new node].
    trie: dict[tuple[int, Any], list[Any]] = {}
    for path, new in zip(paths, news, strict=True):
        parents, _ = _follow(obj, path, root)
        level = trie
        for depth, (_, kind, key) in enumerate(parents):
            last = depth == len(parents) - 1
            entry = level.get((kind, key))
            if entry is None:
                child = None if last else parents[depth + 1][0]
                entry = level[kind, key] = [child, new if last else {}]
            elif last or type(entry[1]) is not dict:
                at = _show(root, path[: depth + 1])
                msg = f"`where` selects {at} twice, or both {at} and a node inside it."
                raise ValueError(msg)
            if not last:
                level = entry[1]
    return _rebuild(obj, trie)


def _rebuild(parent: Any, level: dict[tuple[int, Any], list[Any]]) -> Any:
    changes = {k: _rebuild(child, sub) if type(sub) is dict else sub for (_, k), (child, sub) in level.items()}
    kind = next(iter(level))[0]  # one parent: every entry was read the same way
    return _put(parent, kind, changes)


@overload
def replace_at(obj: _T, /, where: Callable[[_T], Any], value: Any) -> _T: ...
@overload
def replace_at(obj: _T, /, where: Callable[[_T], Any], *, fn: Callable[[Any], Any]) -> _T: ...
def replace_at(
    obj: _T,
    /,
    where: Callable[[_T], Any],
    value: Any = _MISSING,
    *,
    fn: Callable[[Any], Any] | None = None,
) -> _T:
    """Returns a copy of `obj` with the node(s) that `where` selects replaced.

    **Arguments**

    - `obj`: a treeclass instance (or a tuple, list, dict or NamedTuple holding them).
    - `where`: a function that reads the node(s) to replace from its argument, through
      fields (static ones too) and entries of tuples, lists, dicts and NamedTuples:
      `lambda m: m.layers[1].w`, or a tuple of such reads to replace several at once.
    - `value`: the new node; a tuple of them, one per node, when `where` returns a tuple.
    - `fn`: instead of `value`, a function called on each selected node's current value,
      returning its replacement.

    **Returns**

    An object of `obj`'s type. Each treeclass on the path is rebuilt with `replace()`,
    so converters, static checks and `__post_init__` run on the changed fields; each
    tuple, list or dict on the path is copied with its entry changed; every other node
    is shared with `obj`, not copied.

    **Raises**

    `AttributeError`, `IndexError` or `KeyError` for a read that `obj` has no node for,
    `TypeError` when `where` calls, computes or compares instead of reading, each naming
    the path (`MLP.layers[1].weight: no such field, did you mean 'w'?`); `ValueError` for
    a `value` that does not match the nodes selected; whatever `replace()` raises.

    **Example**

    >>> @tc.treeclass
    ... class Linear:
    ...     w: jax.Array
    ...     act: str = tc.static(default="relu")
    >>> @tc.treeclass
    ... class MLP:
    ...     layers: tuple[Linear, ...]
    >>> mlp = MLP((Linear(jnp.ones(2)), Linear(jnp.ones(3))))
    >>> new = tc.replace_at(mlp, lambda m: m.layers[1].w, jnp.zeros(3))
    >>> new.layers[1].w.tolist(), new.layers[0] is mlp.layers[0]
    ([0.0, 0.0, 0.0], True)
    >>> new = tc.replace_at(mlp, lambda m: (m.layers[0].act, m.layers[1].w), ("tanh", jnp.ones(3)))
    >>> new.layers[0].act
    'tanh'
    >>> tc.replace_at(mlp, lambda m: m.layers[0].w, fn=lambda w: 2 * w).layers[0].w.tolist()
    [2.0, 2.0]
    >>> tc.replace_at(mlp, lambda m: m.layers[1].weight, jnp.zeros(3))
    Traceback (most recent call last):
    AttributeError: MLP.layers[1].weight: no such field, did you mean 'w'? Linear's fields: w, act.
    """
    if (value is _MISSING) == (fn is None):
        msg = "replace_at() takes either a value or fn=, not both and not neither."
        raise TypeError(msg)
    root = type(obj).__name__
    stand_in: Any = _read(root, ())  # records what `where` reads of it
    selected = where(stand_in)
    if type(selected) is _Read:  # one node, the common case
        parents, node = _follow(obj, _at(selected)[1], root)
        new = value if fn is None else fn(node)
        for parent, kind, key in reversed(parents):
            # The treeclass case inline: one Python call fewer per level.
            new = parent.__tc_set__(key, new) if kind == _TREECLASS else _put(parent, kind, {key: new})
        return new  # type: ignore[no-any-return]
    items: list[Any] = list(selected) if isinstance(selected, tuple | list) else [selected]
    bad = next((s for s in items if type(s) is not _Read), None)
    if bad is not None:
        what = describe(bad, shape=False)
        if bad is not selected:
            what = f"a {type(selected).__name__} holding {what}"
        raise TypeError(_MSG_RETURN.format(what=what))
    paths = [_at(s)[1] for s in items]
    if not paths:
        return obj
    if fn is not None:
        news = [fn(_follow(obj, path, root)[1]) for path in paths]
    elif isinstance(value, tuple | list) and len(value) == len(paths):
        news = list(value)
    else:
        found = f" of length {len(value)}" if isinstance(value, tuple | list) else ""
        msg = (
            f"`where` selects {len(paths)} nodes ({', '.join(_show(root, p) for p in paths)}), "
            f"so value must be a tuple of {len(paths)} new values; got "
            f"{describe(value, shape=False)}{found}."
        )
        raise ValueError(msg)
    if any(not path for path in paths):
        msg = "`where` selects the object itself among other nodes; select one or the other."
        raise ValueError(msg)
    return _replace_many(obj, root, paths, news)  # type: ignore[no-any-return]

