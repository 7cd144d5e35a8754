"""The base-class form, `class X(tc.TreeClass)`, as the type checkers see it: the
constructor, the fields, `replace()` returning the class, nested layers and a
`tc.jit` method; a program written from the docs' examples.

`tests/project/test_typing.py` pins each `reveal_type`; nothing else here may be flagged
(`assert_type` fails loudly otherwise), and the file runs.
"""

from typing import Self, assert_type, reveal_type

import jax
import jax.numpy as jnp

import treeclass as tc


class Linear(tc.TreeClass):
    w: jax.Array
    b: jax.Array
    act: tc.Static[str] = "relu"

    def __call__(self, x: jax.Array) -> jax.Array:
        y = x @ self.w + self.b
        return jax.nn.relu(y) if self.act == "relu" else y

    def scaled(self, by: float) -> Self:
        return self.replace(w=self.w * by)  # Self inside the class


class MLP(tc.TreeClass, kw_only=True):
    layers: tuple[Linear, ...]
    lr: tc.Static[float] = 0.1

    @tc.jit
    def __call__(self, x: jax.Array) -> jax.Array:
        for layer in self.layers:
            x = layer(x)
        return x

    @tc.jit
    def step(self, x: jax.Array, y: jax.Array) -> "MLP":
        def loss(m: MLP) -> jax.Array:
            return ((m(x) - y) ** 2).mean()

        grads = jax.grad(loss)(self)
        # jax.tree.map returns Any; a declared variable gives the result its type back
        # (mypy --strict refuses to return Any from a function typed `-> MLP`).
        new: MLP = jax.tree.map(lambda p, g: p - self.lr * g, self, grads)
        return new


@tc.treeclass
class Decorated:  # the decorator form holds base-form instances, and the reverse
    mlp: MLP


class Holder(tc.TreeClass):
    inner: Decorated


reveal_type(Linear.__init__)
reveal_type(MLP.__init__)

layers = (Linear(jnp.ones((2, 3)), jnp.zeros(3)), Linear(jnp.ones((3, 1)), jnp.zeros(1), act="id"))
m = MLP(layers=layers)
reveal_type(m.replace(lr=0.01))
assert_type(m.replace(lr=0.01).lr, float)
assert_type(m.layers[0].replace(act="tanh"), Linear)
assert_type(m.layers[0].scaled(2.0), Linear)
assert_type(m(jnp.ones(2)), jax.Array)
assert_type(m.step(jnp.ones(2), jnp.zeros(1)), MLP)
assert_type(MLP.step.trace_log.count, int)
assert_type(tc.replace(m, lr=0.5), MLP)
assert_type(Holder(Decorated(m)).inner.mlp.layers, tuple[Linear, ...])
assert_type(tc.is_treeclass(m), bool)

assert m.replace(lr=0.01).lr == 0.01
assert m(jnp.ones(2)).shape == (1,)
m.step(jnp.ones(2), jnp.zeros(1)).step(jnp.ones(2), jnp.zeros(1))
assert MLP.step.trace_log.count == 1  # three calls (one in assert_type above), one trace
