"""`replace_at()`: nested update along the path(s) that `where` reads.

`_path.record` reads `where` into the path(s) it selects, `_path.follow` reads them
from the object (checking each step, with errors that name the path), and here each
parent on a path is rebuilt bottom-up with one entry changed: a treeclass through its
generated `replace()` (converters, checks on the changed fields, `__post_init__`), a
NamedTuple through `_replace()`, a tuple, list or dict by copy. Everything off the path
is shared, not copied.

Why not equinox's way (`tree_at` runs `where` on a copy whose leaves are sentinels, then
finds the sentinels by identity): it reaches only pytree children, so not static
fields; it rebuilds every node by unflatten, so no check runs and the result can hold
what no constructor would accept (`Linear.w = 'oops'`); and it flattens, maps and
unflattens the whole tree for one change.

Under `jax.jit` this runs once, at trace time; its eager cost against the hand-written
chain of `replace()` calls is in benchmarks/RESULTS.md, "whole_models".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar, overload

from treeclass._core.show import describe
from treeclass._paths.record import (
    DICT,
    LIST,
    NAMEDTUPLE,
    TREECLASS,
    TUPLE,
    Path,
    follow,
    record,
    show,
)

__all__ = ["replace_at"]

_T = TypeVar("_T")
_MISSING: Final[Any] = object()


def _put(parent: Any, kind: int, changes: dict[Any, Any]) -> Any:
    """`parent` with the entries `changes` (keys as stored) replaced."""
    if kind == TREECLASS:
        # The generated replace(): converters and checks on these fields, __post_init__.
        return type(parent).replace(parent, **changes)
    if kind == NAMEDTUPLE:
        return parent._replace(**changes)
    if kind == DICT:
        return parent | changes  # a copy, of the type `copy()` gives
    items = list(parent)
    for i, value in changes.items():
        items[i] = value
    if type(parent) is list or type(parent) is tuple:
        return items if kind == LIST else tuple(items)
    return type(parent)(items)  # a subclass of list or tuple


def _replace_many(obj: Any, root: str, paths: list[Path], news: list[Any]) -> Any:
    """Replaces several nodes, rebuilding each shared ancestor once with all of its
    changes (so a `__post_init__` that checks two fields together sees both new)."""
    # A trie of the steps: (kind, key) -> [the child read from the parent, the next
    # level or, at the end of a path, the new node].
    trie: dict[tuple[int, Any], list[Any]] = {}
    for path, new in zip(paths, news, strict=True):
        parents, _ = follow(obj, path, root)
        level = trie
        for depth, (_, kind, key) in enumerate(parents):
            last = depth == len(parents) - 1
            entry = level.get((kind, key))
            if entry is None:
                child = None if last else parents[depth + 1][0]
                entry = level[kind, key] = [child, new if last else {}]
            elif last or type(entry[1]) is not dict:
                at = show(root, path[: depth + 1])
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

    >>> class Linear(tc.TreeClass):
    ...     w: jax.Array
    ...     act: str = tc.static(default="relu")
    >>> class MLP(tc.TreeClass):
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
    paths = record(where, root)
    if isinstance(paths, tuple):  # one node, the common case
        parents, node = follow(obj, paths, root)
        new = value if fn is None else fn(node)
        for parent, kind, key in reversed(parents):
            # The common cases inline: one Python call fewer per level.
            if kind == TREECLASS:
                new = parent.replace(**{key: new})
            elif kind == TUPLE and type(parent) is tuple:
                new = (*parent[:key], new, *parent[key + 1 :])
            else:
                new = _put(parent, kind, {key: new})
        return new  # type: ignore[no-any-return]
    if not paths:
        return obj
    if fn is not None:
        news = [fn(follow(obj, path, root)[1]) for path in paths]
    elif isinstance(value, tuple | list) and len(value) == len(paths):
        news = list(value)
    else:
        found = f" of length {len(value)}" if isinstance(value, tuple | list) else ""
        msg = (
            f"`where` selects {len(paths)} nodes ({', '.join(show(root, p) for p in paths)}), "
            f"so value must be a tuple of {len(paths)} new values; got "
            f"{describe(value, shape=False)}{found}."
        )
        raise ValueError(msg)
    if any(not path for path in paths):
        msg = "`where` selects the object itself among other nodes; select one or the other."
        raise ValueError(msg)
    return _replace_many(obj, root, paths, news)  # type: ignore[no-any-return]

