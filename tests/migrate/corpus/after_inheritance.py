"""Inheritance among hand-written pytree classes (the migration corpus,
tests/migrate/test_migrate_corpus.py)."""

from typing import Any

import jax.numpy as jnp
from jax.tree_util import register_pytree_node_class
import treeclass as tc


# converted, with its subclass: the subclass inherits flatten and unflatten.
class Kernel(tc.TreeClass, eq=False):
    lengthscale: Any
    variance: Any

    def __call__(self, x, y):
        return self.variance * jnp.exp(-self.distance(x, y) / self.lengthscale)

    def distance(self, x, y):
        return jnp.sum((x - y) ** 2)


class L1Kernel(Kernel, eq=False):
    def distance(self, x, y):
        return jnp.sum(jnp.abs(x - y))


# refused, with its subclass: the subclass extends the base's flatten through super().
@register_pytree_node_class
class Layer:
    def __init__(self, w):
        self.w = w

    def tree_flatten(self):
        return (self.w,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


@register_pytree_node_class
class BiasedLayer(Layer):
    def __init__(self, w, b):
        super().__init__(w)
        self.b = b

    def tree_flatten(self):
        children, aux = super().tree_flatten()
        return (*children, self.b), aux


# refused: a subclass that is not registered is a leaf today; converting the base
# would make it a pytree.
@register_pytree_node_class
class Distribution:
    def __init__(self, loc):
        self.loc = loc

    def tree_flatten(self):
        return (self.loc,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


class PointMass(Distribution):
    pass
