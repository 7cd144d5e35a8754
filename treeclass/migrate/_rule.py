"""What the tool knows about one family of pytree classes: how its classes are found,
and what is particular about planning one. `_families/__init__.py` lists every family;
each has a module of its own."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the planners import the registry's users: types only here
    from treeclass.migrate._context import Context
    from treeclass.migrate._plan import Plan

__all__ = ["DeclaredField", "Rule"]


@dataclasses.dataclass(frozen=True)
class DeclaredField:
    """A field as a dataclass family's class body declares it (what `Rule.statics` reads)."""

    name: str
    stmt: ast.AnnAssign
    call: ast.Call | None  # a field(...) call on the right-hand side
    static_marked: bool  # pytree_node=False or metadata static=True


def _no_statics(ctx: Context, fields: list[DeclaredField]) -> set[str]:
    return set()


def _no_uses(ctx: Context) -> None:
    return None


@dataclasses.dataclass(frozen=True)
class Rule:
    """One family: its name (the `family` of what the tool finds, plans and reports) and
    how it is recognised by qualified name (a registering decorator, a registering call
    `register(Cls, ...)` as a statement, a base class). The rest says how its classes
    are planned: `plan` for a family whose flatten is written by hand, else the common
    dataclass planner (`_dataclasses.plan_dataclass`) with this family's hooks."""

    name: str
    decorators: frozenset[str] = frozenset()
    calls: frozenset[str] = frozenset()
    bases: frozenset[str] = frozenset()
    option: str | None = None  # a command-line option without which it is not found
    plan: Callable[[Context], Plan] | None = None  # None: the common dataclass planner
    # Dataclass families: which declared fields are static; raises Refused for what the
    # family's fields say that a treeclass cannot keep.
    statics: Callable[[Context, list[DeclaredField]], set[str]] = _no_statics
    uses: Callable[[Context], None] = _no_uses  # raises Refused for the run's uses of it
    frozen: bool = False  # its instances were frozen already (no "frozen now" note)
    inherited: bool = False  # a subclass of one of its classes is one too (PyTreeNode)
    keywords_are_options: bool = False  # class keywords are dataclass options (PyTreeNode)
    required_option: str | None = None  # a decorator keyword it must be given (chex)
    tuple_protocol: bool = False  # the converted class keeps a tuple's methods
    notes: tuple[str, ...] = ()  # what changes for users of every converted class
    # A family the tool reports but never rewrites: how, and the recipe to port it.
    reported: str | None = None
    recipe: str | None = None
