"""What the analysis decides for one class: a `Plan` to rewrite it, or a `Refusal`.

Both are plain data: the analysis (`_handwritten.py`, `_dataclasses.py`) reads the
code with `ast` and fills them; `_rewrite.py` applies a plan to the concrete syntax
tree. Nothing here knows either tree.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

__all__ = ["Field", "Plan", "Refusal", "Report"]

# A family's name (`_families`: one module each, listed in one registry), such as
# "register_pytree_node_class", "flax.struct" or "NamedTuple".
Family = str


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of the converted class, in declaration order."""

    name: str
    static: bool
    # The annotation as source text (`tc.Static[int]`, `Any`); for a field the class
    # body declares already, None keeps its annotation as it is.
    annotation: str | None
    # The right-hand side as source text (`3`, `tc.static(default=3)`): None for none
    # (a declared field: keep it as it is), "" to remove it.
    value: str | None = None


@dataclasses.dataclass
class Plan:
    """How to rewrite one class."""

    cls: str
    family: Family
    fields: list[Field]
    # Hand-written classes: fields are declared at the top of the body; dataclasses
    # declare theirs already and only the statements named in `fields` change.
    declare_fields: bool
    # Keep the hand-written __init__ (its `self.x = ...` become object.__setattr__),
    # or drop it for the generated one (same signature).
    keep_init: bool = True
    remove_methods: tuple[str, ...] = ()
    remove_decorators: tuple[int, ...] = ()  # indices into the class's decorator list
    remove_bases: tuple[int, ...] = ()  # indices into its positional bases
    add_base: bool = True  # False for a subclass of a class converted in this run
    drop_keywords: bool = False  # the class keywords were the old base's options
    options: dict[str, str] = dataclasses.field(default_factory=dict[str, str])  # class keywords
    remove_functions: tuple[str, ...] = ()  # module-level flatten/unflatten functions
    remove_registration: bool = False  # a module-level register_*(Cls, ...) statement
    # Class-body annotations of fields moved into the declaration block.
    moved_annotations: tuple[str, ...] = ()
    # A converted NamedTuple: its fields in order with their annotations' source text,
    # for the tuple protocol written into it (_namedtuple.py), and the names of that
    # protocol its body defines already.
    tuple_protocol: tuple[tuple[str, str], ...] | None = None
    defined: frozenset[str] = frozenset()
    # What changes for users (frozen, statics checked, ...): the `reason` of a conversion.
    notes: list[str] = dataclasses.field(default_factory=list[str])


@dataclasses.dataclass(frozen=True)
class Refusal:
    """The reason a class is left unchanged, with what to do by hand."""

    reason: str


@dataclasses.dataclass(frozen=True)
class Report:
    """One class found: the `--json` object."""

    path: str
    line: int
    cls: str
    status: Literal["converted", "refused"]
    reason: str

    def as_json(self) -> dict[str, str | int]:
        return {
            "path": self.path,
            "line": self.line,
            "class": self.cls,
            "status": self.status,
            "reason": self.reason,
        }
