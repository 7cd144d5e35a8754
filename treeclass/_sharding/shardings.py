"""Field axes -> shardings: `shardings()` and `partition_specs()`.

A dynamic field names its array's logical axes, `field(axes=("batch", None))`, and
rules map logical names to mesh axes, as flax's logical axis rules do. The model says
what its dimensions *mean*; the rules, chosen per run, say how a mesh splits them:

    rules = {"batch": "data", "embed": None}     # data parallel
    rules = {"batch": "data", "embed": "model"}  # the same model, tensor parallel too

Both functions walk the tree in JAX's flatten order (`_walk.walk`), build one spec
per leaf from the axes of the field holding it (`_rules.AxisMap`), then rebuild the
tree with `obj`'s own treedef. So the result has exactly `obj`'s pytree structure (statics, `None` fields and all) and fits wherever JAX takes a pytree of
shardings or specs: `jax.device_put`, `jax.jit(in_shardings=..., out_shardings=...)`,
`jax.shard_map(in_specs=..., out_specs=...)`.
"""

from __future__ import annotations

from typing import Any, Final, cast

import jax
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec

from treeclass._core.fields import AXES
from treeclass._core.layout import instance_layout, layout_of
from treeclass._core.walk import path_str, walk
from treeclass._sharding.rules import Axes, AxisMap, Rules, partition_spec

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


def _field_axes(owner: type | None, name: str | None) -> Axes:
    layout = None if owner is None else layout_of(owner)
    if layout is None:
        return None  # a leaf outside every treeclass field: replicated
    return next(f.metadata.get(AXES) for f in layout.fields if f.name == name)


def _spec_leaves(
    obj: object, rules: Rules | None, strict: bool, mesh: Mesh | AbstractMesh | None
) -> tuple[Any, list[PartitionSpec]]:
    """`obj`'s treedef and the spec of each of its leaves, in flatten order.

    Why not `jax.tree.map(spec, obj)`: a leaf does not know which field holds it, and
    the axes live on the field. `walk()` gives each leaf its `Class.field` (the
    innermost treeclass field holding it, through any containers), whose axes apply
    to every array inside that field, while a nested treeclass brings its own."""
    axis_map = AxisMap(rules, strict, None if mesh is None else dict(mesh.shape))
    root = type(obj).__name__
    specs: list[PartitionSpec] = []
    for v in walk(obj):
        if v.kind == "static":
            continue
        axes = _field_axes(v.owner, v.name)
        if axes is None:
            if v.kind == "leaf":
                specs.append(partition_spec())
            continue
        where = path_str(root, v.path)
        if v.kind == "leaf":
            specs.append(axis_map.spec(v.value, axes, v.field, where))
        elif instance_layout(v.value) is not None:
            inner = type(v.value).__name__
            msg = _MSG_AXES_ON_TREECLASS.format(where=where, axes=axes, inner=inner, owner=v.field)
            raise TypeError(msg)
    return jax.tree.structure(obj), specs


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

    >>> class Batch(tc.TreeClass):
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
    ValueError: Batch.x: the rules map the logical axis 'batch' to mesh axis 'data'...
    """
    found = cast("object", mesh)  # untyped callers swap arguments: shardings(obj, rules)
    if not isinstance(found, Mesh | AbstractMesh):
        raise TypeError(_MSG_MESH.format(found=found))
    treedef, specs = _spec_leaves(obj, rules, strict, mesh)
    return jax.tree.unflatten(treedef, [NamedSharding(mesh, spec) for spec in specs])
