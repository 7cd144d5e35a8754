"""`replace_at()`: nested update along the path(s) that `where` reads.

`record` reads `where` into the path(s) it selects, `follow` reads them from the object,
and `_rebuild` rebuilds each parent on them bottom-up, once, with all of its changes: a
treeclass through `replace()`, a NamedTuple through `_replace()`, a container by copy.

Why not equinox's way (`tree_at` runs `where` on a copy whose leaves are sentinels, then
finds the sentinels by identity): it runs `where` on the real tree; it reaches only
pytree children, so not static fields; it rebuilds by unflatten, so no check runs; and
it flattens, maps and unflattens the whole tree for one change. The eager cost of ours
against the hand-written `replace()` chain: benchmarks/RESULTS.md, "whole_models".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar, overload

from treeclass._core.show import describe
from treeclass._paths.record import DICT, LIST, NAMEDTUPLE, TREECLASS, Parent, follow, record, show

__all__ = ["replace_at"]

_T = TypeVar("_T")
_MISSING: Final[Any] = object()
_SEQUENCES: Final = (tuple, list)
_End = tuple[list[Parent], tuple[Any, ...], Any]  # a path's parents (from `follow`), path, new node


def _put(parent: Any, kind: int, changes: dict[Any, Any]) -> Any:
    """`parent` with the entries `changes` (keys as stored) replaced."""
    if kind == TREECLASS:  # replace(): converters and checks on these fields, __post_init__
        return parent.replace(**changes)
    if kind == NAMEDTUPLE:
        return parent._replace(**changes)
    if kind == DICT:  # a copy of its own type: OrderedDict, defaultdict (its factory too)
        return parent | changes
    items = list(parent)
    for i, value in changes.items():
        items[i] = value
    return items if kind == LIST else tuple(items)


def _rebuild(ends: list[_End], depth: int, root: str) -> Any:
    """The node at `depth` on the paths of `ends` (one node, down to there) with the new
    nodes put in: each parent rebuilt once with all of its changes, so a `__post_init__`
    that checks two fields together sees both new ones."""
    parents, _, new = ends[0]
    if len(ends) == 1:  # no branch below: each parent with its one change, bottom-up
        for parent, kind, key in reversed(parents[depth:]):
            new = _put(parent, kind, {key: new})
        return new
    changes: dict[Any, Any] = {}
    for end in ends:
        if len(end[1]) == depth:
            other = show(root, next(e for e in ends if e is not end)[1])
            msg = f"`where` selects {show(root, end[1])} and {other}: one holds the other, or they are one node."
            raise ValueError(msg)
        changes.setdefault(end[0][depth][2], []).append(end)
    for key, group in changes.items():
        changes[key] = _rebuild(group, depth + 1, root)
    return _put(parents[depth][0], parents[depth][1], changes)


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
      fields (static ones too) and entries of tuples, lists, dicts (OrderedDict,
      defaultdict) and NamedTuples: `lambda m: m.layers[1].w`, or a tuple of such reads
      to replace several at once. It receives a stand-in, never `obj`.
    - `value`: the new node; a tuple of them, one per node, when `where` returns a tuple.
    - `fn`: instead of `value`, a function called on each selected node's current value,
      returning its replacement.

    **Returns**

    An object of `obj`'s type. Each treeclass on the path is rebuilt once with
    `replace()`, so converters, static checks and `__post_init__` run on the changed
    fields; each container on the path is copied, of its own type, with its entries
    changed; every other node is shared with `obj`, not copied.

    **Raises**

    `AttributeError`, `IndexError` or `KeyError` for a read that `obj` has no node for,
    `TypeError` when `where` calls, computes, compares or slices instead of reading, or
    reads into a node that JAX does not flatten (a dict subclass, an array), each naming
    the path (`MLP.layers[1].weight: no such field, did you mean 'w'?`); `ValueError` for
    a `value` that does not match the nodes selected, or nodes selected twice; whatever
    `replace()` raises.

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
    selected = record(where, root)
    if isinstance(selected, tuple):  # one path: the same route, without the checks of many
        parents, node = follow(obj, selected, root)
        return _rebuild([(parents, selected, value if fn is None else fn(node))], 0, root)  # type: ignore[no-any-return]
    if fn is None and not (isinstance(value, _SEQUENCES) and len(value) == len(selected)):
        length = f" of length {len(value)}" if isinstance(value, _SEQUENCES) else ""
        msg = (
            f"`where` selects {len(selected)} nodes ({', '.join(show(root, p) for p in selected)}), "
            f"so value must be a tuple of {len(selected)} new values; got "
            f"{describe(value, shape=False)}{length}."
        )
        raise ValueError(msg)
    ends: list[_End] = []
    for i, path in enumerate(selected):
        parents, node = follow(obj, path, root)
        ends.append((parents, path, value[i] if fn is None else fn(node)))
    return _rebuild(ends, 0, root) if ends else obj
