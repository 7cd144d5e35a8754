"""`Layout`: the one record of a class: its fields split into children and treedef, its hooks,
and the generated flatten and unflatten JAX calls. Every layer reaches it through `layout_of()`.

An instance keeps its fields in one store, its `__dict__`: the attribute, JAX's flatten, `==`,
`hash` and `repr` all read it, so a write by any route is seen by all of them."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from collections.abc import Callable
from typing import Any, Final, cast

from treeclass._core.fields import CONVERTER, STATIC, TRAINABLE

# The class attribute that holds the record (`layout_of()` reads it; nothing else spells it).
LAYOUT: Final = "__tc_layout__"
# The instances whose hand-written `__init__` runs, by id, with the names `self.w = ...` may
# set there. Not a key in the instance's `__dict__`: `vars(obj)` holds the fields only.
BUILDING: Final[dict[int, frozenset[str]]] = {}

# `ClassVar[int]` as a string (`from __future__ import annotations`), maybe module-qualified.
_CLASSVAR: Final = re.compile(r"^\s*(?:\w+\.)?ClassVar\b")


# Called with each record unpickled (flatten.py subscribes: it imports this module).
UNPICKLED: Final[list[Callable[[Layout], None]]] = []


@dataclasses.dataclass(eq=False)
class Layout:
    """One class's record; `flatten` and `unflatten` are set once, by `flatten.complete()`."""

    cls: type
    fields: tuple[dataclasses.Field[Any], ...]  # declaration order, init=False included
    names: tuple[str, ...]
    initvars: tuple[dataclasses.Field[Any], ...]
    params: tuple[
        dataclasses.Field[Any], ...
    ]  # `__init__`'s, in declaration order, InitVars included
    dynamic: tuple[str, ...]
    static: tuple[str, ...]
    frozen: frozenset[str]  # the dynamic fields declared `trainable=False`
    converters: dict[str, Callable[[Any], Any]]
    post_init: bool
    user_init: Callable[..., None] | None  # the class's own `__init__`, if any
    check_inits: tuple[Callable[[Any], None], ...]  # every `__check_init__` of the MRO, base first
    options: dict[str, bool]  # the decorator's: kw_only, repr, eq
    # What JAX calls: `flatten(obj) -> (children, statics)` reads the fields' attributes;
    # `unflatten(statics, children)` builds an instance without running user code.
    flatten: Callable[[Any], tuple[tuple[Any, ...], tuple[Any, ...]]] = dataclasses.field(
        init=False, repr=False
    )
    unflatten: Callable[[Any, Any], Any] = dataclasses.field(init=False, repr=False)

    # cloudpickle carries a class defined in `__main__` by value, this record with it: the
    # analysis travels, the generated flatten and unflatten are compiled again on arrival
    # (`UNPICKLED`), and the rebuilt class is registered with JAX there.
    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k not in ("flatten", "unflatten")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        for hook in UNPICKLED:
            hook(self)


def _computed(cls: type, f: dataclasses.Field[Any]) -> bool:
    """An inherited `init=False` field the class overrides with a property (a data descriptor)."""
    if f.init:
        return False
    attr = inspect.getattr_static(cls, f.name, None)
    return hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__")


def is_classvar(annotation: object) -> bool:
    if isinstance(annotation, str):
        return bool(_CLASSVAR.match(annotation))
    return annotation is typing.ClassVar or typing.get_origin(annotation) is typing.ClassVar


def analyse(cls: type, user_init: Callable[..., None] | None, options: dict[str, bool]) -> Layout:
    fields = tuple(f for f in dataclasses.fields(cls) if not _computed(cls, f))
    # `dataclasses.fields()` hides the InitVars, which `__init__` takes and passes to
    # `__post_init__`; `__dataclass_fields__` (unknown to checkers) has them and ClassVars.
    every = cast("dict[str, dataclasses.Field[Any]]", vars(cls)["__dataclass_fields__"])
    real = {f.name for f in dataclasses.fields(cls)}
    initvars = tuple(f for f in every.values() if f.name not in real and not is_classvar(f.type))
    return Layout(
        cls=cls,
        fields=fields,
        names=tuple(f.name for f in fields),
        initvars=initvars,
        params=tuple(f for f in every.values() if f.init and (f in fields or f in initvars)),
        dynamic=tuple(f.name for f in fields if not f.metadata.get(STATIC, False)),
        static=tuple(f.name for f in fields if f.metadata.get(STATIC, False)),
        frozen=frozenset(
            f.name
            for f in fields
            if not f.metadata.get(STATIC) and not f.metadata.get(TRAINABLE, True)
        ),
        converters={f.name: f.metadata[CONVERTER] for f in fields if CONVERTER in f.metadata},
        post_init=hasattr(cls, "__post_init__"),
        user_init=user_init,
        check_inits=tuple(
            vars(k)["__check_init__"] for k in reversed(cls.__mro__) if "__check_init__" in vars(k)
        ),
        options=options,
    )


def layout_of(x: object) -> Layout | None:
    """The record of a treeclass or instance (not inherited); None for anything else."""
    cls = x if isinstance(x, type) else type(x)
    return cast("Layout | None", cls.__dict__.get(LAYOUT))


def instance_layout(x: object) -> Layout | None:
    """The `Layout` of a treeclass instance; None else, a treeclass class included."""
    return None if isinstance(x, type) else layout_of(x)
