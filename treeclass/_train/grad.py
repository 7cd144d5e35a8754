"""`grad()`, `value_and_grad()` and `apply_updates()` for models that also hold state,
keys, integers, masks and strings, which `jax.grad` refuses (or, with `allow_int`, gives
`float0` for, which optax cannot add) or differentiates (BatchNorm statistics). As
equinox's `filter_value_and_grad`, they differentiate only the half that `tc.partition`
selects: the gradient has the structure optax's state is built on, and under `jax.jit`
the program of hand-split parameters (benchmarks/RESULTS.md).
"""

from __future__ import annotations

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
    filter: _Filter = None,  # noqa: A002 - the public keyword's name (SPEC §10)
    has_aux: bool = False,
) -> Callable[..., Any]:
    """`jax.value_and_grad` with respect to the trainable leaves of the first argument,
    whatever else it holds.

    **Arguments**

    - `fun`: a function of a pytree (a model) first, returning a scalar, or `(scalar,
      aux)` with `has_aux=True` (as in `jax.value_and_grad`).
    - `where`, `filter`: as in `tc.partition`, a selector (`lambda m: m.head`) and a
      predicate on leaves (`lambda x: x.ndim == 2`) narrowing the trainable leaves.

    **Returns**

    A function of `fun`'s parameters returning `(value, grads)` (`((value, aux), grads)`
    with `has_aux`): `grads` has the structure and type of the first argument and of
    `tc.partition(model, where, filter=filter)[0]`, the gradient at each selected leaf (a
    scalar array for a Python float, as `jax.grad` gives) and `None` elsewhere.

    **Raises**

    `TypeError` naming the class when nothing is selected, or `Class.field` where a
    dynamic field holds what JAX cannot trace (a string); `tc.partition`'s errors for
    `where`; `jax.value_and_grad`'s otherwise.

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

    def merged(params: Any, rest: Any, *args: Any, **kwargs: Any) -> Any:
        return fun(combine(params, rest), *args, **kwargs)

    vg = jax.value_and_grad(merged, has_aux=has_aux)  # of the selected half only

    @functools.wraps(fun)
    def call(x: Any, /, *args: Any, **kwargs: Any) -> Any:
        visits = leaf_visits(x)
        # A leaf JAX cannot trace would sit in the half that is not differentiated,
        # where nothing checks it, and `fun` would see a string where it expects an
        # array: named here, as `tc.jit` names it.
        if not all(is_traceable(v.value) for v in visits):
            found = untraceable_field(fun, (x,), {})
            if found is not None:
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
    filter: _Filter = None,  # noqa: A002 - the public keyword's name (SPEC §10)
    has_aux: bool = False,
) -> Callable[..., Any]:
    """`jax.grad` with respect to the trainable leaves of the first argument, whatever
    else it holds: `tc.value_and_grad`'s gradient, with its arguments and errors.

    **Returns**

    A function with `fun`'s parameters returning the gradient (`(grads, aux)` with
    `has_aux`): the first argument's structure and type, `None` at every leaf that is
    not selected.

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
    >>> tc.grad(lambda m: jnp.sum(m.w**2), where=lambda m: m.w)(m).rate is None
    True
    >>> tc.grad(lambda m: jnp.sum(m.w**2), filter=tc.is_inexact_array)(m).rate is None
    True
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
    leaf, update = np.shape(x), np.shape(u)
    try:
        wide = np.broadcast_shapes(leaf, update)
    except ValueError:  # the shapes do not broadcast
        return "fail (the shapes do not broadcast)"
    return None if wide == leaf else f"change it to {wide}"


def _add(x: Any, u: Any) -> Any:
    x, u = jnp.asarray(x), jnp.asarray(u)  # a Python float: the weak scalar JAX traces
    # Added in the wider dtype, then stored in the leaf's: a bfloat16 weight with a
    # float32 update rounds once, not twice. Wider by size: `jnp.promote_types` refuses
    # bfloat16 + float32 under jax_numpy_dtype_promotion="strict".
    wide = x.dtype if x.dtype.itemsize >= u.dtype.itemsize else u.dtype
    new = (x.astype(wide) + u.astype(wide)).astype(x.dtype)
    if not x.weak_type:
        return new
    # A weak leaf stays weak, or the next step's arguments differ and it compiles again.
    # JAX has no public "make this weakly typed"; `lax.full_like` keeps its template's
    # weak type and takes a scalar fill, so it is mapped over every axis: the program
    # holds one convert_element_type, where `x.at[...].add(u)` would hold a scatter.
    fill = jax.lax.full_like
    for _ in range(x.ndim):
        fill = jax.vmap(fill)
    return fill(x, new)


def apply_updates(tree: _T, updates: Any) -> _T:
    """Adds `updates` to `tree`'s trainable leaves where an update is not `None`: the
    step after `optimizer.update`.

    **Arguments**

    - `tree`: the model (any pytree).
    - `updates`: a pytree of `tree`'s structure, `None` where a leaf (or a subtree) is
      not updated: optax's updates computed on `tc.partition(tree)[0]`, or `tc.grad`'s
      gradients.

    **Returns**

    A tree of `tree`'s structure and type (whatever the type of `updates`): `leaf +
    update` in the leaf's dtype, weakly typed if the leaf was (a Python float gives a
    weak scalar array, as JAX traces it), so a jitted step does not compile again; the
    leaf itself (shared) where the update is `None`.

    **Raises**

    `ValueError` naming the path for an update at a leaf that is not trainable, or of
    a shape that would change the leaf's (a `(2, 1)` update on a `(2,)` leaf); JAX's
    `ValueError` when `updates` does not have `tree`'s structure.

    **Example**

    >>> class Model(tc.TreeClass):
    ...     w: jax.Array
    ...     step: jax.Array
    >>> m = Model(jnp.ones(2, jnp.bfloat16), jnp.array(3))
    >>> new = tc.apply_updates(m, Model(jnp.full(2, 0.5), None))  # a float32 update
    >>> new.w, new.step is m.step
    (Array([1.5, 1.5], dtype=bfloat16), True)
    >>> tc.apply_updates(jnp.asarray(1.0), jnp.float32(0.5))  # weak stays weak
    Array(1.5, dtype=float32, weak_type=True)
    >>> tc.apply_updates(m, Model(None, jnp.array(1)))
    Traceback (most recent call last):
    ValueError: Model.step: an update for a leaf that is not trainable (i32[], not floating-point).
    ...
    """
    visits = leaf_visits(tree)
    treedef: Any = jax.tree.structure(tree)  # a PyTreeDef: jaxlib ships no stubs

    # `None` in `updates` stands where `tree` holds a leaf, or a subtree (as in
    # `eqx.apply_updates`), that is not updated.
    def spread(u: Any, sub: Any) -> Any:
        return jax.tree.map(lambda _: None, sub) if u is None else u

    updates = jax.tree.map(spread, updates, tree, is_leaf=lambda u: u is None)
    new: list[Any] = []
    for v, u in zip(visits, treedef.flatten_up_to(updates), strict=True):
        if u is not None and not trainable(v):
            path = path_str(type(tree).__name__, v.path)
            raise ValueError(_MSG_UPDATE_NOT_TRAINABLE.format(path=path, what=why_not(v)))
        if u is not None and (did := _reshapes(v.value, u)):
            path, shapes = path_str(type(tree).__name__, v.path), (np.shape(u), np.shape(v.value))
            raise ValueError(
                _MSG_UPDATE_SHAPE.format(path=path, update=shapes[0], leaf=shapes[1], did=did)
            )
        new.append(v.value if u is None else _add(v.value, u))
    result: _T = treedef.unflatten(new)
    return result
