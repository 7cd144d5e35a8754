"""An `__init__` that assigns its fields (equinox's style): the checkers flag the
assignments in a frozen class, as anywhere else, since they cannot tell `__init__`
from other methods; and they do not know that a subclass without fields inherits a
hand-written `__init__` (they give it the dataclass one). `pass_init.py` shows
`frozen=False`, which makes them accept the assignments.
"""

import jax
import jax.numpy as jnp

import treeclass as tc


class Linear(tc.TreeClass):
    w: jax.Array
    size: tc.Static[int]

    def __init__(self, size: int) -> None:
        self.w = jnp.ones(size)  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]
        self.size = size  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]


class Same(Linear):
    pass


same = Same(3)  # type: ignore[arg-type, call-arg]  # pyright: ignore[reportCallIssue]
