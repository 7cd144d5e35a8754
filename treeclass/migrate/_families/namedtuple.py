"""`class Cls(NamedTuple)`, only with `--namedtuples`: converted keeping its tuple
protocol (`_namedtuple.py` writes it into the class), refused where the run uses an
instance in a way a treeclass cannot keep (`_tuples.py` finds those)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from treeclass.migrate import _messages, _names
from treeclass.migrate._dataclasses import DeclaredField
from treeclass.migrate._flatten_code import Refused
from treeclass.migrate._rule import Rule

if TYPE_CHECKING:
    from treeclass.migrate._context import Context

__all__ = ["RULE"]


def _statics(ctx: Context, fields: list[DeclaredField]) -> set[str]:
    """None (every field of a NamedTuple is a leaf); a default must be a literal (an
    array default would be one shared, unhashable object)."""
    for f in fields:
        value = f.stmt.value
        if value is not None and not all(
            isinstance(n, ast.Constant | ast.Tuple | ast.UnaryOp | ast.USub | ast.Load)
            for n in ast.walk(value)
        ):
            raise Refused(_messages.DEFAULT.format(attr=f.name, code=ctx.code(value)))
    return set()


def _uses(ctx: Context) -> None:
    """Every site of the run that uses an instance as only a tuple can be used."""
    blocked = ctx.facts.tuple_use.get(ctx.found.name, [])
    if blocked:
        raise Refused(_messages.tuple_use(blocked))


RULE = Rule(
    "NamedTuple",
    bases=frozenset(_names.NAMEDTUPLE),
    option="namedtuples",
    statics=_statics,
    uses=_uses,
    frozen=True,
    tuple_protocol=True,
    notes=(_messages.NOTE_NAMEDTUPLE,),
)
