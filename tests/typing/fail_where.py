"""`where=` is typed `Callable[[T], Any]` with `T` the tree's type, as in
`tc.replace_at`: a typo in a selector is flagged by both checkers, on `tc.partition`
(T from the tree), and on `tc.grad` / `tc.value_and_grad` (T from the loss's first
parameter).
"""

from typing import Any

import jax
import jax.numpy as jnp

import treeclass as tc


class Net(tc.TreeClass):
    encoder: jax.Array
    head: jax.Array


def loss(net: Net, x: jax.Array) -> jax.Array:
    return jnp.sum(net.encoder * x) + jnp.sum(net.head)


def fine_tune(net: Net, x: jax.Array) -> Any:
    params, _ = tc.partition(net, lambda n: n.haed)  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
    grads = tc.grad(loss, where=lambda n: n.haed)(net, x)  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
    value = tc.value_and_grad(loss, where=lambda n: n.encodr)(net, x)  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
    return params, grads, value
