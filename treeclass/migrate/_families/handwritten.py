"""Classes with a hand-written `tree_flatten` / `tree_unflatten`, registered with
`@register_pytree_node_class` or `@register_pytree_with_keys_class` (or those called on
the class as a statement)."""

from __future__ import annotations

from treeclass.migrate import _names
from treeclass.migrate._handwritten import plan_handwritten
from treeclass.migrate._rule import Rule

__all__ = ["KEYS_RULE", "RULE"]

_CLASS = frozenset(
    q for q, kind in _names.REGISTER_CLASS.items() if kind == "register_pytree_node_class"
)
_KEYS_CLASS = frozenset(_names.REGISTER_CLASS) - _CLASS

RULE = Rule("register_pytree_node_class", decorators=_CLASS, calls=_CLASS, plan=plan_handwritten)
KEYS_RULE = Rule(
    "register_pytree_with_keys_class",
    decorators=_KEYS_CLASS,
    calls=_KEYS_CLASS,
    plan=plan_handwritten,
)
