"""What treeclass knows about one class: its fields, split into the pytree's children
(dynamic) and treedef (static), and the user hooks that construction must run.

Computed once per class at decoration; everything generated (`__init__`, flatten,
unflatten, `replace`) is driven by a `Layout`.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, Final, cast

from treeclass._core.fields import CONVERTER, STATIC, TRAINABLE

__all__ = ["FLAT", "INIT", "LAYOUT", "Layout", "analyse", "instance_layout", "layout_of"]

# The attribute that caches an instance's flattened form, `(children, statics)`.
# Instances are immutable, so it is computed once (at construction or unflatten) and
# JAX's flatten becomes `operator.attrgetter(FLAT)`: a C call with no Python frame.
FLAT: Final = "__tc_flat__"
LAYOUT: Final = "__tc_layout__"
# In an instance's `__dict__` only while its hand-written `__init__` runs: the one time
# `self.w = ...` is allowed (`decorator._setattr`).
INIT: Final = "__tc_init__"

# `dataclasses.fields()` hides InitVar pseudo-fields, but the generated `__init__` must
# accept them in declaration order and pass them to `__post_init__`. The marker has
# been in the stdlib, unchanged, since dataclasses was added (3.7).
_FIELD_INITVAR: Final = getattr(dataclasses, "_FIELD_INITVAR", None)


@dataclasses.dataclass(frozen=True)
class Layout:
    """The per-class analysis that drives code generation."""

    cls: type
    fields: tuple[dataclasses.Field[Any], ...]
    """Every field, in declaration order (parents' first), `init=False` ones included."""
    names: tuple[str, ...]
    """The fields' names, in that order."""
    initvars: tuple[dataclasses.Field[Any], ...]
    dynamic: tuple[str, ...]
    static: tuple[str, ...]
    frozen: frozenset[str]
    """The dynamic fields declared `trainable=False`: state, not parameters."""
    converters: dict[str, Callable[[Any], Any]]
    post_init: bool
    user_init: Callable[..., None] | None
    """The class's own `__init__`, if it wrote one (dataclasses then keeps it)."""
    check_inits: tuple[Callable[[Any], None], ...]
    """Every `__check_init__` of the class's MRO, base first."""
    options: dict[str, bool]
    """The decorator's options the class was built with (`kw_only`, `repr`, `eq`)."""


def _computed(cls: type, f: dataclasses.Field[Any]) -> bool:
    """True for an inherited `init=False` field that the class overrides with a property
    (or another data descriptor), as plain dataclasses allow:

        class Base:
            y: float = tc.field(init=False)
        class Child(Base):
            @property
            def y(self): return self.x * 2

    The value is computed, never stored: it is not a pytree child, a treedef entry or a
    `replace()` keyword."""
    if f.init:
        return False
    attr = inspect.getattr_static(cls, f.name, None)
    return hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__")


def analyse(cls: type, user_init: Callable[..., None] | None, options: dict[str, bool]) -> Layout:
    fields = tuple(f for f in dataclasses.fields(cls) if not _computed(cls, f))
    # Checkers do not know `__dataclass_fields__` (set by dataclasses at runtime).
    all_fields = cast("dict[str, dataclasses.Field[Any]]", vars(cls)["__dataclass_fields__"])
    initvars = tuple(
        f
        for f in all_fields.values()
        if getattr(f, "_field_type", None) is _FIELD_INITVAR and _FIELD_INITVAR is not None
    )
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
    """The `Layout` of a treeclass, or of an instance of one; None for anything else.

    Read from the class's own `__dict__`, not inherited: a subclass that was not
    decorated again is not registered with JAX, so it is not a treeclass either."""
    cls = x if isinstance(x, type) else type(x)
    layout: Layout | None = cls.__dict__.get(LAYOUT)
    return layout


def instance_layout(x: object) -> Layout | None:
    """The `Layout` of a treeclass instance; None for anything else, a treeclass
    class included (a class held in a field is a leaf to JAX, not a node)."""
    return None if isinstance(x, type) else layout_of(x)
