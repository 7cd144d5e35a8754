"""A constant path compiled into the function a user would write by hand.

For `lambda m: m.block.layer.w` on a `Model` (whose path `_where.py` read from the
lambda's code), the first call walks the object (`_step.walk`, which checks
every step) and then generates, for the node types it met:

    def replace_at_path(_tc_0, _tc_new, _tc_fn):
        if _tc_type(_tc_0) is not _tc_T0: return _tc_MISS
        _tc_1 = _tc_0.block
        if _tc_type(_tc_1) is not _tc_T1: return _tc_MISS
        _tc_2 = _tc_1.layer
        if _tc_type(_tc_2) is not _tc_T2: return _tc_MISS
        if _tc_fn is not None: _tc_new = _tc_fn(_tc_2.w)
        return _tc_0.replace(block=_tc_1.replace(layer=_tc_2.replace(w=_tc_new)))

which is the hand-written chain of `replace()` calls plus one type test per level.
Every fact the walk checked is either a property of a node's type (which fields a
treeclass has) or guarded here (a tuple's length, a dict's key), so the function does
exactly what the walk-and-rebuild would, or returns `_tc_MISS` and the caller takes
the general route. Measured (benchmarks/whole_models.py): the general route is about
2.2x the hand-written chain on a 3-level path, this one about 1.35x. A recorded path
(one that is not constant) is compiled too, keyed by the path's value.

The source is registered with `linecache`, so tracebacks through it show the code.
"""

from __future__ import annotations

import linecache
from collections.abc import Callable
from typing import Any, Final

MISS: Final[Any] = object()
"""Returned when a node's type differs from the one the function was generated for."""

# The kinds of `_step` (how a node was read from its parent).
TREECLASS, NAMEDTUPLE, TUPLE, LIST, DICT = 0, 1, 2, 3, 4


PathFunction = Callable[[Any, Any, "Callable[[Any], Any] | None"], Any]
_EXACT: Final = {TUPLE: tuple, LIST: list, DICT: dict}


def generate(steps: list[tuple[Any, int, Any]], name: str) -> PathFunction | None:
    """The function for `steps`, as `_step.walk` found them: each `(parent,
    kind, key)`, the key as stored (a non-negative index, a field name); `name` is the
    path, for the traceback's file name. None where a container is a subclass (of
    tuple, list or dict), which the general route rebuilds by calling its type."""
    if any(kind in _EXACT and type(parent) is not _EXACT[kind] for parent, kind, _ in steps):
        return None
    ns: dict[str, Any] = {"_tc_type": type, "_tc_len": len, "_tc_MISS": MISS}
    lines: list[str] = []
    for depth, (parent, kind, key) in enumerate(steps):
        here = f"_tc_{depth}"
        ns[f"_tc_T{depth}"] = type(parent)
        lines.append(f"if _tc_type({here}) is not _tc_T{depth}: return _tc_MISS")
        if kind in (TUPLE, LIST):
            lines.append(f"if _tc_len({here}) != {len(parent)}: return _tc_MISS")
        elif kind == DICT:
            lines.append(f"if {key!r} not in {here}: return _tc_MISS")
        if depth + 1 < len(steps):
            lines.append(f"_tc_{depth + 1} = {_read(here, kind, key)}")
    _, last_kind, last_key = steps[-1]
    leaf = _read(f"_tc_{len(steps) - 1}", last_kind, last_key)
    lines.append(f"if _tc_fn is not None: _tc_new = _tc_fn({leaf})")
    new = "_tc_new"
    for depth in reversed(range(len(steps))):
        _, kind, key = steps[depth]
        new = _rebuild(f"_tc_{depth}", kind, key, new)
    lines.append(f"return {new}")
    source = "def replace_at_path(_tc_0, _tc_new, _tc_fn):\n" + "".join(f"    {line}\n" for line in lines)
    filename = f"<treeclass replace_at {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), ns)  # noqa: S102 - our own source, shown above
    return ns["replace_at_path"]  # type: ignore[no-any-return]


def _read(node: str, kind: int, key: Any) -> str:
    return f"{node}.{key}" if kind in (TREECLASS, NAMEDTUPLE) else f"{node}[{key!r}]"


def _rebuild(node: str, kind: int, key: Any, new: str) -> str:
    if kind == TREECLASS:
        return f"{node}.replace({key}={new})"
    if kind == NAMEDTUPLE:
        return f"{node}._replace({key}={new})"
    if kind == TUPLE:
        return f"(*{node}[:{key}], {new}, *{node}[{key + 1}:])"
    if kind == LIST:
        return f"[*{node}[:{key}], {new}, *{node}[{key + 1}:]]"
    return f"{{**{node}, {key!r}: {new}}}"
