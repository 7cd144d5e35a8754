"""Every family of pytree classes the tool knows, one module each, in one registry.

A family is a `Rule` (`rule.py`): how its classes are found (decorators, registration
calls, bases, by qualified name) and what is particular about planning one. To add a
family, write its module here and add its rule to `RULES`.
"""

from __future__ import annotations

from treeclass.migrate._families import (
    chex,
    equinox,
    flax_struct,
    functions,
    handwritten,
    jax_dataclasses,
    namedtuple,
    register_dataclass,
)
from treeclass.migrate._rule import Rule

__all__ = ["BY_NAME", "RULES", "Rule", "by_base", "by_call", "by_decorator"]

RULES: tuple[Rule, ...] = (
    handwritten.RULE,
    handwritten.KEYS_RULE,
    functions.RULE,
    register_dataclass.RULE,
    flax_struct.RULE,
    jax_dataclasses.RULE,
    chex.RULE,
    namedtuple.RULE,
    equinox.RULE,
)
BY_NAME = {rule.name: rule for rule in RULES}


def by_decorator(qualified: str | None) -> Rule | None:
    """The family a class decorated with `qualified` belongs to."""
    return next((r for r in RULES if qualified in r.decorators), None)


def by_call(qualified: str | None) -> Rule | None:
    """The family a statement `qualified(Cls, ...)` registers `Cls` in."""
    return next((r for r in RULES if qualified in r.calls), None)


def by_base(qualified: str | None, options: frozenset[str]) -> Rule | None:
    """The family whose classes extend `qualified` (with the command-line `options`
    that family needs given)."""
    return next(
        (r for r in RULES if qualified in r.bases and (r.option is None or r.option in options)),
        None,
    )
