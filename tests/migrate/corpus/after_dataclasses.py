"""Dataclass families: flax.struct, chex, jax's register_dataclass, and a dataclass
with a hand-written flatten (the migration corpus, tests/migrate/test_migrate_corpus.py)."""

import dataclasses

import chex
import jax
import jax.numpy as jnp
from jax.tree_util import register_dataclass
import treeclass as tc


# converted: struct.field(pytree_node=False) -> tc.static().
class FlaxLinear(tc.TreeClass):
    w: jax.Array
    b: jax.Array
    act: str = tc.static(default="relu")

    def __call__(self, x):
        return jax.nn.relu(x @ self.w + self.b)


# converted: the base-class form, keyword-only.
class FlaxState(tc.TreeClass, kw_only=True):
    step: jax.Array
    params: FlaxLinear
    lr: float = tc.static(default=0.1)


# refused: a chex dataclass is a mapping unless mappable_dataclass=False.
@chex.dataclass(frozen=True)
class ChexState:
    v: jax.Array
    n: jax.Array


# converted: not a mapping, frozen, and its fields declared in sorted order (chex's
# leaf order).
class ChexParams(tc.TreeClass):
    bias: jax.Array
    weight: jax.Array


# refused: chex sorts the leaves by name; declared out of order, they would move.
@chex.dataclass(frozen=True, mappable_dataclass=False)
class ChexUnsorted:
    weight: jax.Array
    bias: jax.Array


# converted: register_dataclass with the field lists.
class Adam(tc.TreeClass):
    mu: jax.Array
    nu: jax.Array
    lr: tc.Static[float] = 1e-3


# converted: register_dataclass as a decorator, static fields by metadata.
class Sgd(tc.TreeClass):
    momentum: jax.Array
    lr: float = tc.static(default=0.1)


# refused: data_fields in another order than the fields are declared.
@dataclasses.dataclass(frozen=True)
class Rmsprop:
    nu: jax.Array
    grad: jax.Array


register_dataclass(Rmsprop, data_fields=["grad", "nu"], meta_fields=[])


# converted: a dataclass with a hand-written flatten.
class Window(tc.TreeClass):
    values: jax.Array
    size: tc.Static[int] = 3

    def mean(self):
        return jnp.mean(self.values[-self.size :])
