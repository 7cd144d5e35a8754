"""Known limitation, pinned: the type checkers do not see the `replace` method.

`@treeclass` adds `obj.replace(...)` at runtime, but `dataclass_transform` can only
describe the generated `__init__` and the fields, not added methods, so to pyright and
mypy the method does not exist. The one-line ways out, both typed to return the class:
`tc.replace(obj, ...)` (pass_basic.py) or subclassing `tc.TreeClass` instead of
decorating (pass_base.py); docs/faq.md and docs/quickstart.md say so. If this file
ever checks clean, the limitation is gone: drop the ignores, update
tests/project/test_typing.py and the docs.
"""

import jax

import treeclass as tc


@tc.treeclass
class Neuron:
    v: jax.Array


def update(n: Neuron, x: jax.Array) -> None:
    n.replace(v=x)  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
