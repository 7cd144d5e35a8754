"""A top-level class of a module, as `_find` finds it (a module of its own: the
planners' `Context` holds one, and `_find` reads the family registry, whose planners
take a `Context`)."""

from __future__ import annotations

import ast
import dataclasses

from treeclass.migrate._plan import Family

__all__ = ["Found"]


@dataclasses.dataclass
class Found:
    """A top-level class of a module."""

    name: str
    node: ast.ClassDef
    family: Family | None  # None: not registered itself
    bases: list[str | None]  # qualified names of the positional bases
    decorator: int | None = None  # index of the registering decorator
    registration: ast.Call | None = None  # a module-level register_*(Cls, ...) call
    registered_twice: bool = False
    # A project's dataclass wrapper that registered it: the dataclass options it fixes.
    wrapper: ast.Call | None = None
    indirect: str | None = None  # registered in a loop or through a helper: how (refused)
    # How the class's subclasses are pytrees without a registration of their own (an
    # `__init_subclass__` that registers `cls`, equinox.Module): each is reported, refused.
    registers_subclasses: str | None = None
    # Not registered itself, but defines the `tree_flatten` / `tree_unflatten` that its
    # registered subclass (this one, by name) inherits: a root of the run, reported.
    root_of: str | None = None
