"""`register_pytree_with_keys_class` (the migration corpus,
tests/migrate/test_migrate_corpus.py)."""

from typing import Any

import jax.numpy as jnp
from jax.tree_util import GetAttrKey, register_pytree_with_keys_class
import treeclass as tc


# converted: the keys are the attribute names, so the key paths do not change.
class Affine(tc.TreeClass, eq=False):
    scale: Any
    shift: Any

    def __call__(self, x):
        return self.scale * x + self.shift


# refused: the key is not the attribute's name (the key path would change).
@register_pytree_with_keys_class
class Offset:
    def __init__(self, value):
        self._value = value

    def tree_flatten_with_keys(self):
        return ((GetAttrKey("value"), self._value),), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)

    def __call__(self, x):
        return x + jnp.asarray(self._value)
