"""`field(converter=...)` as the type checkers see it.

pyright reads the converter's parameter type as the `__init__` parameter's type, so
`Gaussian([0.0, 1.0], 1.0)` checks; mypy keeps the field's annotation as the parameter
type (it has no converter support for `dataclass_transform`), so under mypy the caller
passes the converted type, here `jnp.asarray(...)`, which both accept. The `reveal_type`
below is pinned per checker in `tests/project/test_typing.py`; nothing else may be flagged.
"""

from typing import assert_type, reveal_type

import jax
import jax.numpy as jnp

import treeclass as tc


def as_f32(x: float | list[float] | jax.Array) -> jax.Array:
    return jnp.asarray(x, jnp.float32)


@tc.treeclass
class Gaussian:
    mean: jax.Array = tc.field(converter=as_f32)
    std: jax.Array = tc.field(converter=as_f32, default=1.0)
    scale: jax.Array = tc.field(converter=as_f32, default_factory=lambda: [1.0])


reveal_type(Gaussian.__init__)
g = Gaussian(jnp.asarray([0.0, 1.0]))  # the converted type: both checkers accept it
assert_type(g.mean, jax.Array)  # the attribute is what the converter returns
assert_type(tc.replace(g, std=jnp.asarray(2.0)), Gaussian)
assert g.std.dtype == jnp.float32
assert g.scale.shape == (1,)
