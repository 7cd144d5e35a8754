"""`grad()`, `value_and_grad()` and `apply_updates()`: differentiate and optimise the
floating-point leaves of a model that also holds keys, integers, masks and strings.

`jax.grad(loss)(model)` refuses a model holding a bool mask or an int counter, and
with `allow_int=True` returns `float0` gradients that optax cannot add. So, as
equinox's `filter_value_and_grad` does, we split the first argument with `partition`,
differentiate the floating half only, and rebuild the model inside:

    params, rest = partition(model)
    jax.value_and_grad(lambda params, rest, *args: fun(combine(params, rest), *args))

All of this is Python that runs while JAX traces: inside `jax.jit` the compiled program
is the one `jax.value_and_grad` on hand-split parameters would compile, and a call
costs the same (benchmarks/RESULTS.md, the jitted training step).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar, overload

import jax

from treeclass._partition import combine, partition
from treeclass._untraceable import is_traceable, untraceable_field

_T = TypeVar("_T")
_R = TypeVar("_R")
_A = TypeVar("_A")
_P = ParamSpec("_P")


def _check_traceable(fun: Callable[..., Any], x: Any) -> None:
    """Raises the `Class.field` error (as `tc.jit` words it) for a leaf of the first
    argument `x` that JAX cannot trace.

    jax.grad would refuse such a leaf; after `partition` it sits in the half that is not
    differentiated, where nothing checks it, and `fun` would see a string where it
    expects an array."""
    if not all(map(is_traceable, jax.tree.leaves(x))):  # one C-level flatten first
        found = untraceable_field(fun, (x,), {})
        if found is not None:
            raise found


def _split(fun: Callable[..., Any], *, has_aux: bool) -> Callable[..., Any]:
    """`jax.value_and_grad` of `fun` with its first argument split in two, to call as
    `vg(params, rest, *args, **kwargs)`: only `params` is differentiated."""

    def merged(params: Any, rest: Any, *args: Any, **kwargs: Any) -> Any:
        return fun(combine(params, rest), *args, **kwargs)

    return jax.value_and_grad(merged, has_aux=has_aux)


@overload
def value_and_grad(
    fun: Callable[Concatenate[_T, _P], _R], *, has_aux: Literal[False] = False
) -> Callable[Concatenate[_T, _P], tuple[_R, _T]]: ...
@overload
def value_and_grad(
    fun: Callable[Concatenate[_T, _P], tuple[_R, _A]], *, has_aux: Literal[True]
) -> Callable[Concatenate[_T, _P], tuple[tuple[_R, _A], _T]]: ...
def value_and_grad(fun: Callable[..., Any], *, has_aux: bool = False) -> Callable[..., Any]:
    """`jax.value_and_grad` with respect to the floating-point leaves of the first
    argument, whatever else it holds.

    **Arguments**

    - `fun`: a function whose first argument is a pytree (a model) and which returns a
      scalar, or `(scalar, aux)` with `has_aux=True`.
    - `has_aux`: as in `jax.value_and_grad`.

    **Returns**

    A function with `fun`'s parameters returning `(value, grads)` (`((value, aux),
    grads)` with `has_aux`). `grads` has the first argument's structure and type: the
    gradient at each floating-point or complex array leaf (`tc.is_inexact_array`),
    `None` at every other leaf (integer, boolean and PRNG-key arrays, Python numbers).
    The other arguments are passed through as `jax.value_and_grad` passes them.

    **Raises**

    `TypeError` naming `Class.field` when a dynamic field of the first argument holds
    a value JAX cannot trace (a string, a function); `jax.value_and_grad`'s errors
    otherwise.

    **Example**

    >>> @tc.treeclass
    ... class Model:
    ...     w: jax.Array
    ...     mask: jax.Array
    ...     step: jax.Array
    >>> def loss(m, x):
    ...     return jnp.sum(jnp.where(m.mask, m.w * x, 0.0))
    >>> m = Model(jnp.ones(3), jnp.array([True, False, True]), jnp.array(0))
    >>> value, grads = tc.value_and_grad(loss)(m, jnp.full(3, 2.0))
    >>> float(value), grads.w.tolist(), grads.mask, grads.step
    (4.0, [2.0, 0.0, 2.0], None, None)
    """
    return _value_and_grad(fun, has_aux=has_aux)


def _value_and_grad(fun: Callable[..., Any], *, has_aux: bool) -> Callable[..., Any]:
    vg = _split(fun, has_aux=has_aux)

    @functools.wraps(fun)
    def call(x: Any, /, *args: Any, **kwargs: Any) -> Any:
        _check_traceable(fun, x)
        params, rest = partition(x)
        return vg(params, rest, *args, **kwargs)

    return call


@overload
def grad(
    fun: Callable[Concatenate[_T, _P], Any], *, has_aux: Literal[False] = False
) -> Callable[Concatenate[_T, _P], _T]: ...
@overload
def grad(
    fun: Callable[Concatenate[_T, _P], tuple[Any, _A]], *, has_aux: Literal[True]
) -> Callable[Concatenate[_T, _P], tuple[_T, _A]]: ...
def grad(fun: Callable[..., Any], *, has_aux: bool = False) -> Callable[..., Any]:
    """`jax.grad` with respect to the floating-point leaves of the first argument,
    whatever else it holds.

    **Arguments**

    - `fun`: a function whose first argument is a pytree (a model) and which returns a
      scalar, or `(scalar, aux)` with `has_aux=True`.
    - `has_aux`: as in `jax.grad`.

    **Returns**

    A function with `fun`'s parameters returning the gradient (`(grads, aux)` with
    `has_aux`): the first argument's structure and type, with the gradient at each
    floating-point or complex array leaf and `None` at every other leaf.

    **Raises**

    As `tc.value_and_grad`.

    **Example**

    >>> @tc.treeclass
    ... class Model:
    ...     w: jax.Array
    ...     key: jax.Array
    >>> m = Model(jnp.array([1.0, 2.0]), jax.random.key(0))
    >>> grads = tc.grad(lambda m: jnp.sum(m.w**2))(m)
    >>> grads.w.tolist(), grads.key
    ([2.0, 4.0], None)
    """
    vg = _value_and_grad(fun, has_aux=has_aux)

    @functools.wraps(fun)
    def call(x: Any, /, *args: Any, **kwargs: Any) -> Any:
        value, grads = vg(x, *args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return call


def _add(x: Any, u: Any) -> Any:
    if u is None:
        return x
    if not hasattr(x, "dtype") or x.dtype == u.dtype:
        return x + u
    # Added in the wider of the two dtypes, then stored back in the leaf's own: a
    # bfloat16 weight with a float32 update rounds once, not twice. Chosen by size, not
    # by `jnp.promote_types`, which refuses bfloat16 + float32 under
    # jax_numpy_dtype_promotion="strict".
    wide = x.dtype if x.dtype.itemsize >= u.dtype.itemsize else u.dtype
    return (x.astype(wide) + u.astype(wide)).astype(x.dtype)


def apply_updates(tree: _T, updates: _T) -> _T:
    """Adds `updates` to `tree`'s leaves where an update is not `None`, keeping each
    leaf's dtype: the step after `optimizer.update`.

    **Arguments**

    - `tree`: the model (any pytree).
    - `updates`: a pytree of `tree`'s structure with `None` where a leaf is not
      updated, such as optax's updates computed on `tc.partition(tree)[0]`, or grads
      from `tc.grad`.

    **Returns**

    A tree of `tree`'s structure and type: `leaf + update` (in the leaf's dtype) where
    the update is not `None`, the leaf itself elsewhere (shared, not copied).

    **Example**

    >>> @tc.treeclass
    ... class Model:
    ...     w: jax.Array
    ...     step: jax.Array
    >>> m = Model(jnp.ones(2, jnp.bfloat16), jnp.array(3))
    >>> updates = Model(jnp.full(2, 0.5), None)  # float32, as an optimizer may give
    >>> new = tc.apply_updates(m, updates)
    >>> new.w
    Array([1.5, 1.5], dtype=bfloat16)
    >>> new.step is m.step
    True
    """
    # `None` is a leaf of `updates` here: it stands where `tree` holds a leaf.
    return jax.tree.map(_add, tree, updates, is_leaf=lambda u: u is None)  # type: ignore[no-any-return]
