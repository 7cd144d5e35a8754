"""Known limitation, pinned: the type checkers do not see the `replace` method.

`@treeclass` adds `obj.replace(...)` at runtime, but `dataclass_transform` can only
describe the generated `__init__` and the fields, not added methods, so to pyright and
mypy the method does not exist. `tc.replace(obj, ...)` is the typed spelling (see
pass_basic.py). If this file ever checks clean, the limitation is gone: drop the
ignores, update tests/test_typing.py and say so in the docs.
"""

import jax

import treeclass as tc


@tc.treeclass
class Neuron:
    v: jax.Array


def update(n: Neuron, x: jax.Array) -> None:
    n.replace(v=x)  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
