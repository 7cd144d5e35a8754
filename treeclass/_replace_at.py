"""`replace_at()`: nested update along the path(s) that `where` reads.

`_where.py` turns `where` (`lambda m: m.layers[1].w`) into a path of steps. `_walk`
follows it through the object, checking each step (a field of a treeclass or
NamedTuple, an entry of a tuple, list or dict) and raising an error that names the
path where there is no such node (`MLP.layers[5]: index out of range`). Then the new
node is put in place and its ancestors are rebuilt bottom-up: a treeclass through its
generated `replace()` (converters, checks on the changed fields, `__post_init__`), a
tuple, list or dict copied with one entry changed, a NamedTuple through `_replace()`.
Everything off the path is shared, not copied.

Why not equinox's way (`tree_at` runs `where` on a copy whose leaves are sentinels, then
finds the sentinels by identity): it reaches only pytree children, so not static
fields; it rebuilds every node by unflatten, so no check runs and the result can hold
what no constructor would accept (`Linear.w = 'oops'`); and it flattens, maps and
unflattens the whole tree for one change.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
from collections.abc import Callable
from typing import Any, Final, NoReturn, TypeVar, overload

import jax

from treeclass import _path_function
from treeclass._layout import LAYOUT
from treeclass._path_function import MISS, PathFunction
from treeclass._where import Path, constant_paths, format_path, read_paths

_T = TypeVar("_T")

# dataclasses keeps ClassVar and InitVar pseudo-fields in `__dataclass_fields__` too;
# this is the marker of the real ones (what `dataclasses.fields()` returns).
_FIELD: Final = getattr(dataclasses, "_FIELD", None)
_MISSING: Final[Any] = object()

# How a node was read from its parent: what `_put` does to put a new one back.
_TREECLASS: Final = _path_function.TREECLASS  # a treeclass field: p.replace(name=new)
_NAMEDTUPLE: Final = _path_function.NAMEDTUPLE  # a NamedTuple entry: p._replace(name=new)
_TUPLE: Final = _path_function.TUPLE  # a tuple entry: (*p[:i], new, *p[i + 1:])
_LIST: Final = _path_function.LIST  # a list entry: copy, then set
_DICT: Final = _path_function.DICT  # a dict entry: copy, then set

# id(code of `where`) -> (that code, the function its constant path compiled to for the
# node types met on the first call; _path_function.py). At most _COMPILED_SIZE kept.
_compiled: dict[int, tuple[Any, PathFunction]] = {}
# The same for recorded paths, keyed by the path itself (a value: `m.layers[i].w` for
# each `i` is its own entry), so only the recording is paid per call.
_compiled_paths: dict[Path, PathFunction] = {}
_COMPILED_SIZE: Final = 1024

# (parent, kind, key): one step of a walk, with the parent it was read from.
_Parent = tuple[Any, int, Any]


def _closest(name: str, names: list[str] | tuple[str, ...]) -> str | None:
    """The field `name` was probably meant to be: a close spelling, else a field that
    abbreviates it or that it abbreviates (`weight` -> `w`, `b` -> `bias`)."""
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return close[0]
    return next((n for n in names if name.startswith(n) or n.startswith(name)), None)


def _describe(value: object) -> str:
    """`a jax.Array of shape (3,)`, `a str`: what a node holds, for messages."""
    cls = type(value)
    name = "jax.Array" if isinstance(value, jax.Array) else cls.__name__
    if cls.__module__ == "numpy":
        name = f"numpy.{name}"
    shape = getattr(value, "shape", None)
    article = "an" if name[0] in "aeiouAEIOU" else "a"
    return f"{article} {name}" + ("" if shape is None else f" of shape {shape}")


class _BadStep(Exception):  # noqa: N818 - internal: carries the reason up to _walk
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
            return _NAMEDTUPLE, fields[key]
        if key not in fields:
            _no_field(node, str(key), fields)
        return _NAMEDTUPLE, key
    if item and isinstance(node, tuple | list):
        if not isinstance(key, int):
            raise _BadStep(TypeError, f"{at} is {_describe(node)}; index it with an int.")
        n = len(node)
        if not -n <= key < n:
            raise _BadStep(IndexError, f"index out of range ({at} has {n} entries).")
        return (_LIST if isinstance(node, list) else _TUPLE), key % n
    if item and isinstance(node, dict):
        if key not in node:
            keys = ", ".join(repr(k) for k in node)
            raise _BadStep(KeyError, f"no such key; the keys are: {keys}.")
        return _DICT, key
    if item and hasattr(cls, LAYOUT):
        raise _BadStep(
            TypeError,
            f"{at} is a treeclass ({cls.__name__}); read its fields as attributes, not items.",
        )
    reason = (
        f"{at} holds {_describe(node)}, and `where` "
        f"{'indexed it' if item else 'read an attribute of it'}. replace_at walks treeclass "
        "fields and the entries of tuples, lists, dicts and NamedTuples, and replaces whole nodes"
    )
    if hasattr(node, "shape"):
        reason += "; to change part of an array, pass fn=lambda x: x.at[...].set(...)"
    raise _BadStep(TypeError, reason + ".")


def _walk(obj: Any, path: Path) -> tuple[list[_Parent], Any]:
    """The (parent, kind, key) of each step of `path` in `obj`, and the node at its end.
    Raises an error naming the path where a step has no node."""
    parents: list[_Parent] = []
    node = obj
    for key, item in path:
        try:
            if not item and hasattr(type(node), LAYOUT):
                # __dataclass_fields__ is set by dataclasses on every treeclass.
                f = type(node).__dataclass_fields__.get(key)
                if f is None or f._field_type is not _FIELD:
                    all_fields = type(node).__dataclass_fields__.values()
                    _no_field(node, key, [g.name for g in all_fields if g._field_type is _FIELD])
                parents.append((node, _TREECLASS, key))
                node = getattr(node, key)
            else:
                kind, key = _entry(node, key, item, format_path(type(obj).__name__, path[: len(parents)]))
                parents.append((node, kind, key))
                node = getattr(node, key) if kind == _NAMEDTUPLE else node[key]
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
_setters: dict[str, Callable[[Any, Any], Any]] = {}


def _setter(name: str) -> Callable[[Any, Any], Any]:
    if not name.isidentifier():  # pragma: no cover - dataclasses allows only identifiers
        return lambda parent, new: type(parent).replace(parent, **{name: new})
    source = f"def set_{name}(_tc_parent, _tc_new):\n    return _tc_parent.replace({name}=_tc_new)\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<treeclass replace_at setter {name}>", "exec"), namespace)  # noqa: S102 - source above
    fn = _setters[name] = namespace[f"set_{name}"]
    return fn  # type: ignore[no-any-return]


def _put(parent: Any, kind: int, changes: dict[Any, Any]) -> Any:
    """`parent` with the entries `changes` (keys as read) replaced."""
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


def _replace_many(obj: Any, paths: list[Path], news: list[Any]) -> Any:
    """Replaces several nodes, rebuilding each shared ancestor once with all of its
    changes (so a `__post_init__` that checks two fields together sees both new)."""
    # A trie of the steps: (kind, key) -> [parent's child, the next level or new value].
    trie: dict[tuple[int, Any], list[Any]] = {}
    for path, new in zip(paths, news, strict=True):
        parents, _ = _walk(obj, path)
        level = trie
        for depth, (_, kind, key) in enumerate(parents):
            last = depth == len(parents) - 1
            entry = level.get((kind, key))
            if entry is None:
                child = parents[depth + 1][0] if not last else None
                entry = level[kind, key] = [child, new if last else {}]
            elif last or not isinstance(entry[1], dict):
                at = format_path(type(obj).__name__, path[: depth + 1])
                msg = f"`where` selects {at} twice, or both {at} and a node inside it."
                raise ValueError(msg)
            if not last:
                level = entry[1]
    return _rebuild(obj, trie)


def _rebuild(parent: Any, level: dict[tuple[int, Any], list[Any]]) -> Any:
    changes: dict[Any, Any] = {}
    for (_, key), (child, sub) in level.items():
        changes[key] = _rebuild(child, sub) if type(sub) is dict else sub
    kind = next(iter(level))[0]  # one parent: every entry was read the same way
    return _put(parent, kind, changes)


def _compile(where: Any, parents: list[_Parent], root: str, path: Path) -> None:
    """Compiles `path` for the node types in `parents`, and keeps it by `where`'s code
    when the path is constant, else by the path itself."""
    # Only int and str keys: generated code writes each key with repr().
    if any(type(key) not in (int, str) for _, _, key in parents):
        return
    function = _path_function.generate(parents, format_path(root, path))
    if function is None:
        return
    if path is constant_paths(where):
        if len(_compiled) >= _COMPILED_SIZE:
            _compiled.clear()
        _compiled[id(where.__code__)] = (where.__code__, function)
    else:
        if len(_compiled_paths) >= _COMPILED_SIZE:
            _compiled_paths.clear()
        _compiled_paths[path] = function


def _hashable(path: Path) -> bool:
    try:
        hash(path)
    except TypeError:  # an unhashable index: _walk names it
        return False
    return True


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
    ...     act: str = tc.static("relu")
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
    if isinstance(where, types.FunctionType):  # the compiled path, if there is one
        hit = _compiled.get(id(where.__code__))
        if hit is not None and hit[0] is where.__code__:
            out = hit[1](obj, value, fn)
            if out is not MISS:
                return out  # type: ignore[no-any-return]
    paths = read_paths(where, type(obj).__name__)
    if isinstance(paths, tuple):  # one path, the common case: no trie
        recorded = paths is not constant_paths(where)
        compiled = _compiled_paths.get(paths) if recorded and _hashable(paths) else None
        if compiled is not None:
            out = compiled(obj, value, fn)
            if out is not MISS:
                return out  # type: ignore[no-any-return]
        parents, node = _walk(obj, paths)
        if parents:
            _compile(where, parents, type(obj).__name__, paths)
        new = value if fn is None else fn(node)
        for parent, kind, key in reversed(parents):
            if kind == _TREECLASS:
                new = (_setters.get(key) or _setter(key))(parent, new)
            else:
                new = _put(parent, kind, {key: new})
        return new  # type: ignore[no-any-return]
    if not paths:
        return obj
    if fn is not None:
        news = [fn(_walk(obj, path)[1]) for path in paths]
    elif isinstance(value, tuple | list) and len(value) == len(paths):
        news = list(value)
    else:
        root = type(obj).__name__
        found = f" of length {len(value)}" if isinstance(value, tuple | list) else ""
        msg = (
            f"`where` selects {len(paths)} nodes ({', '.join(format_path(root, p) for p in paths)}), "
            f"so value must be a tuple of {len(paths)} new values; got {_describe(value)}{found}."
        )
        raise ValueError(msg)
    if any(not path for path in paths):
        msg = "`where` selects the object itself among other nodes; select one or the other."
        raise ValueError(msg)
    return _replace_many(obj, list(paths), news)  # type: ignore[no-any-return]
