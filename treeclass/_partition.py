"""`partition()` and `combine()`: split a model's leaves in two trees of its structure,
and merge them back.

Both halves keep the whole structure, statics included, with `None` where the other
half holds the leaf: JAX flattens `None` to nothing, so each half is a pytree of
exactly its own leaves, and `combine` puts them back by position. This is equinox's
`partition`/`combine`, which users of `eqx.filter_grad` know; `tc.grad` and
`tc.value_and_grad` (`_grad.py`) are built on it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp

from treeclass._walk import ARRAY_TYPES

_T = TypeVar("_T")


@functools.cache
def _inexact_dtype(dtype: Any) -> bool:
    # Cached: `jnp.issubdtype` walks numpy's type hierarchy on every call, and a model
    # holds a handful of dtypes, so the cache is small and never stale.
    return bool(jnp.issubdtype(dtype, jnp.inexact))


def is_inexact_array(x: object) -> bool:
    """True for floating-point and complex arrays: the leaves `tc.grad` differentiates.

    **Arguments**

    - `x`: any pytree leaf.

    **Returns**

    True for a `jax.Array` (tracers included), `numpy.ndarray` or numpy scalar whose
    dtype is floating (bfloat16 and float8 included) or complex; False for integer,
    boolean and PRNG-key arrays, and for anything that is not an array (Python
    numbers included: they have no dtype until JAX gives them one).

    **Example**

    >>> tc.is_inexact_array(jnp.ones(3)), tc.is_inexact_array(jnp.ones(3, jnp.bfloat16))
    (True, True)
    >>> tc.is_inexact_array(jnp.arange(3)), tc.is_inexact_array(jax.random.key(0))
    (False, False)
    >>> tc.is_inexact_array(1.0)
    False
    """
    if not isinstance(x, ARRAY_TYPES):
        return False
    return _inexact_dtype(x.dtype)


def partition(
    tree: _T,
    where: Callable[[Any], bool] = is_inexact_array,
    *,
    is_leaf: Callable[[Any], bool] | None = None,
) -> tuple[_T, _T]:
    """Splits `tree`'s leaves in two: those `where` selects, and the rest.

    **Arguments**

    - `tree`: any pytree, such as a treeclass model.
    - `where`: a predicate on leaves; by default `tc.is_inexact_array`, which selects
      the floating-point arrays (the parameters an optimizer updates).
    - `is_leaf`: passed to `jax.tree.flatten`, to treat some subtrees as leaves.

    **Returns**

    `(selected, rest)`: two pytrees of `tree`'s structure (treeclasses, containers
    and static fields included) holding `None` where the other one holds the leaf.
    `tc.combine(selected, rest)` is `tree` again.

    **Example**

    >>> @tc.treeclass
    ... class Model:
    ...     w: jax.Array
    ...     step: jax.Array
    ...     act: str = tc.static(default="relu")
    >>> params, rest = tc.partition(Model(jnp.ones(2), jnp.array(0)))
    >>> params
    Model(w=f32[2], step=None, act='relu')
    >>> rest
    Model(w=None, step=i32[], act='relu')
    >>> tc.combine(params, rest).step
    Array(0, dtype=int32, weak_type=True)
    """
    leaves, treedef = jax.tree.flatten(tree, is_leaf=is_leaf)
    chosen = [bool(where(x)) for x in leaves]
    selected = [x if c else None for x, c in zip(leaves, chosen, strict=True)]
    rest = [None if c else x for x, c in zip(leaves, chosen, strict=True)]
    return jax.tree.unflatten(treedef, selected), jax.tree.unflatten(treedef, rest)


def _is_none(x: object) -> bool:
    return x is None


def _first(*xs: Any) -> Any:
    for x in xs:
        if x is not None:
            return x
    return None


def combine(*trees: _T) -> _T:
    """Merges trees of one structure, as `tc.partition` makes them: at each leaf, the
    first tree's leaf that is not `None` wins.

    **Arguments**

    - `*trees`: one or more pytrees of the same structure, `None` where a tree holds
      no leaf (statics come from the first tree).

    **Returns**

    One tree of that structure; `None` where every tree holds `None`.

    **Raises**

    `TypeError` when called without trees; JAX's `ValueError` when the trees'
    structures differ.

    **Example**

    >>> params, rest = tc.partition((jnp.ones(2), jnp.arange(2)))
    >>> params, rest
    ((Array([1., 1.], dtype=float32), None), (None, Array([0, 1], dtype=int32)))
    >>> tc.combine(params, rest)
    (Array([1., 1.], dtype=float32), Array([0, 1], dtype=int32))
    """
    if not trees:
        msg = "combine() takes at least one tree, e.g. tc.combine(*tc.partition(model))."
        raise TypeError(msg)
    # `None` is a leaf in the first tree, so the others are read up to its structure and
    # a leaf of theirs may stand where it holds `None`.
    return jax.tree.map(_first, *trees, is_leaf=_is_none)  # type: ignore[no-any-return]
