"""Pytree registration for one class: flatten reads the `(children, statics)` cached at
construction (`operator.attrgetter`: C-level); the generated unflatten writes `__dict__`, so
no user code runs. Not `register_dataclass`: its `cls(**fields)` runs `__post_init__` and the
converters on tracers, and is slow (docs/how-it-works.md)."""

from __future__ import annotations

import operator
import weakref
from typing import Any, TypeVar

import jax

from treeclass._core import checks, codegen
from treeclass._core.layout import FLAT, Layout, instance_layout
from treeclass._core.walk import node_def

_T = TypeVar("_T")


def unflatten_source(layout: Layout) -> str:
    lines = [
        "def _tc_unflatten(_tc_aux, _tc_children, _tc_new=_tc_object_new, _tc_cls=_tc_cls):",
        "    _tc_self = _tc_new(_tc_cls)",
        "    _tc_d = _tc_self.__dict__",
    ]
    for names, value in ((layout.dynamic, "_tc_children"), (layout.static, "_tc_aux")):
        if names:
            lines.append(f"    {''.join(f'_tc_d[{n!r}], ' for n in names)}= {value}")
    lines += [f"    {codegen.seal('_tc_children', '_tc_aux')}", "    return _tc_self"]
    return "".join(f"{line}\n" for line in lines)


_REGISTERED: weakref.WeakSet[type] = weakref.WeakSet()  # registered in this process


class Registration:
    """`__tc_registration__`: the unflatten; unpickled, it registers a class cloudpickle rebuilt."""

    __slots__ = ("layout", "unflatten")

    def __init__(self, layout: Layout, ns: dict[str, Any]) -> None:
        self.layout, self.unflatten = layout, ns["_tc_unflatten"]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_reregister, (self.layout,))


def _reregister(layout: Layout) -> Registration:
    ns = codegen.compile_class(layout, [unflatten_source(layout)])
    if layout.cls not in _REGISTERED:
        register(layout, ns)
    return Registration(layout, ns)


def register(layout: Layout, ns: dict[str, Any]) -> None:
    """Registers the class with JAX, with the generated `_tc_unflatten` from `ns`."""
    _REGISTERED.add(layout.cls)
    keys = tuple(jax.tree_util.GetAttrKey(name) for name in layout.dynamic)

    def flatten_with_keys(obj: Any) -> tuple[tuple[tuple[Any, Any], ...], tuple[Any, ...]]:
        children, aux = getattr(obj, FLAT)
        return tuple(zip(keys, children, strict=True)), aux

    jax.tree_util.register_pytree_with_keys(
        layout.cls, flatten_with_keys, ns["_tc_unflatten"], flatten_func=operator.attrgetter(FLAT)
    )


def getstate(self: object) -> dict[str, Any]:
    """What `pickle`, `copy` and `deepcopy` store: the fields by name, not the flatten cache."""
    return {k: v for k, v in self.__dict__.items() if k != FLAT}


def setstate(self: object, state: dict[str, Any]) -> None:
    """Sets `getstate`'s fields as the class's unflatten writes them, in its current order."""
    registration: Registration = vars(type(self))["__tc_registration__"]
    layout = registration.layout
    try:
        children, aux = (
            tuple(state[n] for n in names) for names in (layout.dynamic, layout.static)
        )
    except KeyError as e:
        msg = f"{layout.cls.__name__}.{e.args[0]} is missing from the pickled state: "
        msg += "the class has a field the pickled instance has not."
        raise TypeError(msg) from None
    self.__dict__.update(state)  # and what is no field, such as `__orig_class__`
    self.__dict__.update(vars(registration.unflatten(aux, children)))


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
