"""Logical axis rules (flax's): `{"batch": "data"}` or pairs `[("batch", "data")]` (the first
naming an axis wins), read by `rule_table`; `AxisMap.spec` gives one array's `PartitionSpec`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final, TypeAlias, cast

from jax.sharding import PartitionSpec

from treeclass._core.checks import closest
from treeclass._core.show import short_repr
from treeclass._core.walk import PYTHON_SCALARS

# One mesh axis, several (split over their product), or None (replicated).
MeshAxes: TypeAlias = str | tuple[str, ...] | None
Rules: TypeAlias = Mapping[str, MeshAxes] | Sequence[tuple[str, MeshAxes]]
Axes: TypeAlias = tuple[str | None, ...] | None  # a field's `axes=`: a name (or None) per dim

_MSG_RULES: Final = (
    "rules= takes a mapping {{logical_name: mesh_axis}} or a sequence of (logical_name, "
    "mesh_axis) pairs, where mesh_axis is a mesh axis name, a tuple of names, or None "
    "(replicate); e.g. rules=[('batch', 'data'), ('embed', None)]. Got {found!r}."
)
_MSG_NOT_ARRAY: Final = (
    "{where}: field(axes={axes!r}) names array dimensions, but this leaf is a "
    "{kind} ({leaf}). Drop axes= from {owner}, or store an array there."
)
_MSG_TOO_MANY_AXES: Final = (
    "{where}: field(axes={axes!r}) names {n} dimensions, but the value has shape "
    "{shape} ({ndim} dimensions). Name at most one axis per dimension, e.g. "
    "field(axes={fix!r}); trailing dimensions left out are replicated."
)
_MSG_UNMAPPED: Final = (
    "{where}: the logical axis {name!r} {why}, and strict=True refuses to replicate it "
    "silently.{hint} Fix the name in field(axes=...), or add a rule: "
    "({name!r}, 'mesh_axis') to shard it, ({name!r}, None) to replicate it. {known}."
)
_MSG_UNKNOWN_MESH_AXIS: Final = (
    "{where}: the rules map the logical axis {name!r} to mesh axis {mesh_axis!r}, "
    "which the mesh does not have; its axes are {mesh_axes}. Map {name!r} to one of "
    "them, or to None to replicate."
)
_MSG_MESH_AXIS_TWICE: Final = (
    "{where}: field(axes={axes!r}) maps mesh axis {mesh_axis!r} to two dimensions "
    "(through {first!r} and {second!r}); an array is split along a mesh axis at most "
    "once. Map one of the two logical names to another mesh axis, or to None."
)
_MSG_NOT_DIVISIBLE: Final = (
    "{where}: dimension {dim} ({name!r}) has size {size}, which mesh axis "
    "{mesh_axis!r} of size {parts} does not divide. Pad the dimension to a multiple "
    "of {parts}, use a mesh that divides it, or map {name!r} to None to replicate."
)


def rule_table(rules: Rules | None) -> dict[str, MeshAxes] | None:
    """The rules as a dict (the first pair naming an axis wins); None stays None."""
    if rules is None:
        return None
    # Checked as `object`: the annotation is what we accept, not what callers pass.
    found = cast("object", rules)
    if isinstance(found, Mapping):
        found = list(cast("Mapping[object, object]", found).items())
    # A str is a Sequence too: rules="batch" must not read as the pairs "b", "a", ...
    if not isinstance(found, Sequence) or isinstance(found, str | bytes):
        raise TypeError(_MSG_RULES.format(found=found))
    table: dict[str, MeshAxes] = {}
    for pair in cast("Sequence[object]", found):
        rule = _rule(pair)
        if rule is None:
            raise TypeError(_MSG_RULES.format(found=pair))
        table.setdefault(*rule)
    return table


def _rule(pair: object) -> tuple[str, MeshAxes] | None:
    """One `(logical, mesh_axes)` pair normalised; None if malformed."""
    if not isinstance(pair, tuple | list) or len(pair) != len(("logical", "mesh_axes")):
        return None
    name, target = cast("Sequence[object]", pair)
    if not isinstance(name, str):
        return None
    if target is None or isinstance(target, str):
        return name, target
    if isinstance(target, tuple | list) and all(isinstance(a, str) for a in target):
        return name, tuple(cast("Sequence[str]", target)) or None
    return None


def mesh_axis_names(target: MeshAxes) -> tuple[str, ...]:
    return () if target is None else (target,) if isinstance(target, str) else target


def partition_spec(*entries: MeshAxes) -> PartitionSpec:
    """`PartitionSpec(*entries)`, typed: mypy --strict refuses jax's unannotated `__init__`."""
    return PartitionSpec(*entries)


class AxisMap:
    """The rules of one `shardings()` call, and the mesh's axis sizes (None: no mesh)."""

    def __init__(self, rules: Rules | None, strict: bool, sizes: dict[str, int] | None) -> None:
        self.table, self.sizes, self.strict = rule_table(rules), sizes, strict

    def spec(
        self, leaf: object, axes: tuple[str | None, ...], owner: str, where: str
    ) -> PartitionSpec:
        """The spec of one leaf of the field `owner` (`Class.field`); `where` is its path."""
        shape = () if isinstance(leaf, PYTHON_SCALARS) else getattr(leaf, "shape", None)
        if not isinstance(shape, tuple):
            kind, shown = type(leaf).__name__, short_repr(leaf)
            msg = _MSG_NOT_ARRAY.format(where=where, axes=axes, kind=kind, leaf=shown, owner=owner)
            raise TypeError(msg)
        if len(axes) > len(shape):
            n, ndim, fix = len(axes), len(shape), axes[: len(shape)]
            msg = _MSG_TOO_MANY_AXES.format(
                where=where, axes=axes, n=n, shape=shape, ndim=ndim, fix=fix
            )
            raise ValueError(msg)
        entries: list[MeshAxes] = []
        # flax skips a rule whose mesh axis is taken, so a name's axis depends on the array's
        # other names; here a name has one mesh axis, and a clash is an error naming the field.
        used: dict[str, str] = {}  # mesh axis -> the logical name that took it
        for dim, name in enumerate(axes):
            target = None if name is None else self.lookup(name, where)
            for mesh_axis in mesh_axis_names(target):
                if mesh_axis in used:
                    first, second = used[mesh_axis], name
                    msg = _MSG_MESH_AXIS_TWICE.format(
                        where=where, axes=axes, mesh_axis=mesh_axis, first=first, second=second
                    )
                    raise ValueError(msg)
                used[mesh_axis] = str(name)
            if target is not None and self.sizes is not None:
                parts = math.prod(self.sizes[a] for a in mesh_axis_names(target))
                if shape[dim] % parts:
                    size = shape[dim]
                    msg = _MSG_NOT_DIVISIBLE.format(
                        where=where, dim=dim, name=name, size=size, mesh_axis=target, parts=parts
                    )
                    raise ValueError(msg)
            entries.append(target)
        return partition_spec(*entries)

    def lookup(self, name: str, where: str) -> MeshAxes:
        """The mesh axes of one logical name, checked against the mesh if any."""
        if self.table is None:
            # No rules: a name is its own mesh axis, where the mesh has one.
            if self.sizes is None or name in self.sizes:
                return name
            known, listed = list(self.sizes), "The mesh axes are"
            why = "is not a mesh axis (rules=None maps each name to the mesh axis of that name)"
        elif name in self.table:
            target = self.table[name]
            for mesh_axis in mesh_axis_names(target):
                if self.sizes is not None and mesh_axis not in self.sizes:
                    msg = _MSG_UNKNOWN_MESH_AXIS.format(
                        where=where, name=name, mesh_axis=mesh_axis, mesh_axes=list(self.sizes)
                    )
                    raise ValueError(msg)
            return target
        else:
            known, listed = list(self.table), "The rules map"
            why = "is not mapped by the rules"
        if self.strict:
            close = closest(name, known)
            hint = f" Did you mean {close!r}?" if close else ""
            known_msg = f"{listed} {known}"
            msg = _MSG_UNMAPPED.format(where=where, name=name, why=why, hint=hint, known=known_msg)
            raise ValueError(msg)
        return None
