"""`replace_at()`: `record` reads `where` into path(s), `follow` reads them from the object,
and `_rebuild` rebuilds each parent on them bottom-up, once, with all of its changes (not
`eqx.tree_at`'s way: it reaches no static fields, runs no checks, maps the whole tree)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar, overload

from treeclass._core.show import describe
from treeclass._paths.record import Parent, follow, put, record, show

_T = TypeVar("_T")
_MISSING: Final[Any] = object()
_SEQUENCES: Final = (tuple, list)
_End = tuple[list[Parent], tuple[Any, ...], Any]  # a path's parents (from `follow`), path, new node


def _rebuild(ends: list[_End], depth: int, root: str) -> Any:
    """The node at `depth` on `ends`' paths, each parent rebuilt once with all its changes."""
    parents, _, new = ends[0]
    if len(ends) == 1:  # no branch below: each parent with its one change, bottom-up
        for parent, kind, key in reversed(parents[depth:]):
            new = put(parent, kind, {key: new})
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
    return put(parents[depth][0], parents[depth][1], changes)


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
    - `where`: reads the node(s) to replace through fields (static too), container entries and
      children JAX flattens with key paths: `lambda m: m.layers[1].w`, or a tuple of reads.
    - `value`: the new node; a tuple of them, one per node, when `where` returns a tuple.
    - `fn`: instead of `value`, called on each selected node, returning its replacement.

    **Returns**

    An object of `obj`'s type: each treeclass on the path rebuilt once with `replace()`, each
    other node on it copied with its own type, every other node shared with `obj`.

    **Raises**

    `AttributeError`, `IndexError`, `KeyError` for a read with no node; `TypeError` when `where`
    does more than read or reads into a leaf; `ValueError` for a `value` not matching the nodes
    selected, or nodes selected twice; whatever `replace()` raises.

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
    if isinstance(selected, tuple):  # one path: a list of one, as `where` returning (node,)
        selected, value = [selected], [value]
    if fn is None and not (isinstance(value, _SEQUENCES) and len(value) == len(selected)):
        length = f" of length {len(value)}" if isinstance(value, _SEQUENCES) else ""
        shown = ", ".join(show(root, p) for p in selected)
        msg = f"`where` selects {len(selected)} nodes ({shown}), so value must be a tuple of "
        msg += f"{len(selected)} new values; got {describe(value, shape=False)}{length}."
        raise ValueError(msg)
    ends: list[_End] = []
    for i, path in enumerate(selected):
        parents, node = follow(obj, path, root)
        ends.append((parents, path, value[i] if fn is None else fn(node)))
    return _rebuild(ends, 0, root) if ends else obj
