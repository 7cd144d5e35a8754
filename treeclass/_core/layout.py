"""`Layout`: one class's fields, split into children (dynamic) and treedef (static), and
the hooks construction runs; computed once at decoration, it drives all generated code."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, Final, cast

from treeclass._core.fields import CONVERTER, STATIC, TRAINABLE

# An instance's `(children, statics)`, cached (it is immutable): JAX's flatten reads it.
FLAT: Final = "__tc_flat__"
LAYOUT: Final = "__tc_layout__"
# In `__dict__` only while a hand-written `__init__` runs, the one time `self.w = ...` works.
INIT: Final = "__tc_init__"

# `dataclasses.fields()` hides InitVars, which `__init__` takes and passes to `__post_init__`.
_FIELD_INITVAR: Final = getattr(dataclasses, "_FIELD_INITVAR", None)


@dataclasses.dataclass(frozen=True)
class Layout:
    """The per-class analysis that drives code generation."""

    cls: type
    fields: tuple[dataclasses.Field[Any], ...]  # declaration order, init=False included
    names: tuple[str, ...]
    initvars: tuple[dataclasses.Field[Any], ...]
    dynamic: tuple[str, ...]
    static: tuple[str, ...]
    frozen: frozenset[str]  # the dynamic fields declared `trainable=False`
    converters: dict[str, Callable[[Any], Any]]
    post_init: bool
    user_init: Callable[..., None] | None  # the class's own `__init__`, if any
    check_inits: tuple[Callable[[Any], None], ...]  # every `__check_init__` of the MRO, base first
    options: dict[str, bool]  # the decorator's: kw_only, repr, eq


def _computed(cls: type, f: dataclasses.Field[Any]) -> bool:
    """An inherited `init=False` field the class overrides with a property (a data descriptor)."""
    if f.init:
        return False
    attr = inspect.getattr_static(cls, f.name, None)
    return hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__")


def analyse(cls: type, user_init: Callable[..., None] | None, options: dict[str, bool]) -> Layout:
    fields = tuple(f for f in dataclasses.fields(cls) if not _computed(cls, f))
    # Checkers do not know `__dataclass_fields__` (set by dataclasses at runtime).
    every = cast("dict[str, dataclasses.Field[Any]]", vars(cls)["__dataclass_fields__"])
    # getattr: typeshed declares neither the marker nor `_field_type`.
    initvars = tuple(f for f in every.values() if getattr(f, "_field_type", 0) is _FIELD_INITVAR)
    return Layout(
        cls=cls,
        fields=fields,
        names=tuple(f.name for f in fields),
        initvars=initvars,
        dynamic=tuple(f.name for f in fields if not f.metadata.get(STATIC, False)),
        static=tuple(f.name for f in fields if f.metadata.get(STATIC, False)),
        frozen=frozenset(f.name for f in fields if not f.metadata.get(STATIC) and not f.metadata.get(TRAINABLE, True)),
        converters={f.name: f.metadata[CONVERTER] for f in fields if CONVERTER in f.metadata},
        post_init=hasattr(cls, "__post_init__"),
        user_init=user_init,
        check_inits=tuple(vars(k)["__check_init__"] for k in reversed(cls.__mro__) if "__check_init__" in vars(k)),
        options=options,
    )


def layout_of(x: object) -> Layout | None:
    """The `Layout` of a treeclass or instance (not inherited); None for anything else."""
    cls = x if isinstance(x, type) else type(x)
    return cast("Layout | None", cls.__dict__.get(LAYOUT))


def instance_layout(x: object) -> Layout | None:
    """The `Layout` of a treeclass instance; None else, a treeclass class included."""
    return None if isinstance(x, type) else layout_of(x)
