"""`check(old, new)`: does a migrated class flatten like the class it replaces?

It needs only jax and numpy (not libcst), so a user can run it in the project's own
tests after the migration, on their own objects.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from treeclass._core.layout import layout_of

__all__ = ["check"]


def _describe(value: Any) -> str:
    dtype = getattr(value, "dtype", None)
    shape = getattr(value, "shape", None)
    if dtype is not None and shape is not None:
        return f"{type(value).__name__} {dtype}{list(shape)}"
    return f"{type(value).__name__} {value!r}"


def _same_leaf(a: Any, b: Any) -> bool:
    if hasattr(a, "dtype") or hasattr(b, "dtype"):
        if not (hasattr(a, "dtype") and hasattr(b, "dtype")):
            return False
        if a.dtype != b.dtype or np.shape(a) != np.shape(b):
            return False
        if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=a.dtype.kind in "fc"))
    return type(a) is type(b) and bool(a == b)


def _aux_values(aux: Any) -> list[Any]:
    """The static values in a node's aux data, whatever container the class used."""
    if aux is None:
        return []
    if isinstance(aux, dict):
        return list(aux.values())
    if isinstance(aux, tuple | list):
        return list(aux)
    return [aux]


def _statics(obj: Any) -> list[Any]:
    """The static values of `obj`'s top node, whatever container its class used: a
    treeclass's or flax.struct's static fields, a hand-written class's aux data (a
    value, a tuple or a dict); none for a NamedTuple or a chex dataclass (whose aux
    data are its field names)."""
    cls = type(obj)
    if layout_of(cls) is not None or "_flax_dataclass" in vars(cls):
        return [
            getattr(obj, f.name)
            for f in dataclasses.fields(obj)
            if f.metadata.get("static", False) or f.metadata.get("pytree_node", True) is False
        ]
    # PyTreeDef comes from jaxlib's compiled core, which ships no stubs.
    node_data: Any = jax.tree.structure(obj).node_data()  # type: ignore[attr-defined]
    if node_data is None or isinstance(obj, tuple):
        return []
    aux = node_data[1]
    if dataclasses.is_dataclass(obj) and aux == tuple(sorted(vars(obj))):
        return []  # chex
    return _aux_values(aux)


def _round_trip(obj: Any, which: str) -> Any:
    leaves, treedef = jax.tree.flatten(obj)
    try:
        back = jax.tree.unflatten(treedef, leaves)
    except Exception as e:
        msg = (
            f"{which} {type(obj).__name__} fails a flatten/unflatten round trip: "
            f"{type(e).__name__}: {e}"
        )
        raise AssertionError(msg) from e
    if type(back) is not type(obj):
        msg = f"{which} {type(obj).__name__} unflattens to a {type(back).__name__}"
        raise AssertionError(msg)
    again, again_def = jax.tree.flatten(back)
    if (
        str(again_def) != str(treedef)
        or len(again) != len(leaves)
        or any(a is not b for a, b in zip(again, leaves, strict=True))
    ):
        msg = (
            f"{which} {type(obj).__name__} changes in a flatten/unflatten round trip: "
            f"{treedef} -> {again_def}"
        )
        raise AssertionError(msg)
    return back


def check(old: Any, new: Any) -> None:
    """Checks that `new` (an instance of the migrated class) flattens as `old` (an
    instance of the hand-written class it replaces) does.

    The checks, in order: the number of leaves; each leaf, in order, by type, dtype,
    shape and value; the static (aux) values of the top node, as a collection (the old
    class may keep them in a dict or a tuple, the new one in static fields); and a
    flatten/unflatten round trip of each. Key paths are not compared: they change from
    flat indices (`[0]`) to field names (`.w`) by design (docs/migration.md says how
    to move checkpoints).

    **Arguments**

    - `old`: an instance of the class before the migration.
    - `new`: an instance of the class after it, built from the same values.

    **Returns**

    `None` when no difference is found.

    **Raises**

    `AssertionError` naming the first difference found.

    **Example**

    >>> from jax.tree_util import register_pytree_node_class
    >>> @register_pytree_node_class
    ... class Old:
    ...     def __init__(self, w, act):
    ...         self.w, self.act = w, act
    ...     def tree_flatten(self):
    ...         return (self.w,), self.act
    ...     @classmethod
    ...     def tree_unflatten(cls, act, children):
    ...         return cls(*children, act)
    >>> class New(tc.TreeClass):
    ...     w: jax.Array
    ...     act: tc.Static[str]
    >>> from treeclass import migrate
    >>> migrate.check(Old(jnp.ones(2), "relu"), New(jnp.ones(2), "relu"))
    >>> migrate.check(Old(jnp.ones(2), "relu"), New(jnp.ones(2), "tanh"))
    Traceback (most recent call last):
    AssertionError: static values differ: old Old has 'relu', which new New has not (its ...
    """
    old_leaves = jax.tree.leaves(old)
    new_leaves, new_paths = [], []
    for path, leaf in jax.tree_util.tree_flatten_with_path(new)[0]:
        new_paths.append(jax.tree_util.keystr(path))
        new_leaves.append(leaf)
    o, n = type(old).__name__, type(new).__name__
    if len(old_leaves) != len(new_leaves):
        msg = f"leaf count differs: old {o} has {len(old_leaves)}, new {n} has {len(new_leaves)}"
        raise AssertionError(msg)
    for i, (a, b) in enumerate(zip(old_leaves, new_leaves, strict=True)):
        if not _same_leaf(a, b):
            msg = (
                f"leaf {i} differs: old {o} has {_describe(a)}, new {n} has {_describe(b)}"
                f" at {n}{new_paths[i]}"
            )
            raise AssertionError(msg)
    old_statics, new_statics = _statics(old), _statics(new)
    unmatched = list(new_statics)
    for value in old_statics:
        match = next(
            (i for i, v in enumerate(unmatched) if type(v) is type(value) and v == value), None
        )
        if match is None:
            msg = (
                f"static values differ: old {o} has {value!r}, which new {n} has not"
                f" (its static values: {new_statics!r})"
            )
            raise AssertionError(msg)
        del unmatched[match]
    if unmatched:
        msg = f"static values differ: new {n} has {unmatched!r} beyond old {o}'s {old_statics!r}"
        raise AssertionError(msg)
    _round_trip(old, "old")
    _round_trip(new, "new")
