"""tc.stack and tc.unstack keep the class: a stack of layers is a layer, and
unstacking gives a list of them.

`tests/project/test_typing.py` checks that nothing here is flagged, and the file runs.
"""

from typing import assert_type

import jax
import jax.numpy as jnp

import treeclass as tc


class Linear(tc.TreeClass):
    w: jax.Array
    b: jax.Array
    act: tc.Static[str] = "tanh"


layers = [Linear(jnp.ones((2, 2)), jnp.zeros(2)) for _ in range(3)]
stacked = tc.stack(layers)
assert_type(stacked, Linear)
assert stacked.w.shape == (3, 2, 2)
members = tc.unstack(stacked)
assert_type(members, list[Linear])
pair = tc.stack([(layers[0], layers[1]), (layers[1], layers[2])])
assert_type(pair, tuple[Linear, Linear])
assert pair[1].b.shape == (2, 2)
