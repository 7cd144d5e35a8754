"""`replace_at()`: `record` reads `where` into path(s), `follow` reads them from the object,
and `_rebuild` rebuilds each parent on them bottom-up, once, with all of its changes (not
`eqx.tree_at`'s way: it reaches no static fields, runs no checks, maps the whole tree).
`replace_all()`: one change for every treeclass in a tree that has the field, such as an
inference-mode switch, where setting each flag by path misses one in silence."""

from collections.abc import Callable
from typing import Any, Final, TypeVar, overload

from treeclass._core.checks import closest
from treeclass._core.layout import instance_layout
from treeclass._core.show import describe
from treeclass._core.walk import children, equinox_statics, node_def
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
            msg = (
                f"`where` selects {show(root, end[1])} and {other}: "
                "one holds the other, or they are one node."
            )
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
        msg = (
            f"`where` selects {len(selected)} nodes ({shown}), so value must be a tuple of "
            f"{len(selected)} new values; got {describe(value, shape=False)}{length}."
        )
        raise ValueError(msg)
    ends: list[_End] = []
    for i, path in enumerate(selected):
        parents, node = follow(obj, path, root)
        ends.append((parents, path, value[i] if fn is None else fn(node)))
    return _rebuild(ends, 0, root) if ends else obj


_MSG_NO_FIELD: Final = """\
replace_all(): no treeclass in this {root} has a field {names}{hint}

replace_all() replaces a field in every treeclass that has one, at any depth; the fields
of the treeclasses in this tree: {fields}."""


def replace_all(tree: _T, /, **changes: Any) -> _T:
    """Returns a copy of `tree` in which every treeclass with a field of a given name holds it.

    **Arguments**

    - `tree`: a treeclass instance, or any pytree holding them, at any depth.
    - `**changes`: field names and their new values.

    **Returns**

    An object of `tree`'s type: each treeclass with one of the fields rebuilt once with
    `replace()`, each node above it rebuilt with its own type, the rest shared with `tree`.

    **Raises**

    `TypeError` naming each field no treeclass in `tree` has; whatever `replace()` raises.

    **Example**

    >>> class Dropout(tc.TreeClass):
    ...     rate: tc.Static[float] = 0.1
    ...     inference: tc.Static[bool] = False
    >>> class Block(tc.TreeClass):
    ...     w: jax.Array
    ...     drop: Dropout = Dropout()
    >>> model = (Block(jnp.ones(2)), {"head": Block(jnp.ones(3))})
    >>> evaluating = tc.replace_all(model, inference=True)
    >>> evaluating[0].drop.inference, evaluating[1]["head"].drop.inference
    (True, True)
    >>> evaluating[0].w is model[0].w
    True
    >>> tc.replace_all(model, inferance=True)
    Traceback (most recent call last):
    TypeError: replace_all(): no treeclass in this tuple has a field 'inferance', did you mean
    'inference'?
    ...
    """
    seen: set[str] = set()  # the fields of the treeclasses met
    new: _T = _rebuild_all(tree, changes, seen)
    missing = [name for name in changes if name not in seen]
    if missing:
        close = closest(missing[0], sorted(seen)) if len(missing) == 1 else None
        msg = _MSG_NO_FIELD.format(
            root=type(tree).__name__,
            names=", ".join(map(repr, missing)),
            hint=f", did you mean {close!r}?" if close else ".",
            fields=", ".join(sorted(seen)) or "none (it holds no treeclass)",
        )
        raise TypeError(msg)
    return new


def _rebuild_all(x: Any, changes: dict[str, Any], seen: set[str]) -> Any:
    """`x` with `changes` made in every treeclass at or below it; `x` itself if none."""
    layout = instance_layout(x)
    if layout is not None:
        seen.update(layout.names)
        new = {name: value for name, value in changes.items() if name in layout.names}
        for name in layout.names:  # static fields too: a static treeclass has fields
            if name not in new:
                old = getattr(x, name)
                if (sub := _rebuild_all(old, changes, seen)) is not old:
                    new[name] = sub
        return x.replace(**new) if new else x
    pairs = children(x) or []
    # An equinox Module's static fields are no children, and may hold treeclasses too.
    statics = equinox_statics(x)
    static_subs = {name: _rebuild_all(value, changes, seen) for name, value in statics.items()}
    static_subs = {name: sub for name, sub in static_subs.items() if sub is not statics[name]}
    subs = [_rebuild_all(child, changes, seen) for _, child in pairs]
    if not static_subs and all(sub is child for sub, (_, child) in zip(subs, pairs, strict=True)):
        return x
    if isinstance(x, dict):  # by key: JAX's unflatten would sort a dict's keys
        return x | {entry.key: sub for (entry, _), sub in zip(pairs, subs, strict=True)}
    new = node_def(x).unflatten(subs)  # a tuple, list, NamedTuple, another library's node
    for name, sub in static_subs.items():
        # The Module JAX's unflatten just built, not yet seen by anyone: set as that does.
        object.__setattr__(new, name, sub)
    return new
