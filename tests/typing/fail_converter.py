"""`field(converter=...)`: what each checker flags at the call site.

pyright types the `__init__` parameter as the converter's input, so it rejects a value
the converter does not take and accepts the list. mypy types it as the field's
annotation, so it rejects the list (its gap, pinned here: pass `jnp.asarray(...)`,
which both accept, or see docs/faq.md) and the string too.

Each intentional error carries the mypy code (`# type: ignore[...]`) and the pyright
rule (`# pyright: ignore[...]`) it must raise: both checkers reject an ignore that
hides nothing, and `tests/project/test_typing.py` pins the messages.
"""

import jax
import jax.numpy as jnp

import treeclass as tc


def as_f32(x: float | list[float] | jax.Array) -> jax.Array:
    return jnp.asarray(x, jnp.float32)


@tc.treeclass
class Gaussian:
    mean: jax.Array = tc.field(converter=as_f32)


def misuse() -> None:
    Gaussian([0.0, 1.0])  # type: ignore[arg-type]
    Gaussian("wide")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
