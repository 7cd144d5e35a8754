"""Classes registered with module-level functions or lambdas:
`register_pytree_node(Cls, flatten, unflatten)` and `register_pytree_with_keys(...)`."""

from __future__ import annotations

from treeclass.migrate import _names
from treeclass.migrate._handwritten import plan_handwritten
from treeclass.migrate._rule import Rule

__all__ = ["RULE"]

RULE = Rule(
    "register_pytree_node",
    calls=frozenset(_names.REGISTER_FUNCTION),
    plan=plan_handwritten,
)
