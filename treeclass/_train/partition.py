"""`partition()` and `combine()`: split a model's leaves in two trees of its structure,
and merge them back.

Both halves keep the whole structure, statics included, with `None` where the other
half holds the leaf: JAX flattens `None` to nothing, so each half is a pytree of
exactly its own leaves, and `combine` puts them back by position. This is equinox's
`partition`/`combine`, which users of `eqx.filter_grad` know; `tc.grad` and
`tc.value_and_grad` (`treeclass/_train/grad.py`) are built on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import jax

from treeclass._core.walk import Visit
from treeclass._train.select import leaf_visits, select

_T = TypeVar("_T")


def partition(
    tree: _T,
    where: Callable[[_T], Any] | None = None,
    *,
    filter: Callable[[Any], bool] | None = None,  # noqa: A002 - the public keyword's name (SPEC §10)
    only_trainable: bool = True,
) -> tuple[_T, _T]:
    """Splits `tree`'s leaves in two: those selected, and the rest.

    A leaf is selected when it is trainable, lies inside what `where` selects, and
    `filter(leaf)` is true: the rule of `tc.grad` and `tc.value_and_grad`, so an
    optimizer's state built on the first half matches their gradients.

    **Arguments**

    - `tree`: any pytree, such as a treeclass model.
    - `where`: a selector in `tc.replace_at`'s form (`lambda m: m.head`, or a tuple of
      such reads: `lambda m: (m.encoder, m.head.w)`): only leaves inside the subtrees it
      reads are selected (fine-tuning a part). Default: the whole tree.
    - `filter`: a predicate on leaves (`tc.is_inexact_array`, `lambda x: x.ndim == 2`),
      asked of the leaves the other two conditions keep. Default: every leaf.
    - `only_trainable`: `False` drops the first condition: the trainable leaves are
      floating-point (and complex) arrays and Python floats under no field declared
      `trainable=False`; without it, `tc.partition(tree, filter=pred,
      only_trainable=False)` is equinox's `eqx.partition(tree, pred)`.

    **Returns**

    `(selected, rest)`: two pytrees of `tree`'s structure (treeclasses, containers
    and static fields included) holding `None` where the other one holds the leaf.
    `tc.combine(selected, rest)` is `tree` again.

    **Raises**

    For `where`: the errors of `tc.replace_at` naming the path, for a read with no node
    or a `where` that computes, slices or calls; `TypeError` pointing to `filter=` for a
    predicate on leaves passed as `where`; `ValueError` naming the selection when it
    holds no leaf to select.

    **Example**

    >>> class Model(tc.TreeClass):
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
    >>> class Net(tc.TreeClass):
    ...     encoder: Model
    ...     head: Model
    >>> net = Net(Model(jnp.ones(2), jnp.array(0)), Model(jnp.ones(3), jnp.array(0)))
    >>> head_params, frozen = tc.partition(net, lambda n: n.head)
    >>> head_params.encoder.w is None, head_params.head.w.shape
    (True, (3,))
    >>> ints, _ = tc.partition(net, filter=lambda x: x.dtype == jnp.int32, only_trainable=False)
    >>> ints.encoder.step is net.encoder.step, ints.encoder.w
    (True, None)
    """
    visits = leaf_visits(tree)
    return halves(tree, visits, select(tree, visits, where, filter, only_trainable=only_trainable))


def halves(tree: _T, visits: list[Visit], chosen: list[bool]) -> tuple[_T, _T]:
    """`(selected, rest)`: `tree` with `None` at the leaves not `chosen`, and at those."""
    treedef: Any = jax.tree.structure(tree)  # a PyTreeDef: jaxlib ships no stubs
    leaves = [v.value for v in visits]
    selected = [x if c else None for x, c in zip(leaves, chosen, strict=True)]
    rest = [None if c else x for x, c in zip(leaves, chosen, strict=True)]
    return treedef.unflatten(selected), treedef.unflatten(rest)


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
