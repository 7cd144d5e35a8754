"""Logical axis rules: what `shardings(..., rules=...)` accepts, normalised.

Rules map a field's logical axis names to mesh axes, as flax's logical axis rules do:
a mapping `{"batch": "data"}` or a sequence of pairs `[("batch", "data")]`, where the
first pair naming an axis wins. A target is a mesh axis name, a tuple of names (split
over their product) or None (replicated).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, TypeAlias, cast

MeshAxes: TypeAlias = str | tuple[str, ...] | None
"""What a logical axis maps to: one mesh axis, several (split over their product), or
None (replicated)."""
Rules: TypeAlias = Mapping[str, MeshAxes] | Sequence[tuple[str, MeshAxes]]
Axes: TypeAlias = tuple[str | None, ...] | None
"""A field's `axes=`: one logical name (or None) per dimension; None for no axes."""

_MSG_RULES: Final = (
    "rules= takes a mapping {{logical_name: mesh_axis}} or a sequence of "
    "(logical_name, mesh_axis) pairs, where mesh_axis is a mesh axis name, a tuple of "
    "names, or None (replicate); e.g. rules=[('batch', 'data'), ('embed', None)]. "
    "Got {found!r}."
)
def rule_table(rules: Rules | None) -> dict[str, MeshAxes] | None:
    """The rules as a dict; for a sequence of pairs the first pair naming a logical axis
    wins, as in flax. None (no rules) stays None: each name maps to itself."""
    if rules is None:
        return None
    # Checked as `object`: the annotation is what we accept, not what callers pass.
    found = cast("object", rules)
    pairs: list[object]
    if isinstance(found, Mapping):
        pairs = list(cast("Mapping[object, object]", found).items())
    # A str is a Sequence too: rules="batch" must not read as the pairs "b", "a", ...
    elif isinstance(found, Sequence) and not isinstance(found, str | bytes):
        pairs = list(cast("Sequence[object]", found))
    else:
        raise TypeError(_MSG_RULES.format(found=found))
    table: dict[str, MeshAxes] = {}
    for pair in pairs:
        rule = _rule(pair)
        if rule is None:
            raise TypeError(_MSG_RULES.format(found=pair))
        table.setdefault(*rule)
    return table


def _rule(pair: object) -> tuple[str, MeshAxes] | None:
    """One `(logical, mesh_axes)` pair, normalised (a list of mesh axes becomes a tuple,
    and `()` None); None if malformed."""
    items = _as_tuple(pair)
    if items is None or len(items) != len(("logical", "mesh_axes")):
        return None
    name, target = items
    if not isinstance(name, str):
        return None
    if target is None or isinstance(target, str):
        return name, target
    names = _as_tuple(target)
    if names is None or not all(isinstance(a, str) for a in names):
        return None
    return name, cast("tuple[str, ...]", names) or None


def _as_tuple(x: object) -> tuple[object, ...] | None:
    """`x` as a tuple if it is a tuple or list, else None."""
    return tuple(cast("Sequence[object]", x)) if isinstance(x, tuple | list) else None


def mesh_axis_names(target: MeshAxes) -> tuple[str, ...]:
    return () if target is None else (target,) if isinstance(target, str) else target
