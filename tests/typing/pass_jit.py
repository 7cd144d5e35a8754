"""`tc.jit` and `tc.bind` keep the signature they wrap, so calls stay typed.

Nothing here may be flagged (`assert_type` fails loudly otherwise).
"""

from typing import assert_type

import jax
import jax.numpy as jnp

import treeclass as tc


@tc.treeclass
class Counter:
    count: jax.Array
    step: int = tc.static(default=1)

    @tc.jit
    def inc(self, by: jax.Array) -> "Counter":
        return tc.replace(self, count=self.count + by * self.step)


@tc.jit
def total(c: Counter) -> jax.Array:
    return c.count.sum()


c = Counter(jnp.zeros(3))
assert_type(c.inc(jnp.zeros(3)), Counter)
assert_type(Counter.inc(c, jnp.zeros(3)), Counter)
assert_type(total(c), jax.Array)
assert_type(tc.bind(c.inc)(jnp.zeros(3)), Counter)
