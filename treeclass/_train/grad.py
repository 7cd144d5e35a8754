"""`grad()`, `value_and_grad()` and `apply_updates()`: differentiate and optimise the
trainable leaves of a model that also holds state, keys, integers, masks and strings.

`jax.grad(loss)(model)` refuses a model holding a bool mask or an int counter, with
`allow_int=True` returns `float0` gradients that optax cannot add, and differentiates
BatchNorm's running statistics as if they were weights. So, as equinox's
`filter_value_and_grad` does, we split the first argument in two by `tc.partition`'s
rule (`treeclass/_train/select.py`), differentiate the selected half only, and rebuild
the model inside:

    params, rest = partition(model, where, filter=filter)
    jax.value_and_grad(lambda params, rest, *args: fun(combine(params, rest), *args))

The gradient therefore has the structure of `tc.partition(model, where,
filter=filter)[0]`, which optax's state is built on. All of this is Python that runs
while JAX traces: inside `jax.jit` the compiled program is the one `jax.value_and_grad`
on hand-split parameters would compile (benchmarks/RESULTS.md, the jitted training step).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, Final, Literal, ParamSpec, TypeVar, overload

import jax
import jax.numpy as jnp

from treeclass._core.walk import path_str
from treeclass._jit.untraceable import is_traceable, untraceable_field
from treeclass._train.partition import combine, halves
from treeclass._train.select import leaf_visits, nothing_trainable, select, trainable, why_not

_T = TypeVar("_T")
_R = TypeVar("_R")
_A = TypeVar("_A")
_P = ParamSpec("_P")
Filter = Callable[[Any], bool]

_MSG_UPDATE_NOT_TRAINABLE: Final = """\
{path}: an update for a leaf that is not trainable ({what}).

Optimizer updates belong to the trainable leaves only: compute them on the first half of
tc.partition(model) (or on tc.grad's gradients), which holds None here:

    params, _ = tc.partition(model)
    updates, state = optimizer.update(grads, state, params)"""


def _value_and_grad(
    fun: Callable[..., Any],
    *,
    has_aux: bool,
    where: Callable[[Any], Any] | None,
    filter: Filter | None,  # noqa: A002
) -> Callable[..., Any]:
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
            raise nothing_trainable(x, visits, narrowed=where is not None or filter is not None)
        return vg(*halves(x, visits, chosen), *args, **kwargs)

    return call


@overload
def value_and_grad(
    fun: Callable[Concatenate[_T, _P], _R],
    *,
    where: Callable[[_T], Any] | None = None,
    filter: Filter | None = None,
    has_aux: Literal[False] = False,
) -> Callable[Concatenate[_T, _P], tuple[_R, _T]]: ...
@overload
def value_and_grad(
    fun: Callable[Concatenate[_T, _P], tuple[_R, _A]],
    *,
    where: Callable[[_T], Any] | None = None,
    filter: Filter | None = None,
    has_aux: Literal[True],
) -> Callable[Concatenate[_T, _P], tuple[tuple[_R, _A], _T]]: ...
def value_and_grad(
    fun: Callable[..., Any],
    *,
    where: Callable[[Any], Any] | None = None,
    filter: Filter | None = None,  # noqa: A002 - the public keyword's name (SPEC §10)
    has_aux: bool = False,
) -> Callable[..., Any]:
    """`jax.value_and_grad` with respect to the trainable leaves of the first argument,
    whatever else it holds.

    **Arguments**

    - `fun`: a function whose first argument is a pytree (a model) and which returns a
      scalar, or `(scalar, aux)` with `has_aux=True`.
    - `where`: a selector in `tc.replace_at`'s form (`lambda m: m.head`, or a tuple of
      such reads): only the trainable leaves inside it are differentiated (fine-tuning).
    - `filter`: a predicate on the trainable leaves (`lambda x: x.ndim == 2`): only those
      it accepts are differentiated.
    - `has_aux`: as in `jax.value_and_grad`.

    **Returns**

    A function with `fun`'s parameters returning `(value, grads)` (`((value, aux),
    grads)` with `has_aux`). `grads` has the first argument's structure and type, and
    that of `tc.partition(model, where, filter=filter)[0]`: the gradient at each
    selected leaf (a Python float gets a scalar array, as `jax.grad` gives it), `None`
    at every other leaf. The other arguments are passed through as in `jax.value_and_grad`.

    **Raises**

    `TypeError` naming the class when nothing is selected; `TypeError` naming
    `Class.field` when a dynamic field holds a value JAX cannot trace (a string, a
    function); for `where`, the errors of `tc.partition`; `jax.value_and_grad`'s errors
    otherwise.

    **Example**

    >>> class Model(tc.TreeClass):
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
    return _value_and_grad(fun, has_aux=has_aux, where=where, filter=filter)


@overload
def grad(
    fun: Callable[Concatenate[_T, _P], Any],
    *,
    where: Callable[[_T], Any] | None = None,
    filter: Filter | None = None,
    has_aux: Literal[False] = False,
) -> Callable[Concatenate[_T, _P], _T]: ...
@overload
def grad(
    fun: Callable[Concatenate[_T, _P], tuple[Any, _A]],
    *,
    where: Callable[[_T], Any] | None = None,
    filter: Filter | None = None,
    has_aux: Literal[True],
) -> Callable[Concatenate[_T, _P], tuple[_T, _A]]: ...
def grad(
    fun: Callable[..., Any],
    *,
    where: Callable[[Any], Any] | None = None,
    filter: Filter | None = None,  # noqa: A002 - the public keyword's name (SPEC §10)
    has_aux: bool = False,
) -> Callable[..., Any]:
    """`jax.grad` with respect to the trainable leaves of the first argument, whatever
    else it holds.

    **Arguments**

    - `fun`: a function whose first argument is a pytree (a model) and which returns a
      scalar, or `(scalar, aux)` with `has_aux=True`.
    - `where`, `filter`: narrow what is differentiated, as in `tc.value_and_grad`.
    - `has_aux`: as in `jax.grad`.

    **Returns**

    A function with `fun`'s parameters returning the gradient (`(grads, aux)` with
    `has_aux`): the first argument's structure and type, with the gradient at each
    selected trainable leaf and `None` at every other leaf.

    **Raises**

    As `tc.value_and_grad`.

    **Example**

    >>> class Stats(tc.TreeClass):
    ...     mean: jax.Array
    >>> class Model(tc.TreeClass):
    ...     w: jax.Array
    ...     key: jax.Array
    ...     rate: float
    ...     stats: Stats = tc.field(trainable=False)
    >>> m = Model(jnp.array([1.0, 2.0]), jax.random.key(0), 0.5, Stats(jnp.zeros(2)))
    >>> grads = tc.grad(lambda m: jnp.sum(m.w**2) * m.rate + jnp.sum(m.stats.mean))(m)
    >>> grads.w.tolist(), float(grads.rate), grads.key, grads.stats.mean
    ([1.0, 2.0], 5.0, None, None)
    >>> tc.grad(lambda m: jnp.sum(m.w**2), where=lambda m: m.w)(m).rate is None
    True
    >>> tc.grad(lambda m: jnp.sum(m.w**2), filter=tc.is_inexact_array)(m).rate is None
    True
    """
    vg = _value_and_grad(fun, has_aux=has_aux, where=where, filter=filter)

    @functools.wraps(fun)
    def call(x: Any, /, *args: Any, **kwargs: Any) -> Any:
        value, grads = vg(x, *args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return call


def _add(x: Any, u: Any) -> Any:
    x, u = jnp.asarray(x), jnp.asarray(u)  # a Python float: the weak scalar JAX traces
    if x.dtype == u.dtype:
        new = x + u
    else:
        # Added in the wider of the two dtypes, then stored back in the leaf's own: a
        # bfloat16 weight with a float32 update rounds once, not twice. Chosen by size,
        # not by `jnp.promote_types`, which refuses bfloat16 + float32 under
        # jax_numpy_dtype_promotion="strict".
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
    """Adds `updates` to `tree`'s trainable leaves where an update is not `None`,
    keeping each leaf's dtype and weak type: the step after `optimizer.update`.

    **Arguments**

    - `tree`: the model (any pytree).
    - `updates`: a pytree of `tree`'s structure with `None` where a leaf is not
      updated, such as optax's updates computed on `tc.partition(tree)[0]`, or grads
      from `tc.grad`.

    **Returns**

    A tree of `tree`'s structure and type (whatever the type of `updates`, such as
    optax's): `leaf + update` where the update is not `None`, in the leaf's dtype and
    weakly typed if the leaf was (a Python float gives a weakly typed scalar array, as
    JAX traces it), so a jitted step does not compile again; the leaf itself elsewhere
    (shared, not copied).

    **Raises**

    `ValueError` naming the path for an update at a leaf that is not trainable (under
    a field declared `trainable=False`, or not floating-point); JAX's `ValueError` when
    `updates` does not have `tree`'s structure.

    **Example**

    >>> class Model(tc.TreeClass):
    ...     w: jax.Array
    ...     step: jax.Array
    >>> m = Model(jnp.ones(2, jnp.bfloat16), jnp.array(3))
    >>> updates = Model(jnp.full(2, 0.5), None)  # float32, as an optimizer may give
    >>> new = tc.apply_updates(m, updates)
    >>> new.w
    Array([1.5, 1.5], dtype=bfloat16)
    >>> new.step is m.step
    True
    >>> tc.apply_updates(jnp.asarray(1.0), jnp.float32(0.5))  # weak stays weak
    Array(1.5, dtype=float32, weak_type=True)
    >>> tc.apply_updates(m, Model(None, jnp.array(1)))
    Traceback (most recent call last):
    ValueError: Model.step: an update for a leaf that is not trainable (i32[], not floating-point).
    ...
    """
    visits = leaf_visits(tree)
    treedef: Any = jax.tree.structure(tree)  # a PyTreeDef: jaxlib ships no stubs
    # `None` in `updates` stands where `tree` holds a leaf that is not updated.
    new: list[Any] = []
    for v, u in zip(visits, treedef.flatten_up_to(updates), strict=True):
        if u is None:
            new.append(v.value)
            continue
        if not trainable(v):
            path = path_str(type(tree).__name__, v.path)
            raise ValueError(_MSG_UPDATE_NOT_TRAINABLE.format(path=path, what=why_not(v)))
        new.append(_add(v.value, u))
    result: _T = treedef.unflatten(new)
    return result
