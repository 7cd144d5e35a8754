"""`replace_at()`: nested update along the path(s) that `where` reads.

`_where.py` turns `where` (`lambda m: m.layers[1].w`) into a path of steps. `_step.walk`
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

import types
from collections.abc import Callable
from typing import Any, Final, TypeVar, overload

from treeclass import _path_function
from treeclass._path_function import MISS, PathFunction
from treeclass._step import TREECLASS, Parent, describe, put, setter, setters, walk
from treeclass._where import Path, constant_paths, format_path, read_paths

_T = TypeVar("_T")
_MISSING: Final[Any] = object()

# id(code of `where`) -> (that code, the function its constant path compiled to for the
# node types met on the first call; _path_function.py). At most _COMPILED_SIZE kept.
_compiled: dict[int, tuple[Any, PathFunction]] = {}
# The same for recorded paths, keyed by the path itself (a value: `m.layers[i].w` for
# each `i` is its own entry), so only the recording is paid per call.
_compiled_paths: dict[Path, PathFunction] = {}
_COMPILED_SIZE: Final = 1024


def _replace_many(obj: Any, paths: list[Path], news: list[Any]) -> Any:
    """Replaces several nodes, rebuilding each shared ancestor once with all of its
    changes (so a `__post_init__` that checks two fields together sees both new)."""
    # A trie of the steps: (kind, key) -> [parent's child, the next level or new value].
    trie: dict[tuple[int, Any], list[Any]] = {}
    for path, new in zip(paths, news, strict=True):
        parents, _ = walk(obj, path)
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
    return put(parent, kind, changes)


def _compile(where: Any, parents: list[Parent], root: str, path: Path) -> None:
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
    except TypeError:  # an unhashable index: _step.walk names it
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
        parents, node = walk(obj, paths)
        if parents:
            _compile(where, parents, type(obj).__name__, paths)
        new = value if fn is None else fn(node)
        for parent, kind, key in reversed(parents):
            if kind == TREECLASS:
                new = (setters.get(key) or setter(key))(parent, new)
            else:
                new = put(parent, kind, {key: new})
        return new  # type: ignore[no-any-return]
    if not paths:
        return obj
    if fn is not None:
        news = [fn(walk(obj, path)[1]) for path in paths]
    elif isinstance(value, tuple | list) and len(value) == len(paths):
        news = list(value)
    else:
        root = type(obj).__name__
        found = f" of length {len(value)}" if isinstance(value, tuple | list) else ""
        msg = (
            f"`where` selects {len(paths)} nodes ({', '.join(format_path(root, p) for p in paths)}), "
            f"so value must be a tuple of {len(paths)} new values; got {describe(value)}{found}."
        )
        raise ValueError(msg)
    if any(not path for path in paths):
        msg = "`where` selects the object itself among other nodes; select one or the other."
        raise ValueError(msg)
    return _replace_many(obj, list(paths), news)  # type: ignore[no-any-return]
