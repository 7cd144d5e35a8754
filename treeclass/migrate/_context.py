"""What the analysis of one class may look at: its module, the whole run's facts, and
the plans already made for its bases."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable

from treeclass.migrate._facts import Facts
from treeclass.migrate._found import Found
from treeclass.migrate._plan import Plan
from treeclass.migrate._text import Text

__all__ = ["Context"]


@dataclasses.dataclass
class Context:
    path: str
    text: Text
    tree: ast.Module
    names: dict[str, str]  # local name -> qualified name (_names.aliases)
    found: Found
    facts: Facts
    tc: str  # how the module will name treeclass: "tc" or "treeclass"
    found_in_module: list[Found]  # every top-level class of the module
    # The plan for each base that is converted in this run (a subclass extends it),
    # and each base's Found (for inherited flatten methods), by the base's position.
    base_plans: dict[int, tuple[Found, Plan]] = dataclasses.field(
        default_factory=dict[int, tuple[Found, Plan]]
    )
    base_found: dict[int, Found] = dataclasses.field(default_factory=dict[int, Found])
    mixins: set[int] = dataclasses.field(
        default_factory=set[int]
    )  # stateless bases, kept as they are
    harmless: set[int] = dataclasses.field(
        default_factory=set[int]
    )  # decorators that only write dunders
    methods: set[str] = dataclasses.field(
        default_factory=set[str]
    )  # defined by it or a base in the run
    refused_bases: dict[int, Found] = dataclasses.field(
        default_factory=dict[int, Found]
    )  # said once, by the run
    related: set[str] = dataclasses.field(
        default_factory=set[str]
    )  # its name and its bases' in the run
    # The classes of the run that extend it (a staticmethod unflatten builds it, not them).
    subclasses: list[str] = dataclasses.field(default_factory=list[str])
    # Why an annotation naming a class of the run may hold an unhashable value (_hashable.why_not).
    unhashable: Callable[[ast.expr], str | None] = lambda annotation: None

    def code(self, node: ast.AST) -> str:
        """The source text of `node`, as written."""
        return self.text.code(node)

    def functions(self) -> dict[str, ast.FunctionDef]:
        """The module's top-level functions by name (the last definition wins)."""
        return {s.name: s for s in self.tree.body if isinstance(s, ast.FunctionDef)}
