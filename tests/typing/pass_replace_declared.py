"""The documented workaround for the invisible `replace` method (docs/faq.md): declare
it for the type checkers in the class body, under `if TYPE_CHECKING:`.

At runtime the block is skipped, so `@treeclass` still installs its own `replace` (a
class body that defines `replace` for real is refused). The checkers see the
declaration, and `Self` keeps the subclass's type. Nothing here may be flagged, and
`tests/project/test_typing.py` also runs this file.
"""

from typing import TYPE_CHECKING, Any, Self, assert_type

import jax
import jax.numpy as jnp

import treeclass as tc


@tc.treeclass
class Neuron:
    v: jax.Array
    tau: float = tc.static(default=20.0)

    if TYPE_CHECKING:

        def replace(self, **changes: Any) -> Self: ...


@tc.treeclass
class Tagged(Neuron):
    tag: str = tc.static(default="a")


n = Neuron(jnp.zeros(3))
assert_type(n.replace(v=n.v + 1.0), Neuron)
assert_type(n.replace(tau=5.0).tau, float)
assert_type(Tagged(jnp.zeros(3)).replace(tag="b"), Tagged)

# The runtime method is treeclass's own, with its checks.
assert n.replace(tau=5.0).tau == 5.0
assert Tagged(jnp.zeros(3)).replace(tag="b").tag == "b"
