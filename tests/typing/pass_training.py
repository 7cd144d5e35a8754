"""A user's training loop with optax, in the base-class form, with model state: the
model's class survives `tc.grad`, `tc.value_and_grad`, `tc.partition` and
`tc.apply_updates` whatever optax's updates are typed as.

optax ships no type information (no `py.typed`, no stubs): both checkers are told so on
the import line. Its annotations admit nests of arrays, lists and dicts as parameters
(`chex.ArrayTree`), which no class is, though optax handles any pytree: the optimizer
is held as `Any` (docs/faq.md, "Type checkers").

`tests/project/test_typing.py` pins each `reveal_type`; nothing else here may be flagged, and
the file runs.
"""

from typing import Any, assert_type, reveal_type

import jax
import jax.numpy as jnp
import optax

import treeclass as tc


class Stats(tc.TreeClass):
    mean: jax.Array
    var: jax.Array


class Net(tc.TreeClass):
    w: jax.Array
    head: jax.Array
    stats: Stats = tc.field(trainable=False)
    step: jax.Array = tc.field(default_factory=lambda: jnp.zeros((), jnp.int32))


def loss(net: Net, x: jax.Array) -> tuple[jax.Array, Net]:
    h = (x @ net.w - net.stats.mean) / jnp.sqrt(net.stats.var + 1e-5)
    new_stats = Stats(0.9 * net.stats.mean + 0.1 * h.mean(0), net.stats.var)
    return ((h @ net.head) ** 2).mean(), net.replace(stats=new_stats)


net = Net(jnp.ones((2, 3)), jnp.ones(3), Stats(jnp.zeros(3), jnp.ones(3)))
x = jnp.ones((4, 2))
optimizer: Any = optax.adamw(1e-3, weight_decay=1e-4)
params, _ = tc.partition(net)
assert_type(params, Net)
opt_state = optimizer.init(params)


@jax.jit
def train_step(net: Net, opt_state: Any, x: jax.Array) -> tuple[Net, Any, jax.Array]:
    (value, updated), grads = tc.value_and_grad(loss, has_aux=True)(net, x)
    assert_type(updated, Net)
    updates, opt_state = optimizer.update(grads, opt_state, tc.partition(net)[0])
    new = tc.apply_updates(updated, updates)
    reveal_type(new)
    return new.replace(step=new.step + 1), opt_state, value


net, opt_state, value = train_step(net, opt_state, x)
head_grads, _ = tc.grad(loss, has_aux=True, where=lambda n: n.head)(net, x)
reveal_type(head_grads)
assert head_grads.w is None
assert int(net.step) == 1

# where= (a selector, typed by the tree) and filter= (a predicate on leaves).
fresh = Net(jnp.ones((2, 3)), jnp.ones(3), Stats(jnp.zeros(3), jnp.ones(3)))
matrices, _ = tc.partition(fresh, filter=lambda x: x.ndim == 2)
assert_type(matrices, Net)
assert matrices.head is None
chosen, _ = tc.partition(fresh, lambda n: (n.w, n.stats), only_trainable=False)
assert_type(chosen, Net)
assert chosen.stats.mean is fresh.stats.mean


def value_only(net: Net, x: jax.Array) -> jax.Array:
    return loss(net, x)[0]


w_grads = tc.grad(value_only, where=lambda n: n.w, filter=tc.is_inexact_array)(fresh, x)
assert_type(w_grads, Net)
assert w_grads.head is None
