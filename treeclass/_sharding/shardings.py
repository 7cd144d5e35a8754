"""`shardings()`, `partition_specs()`: a field names its array's logical axes (`field(axes=("batch",
None))`), rules chosen per run map them to mesh axes, one spec per leaf. The rules (flax's):
`{"batch": "data"}` or pairs `[("batch", "data")]` (the first naming an axis wins), read by
`rule_table`; `AxisMap.spec` gives one array's `PartitionSpec`."""

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias, cast

import jax
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec

from treeclass._core.checks import closest
from treeclass._core.fields import AXES
from treeclass._core.layout import instance_layout
from treeclass._core.show import short_repr
from treeclass._core.walk import PYTHON_SCALARS, path_str, walk

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
    found = cast("object", rules)  # checked as object: untyped callers pass anything
    if isinstance(found, Mapping):
        found = list(cast("Mapping[object, object]", found).items())
    # A str is a Sequence too: rules="batch" must not read as the pairs "b", "a", ...
    if not isinstance(found, Sequence) or isinstance(found, str | bytes):
        raise TypeError(_MSG_RULES.format(found=found))
    table: dict[str, MeshAxes] = {}
    for pair in cast("Sequence[object]", found):
        table.setdefault(*_rule(pair))
    return table


def _rule(pair: object) -> tuple[str, MeshAxes]:
    """One `(logical, mesh_axes)` pair normalised; TypeError if malformed."""
    if isinstance(pair, tuple | list) and len(pair) == len(("logical", "mesh_axes")):
        name, target = cast("Sequence[object]", pair)
        if isinstance(name, str) and (target is None or isinstance(target, str)):
            return name, target
        names = isinstance(target, tuple | list) and all(isinstance(a, str) for a in target)
        if isinstance(name, str) and names:
            return name, tuple(cast("Sequence[str]", target)) or None
    raise TypeError(_MSG_RULES.format(found=pair))


def mesh_axis_names(target: MeshAxes) -> tuple[str, ...]:
    return () if target is None else (target,) if isinstance(target, str) else target


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
            info = {"n": len(axes), "shape": shape, "ndim": len(shape), "fix": axes[: len(shape)]}
            raise ValueError(_MSG_TOO_MANY_AXES.format(where=where, axes=axes, **info))
        entries: list[MeshAxes] = []
        # flax skips a rule whose mesh axis is taken, so a name's axis depends on the array's
        # other names; here a name has one mesh axis, and a clash is an error naming the field.
        used: dict[str, str] = {}  # mesh axis -> the logical name that took it
        for dim, name in enumerate(axes):
            target = None if name is None else self.lookup(name, where)
            for mesh_axis in mesh_axis_names(target):
                if mesh_axis in used:
                    info = {"mesh_axis": mesh_axis, "first": used[mesh_axis], "second": name}
                    raise ValueError(_MSG_MESH_AXIS_TWICE.format(where=where, axes=axes, **info))
                used[mesh_axis] = str(name)
            if target is not None and self.sizes is not None:
                parts = math.prod(self.sizes[a] for a in mesh_axis_names(target))
                if shape[dim] % parts:
                    info = {"dim": dim, "name": name, "size": shape[dim], "mesh_axis": target}
                    raise ValueError(_MSG_NOT_DIVISIBLE.format(where=where, parts=parts, **info))
            entries.append(target)
        return PartitionSpec(*entries)

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
                    info = {"name": name, "mesh_axis": mesh_axis, "mesh_axes": list(self.sizes)}
                    raise ValueError(_MSG_UNKNOWN_MESH_AXIS.format(where=where, **info))
            return target
        else:
            known, listed = list(self.table), "The rules map"
            why = "is not mapped by the rules"
        if self.strict:
            close = closest(name, known)
            hint = f" Did you mean {close!r}?" if close else ""
            info = {"why": why, "hint": hint, "known": f"{listed} {known}"}
            raise ValueError(_MSG_UNMAPPED.format(where=where, name=name, **info))
        return None


_MSG_MESH: Final = (
    "treeclass.shardings(obj, mesh, rules) takes a jax.sharding.Mesh as its second "
    "argument; got {found!r}. Build one with jax.make_mesh((8,), ('data',))."
)
_MSG_AXES_ON_TREECLASS: Final = (
    "{where}: field(axes={axes!r}) holds a {inner}, a treeclass whose own fields declare their "
    "axes. Drop axes= from {owner} and put field(axes=...) on the fields of {inner}."
)


def partition_specs(
    obj: Any,
    rules: Rules | None = None,
    *,
    strict: bool = False,
    mesh: Mesh | AbstractMesh | None = None,
) -> Any:
    """Returns `obj`'s `PartitionSpec`s (for `jax.shard_map`): each field's axes through `rules`.

    Unmapped names, `None` axes, fields without axes and non-array leaves are replicated, as
    in flax. A field holding a subtree gives each array in it the same spec. A leaf that its
    owner's rule makes configuration (inside an equinox Module, anything but an array) gets
    `None`, as `tc.partition` leaves it out of the arrays.

    **Arguments**

    - `obj`: any pytree holding treeclasses; `jax.ShapeDtypeStruct` leaves work.
    - `rules`: `{logical: mesh_axis}` or `(logical, mesh_axis)` pairs (the first wins); a
      mesh axis name, a tuple of them, or None (replicate). `None`: each name is a mesh axis.
    - `strict`: raise on a logical name the rules do not map (a typo such as `"btach"`).
    - `mesh`: if given, mesh axes are checked to exist and to divide their dimensions.

    **Returns**

    A pytree with `obj`'s treedef of `PartitionSpec`s (`None` at configuration); trailing
    dimensions are unsplit.

    **Raises**

    - `TypeError`: malformed `rules`; `axes` on a field holding a non-array or a treeclass.
    - `ValueError`, naming `Class.field`: more axes than dimensions; one mesh axis used
      twice in an array; with `strict=True`, an unmapped name; with a `mesh`, a mesh axis
      it lacks or a dimension its size does not divide.

    **Example**

    >>> class Batch(tc.TreeClass):
    ...     x: jax.Array = tc.field(axes=("batch", "feature"))
    ...     y: jax.Array = tc.field(axes=("batch",))
    ...     scale: float = 1.0
    >>> batch = Batch(jnp.ones((8, 3)), jnp.ones(8))
    >>> P = jax.sharding.PartitionSpec
    >>> specs = tc.partition_specs(batch, {"batch": "data"})
    >>> specs.x == P("data", None), specs.y == P("data"), specs.scale == P()
    (True, True, True)
    >>> tc.partition_specs(batch, {"batch": "data"}, strict=True)
    Traceback (most recent call last):
    ...
    ValueError: Batch.x: the logical axis 'feature' is not mapped by the rules, ...
    """
    axis_map = AxisMap(rules, strict, None if mesh is None else dict(mesh.shape))
    root = type(obj).__name__
    specs: list[PartitionSpec | None] = []
    for v in walk(obj):  # each leaf with its innermost field
        axes: Axes = None if v.declared is None else v.declared.metadata.get(AXES)
        if v.config:
            # Configuration by its owner's rule (an equinox layer's float or str) is no
            # array to place, as `tc.partition` leaves it out of the arrays; a spec there
            # would let `jax.device_put` turn `eqx.nn.Dropout`'s p=0.1 into an array.
            specs.append(None)
        elif v.kind == "leaf" and axes is not None:
            specs.append(axis_map.spec(v.value, axes, v.field, path_str(root, v.path)))
        elif v.kind == "leaf":
            specs.append(PartitionSpec())
        elif axes is not None and instance_layout(v.value) is not None:
            where, inner = path_str(root, v.path), type(v.value).__name__
            msg = _MSG_AXES_ON_TREECLASS.format(where=where, axes=axes, inner=inner, owner=v.field)
            raise TypeError(msg)
    return jax.tree.unflatten(jax.tree.structure(obj), specs)


def shardings(
    obj: Any, mesh: Mesh | AbstractMesh, rules: Rules | None = None, *, strict: bool = False
) -> Any:
    """Returns `obj`'s `NamedSharding`s (for `jax.device_put`): `partition_specs` on `mesh`.

    **Arguments**

    - `obj`: any pytree holding treeclasses; `jax.ShapeDtypeStruct` leaves work.
    - `mesh`: a `jax.sharding.Mesh` (or `AbstractMesh`).
    - `rules`, `strict`: as in `partition_specs()`; with `rules=None`, names the mesh lacks
      are replicated.

    **Returns**

    A pytree with `obj`'s treedef whose leaves are `NamedSharding(mesh, spec)`, `None` at
    configuration (see `partition_specs()`).

    **Raises**

    `TypeError` if `mesh` is not a mesh; otherwise as `partition_specs()` with a `mesh`.

    **Example**

    >>> class Batch(tc.TreeClass):
    ...     x: jax.Array = tc.field(axes=("batch", None))
    ...     w: jax.Array
    >>> mesh = jax.make_mesh((1,), ("batch",))
    >>> batch = Batch(jnp.ones((4, 3)), jnp.ones(3))
    >>> sh = tc.shardings(batch, mesh)
    >>> P = jax.sharding.PartitionSpec
    >>> placed = jax.device_put(batch, sh)
    >>> sh.x.spec == P("batch", None), sh.w.spec == P(), placed.x.sharding == sh.x
    (True, True, True)
    """
    found = cast("object", mesh)  # untyped callers swap arguments: shardings(obj, rules)
    if not isinstance(found, Mesh | AbstractMesh):
        raise TypeError(_MSG_MESH.format(found=found))
    specs = partition_specs(obj, rules, strict=strict, mesh=mesh)
    return jax.tree.map(lambda spec: NamedSharding(mesh, spec), specs)  # a PartitionSpec is a leaf
