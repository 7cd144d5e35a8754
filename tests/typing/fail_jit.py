"""`tc.jit` and `tc.bind` keep the wrapped signature, so a wrong argument is flagged.

Each intentional error carries the mypy code (`# type: ignore[...]`) and the pyright
rule (`# pyright: ignore[...]`) it must raise: both checkers reject an ignore that
hides nothing, and `tests/test_typing.py` pins the messages.
"""

import jax

import treeclass as tc


@tc.treeclass
class Counter:
    count: jax.Array

    @tc.jit
    def inc(self, by: jax.Array) -> "Counter":
        return tc.replace(self, count=self.count + by)


def misuse(c: Counter) -> None:
    c.inc("one")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    tc.bind(c.inc)(by="one")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
