"""`@jax_dataclasses.pytree_dataclass` (`jdc.Static[T]` fields static); refused where
the run uses `jdc.copy_and_mutate`, which a treeclass does not support."""

from __future__ import annotations

from typing import TYPE_CHECKING

from treeclass.migrate import _messages, _names
from treeclass.migrate._dataclasses import DeclaredField
from treeclass.migrate._families.flax_struct import marked_static
from treeclass.migrate._flatten_code import Refused
from treeclass.migrate._rule import Rule

if TYPE_CHECKING:
    from treeclass.migrate._context import Context

__all__ = ["RULE"]


def _statics(ctx: Context, fields: list[DeclaredField]) -> set[str]:
    if ctx.facts.jdc_mutate:
        raise Refused(_messages.JDC_MUTATE.format(site=ctx.facts.jdc_mutate[0]))
    return marked_static(ctx, fields)


RULE = Rule(
    "jax_dataclasses",
    decorators=frozenset(_names.JDC_DATACLASS),
    statics=_statics,
    frozen=True,
    notes=(_messages.NOTE_FLAX,),
)
