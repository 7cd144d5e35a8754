"""`@chex.dataclass`: converted when `frozen=True, mappable_dataclass=False` and the
fields are declared in sorted order (chex flattens them sorted by name)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from treeclass.migrate import _messages, _names
from treeclass.migrate._dataclasses import DeclaredField
from treeclass.migrate._flatten_code import Refused
from treeclass.migrate._rule import Rule

if TYPE_CHECKING:
    from treeclass.migrate._context import Context

__all__ = ["RULE"]


def _statics(ctx: Context, fields: list[DeclaredField]) -> set[str]:
    """None: chex makes every field a leaf; its leaf order must be the declared one."""
    names = [f.name for f in fields]
    if names != sorted(names):
        raise Refused(
            _messages.CHEX_ORDER.format(sorted=", ".join(sorted(names)), declared=", ".join(names))
        )
    return set()


RULE = Rule(
    "chex.dataclass",
    decorators=frozenset(_names.CHEX_DATACLASS),
    statics=_statics,
    required_option="mappable_dataclass",
)
