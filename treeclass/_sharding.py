"""Field axes -> shardings: `shardings()` and `partition_specs()`.

A dynamic field names its array's logical axes, `field(axes=("batch", None))`, and
rules map logical names to mesh axes, as flax's logical axis rules do. The model says
what its dimensions *mean*; the rules, chosen per run, say how a mesh splits them:

    rules = {"batch": "data", "embed": None}     # data parallel
    rules = {"batch": "data", "embed": "model"}  # the same model, tensor parallel too

Both functions walk the tree in JAX's flatten order and build one spec per leaf, then
rebuild the tree with `obj`'s own treedef. So the result has exactly `obj`'s pytree
structure (statics, `None` fields and all) and fits wherever JAX takes a pytree of
shardings or specs: `jax.device_put`, `jax.jit(in_shardings=..., out_shardings=...)`,
`jax.shard_map(in_specs=..., out_specs=...)`.
"""

from __future__ import annotations

import difflib
import math
from typing import Any, Final, cast

import jax
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec

from treeclass._field import AXES
from treeclass._layout import FLAT, LAYOUT, Layout
from treeclass._rules import Axes, MeshAxes, Rules, mesh_axis_names, rule_table

__all__ = ["partition_specs", "shardings"]

_MSG_MESH: Final = (
    "treeclass.shardings(obj, mesh, rules) takes a jax.sharding.Mesh as its second "
    "argument; got {found!r}. Build one with jax.make_mesh((8,), ('data',))."
)
_MSG_AXES_ON_TREECLASS: Final = (
    "{where}: field(axes={axes!r}) holds a {inner}, a treeclass whose own fields "
    "declare their axes. Drop axes= from {owner} and put field(axes=...) on the "
    "fields of {inner}."
)
_MSG_NOT_ARRAY: Final = (
    "{where}: field(axes={axes!r}) names array dimensions, but this leaf is a "
    "{kind} ({leaf!r}). Drop axes= from {owner}, or store an array there."
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


def _is_instance(x: object) -> bool:
    return not isinstance(x, type) and LAYOUT in type(x).__dict__


def _shape(leaf: object) -> tuple[int, ...] | None:
    """The leaf's shape, if it is an array (or a `jax.ShapeDtypeStruct`, so that
    `shardings(jax.eval_shape(init), mesh)` works before any array exists)."""
    if isinstance(leaf, bool | int | float | complex):
        return ()
    shape: object = getattr(leaf, "shape", None)
    return cast("tuple[int, ...]", shape) if isinstance(shape, tuple) else None


def _where(owner: str, path: tuple[Any, ...]) -> str:
    keys = jax.tree_util.keystr(path)
    return f"{owner} (at {keys or 'the root'})"


class _Specs:
    """One call: the rules, the mesh's axis sizes (None without a mesh), and the specs
    of the leaves walked so far."""

    def __init__(self, rules: Rules | None, strict: bool, mesh: Mesh | AbstractMesh | None):
        self.table = rule_table(rules)
        self.sizes: dict[str, int] | None = None if mesh is None else dict(mesh.shape)
        self.strict = strict
        self.out: list[PartitionSpec] = []

    def walk(self, node: Any, path: tuple[Any, ...], axes: Axes, owner: str) -> None:
        """Appends the specs of `node`'s leaves, in flatten order. `axes` and `owner`
        ("Class.field") are those of the field that holds `node`.

        Why not `jax.tree.map(spec, obj)`: a leaf does not know which field holds it,
        and the axes live on the field. `tree_map_with_path` gives the key path, but
        a path such as `.layers[0].w` names the attribute, not the class that owns it,
        so the walk goes field by field, as flatten does."""
        if _is_instance(node):
            name = type(node).__name__
            if axes is not None:
                where = _where(owner, path)
                msg = _MSG_AXES_ON_TREECLASS.format(where=where, axes=axes, inner=name, owner=owner)
                raise TypeError(msg)
            layout: Layout = getattr(node, LAYOUT)
            field_axes: dict[str, Axes] = {f.name: f.metadata.get(AXES) for f in layout.fields}
            children: tuple[Any, ...] = getattr(node, FLAT)[0]
            for field, child in zip(layout.dynamic, children, strict=True):
                key = jax.tree_util.GetAttrKey(field)
                self.walk(child, (*path, key), field_axes[field], f"{name}.{field}")
            return
        # Any other subtree (a list, a dict, a leaf): down to its leaves and to the
        # treeclasses inside it, which bring their own axes.
        flat, _ = jax.tree_util.tree_flatten_with_path(node, is_leaf=_is_instance)
        for sub_path, leaf in flat:
            leaf_path: tuple[Any, ...] = (*path, *sub_path)
            if _is_instance(leaf):
                self.walk(leaf, leaf_path, axes, owner)
            else:
                self.out.append(self.spec(leaf, axes, owner, leaf_path))

    def spec(self, leaf: object, axes: Axes, owner: str, path: tuple[Any, ...]) -> PartitionSpec:
        if axes is None:
            return PartitionSpec()  # type: ignore[no-untyped-call]  # jax leaves it unannotated
        where = _where(owner, path)
        shape = _shape(leaf)
        if shape is None:
            kind = type(leaf).__name__
            msg = _MSG_NOT_ARRAY.format(where=where, axes=axes, kind=kind, leaf=leaf, owner=owner)
            raise TypeError(msg)
        if len(axes) > len(shape):
            fix = axes[: len(shape)]
            n, ndim = len(axes), len(shape)
            msg = _MSG_TOO_MANY_AXES.format(
                where=where, axes=axes, n=n, shape=shape, ndim=ndim, fix=fix
            )
            raise ValueError(msg)
        entries: list[MeshAxes] = []
        # flax's rules are a priority list: a rule whose mesh axis is taken is skipped
        # and a later rule for the same name is tried, so with
        #     rules = [("embed", "model"), ("mlp", "model"), ("mlp", "data")]
        # `mlp` lands on "model" or "data" depending on which other names the array
        # has. Here a name has one mesh axis, and a clash is an error naming the field.
        used: dict[str, str] = {}  # mesh axis -> the logical name that took it
        for dim, name in enumerate(axes):
            target = None if name is None else self.lookup(name, where)
            for mesh_axis in mesh_axis_names(target):
                if mesh_axis in used:
                    msg = _MSG_MESH_AXIS_TWICE.format(
                        where=where,
                        axes=axes,
                        mesh_axis=mesh_axis,
                        first=used[mesh_axis],
                        second=name,
                    )
                    raise ValueError(msg)
                used[mesh_axis] = str(name)
            if target is not None and self.sizes is not None:
                parts = math.prod(self.sizes[a] for a in mesh_axis_names(target))
                if shape[dim] % parts:
                    msg = _MSG_NOT_DIVISIBLE.format(
                        where=where,
                        dim=dim,
                        name=name,
                        size=shape[dim],
                        mesh_axis=target,
                        parts=parts,
                    )
                    raise ValueError(msg)
            entries.append(target)
        return PartitionSpec(*entries)  # type: ignore[no-untyped-call]

    def lookup(self, name: str, where: str) -> MeshAxes:
        """The mesh axes for one logical name, checked against the mesh if there is one."""
        if self.table is None:
            # No rules: a name is its own mesh axis, where the mesh has one.
            if self.sizes is None or name in self.sizes:
                return name
            known = list(self.sizes)
            why = "is not a mesh axis (rules=None maps each name to the mesh axis of that name)"
            known_msg = f"The mesh axes are {known}"
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
            known = list(self.table)
            why = "is not mapped by the rules"
            known_msg = f"The rules map {known}"
        if self.strict:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            msg = _MSG_UNMAPPED.format(where=where, name=name, why=why, hint=hint, known=known_msg)
            raise ValueError(msg)
        return None


def _spec_leaves(
    obj: object, rules: Rules | None, strict: bool, mesh: Mesh | AbstractMesh | None
) -> tuple[Any, list[PartitionSpec]]:
    """`obj`'s treedef and the spec of each of its leaves, in flatten order."""
    specs = _Specs(rules, strict, mesh)
    specs.walk(obj, (), None, type(obj).__name__)
    return jax.tree.structure(obj), specs.out


def partition_specs(
    obj: Any,
    rules: Rules | None = None,
    *,
    strict: bool = False,
    mesh: Mesh | AbstractMesh | None = None,
) -> Any:
    """Returns a pytree of `jax.sharding.PartitionSpec` with `obj`'s structure, for
    `jax.shard_map(in_specs=..., out_specs=...)` or to build shardings yourself.

    Each dynamic field's `field(axes=...)` names are mapped through `rules`. A name the
    rules do not map is replicated (`None` in the spec), as in flax; so are `None`
    axes, and every leaf of a field without axes. A field with axes that holds a
    subtree (a list or dict of arrays) gives the same spec to each of its arrays. A
    nested treeclass, anywhere in the tree, uses its own fields' axes. Leaves that
    are not arrays (Python scalars) get `PartitionSpec()`.

    **Arguments**

    - `obj`: a treeclass instance, or any pytree holding some (its leaves outside a
      treeclass are replicated). `jax.ShapeDtypeStruct` leaves work, so
      `partition_specs(jax.eval_shape(init))` needs no arrays.
    - `rules`: a mapping `{logical: mesh_axis}` or a sequence of `(logical, mesh_axis)`
      pairs (flax's logical axis rules; the first pair for a name wins). `mesh_axis`
      is a mesh axis name, a tuple of names (split over their product) or None
      (replicate). `None` maps each logical name to the mesh axis of the same name;
      with a `mesh`, names the mesh lacks are replicated.
    - `strict`: raise, instead of replicating, on a logical name the rules do not map
      (a typo such as `"btach"`). A name mapped to None is not an error.
    - `mesh`: optional. When given, the mesh axes are checked to exist and to divide
      the dimensions they split, as `shardings()` does.

    **Returns**

    A pytree with `obj`'s treedef whose leaves are `PartitionSpec`s, one entry per
    named axis (`field(axes=("batch", None))` gives `P("batch", None)`); a field with
    fewer names than dimensions leaves the trailing ones unsplit.

    **Raises**

    - `TypeError`: malformed `rules`; `axes` on a field holding a non-array leaf or a
      treeclass.
    - `ValueError`, naming `Class.field` and its path: more axes than the array has
      dimensions; one mesh axis used for two dimensions of one array; with
      `strict=True`, an unmapped logical name; with a `mesh`, a mesh axis it lacks or
      a dimension its size does not divide.

    **Example**

    >>> @tc.treeclass
    ... class Batch:
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
    ValueError: Batch.x (at .x): the logical axis 'feature' is not mapped by the rules, ...
    """
    treedef, specs = _spec_leaves(obj, rules, strict, mesh)
    return jax.tree.unflatten(treedef, specs)


def shardings(
    obj: Any,
    mesh: Mesh | AbstractMesh,
    rules: Rules | None = None,
    *,
    strict: bool = False,
) -> Any:
    """Returns a pytree of `jax.sharding.NamedSharding` with `obj`'s structure, that
    lays each dynamic field out on `mesh` as its `field(axes=...)` and `rules` say.

    The specs are those of `partition_specs(obj, rules, strict=strict, mesh=mesh)`:
    unmapped logical names, `None` axes and fields without axes are replicated, and
    non-array leaves get a replicated sharding. The result goes wherever JAX takes a
    pytree of shardings: `jax.device_put(obj, shardings(obj, mesh))`,
    `jax.jit(f, in_shardings=(shardings(obj, mesh),), out_shardings=...)`, and
    `jax.make_array_from_process_local_data` per leaf on several hosts.

    **Arguments**

    - `obj`: a treeclass instance, or any pytree holding some; `jax.ShapeDtypeStruct`
      leaves work (`shardings(jax.eval_shape(init), mesh)`).
    - `mesh`: a `jax.sharding.Mesh` (or `AbstractMesh`).
    - `rules`: as in `partition_specs()`: a mapping or a sequence of
      `(logical, mesh_axis | tuple | None)` pairs; `None` maps each logical name to
      the mesh axis of the same name, replicating names the mesh lacks.
    - `strict`: raise on a logical name the rules do not map, instead of replicating.

    **Returns**

    A pytree with `obj`'s treedef whose leaves are `NamedSharding(mesh, spec)`.

    **Raises**

    - `TypeError`: `mesh` is not a mesh; malformed `rules`; `axes` on a field holding
      a non-array leaf or a treeclass.
    - `ValueError`, naming `Class.field` and its path: more axes than dimensions; a
      rule naming a mesh axis not in `mesh`; a dimension the mesh axis size does not
      divide; one mesh axis used twice in one array; with `strict=True`, an unmapped
      logical name.

    **Example**

    >>> @tc.treeclass
    ... class Batch:
    ...     x: jax.Array = tc.field(axes=("batch", None))
    ...     w: jax.Array
    >>> mesh = jax.make_mesh((1,), ("batch",))
    >>> batch = Batch(jnp.ones((4, 3)), jnp.ones(3))
    >>> sh = tc.shardings(batch, mesh)
    >>> P = jax.sharding.PartitionSpec
    >>> sh.x.spec == P("batch", None), sh.w.spec == P()
    (True, True)
    >>> placed = jax.device_put(batch, sh)
    >>> placed.x.sharding == sh.x
    True
    >>> tc.shardings(batch, mesh, {"batch": "data"})
    Traceback (most recent call last):
    ...
    ValueError: Batch.x (at .x): the rules map the logical axis 'batch' to mesh axis 'data'...
    """
    found = cast("object", mesh)  # untyped callers swap arguments: shardings(obj, rules)
    if not isinstance(found, Mesh | AbstractMesh):
        raise TypeError(_MSG_MESH.format(found=found))
    treedef, specs = _spec_leaves(obj, rules, strict, mesh)
    return jax.tree.unflatten(treedef, [NamedSharding(mesh, spec) for spec in specs])
