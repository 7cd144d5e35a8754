"""`grad()`, `value_and_grad()`, `apply_updates()` for models that also hold state, keys and
strings: as equinox's `filter_value_and_grad`, only the half `tc.partition` selects."""

import functools
from collections.abc import Callable
from typing import Any, Concatenate, Final, Literal, ParamSpec, TypeVar, overload

import jax
import jax.numpy as jnp
import numpy as np

from treeclass._core.walk import path_str
from treeclass._jit.untraceable import is_traceable, untraceable_field
from treeclass._train.select import combine, halves, leaf_visits, listed, select, trainable, why_not

_T = TypeVar("_T")
_R = TypeVar("_R")
_A = TypeVar("_A")
_P = ParamSpec("_P")
_Where = Callable[[_T], Any] | None
_Filter = Callable[[Any], bool] | None

_MSG_NOTHING: Final = """\
{what} has nothing to differentiate: none of its leaves is trainable.

Trainable leaves are floating-point (or complex) arrays and Python floats that no field
above them declares trainable=False. Its leaves: {leaves}.

Store the parameters as float arrays (jnp.asarray(x, jnp.float32)), or, if nothing here
should be trained, call the loss without tc.grad."""

_MSG_UPDATE_NOT_TRAINABLE: Final = """\
{path}: an update for a leaf that is not trainable ({what}).

Optimizer updates belong to the trainable leaves only: compute them on the first half of
tc.partition(model) (or on tc.grad's gradients), which holds None here:

    params, _ = tc.partition(model)
    updates, state = optimizer.update(grads, state, params)"""


@overload
def value_and_grad(
    fun: Callable[Concatenate[_T, _P], _R],
    *,
    where: _Where[_T] = None,
    filter: _Filter = None,
    has_aux: Literal[False] = False,
) -> Callable[Concatenate[_T, _P], tuple[_R, _T]]: ...
@overload
def value_and_grad(
    fun: Callable[Concatenate[_T, _P], tuple[_R, _A]],
    *,
    where: _Where[_T] = None,
    filter: _Filter = None,
    has_aux: Literal[True],
) -> Callable[Concatenate[_T, _P], tuple[tuple[_R, _A], _T]]: ...
def value_and_grad(
    fun: Callable[..., Any],
    *,
    where: _Where[Any] = None,
    filter: _Filter = None,  # noqa: A002 - the public keyword's name (docs/training.md)
    has_aux: bool = False,
) -> Callable[..., Any]:
    """`jax.value_and_grad` with respect to the trainable leaves of the first argument.

    **Arguments**

    - `fun`: a function of a model first, returning a scalar (`(scalar, aux)` with `has_aux`).
    - `where`, `filter`: as in `tc.partition`, narrowing the trainable leaves.

    **Returns**

    A function of `fun`'s parameters returning `(value, grads)` (`((value, aux), grads)`),
    `grads` shaped as `tc.partition(model, where, filter=filter)[0]`.

    **Raises**

    `TypeError` naming the class when nothing is selected, or `Class.field` holding what JAX
    cannot trace (a string); `tc.partition`'s errors for `where`.

    **Example**

    >>> class Model(tc.TreeClass):
    ...     w: jax.Array
    ...     mask: jax.Array
    >>> loss = lambda m, x: jnp.sum(jnp.where(m.mask, m.w * x, 0.0))
    >>> m = Model(jnp.ones(3), jnp.array([True, False, True]))
    >>> value, grads = tc.value_and_grad(loss)(m, jnp.full(3, 2.0))
    >>> float(value), grads.w.tolist(), grads.mask
    (4.0, [2.0, 0.0, 2.0], None)
    """
    vg = jax.value_and_grad(lambda p, r, *a, **k: fun(combine(p, r), *a, **k), has_aux=has_aux)

    @functools.wraps(fun)
    def call(x: Any, /, *args: Any, **kwargs: Any) -> Any:
        visits = leaf_visits(x)
        # Else a string would pass unchecked in the half not differentiated: named as tc.jit does.
        traceable = all(is_traceable(v.value) for v in visits)
        if not traceable and (found := untraceable_field(fun, (x,), {})) is not None:
            raise found
        chosen = select(x, visits, where, filter, only_trainable=True)
        if not any(chosen):  # never a tree of None in silence
            root = type(x).__name__
            what = f"{root}, narrowed by `where`/`filter`," if where or filter else root
            raise TypeError(_MSG_NOTHING.format(what=what, leaves=listed(visits, root)))
        return vg(*halves(x, visits, chosen), *args, **kwargs)

    return call


@overload
def grad(
    fun: Callable[Concatenate[_T, _P], Any],
    *,
    where: _Where[_T] = None,
    filter: _Filter = None,
    has_aux: Literal[False] = False,
) -> Callable[Concatenate[_T, _P], _T]: ...
@overload
def grad(
    fun: Callable[Concatenate[_T, _P], tuple[Any, _A]],
    *,
    where: _Where[_T] = None,
    filter: _Filter = None,
    has_aux: Literal[True],
) -> Callable[Concatenate[_T, _P], tuple[_T, _A]]: ...
def grad(
    fun: Callable[..., Any],
    *,
    where: _Where[Any] = None,
    filter: _Filter = None,  # noqa: A002 - the public keyword's name (docs/training.md)
    has_aux: bool = False,
) -> Callable[..., Any]:
    """`tc.value_and_grad`'s gradient, with its arguments and errors.

    **Returns**

    A function of `fun`'s parameters returning the gradient (`(grads, aux)` with `has_aux`).

    **Example**

    >>> class Model(tc.TreeClass):
    ...     w: jax.Array
    ...     key: jax.Array
    ...     rate: float
    ...     mean: jax.Array = tc.field(trainable=False)
    >>> m = Model(jnp.array([1.0, 2.0]), jax.random.key(0), 0.5, jnp.zeros(2))
    >>> grads = tc.grad(lambda m: jnp.sum(m.w**2) * m.rate + jnp.sum(m.mean))(m)
    >>> grads.w.tolist(), float(grads.rate), grads.key, grads.mean
    ([1.0, 2.0], 5.0, None, None)
    """
    # Wrapped, so that errors name `fun`'s parameters (`tc.jit`'s "argument 'm'").
    with_aux = fun if has_aux else functools.wraps(fun)(lambda *a, **k: (fun(*a, **k), None))
    vg = value_and_grad(with_aux, where=where, filter=filter, has_aux=True)

    @functools.wraps(fun)
    def call(x: Any, /, *args: Any, **kwargs: Any) -> Any:
        (_, aux), grads = vg(x, *args, **kwargs)
        return (grads, aux) if has_aux else grads

    return call


_MSG_UPDATE_SHAPE: Final = """\
{path}: an update of shape {update} for a leaf of shape {leaf}; adding it would {did}.

Compute the updates on tc.partition(model)[0] (or on tc.grad's gradients), which hold
each leaf's shape."""


def _reshapes(x: Any, u: Any) -> str | None:
    """What `x + u` would do to `x`'s shape, if it would not keep it; else None."""
    try:
        wide = np.broadcast_shapes(np.shape(x), np.shape(u))
    except ValueError:
        return "fail (the shapes do not broadcast)"
    return None if wide == np.shape(x) else f"change it to {wide}"


def _add(x: Any, u: Any) -> Any:
    x, u = jnp.asarray(x), jnp.asarray(u)  # a Python float: the weak scalar JAX traces
    # Added in the wider dtype (a bfloat16 weight + a float32 update rounds once), wider by
    # size: `jnp.promote_types` refuses bfloat16 + float32 under strict dtype promotion.
    wide = x.dtype if x.dtype.itemsize >= u.dtype.itemsize else u.dtype
    new = (x.astype(wide) + u.astype(wide)).astype(x.dtype)
    if not x.weak_type:
        return new
    # A weak leaf stays weak, or the next step compiles again: `lax.full_like` keeps it, mapped
    # over every axis for a scalar fill, where `x.at[...].add(u)` would hold a scatter.
    fill = jax.lax.full_like
    for _ in range(x.ndim):
        fill = jax.vmap(fill)
    return fill(x, new)


def apply_updates(tree: _T, updates: Any) -> _T:
    """Adds `updates` to `tree`'s trainable leaves: the step after `optimizer.update`.

    **Arguments**

    - `tree`: the model (any pytree).
    - `updates`: `tree`'s structure (optax's on `tc.partition(tree)[0]`), `None` to skip.

    **Returns**

    `tree`'s structure and type: `leaf + update` in the leaf's dtype, weak if the leaf was.

    **Raises**

    `ValueError` naming the path of an update at a leaf not trainable or of another shape;
    JAX's `ValueError` when the structures differ.

    **Example**

    >>> class Model(tc.TreeClass):
    ...     w: jax.Array
    ...     step: jax.Array
    >>> m = Model(jnp.ones(2, jnp.bfloat16), jnp.array(3))
    >>> new = tc.apply_updates(m, Model(jnp.full(2, 0.5), None))  # a float32 update
    >>> new.w, new.step is m.step
    (Array([1.5, 1.5], dtype=bfloat16), True)
    """
    visits = leaf_visits(tree)
    treedef: Any = jax.tree.structure(tree)  # a PyTreeDef: jaxlib ships no stubs

    # `None` stands for a leaf or a whole subtree (as in `eqx.apply_updates`).
    def spread(u: Any, sub: Any) -> Any:
        return jax.tree.map(lambda _: None, sub) if u is None else u

    updates = jax.tree.map(spread, updates, tree, is_leaf=lambda u: u is None)
    new: list[Any] = []
    for v, u in zip(visits, treedef.flatten_up_to(updates), strict=True):
        if u is not None and not trainable(v):
            path = path_str(type(tree).__name__, v.path)
            raise ValueError(_MSG_UPDATE_NOT_TRAINABLE.format(path=path, what=why_not(v)))
        if u is not None and (did := _reshapes(v.value, u)):
            path = path_str(type(tree).__name__, v.path)
            shapes = {"path": path, "update": np.shape(u), "leaf": np.shape(v.value)}
            raise ValueError(_MSG_UPDATE_SHAPE.format(did=did, **shapes))
        new.append(v.value if u is None else _add(v.value, u))
    return treedef.unflatten(new)  # type: ignore[no-any-return]
