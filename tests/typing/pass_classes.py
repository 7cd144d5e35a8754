"""`kw_only`, `Generic[T]` and inheritance, as the type checkers see them.

`tests/project/test_typing.py` pins each `reveal_type`; nothing else here may be flagged.
"""

from typing import Generic, TypeVar, assert_type, reveal_type

import jax
import jax.numpy as jnp

import treeclass as tc

T = TypeVar("T")


@tc.treeclass(kw_only=True)
class Config:
    lr: jax.Array
    steps: int = tc.static(default=10)


# kw_only=True: every parameter is keyword-only (after the bare `*`).
reveal_type(Config.__init__)
assert_type(Config(lr=jnp.zeros(1)).steps, int)


@tc.treeclass
class Mixed:
    x: jax.Array
    scale: float = tc.field(default=1.0, kw_only=True)


# A per-field kw_only moves just that parameter behind the `*`.
reveal_type(Mixed.__init__)


@tc.treeclass
class Box(Generic[T]):
    item: T
    tag: str = tc.static(default="box")


# Generic classes: the type argument is inferred from the constructor call and kept
# through tc.replace.
assert_type(Box(jnp.zeros(2)), Box[jax.Array])
assert_type(Box(1.0).item, float)
assert_type(tc.replace(Box(1.0), item=2.0), Box[float])


@tc.treeclass
class Base:
    x: jax.Array
    tau: float = tc.static(default=1.0)


@tc.treeclass
class Child(Base):
    y: jax.Array = tc.field(default_factory=lambda: jnp.zeros(0))
    name: tc.Static[str] = "child"


# A subclass inherits its parents' fields (first, in order) with their defaults.
reveal_type(Child.__init__)
child = Child(jnp.zeros(3), 2.0)
assert_type(child.tau, float)
assert_type(tc.replace(child, name="c"), Child)
base: Base = child  # a Child is a Base
