"""`tc.bind(obj.method)`: a bound method that is a pytree. A plain one is opaque to JAX (`jax.jit`
rejects it; a closure bakes `obj`'s arrays in as constants); `BoundMethod` flattens to `obj`,
with the function in the treedef."""

import types
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar

import jax

_P = ParamSpec("_P")
_R = TypeVar("_R")


class BoundMethod(Generic[_P, _R]):
    """`BoundMethod(func, obj)(...)` calls `func(obj, ...)`: a pytree whose only child is `obj`
    (`func` is static), made by `tc.bind(obj.method)`; immutable, equal when both parts are.

    **Example**

    >>> class Scale(tc.TreeClass):
    ...     w: jax.Array
    ...     def apply(self, x):
    ...         return self.w * x
    >>> bound = tc.bind(Scale(jnp.array(3.0, jnp.float32)).apply)
    >>> doubled = jax.tree.map(lambda w: 2 * w, bound)  # still a BoundMethod
    >>> float(bound(2.0)), jax.tree.leaves(bound), float(doubled(2.0))
    (6.0, [Array(3., dtype=float32)], 12.0)
    """

    __module__ = "treeclass"  # shown as treeclass.BoundMethod, where users import it

    __slots__ = ("__func__", "__self__", "__weakref__")
    # Declared for the type checkers; the slots above hold them.
    __func__: Callable[..., _R]
    __self__: Any

    def __init__(self, func: Callable[..., _R], obj: Any) -> None:
        object.__setattr__(self, "__func__", func)
        object.__setattr__(self, "__self__", obj)

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return self.__func__(self.__self__, *args, **kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        msg = f"cannot assign to BoundMethod.{name}: it is immutable; use tc.bind(new_obj.method)."
        raise AttributeError(msg)

    def __repr__(self) -> str:
        name = getattr(self.__func__, "__qualname__", self.__func__)
        return f"BoundMethod({name}, {self.__self__!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BoundMethod):
            return NotImplemented
        return self.__func__ == other.__func__ and self.__self__ == other.__self__

    def __hash__(self) -> int:
        return hash((self.__func__, self.__self__))


jax.tree_util.register_pytree_with_keys(
    BoundMethod,
    lambda b: (((jax.tree_util.GetAttrKey("__self__"), b.__self__),), b.__func__),
    lambda func, children: BoundMethod(func, *children),
    lambda b: ((b.__self__,), b.__func__),
)


def bind(method: Callable[_P, _R]) -> BoundMethod[_P, _R]:
    """Turns a bound method `obj.method` into a pytree whose child is `obj`.

    **Arguments**

    - `method`: a bound method of a pytree instance (a treeclass, usually).

    **Returns**

    A `BoundMethod`, callable like `method`: pass it into `jax.jit` or use it as a
    `lax.scan` body, one compile per structure of `obj`.

    **Raises**

    `TypeError` if `method` is not a bound method.

    **Example**

    >>> class Decay(tc.TreeClass):
    ...     rate: jax.Array
    ...     def step(self, x, _):
    ...         return x * self.rate, x
    >>> @jax.jit
    ... def run(step, x0):
    ...     return jax.lax.scan(step, x0, length=3)
    >>> final, history = run(tc.bind(Decay(jnp.array(0.5)).step), jnp.array(8.0))
    >>> quarter, _ = run(tc.bind(Decay(jnp.array(0.25)).step), jnp.array(8.0))
    >>> float(final), history.tolist(), float(quarter), run._cache_size()  # one compile
    (1.0, [8.0, 4.0, 2.0], 0.125, 1)
    """
    if isinstance(method, BoundMethod):
        return method
    if not isinstance(method, types.MethodType):
        msg = (
            f"tc.bind() takes a bound method such as obj.method; got {method!r}. For a plain "
            "function, use functools.partial or pass the object explicitly."
        )
        raise TypeError(msg)
    return BoundMethod(method.__func__, method.__self__)
