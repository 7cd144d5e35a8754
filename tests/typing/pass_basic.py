"""What pyright and mypy infer for a plain treeclass: the generated `__init__`, field
types, and the typed `tc.replace()`.

`tests/project/test_typing.py` pins each `reveal_type` below; everything else in this file
must check with no diagnostic at all (`assert_type` fails loudly otherwise).
"""

from typing import ClassVar, assert_type, reveal_type

import jax
import jax.numpy as jnp

import treeclass as tc


@tc.treeclass
class Neuron:
    v: jax.Array
    w: jax.Array = tc.field(default_factory=lambda: jnp.zeros(3))
    tau: float = tc.static(default=20.0)
    dt: tc.Static[float] = 0.1
    label: str = tc.field(static=True, default="n")
    count: int = tc.field(init=False, default=0)
    registry: ClassVar[dict[str, int]] = {}


# The constructor: `Static[float]` is a float, `init=False` and `ClassVar` are no
# parameters, and every default (a factory included) makes a parameter optional.
reveal_type(Neuron.__init__)

n = Neuron(jnp.zeros(3))
m = Neuron(jnp.zeros(3), jnp.zeros(3), 10.0, 0.5, "m")
assert_type(n.v, jax.Array)
assert_type(n.tau, float)
assert_type(n.dt, float)
assert_type(n.count, int)

# tc.replace keeps the class type, so chained updates stay typed.
assert_type(tc.replace(n, v=n.v + 1.0), Neuron)
assert_type(tc.replace(tc.replace(m, tau=5.0), dt=0.2).tau, float)

# Known gap, pinned: `**changes` is untyped, so the checkers accept a value of the
# wrong type (below) and an unknown field name (which the runtime rejects).
tc.replace(n, tau="slow")

assert_type(tc.is_treeclass(n), bool)
assert_type(tc.fields(n)[0].name, str)
