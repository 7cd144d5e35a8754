"""`fields()`, `is_treeclass()`, `tree_equal()`, and the `==` and hash instances get from them."""

import contextlib
import dataclasses
import warnings
from typing import Any

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core
import jax.numpy as jnp
import numpy as np

from treeclass._core.layout import layout_of
from treeclass._core.walk import PYTHON_SCALARS, is_array


def is_treeclass(x: Any) -> bool:
    """Returns True for a treeclass (`@tc.treeclass` or a `tc.TreeClass` subclass) or its instance.

    **Arguments**

    - `x`: anything.

    **Returns**

    `bool`.

    **Raises**

    Nothing: any other value gives `False`.

    **Example**

    >>> class P(tc.TreeClass):
    ...     x: float
    >>> tc.is_treeclass(P), tc.is_treeclass(P(1.0)), tc.is_treeclass((1.0,))
    (True, True, False)
    """
    return layout_of(x) is not None


def fields(cls_or_obj: Any) -> tuple[dataclasses.Field[Any], ...]:
    """Returns the fields of a treeclass or instance, like `dataclasses.fields`.

    **Arguments**

    - `cls_or_obj`: a treeclass or an instance of one.

    **Returns**

    A tuple of `dataclasses.Field` in declaration order (inherited fields first);
    `f.metadata["static"]` is True for static fields.

    **Raises**

    `TypeError` if `cls_or_obj` is not a treeclass or instance.

    **Example**

    >>> class Neuron(tc.TreeClass):
    ...     v: jax.Array
    ...     tau: tc.Static[float] = 20.0
    >>> [(f.name, f.metadata["static"]) for f in tc.fields(Neuron)]
    [('v', False), ('tau', True)]
    """
    layout = layout_of(cls_or_obj)
    if layout is None:
        msg = f"treeclass.fields() takes a treeclass or an instance of one; got {cls_or_obj!r}."
        raise TypeError(msg)
    # Not dataclasses.fields(): a subclass may turn an inherited field into a property.
    return layout.fields


def tree_equal(a: Any, b: Any) -> bool | jax.Array:
    """Compares two pytrees: same structure (static values included) and equal leaves.

    Arrays are equal when their shapes, dtypes and values are (`NaN != NaN`), typed PRNG
    keys when their key data are; other leaves compare with `==`. A Python scalar equals a
    0-d array of its value in the dtype JAX gives it (as `jax.jit(lambda m: m)` returns it).

    **Arguments**

    - `a`, `b`: any pytrees.

    **Returns**

    A `bool`; a traced boolean scalar if a compared leaf is a tracer (a structure,
    shape or dtype mismatch is still a plain `False`).

    **Raises**

    Nothing: a leaf whose `==` fails or is ambiguous counts as unequal.

    **Example**

    >>> class P(tc.TreeClass):
    ...     x: jax.Array
    ...     tag: str = tc.static(default="a")
    >>> tc.tree_equal(P(jnp.ones(2)), P(jnp.ones(2), tag="b"))
    False
    >>> P(jnp.ones(2)) == P(jnp.ones(2))
    True
    """
    # jaxlib ships no type stubs, so to the checkers a PyTreeDef is of unknown type.
    leaves_a, treedef_a = jax.tree.flatten(a)
    leaves_b, treedef_b = jax.tree.flatten(b)
    if treedef_a != treedef_b:  # type: ignore[operator]
        return False
    traced: list[jax.Array] = []
    for x, y in zip(leaves_a, leaves_b, strict=True):
        if x is y:
            continue
        if is_array(x) or is_array(y):
            x, y = _as_array(x, y), _as_array(y, x)
            if not (is_array(x) and is_array(y)) or x.shape != y.shape or x.dtype != y.dtype:
                return False
            if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):  # no numpy form
                x, y = jax.random.key_data(x), jax.random.key_data(y)
            if isinstance(x, jax.core.Tracer) or isinstance(y, jax.core.Tracer):
                traced.append(jnp.all(x == y))
            elif not np.array_equal(np.asarray(x), np.asarray(y)):
                return False
        elif not equal(x, y):
            return False
    return jnp.all(jnp.stack(traced)) if traced else True


def _as_array(x: Any, other: Any) -> Any:
    """`x` as JAX holds it where `x` is a Python scalar and `other` a 0-d array."""
    if type(x) in PYTHON_SCALARS and getattr(other, "shape", None) == ():
        with contextlib.suppress(OverflowError), warnings.catch_warnings():
            # An int no JAX dtype holds is equal to no array; a float past float32's range
            # is inf, as JAX holds it (jax 0.7's numpy cast warns on the way).
            warnings.simplefilter("ignore", RuntimeWarning)
            return jnp.asarray(x)
    return x


def equal(a: Any, b: Any) -> bool:
    """`a is b or a == b`, False where `==` fails or is ambiguous (as JAX compares statics)."""
    try:
        return a is b or bool(a == b)
    except Exception:  # noqa: BLE001 - an ambiguous or failing == means "not equal"
        return False


def eq(self: Any, other: Any) -> Any:
    return tree_equal(self, other) if type(other) is type(self) else NotImplemented


def hash_(self: object) -> int:
    # Equal instances have equal treedefs, hence equal statics: consistent with ==.
    layout = layout_of(self)
    assert layout is not None  # installed on treeclasses only
    return hash((type(self), layout.flatten(self)[1]))
