"""Which leaves of a model are its trainable parameters, and `where=`, which narrows them.

A leaf is trainable when it is inexact (a floating-point or complex array, or a Python
float or complex, which JAX differentiates as it differentiates a float argument) and
no field above it, at any depth, is declared `trainable=False`. That flag lives on the
field, so it needs no variable type, index object or filter at the call site, and it
holds for every instance of the class through every transform: `jit`, `vmap`, `scan`,
`replace`, checkpoints. `tc.partition`, `tc.grad`, `tc.value_and_grad` and
`tc.apply_updates` all ask `mask()`.

`where=` is either a predicate on leaves (`tc.is_inexact_array`) or a selector in
`tc.replace_at`'s form (`lambda m: (m.encoder, m.head.w)`). The two are told apart by
calling `where` once on `replace_at`'s recording stand-in (`_path.probe`): a selector
returns nodes read from it; a predicate returns a bool or fails on the stand-in.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

import jax
import jax.numpy as jnp
from jax.tree_util import DictKey, GetAttrKey, SequenceKey

from treeclass._core.walk import ARRAY_TYPES, KeyPath, Visit, array_name, is_array, path_str, walk
from treeclass._paths.record import DICT, NAMEDTUPLE, follow, probe, show

__all__ = ["is_inexact_array", "is_trainable_leaf", "leaf_visits", "mask", "nothing_trainable", "trainable", "why_not"]

_MSG_NOTHING: Final = """\
{what} has nothing to differentiate: none of its leaves is trainable.

Trainable leaves are floating-point (or complex) arrays and Python floats that no field
above them declares trainable=False. Its leaves: {leaves}.

Store the parameters as float arrays (jnp.asarray(x, jnp.float32)), or, if nothing here
should be trained, call the loss without tc.grad."""

_MSG_SELECTS_NOTHING: Final = """\
`where` selects {paths}, which hold{s} no trainable leaf: {leaves}.

Trainable leaves are floating-point (or complex) arrays and Python floats that no field
above them declares trainable=False; select the part of the model to train, e.g.
where=lambda m: m.head"""


@functools.cache
def _inexact_dtype(dtype: Any) -> bool:
    # Cached: `jnp.issubdtype` walks numpy's type hierarchy on every call, and a model
    # holds a handful of dtypes, so the cache is small and never stale.
    return bool(jnp.issubdtype(dtype, jnp.inexact))


def is_inexact_array(x: object) -> bool:
    """True for floating-point and complex arrays: the array leaves that can be trainable
    parameters (`tc.grad` also differentiates Python floats, and nothing under a field
    declared `trainable=False`).

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


def is_trainable_leaf(x: object) -> bool:
    """True for the leaves that can be parameters: inexact arrays (and their
    `jax.ShapeDtypeStruct` stand-ins, as `jax.eval_shape` gives), Python floats and
    complex numbers; not bools or ints (JAX does not differentiate integers)."""
    if type(x) is float or type(x) is complex:
        return True
    if isinstance(x, jax.ShapeDtypeStruct):
        return _inexact_dtype(x.dtype)
    return is_inexact_array(x)


def leaf_visits(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Visit]:
    """`walk()`'s visits of the leaves of `tree`, in `jax.tree.leaves` order."""
    return [v for v in walk(tree, is_leaf=is_leaf) if v.kind == "leaf"]


def trainable(v: Visit) -> bool:
    """Whether a leaf visit is a trainable leaf: inexact, under no `trainable=False`."""
    return v.trainable and is_trainable_leaf(v.value)


def why_not(v: Visit) -> str:
    """`f32[16], under trainable=False`: what a leaf is and why it is not trainable."""
    what = array_name(v.value.dtype, v.value.shape) if is_array(v.value) else type(v.value).__name__
    return f"{what}, {'under trainable=False' if not v.trainable else 'not floating-point'}"


def _shown(v: Visit, root: str) -> str:
    return f"{path_str(root, v.path)} ({why_not(v) if not trainable(v) else 'trainable'})"


def _listed(visits: list[Visit], root: str, limit: int = 4) -> str:
    shown = [_shown(v, root) for v in visits[:limit]]
    if len(visits) > limit:
        shown.append(f"and {len(visits) - limit} more")
    return ", ".join(shown) if shown else "none"


def nothing_trainable(tree: Any, visits: list[Visit], *, narrowed: bool) -> TypeError:
    """The error of `tc.grad` for a first argument with no trainable leaf (that
    `where=` accepts, when `narrowed`)."""
    root = type(tree).__name__
    what = f"{root}, narrowed by `where`," if narrowed else root
    return TypeError(_MSG_NOTHING.format(what=what, leaves=_listed(visits, root)))


def _key_entry(kind: int, key: Any) -> Any:
    """The `jax.tree_util` key entry of a step `_path.follow` found: the one that JAX's
    `tree_flatten_with_path` gives the same child."""
    if kind <= NAMEDTUPLE:
        return GetAttrKey(key)
    return DictKey(key) if kind == DICT else SequenceKey(key)


def _selected(tree: Any, where: Callable[[Any], Any], visits: list[Visit]) -> list[bool] | None:
    """For a selector, which leaves lie inside the subtrees it selects; None if `where`
    is a predicate on leaves."""
    root = type(tree).__name__
    paths = probe(where, root)
    if paths is None:
        return None
    prefixes: list[KeyPath] = []
    for path in paths:
        parents, _ = follow(tree, path, root)  # names the path where there is no node
        prefixes.append(tuple(_key_entry(kind, key) for _, kind, key in parents))
    inside = [any(v.path[: len(p)] == p for p in prefixes) for v in visits]
    if not any(i and trainable(v) for i, v in zip(inside, visits, strict=True)):
        under = [v for i, v in zip(inside, visits, strict=True) if i]
        shown = ", ".join(show(root, path) for path in paths)
        leaves = _listed(under, root) if under else "no leaves at all (a static field, or None)"
        msg = _MSG_SELECTS_NOTHING.format(paths=shown, s="s" if len(paths) == 1 else "", leaves=leaves)
        raise ValueError(msg)
    return inside


def mask(
    tree: Any,
    where: Callable[[Any], Any] | None,
    visits: list[Visit],
    *,
    predicate_alone: bool,
) -> list[bool]:
    """For each leaf visit of `tree`, whether `where` takes it.

    - `where=None`: the trainable leaves.
    - a selector: the trainable leaves inside the subtrees it selects; `ValueError`
      naming the selection when there is none.
    - a predicate: the leaves it accepts, and only the trainable ones unless
      `predicate_alone` (`tc.partition` splits by any predicate; `tc.grad` never
      differentiates what is not trainable).
    """
    if where is None:
        return [trainable(v) for v in visits]
    inside = _selected(tree, where, visits)
    if inside is not None:
        return [i and trainable(v) for i, v in zip(inside, visits, strict=True)]
    if predicate_alone:
        return [bool(where(v.value)) for v in visits]
    return [trainable(v) and bool(where(v.value)) for v in visits]  # asked of parameters only
