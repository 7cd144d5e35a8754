"""Pytree registration for one class. The generated flatten reads the fields' attributes, the
store every other reader uses (no cached copy of the leaves to fall out of step); the generated
unflatten gives a new instance its store in one step (`codegen.store`), so no user code runs.
Not `register_dataclass`: its `cls(**fields)` runs `__post_init__` and the converters on
tracers, and is slow (docs/how-it-works.md)."""

import weakref
from typing import Any, TypeVar

import jax

from treeclass._core import checks, codegen
from treeclass._core.layout import UNPICKLED, Layout, instance_layout
from treeclass._core.walk import node_def

_T = TypeVar("_T")


def flatten_source(layout: Layout) -> str:
    children, statics = (
        "".join(f"_tc_self.{n}, " for n in names) for names in (layout.dynamic, layout.static)
    )
    return (
        "def _tc_flatten(_tc_self):\n"
        f"    try: return ({children}), ({statics})\n"
        "    except _tc_AttributeError as _tc_e: _tc_deleted(_tc_self, _tc_e)\n"
    )


def unflatten_source(layout: Layout) -> str:
    lines = ["def _tc_unflatten(_tc_aux, _tc_children, _tc_new=_tc_object_new, _tc_cls=_tc_cls):"]
    lines += [
        f"    {''.join(f'{n}, ' for n in names)}= {value}"
        for names, value in ((layout.dynamic, "_tc_children"), (layout.static, "_tc_aux"))
        if names
    ]
    # The `__dict__` descriptor's own setter: 60 ns less per node than `codegen.store()`'s
    # `object.__setattr__` (benchmarks/RESULTS.md, "Design measurements"). It does not pickle,
    # so only this function, which the record compiles again when unpickled, calls it.
    # Declaration order, as `__init__` stores them: `vars(obj)` reads the same either way.
    lines += [
        "    _tc_self = _tc_new(_tc_cls)",
        f"    _tc_setdict(_tc_self, {codegen.fields_dict(layout.names)})",
        "    return _tc_self",
    ]
    return "".join(f"{line}\n" for line in lines)


def sources(layout: Layout) -> list[str]:
    return [flatten_source(layout), unflatten_source(layout)]


def complete(layout: Layout, ns: dict[str, Any]) -> None:
    """Puts the generated flatten and unflatten from `ns` in the record, once."""
    layout.flatten, layout.unflatten = ns["_tc_flatten"], ns["_tc_unflatten"]


def _unpickled(layout: Layout) -> None:
    """A record cloudpickle carried with its class: its own flatten and unflatten, and the
    class registered with JAX (the class cloudpickle rebuilt was not processed)."""
    complete(layout, codegen.compile_class(layout, sources(layout)))
    if layout.cls not in _REGISTERED:
        register(layout)


UNPICKLED.append(_unpickled)

_REGISTERED: weakref.WeakSet[type] = weakref.WeakSet()  # registered in this process


def register(layout: Layout) -> None:
    """Registers the class with JAX, with its record's generated flatten and unflatten."""
    _REGISTERED.add(layout.cls)
    keys = tuple(jax.tree_util.GetAttrKey(name) for name in layout.dynamic)
    flat = layout.flatten

    def flatten_with_keys(obj: Any) -> tuple[tuple[tuple[Any, Any], ...], tuple[Any, ...]]:
        children, aux = flat(obj)
        return tuple(zip(keys, children, strict=True)), aux

    jax.tree_util.register_pytree_with_keys(
        layout.cls, flatten_with_keys, layout.unflatten, flatten_func=flat
    )


def getstate(self: object) -> dict[str, Any]:
    """What `pickle`, `copy` and `deepcopy` store: the instance's store, fields by name."""
    return dict(vars(self))


def setstate(self: object, state: dict[str, Any]) -> None:
    """Makes `state` the instance's store, fields in the class's current declaration order."""
    layout = instance_layout(self)
    assert layout is not None  # installed on treeclasses only
    if missing := [n for n in layout.names if n not in state]:
        msg = (
            f"{layout.cls.__name__}.{missing[0]} is missing from the pickled state: "
            "the class has a field the pickled instance has not."
        )
        raise TypeError(msg)
    # The fields, then what is no field, such as `__orig_class__`.
    object.__setattr__(self, "__dict__", {n: state[n] for n in layout.names} | state)


def prefix(obj: _T, fill: Any = None, /, **fields: Any) -> _T:
    """Returns a pytree prefix of `obj` (as `jax.vmap`'s `in_axes`): dynamic fields hold
    `fields[name]` or `fill`, statics are `obj`'s. Built as JAX rebuilds instances (no
    `__init__`, converter or `__post_init__` runs), so `None` and axis numbers fit any field.

    **Arguments**

    - `obj`: a treeclass instance, whose static fields are kept.
    - `fill`: the value of every dynamic field not named in `fields`.
    - `**fields`: values for dynamic fields, by name.

    **Returns**

    A new instance of `type(obj)`.

    **Raises**

    `TypeError` for a non-treeclass `obj` or a name that is no dynamic field (naming the closest).

    **Example**

    >>> class Linear(tc.TreeClass):
    ...     w: jax.Array = tc.field(converter=jnp.asarray)
    ...     b: jax.Array = tc.field(converter=jnp.asarray)
    ...     def __post_init__(self):
    ...         assert self.w.shape[-1:] == self.b.shape[-1:]
    >>> ensemble = Linear(jnp.ones((4, 3)), jnp.zeros((4, 3)))
    >>> axes = tc.prefix(ensemble, w=0)             # map over w's first axis, share b
    >>> axes.w, axes.b
    (0, None)
    >>> jax.vmap(lambda m: m.w.sum() + m.b.sum(), in_axes=(axes,))(ensemble).shape
    (4,)
    """
    layout = instance_layout(obj)
    if layout is None:
        msg = f"treeclass.prefix() takes a treeclass instance; got {type(obj).__name__}."
        raise TypeError(msg)
    if unknown := [name for name in fields if name not in layout.dynamic]:
        raise checks.unknown_field_error(
            type(obj), unknown, layout.dynamic, call="prefix", kind="dynamic field"
        )
    new: _T = jax.tree.unflatten(node_def(obj), [fields.get(name, fill) for name in layout.dynamic])
    return new
