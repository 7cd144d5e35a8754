"""`@flax.struct.dataclass` and `class Cls(flax.struct.PyTreeNode)` (a project's copy of
`flax.struct.dataclass` converts as this family: `_find.FLAX_COPY`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from treeclass.migrate import _messages, _names
from treeclass.migrate._dataclasses import DeclaredField
from treeclass.migrate._flatten_code import Refused
from treeclass.migrate._rule import Rule

if TYPE_CHECKING:
    from treeclass.migrate._context import Context

__all__ = ["RULE", "marked_static"]


def marked_static(ctx: Context, fields: list[DeclaredField]) -> set[str]:
    """The fields marked static (`struct.field(pytree_node=False)`, `jdc.Static[T]`);
    a field's `init=` has no treeclass equivalent."""
    for f in fields:
        if f.call is not None and any(kw.arg == "init" for kw in f.call.keywords):
            raise Refused(_messages.FIELD_SPEC.format(code="init=", attr=f.name))
    return {f.name for f in fields if f.static_marked}


RULE = Rule(
    "flax.struct",
    decorators=frozenset(_names.FLAX_DATACLASS),
    bases=frozenset(_names.FLAX_BASE),
    statics=marked_static,
    frozen=True,
    inherited=True,
    keywords_are_options=True,
    notes=(_messages.NOTE_FLAX,),
)
