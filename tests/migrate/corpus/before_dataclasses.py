"""Dataclass families: flax.struct, chex, jax's register_dataclass, and a dataclass
with a hand-written flatten (the migration corpus, tests/migrate/test_migrate_corpus.py)."""

import dataclasses

import chex
import jax
import jax.numpy as jnp
from flax import struct
from jax.tree_util import register_dataclass, register_pytree_node_class


# converted: struct.field(pytree_node=False) -> tc.static().
@struct.dataclass
class FlaxLinear:
    w: jax.Array
    b: jax.Array
    act: str = struct.field(pytree_node=False, default="relu")

    def __call__(self, x):
        return jax.nn.relu(x @ self.w + self.b)


# converted: the base-class form, keyword-only.
class FlaxState(struct.PyTreeNode, kw_only=True):
    step: jax.Array
    params: FlaxLinear
    lr: float = struct.field(pytree_node=False, default=0.1)


# refused: a chex dataclass is a mapping unless mappable_dataclass=False.
@chex.dataclass(frozen=True)
class ChexState:
    v: jax.Array
    n: jax.Array


# converted: not a mapping, frozen, and its fields declared in sorted order (chex's
# leaf order).
@chex.dataclass(frozen=True, mappable_dataclass=False)
class ChexParams:
    bias: jax.Array
    weight: jax.Array


# refused: chex sorts the leaves by name; declared out of order, they would move.
@chex.dataclass(frozen=True, mappable_dataclass=False)
class ChexUnsorted:
    weight: jax.Array
    bias: jax.Array


# converted: register_dataclass with the field lists.
@dataclasses.dataclass(frozen=True)
class Adam:
    mu: jax.Array
    nu: jax.Array
    lr: float = 1e-3


register_dataclass(Adam, data_fields=["mu", "nu"], meta_fields=["lr"])


# converted: register_dataclass as a decorator, static fields by metadata.
@register_dataclass
@dataclasses.dataclass(frozen=True)
class Sgd:
    momentum: jax.Array
    lr: float = dataclasses.field(default=0.1, metadata=dict(static=True))


# refused: data_fields in another order than the fields are declared.
@dataclasses.dataclass(frozen=True)
class Rmsprop:
    nu: jax.Array
    grad: jax.Array


register_dataclass(Rmsprop, data_fields=["grad", "nu"], meta_fields=[])


# converted: a dataclass with a hand-written flatten.
@register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class Window:
    values: jax.Array
    size: int = 3

    def tree_flatten(self):
        return (self.values,), self.size

    @classmethod
    def tree_unflatten(cls, size, children):
        return cls(children[0], size)

    def mean(self):
        return jnp.mean(self.values[-self.size :])
