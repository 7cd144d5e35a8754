"""`jax.tree_util.register_dataclass` on a dataclass (as a decorator, or called on the
class), and a project's own wrapper of it (`_resolve.mark_wrapped`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from treeclass.migrate import _messages, _names
from treeclass.migrate._dataclasses import DeclaredField, register_dataclass_fields
from treeclass.migrate._flatten_code import Refused
from treeclass.migrate._rule import Rule

if TYPE_CHECKING:
    from treeclass.migrate._context import Context

__all__ = ["RULE"]

_REGISTER = frozenset(_names.REGISTER_DATACLASS)


def _statics(ctx: Context, fields: list[DeclaredField]) -> set[str]:
    """`meta_fields`, else the fields marked static; `data_fields`, if given, must be
    the other fields in declaration order (JAX's leaf order)."""
    data, meta = register_dataclass_fields(ctx, ctx.found.registration)
    statics = meta if meta is not None else {f.name for f in fields if f.static_marked}
    declared = [f.name for f in fields if f.name not in statics]
    if data is not None and data != declared:
        raise Refused(_messages.DATA_FIELDS_ORDER.format(given=data, declared=declared))
    return statics


RULE = Rule("register_dataclass", decorators=_REGISTER, calls=_REGISTER, statics=_statics)
