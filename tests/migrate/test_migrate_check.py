"""`treeclass.migrate.check(old, new)` names the first difference between an instance of
a hand-written pytree class and one of its migration (it needs jax only)."""

from __future__ import annotations

import re

import jax.numpy as jnp
import pytest
from jax.tree_util import register_pytree_node_class

import treeclass as tc
from treeclass.migrate import check


@register_pytree_node_class
class Old:
    def __init__(self, w, b, act="relu"):
        self.w, self.b, self.act = w, b, act

    def tree_flatten(self):
        return (self.w, self.b), {"act": self.act}

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, **aux)


class New(tc.TreeClass):
    w: object
    b: object
    act: tc.Static[str] = "relu"


class Reordered(tc.TreeClass):
    b: object
    w: object
    act: tc.Static[str] = "relu"


class Fewer(tc.TreeClass):
    w: object
    act: tc.Static[str] = "relu"


def test_equal_migration_passes():
    check(Old(jnp.ones(2), 0.5), New(jnp.ones(2), 0.5))


def test_leaf_count():
    with pytest.raises(AssertionError, match=r"^leaf count differs: old Old has 2, new Fewer has 1$"):
        check(Old(jnp.ones(2), jnp.zeros(2)), Fewer(jnp.ones(2)))


def test_leaf_order():
    msg = "leaf 0 differs: old Old has ArrayImpl float32[2], new Reordered has ArrayImpl int32[3] at Reordered.b"
    with pytest.raises(AssertionError, match=f"^{re.escape(msg)}$"):
        check(Old(jnp.ones(2), jnp.zeros(3, int)), Reordered(jnp.zeros(3, int), jnp.ones(2)))


def test_leaf_value_and_dtype():
    with pytest.raises(AssertionError, match=re.escape("leaf 1 differs: old Old has float 0.5, new New has float 0.25 at New.b")):
        check(Old(jnp.ones(2), 0.5), New(jnp.ones(2), 0.25))
    with pytest.raises(AssertionError, match=re.escape("leaf 0 differs: old Old has ArrayImpl float32[2], new New has ArrayImpl int32[2] at New.w")):
        check(Old(jnp.ones(2), 0.5), New(jnp.ones(2, int), 0.5))


def test_static_values():
    msg = "static values differ: old Old has 'tanh', which new New has not (its static values: ['relu'])"
    with pytest.raises(AssertionError, match=f"^{re.escape(msg)}$"):
        check(Old(jnp.ones(2), 0.5, "tanh"), New(jnp.ones(2), 0.5))


def test_round_trip_of_the_old_class():
    # jax-cosmo's Cosmology: `list(...).reverse()` is None, so unflatten crashes.
    @register_pytree_node_class
    class Broken:
        def __init__(self, x, gamma=None):
            self.x, self.gamma = x, gamma

        def tree_flatten(self):
            return (self.x, self.gamma), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            rest = list(children[1:]).reverse()
            return cls(children[0], rest.pop())

    class Fixed(tc.TreeClass):
        x: object
        gamma: object = None

    with pytest.raises(AssertionError, match=r"^old Broken fails a flatten/unflatten round trip: AttributeError: "):
        check(Broken(1.0, 0.5), Fixed(1.0, 0.5))
