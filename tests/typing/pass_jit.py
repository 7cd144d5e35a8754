"""`tc.jit` and `tc.bind` keep the signature they wrap, and a `tc.jit` function or
method carries a typed `trace_log` (with the retrace options) and `jax.jit`'s `lower`.

`tests/project/test_typing.py` pins each `reveal_type`; nothing else here may be flagged
(`assert_type` fails loudly otherwise), and the file runs.
"""

from typing import assert_type, reveal_type

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

    @tc.jit(static_argnames="times", max_traces=4)
    def repeat(self, times: int) -> "Counter":
        return tc.replace(self, count=self.count * times)

    @tc.jit
    @staticmethod
    def double(x: jax.Array) -> jax.Array:
        return 2 * x


@tc.jit
def total(c: Counter) -> jax.Array:
    return c.count.sum()


@tc.jit(explain=True)
def scale(c: Counter, by: float = 2.0) -> Counter:
    return tc.replace(c, count=c.count * by)


# On the class, the method keeps `self`; on an instance, it is bound.
reveal_type(Counter.inc)
reveal_type(Counter(jnp.zeros(3)).inc)

c = Counter(jnp.zeros(3))
assert_type(c.inc(jnp.zeros(3)), Counter)
assert_type(Counter.inc(c, jnp.zeros(3)), Counter)
assert_type(c.repeat(2), Counter)
assert_type(Counter.double(jnp.ones(2)), jax.Array)
assert_type(total(c), jax.Array)
assert_type(scale(c), Counter)
assert_type(tc.bind(c.inc)(jnp.zeros(3)), Counter)
assert_type(tc.jit(c.inc)(jnp.zeros(3)), Counter)

# trace_log: on the class, the instance, and a function; with the retrace options.
assert_type(Counter.inc.trace_log.count, int)
assert_type(c.inc.trace_log.reasons, list[str])
assert_type(Counter.repeat.trace_log.max_traces, int | None)
assert_type(scale.trace_log.explain, bool)
assert Counter.inc.trace_log.count == 1  # four calls above, one trace
assert Counter.repeat.trace_log.max_traces == 4
assert scale.trace_log.explain

# jax.jit's ahead-of-time API, with the function's own arguments.
assert_type(total.lower(c), jax.stages.Lowered)
assert "stablehlo.reduce" in total.lower(c).as_text()
