"""`tc.jit` and `tc.bind` keep the wrapped signature, so a wrong argument is flagged,
on a method (bound or read from the class), on a function, and in `lower`.

Each intentional error carries the mypy code (`# type: ignore[...]`) and the pyright
rule (`# pyright: ignore[...]`) it must raise: both checkers reject an ignore that
hides nothing, and `tests/project/test_typing.py` pins the messages.
"""

import jax

import treeclass as tc


@tc.treeclass
class Counter:
    count: jax.Array

    @tc.jit
    def inc(self, by: jax.Array) -> "Counter":
        return tc.replace(self, count=self.count + by)


@tc.jit
def total(c: Counter) -> jax.Array:
    return c.count.sum()


def misuse(c: Counter, x: jax.Array) -> None:
    c.inc("one")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    Counter.inc(x, x)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    total(x)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    total.lower(c, x)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    c.inc.trace_log.count = 0  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]
    tc.bind(c.inc)(by="one")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
