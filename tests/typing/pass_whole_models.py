"""`tc.replace_at`, `tc.partition`, `tc.combine`, `tc.grad`, `tc.value_and_grad` and
`tc.apply_updates` keep the model's type, so a training step written with them is
typed end to end (no `Any` to annotate away, unlike `jax.tree.map`).

`tests/project/test_typing.py` pins each `reveal_type`; nothing else here may be flagged, and
the file runs.
"""

from typing import assert_type, reveal_type

import jax
import jax.numpy as jnp

import treeclass as tc


class Linear(tc.TreeClass):
    w: jax.Array
    b: jax.Array
    act: tc.Static[str] = "relu"


class MLP(tc.TreeClass):
    layers: tuple[Linear, ...]
    step: jax.Array  # an int32 counter beside the float parameters


def loss(m: MLP, x: jax.Array) -> jax.Array:
    for layer in m.layers:
        x = x @ layer.w + layer.b
    return (x**2).mean()


m = MLP((Linear(jnp.ones((2, 2)), jnp.zeros(2)),), jnp.zeros((), jnp.int32))

reveal_type(tc.replace_at(m, lambda t: t.layers[0].w, jnp.zeros((2, 2))))
assert_type(tc.replace_at(m, lambda t: t.layers[0].act, fn=str.upper), MLP)
assert_type(tc.replace_all(m, act="tanh"), MLP)

params, rest = tc.partition(m)
reveal_type(params)
assert_type(tc.combine(params, rest), MLP)

grads = tc.grad(loss)(m, jnp.ones(2))
reveal_type(grads)
value, grads2 = tc.value_and_grad(loss)(m, jnp.ones(2))
assert_type(value, jax.Array)
assert_type(grads2, MLP)
updates: MLP = jax.tree.map(lambda g: -0.1 * g, grads)  # jax.tree.map returns Any
new = tc.apply_updates(m, updates)
assert_type(new, MLP)

assert new.step.dtype == jnp.int32
assert tc.replace_at(m, lambda t: t.layers[0].act, fn=str.upper).layers[0].act == "RELU"
