"""`shardings()`, `partition_specs()`: a field names its array's logical axes (`field(axes=("batch",
None))`), rules chosen per run map them to mesh axes (`rules.AxisMap`), one spec per leaf."""

from __future__ import annotations

from typing import Any, Final, cast

import jax
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec

from treeclass._core.fields import AXES
from treeclass._core.layout import instance_layout, layout_of
from treeclass._core.walk import path_str, walk
from treeclass._sharding.rules import Axes, AxisMap, Rules, partition_spec

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
    in flax. A field holding a subtree gives each array in it the same spec.

    **Arguments**

    - `obj`: any pytree holding treeclasses; `jax.ShapeDtypeStruct` leaves work.
    - `rules`: `{logical: mesh_axis}` or `(logical, mesh_axis)` pairs (the first wins); a
      mesh axis name, a tuple of them, or None (replicate). `None`: each name is a mesh axis.
    - `strict`: raise on a logical name the rules do not map (a typo such as `"btach"`).
    - `mesh`: if given, mesh axes are checked to exist and to divide their dimensions.

    **Returns**

    A pytree with `obj`'s treedef of `PartitionSpec`s; trailing dimensions are unsplit.

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
    specs: list[PartitionSpec] = []
    for v in walk(obj):  # each leaf with its innermost field
        layout = None if v.kind == "static" else layout_of(v.owner)  # None outside every field
        field = None if layout is None else layout.fields[layout.names.index(v.name)]
        axes: Axes = None if field is None else field.metadata.get(AXES)
        if axes is None:
            if v.kind == "leaf":
                specs.append(partition_spec())
        elif v.kind == "leaf":
            specs.append(axis_map.spec(v.value, axes, v.field, path_str(root, v.path)))
        elif instance_layout(v.value) is not None:
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

    A pytree with `obj`'s treedef whose leaves are `NamedSharding(mesh, spec)`.

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
    leaves, treedef = jax.tree.flatten(specs, is_leaf=lambda x: isinstance(x, PartitionSpec))
    return jax.tree.unflatten(treedef, [NamedSharding(mesh, spec) for spec in leaves])
