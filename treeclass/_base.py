"""`TreeClass`: the base-class form of `@treeclass`, for users of `eqx.Module` and
`flax.struct.PyTreeNode`.

    class Linear(tc.TreeClass):             # the same as @tc.treeclass class Linear:
        w: jax.Array

    class MLP(tc.TreeClass, kw_only=True):  # class keywords = the decorator's options
        layers: tuple[Linear, ...]

`__init_subclass__` runs the decorator's own processing (`_treeclass.process`) on every
subclass, so both forms share one code path and the same generated code: a subclass is
the class the decorator would have made, plus one base in its MRO. No metaclass: the
class statement runs type's own machinery, as for a decorated class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from typing_extensions import dataclass_transform

from treeclass._field import field, static
from treeclass._treeclass import process

__all__ = ["TreeClass"]


# frozen_default=True: checkers flag `obj.x = ...` as at runtime. (equinox leaves it
# off because its modules assign fields in __init__; here a hand-written __init__
# assigns with object.__setattr__, as for any frozen dataclass.)
@dataclass_transform(frozen_default=True, field_specifiers=(field, static))
class TreeClass:
    """A base class that makes every subclass a treeclass, as `@tc.treeclass` does.

    Subclasses are frozen dataclasses and JAX pytrees with dynamic and static fields,
    `replace()`, and everything else the decorator gives; `TreeClass` itself has no
    fields and is not a pytree. Both forms mix freely: either may hold, subclass or be
    subclassed by the other (`@tc.treeclass` on a `TreeClass` subclass is a no-op; pass
    options as class keywords instead).

    **Arguments** (class keywords)

    - `kw_only`: make every field keyword-only in `__init__`.
    - `repr`: install the array-summarising `__repr__` (unless the body defines one).
    - `eq`: install `__eq__` (`tree_equal`) and `__hash__` (unless the body defines them).

    **Returns**

    Each subclass, processed as `@tc.treeclass(kw_only=..., repr=..., eq=...)` would.

    **Raises**

    At class definition, the errors `@tc.treeclass` raises (a static array default, a
    field named `replace`, a body defining `replace`, the dataclass errors).

    **Example**

    >>> class Linear(tc.TreeClass):
    ...     w: jax.Array
    ...     b: jax.Array
    ...     act: tc.Static[str] = "relu"
    >>> lin = Linear(jnp.ones(2), jnp.zeros(2))
    >>> lin
    Linear(w=f32[2], b=f32[2], act='relu')
    >>> lin.replace(act="tanh").act, len(jax.tree.leaves(lin)), tc.is_treeclass(lin)
    ('tanh', 2, True)
    >>> class MLP(tc.TreeClass, kw_only=True):
    ...     layers: tuple[Linear, ...]
    >>> mlp = MLP(layers=(lin, lin))
    >>> jax.tree.structure(mlp) == jax.tree.structure(MLP(layers=(lin, lin)))
    True
    """

    def __init_subclass__(
        cls,
        *,
        kw_only: bool = False,
        repr: bool = True,  # noqa: A002 - the decorator's option, by its name
        eq: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        process(cls, kw_only=kw_only, repr=repr, eq=eq)

    if TYPE_CHECKING:
        # Declared for type checkers only: at runtime every subclass gets its own
        # generated `replace` (one keyword per field), which a method defined here
        # would not shadow but would make `TreeClass` look like it had one.
        def replace(self, /, **changes: Any) -> Self:
            """Returns a copy with the given fields changed (see `treeclass.replace`)."""
            ...

        def __replace__(self, /, **changes: Any) -> Self: ...
