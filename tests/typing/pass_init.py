"""`frozen=False` on every class of a hierarchy whose `__init__` assigns its fields:
both checkers then accept `self.w = ...` there. It is a declaration for the checkers
only: at runtime the instances are frozen all the same.
"""

from typing import assert_type

import jax
import jax.numpy as jnp

import treeclass as tc


class Linear(tc.TreeClass, frozen=False):
    w: jax.Array
    size: tc.Static[int]

    def __init__(self, size: int) -> None:
        self.w = jnp.ones(size)
        self.size = size


@tc.treeclass(frozen=False)
class Scaled:
    inner: Linear
    scale: float

    def __init__(self, size: int, scale: float = 2.0) -> None:
        self.inner = Linear(size)
        self.scale = scale


lin = Linear(3)
assert_type(lin, Linear)
assert_type(lin.replace(size=4), Linear)
assert_type(Scaled(3).inner.w, jax.Array)
