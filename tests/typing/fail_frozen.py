"""Instances are frozen, and the checkers say so: assigning a field is flagged, on an
instance and on `self` inside a method.

Each intentional error carries the mypy code (`# type: ignore[...]`) and the pyright
rule (`# pyright: ignore[...]`) it must raise: both checkers reject an ignore that
hides nothing, and `tests/project/test_typing.py` pins the messages.
"""

import jax

import treeclass as tc


@tc.treeclass
class Neuron:
    v: jax.Array
    tau: float = tc.static(default=20.0)

    def reset(self) -> None:
        self.v = self.v * 0  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]


def misuse(n: Neuron, x: jax.Array) -> None:
    n.v = x  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]
    n.tau = 5.0  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]
    # pyright flags deleting a field; mypy does not (a mypy gap, pinned by the test).
    del n.v  # pyright: ignore[reportAttributeAccessIssue]
