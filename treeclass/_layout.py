"""What treeclass knows about one class: its fields, split into the pytree's children
(dynamic) and treedef (static), and the user hooks that construction must run.

Computed once per class at decoration; everything generated (`__init__`, flatten,
unflatten, `replace`) is driven by a `Layout`.
"""

from __future__ import annotations

import dataclasses
import linecache
from collections.abc import Callable
from typing import Any, Final, cast

from treeclass._field import CONVERTER, STATIC

# The attribute that caches an instance's flattened form, `(children, statics)`.
# Instances are immutable, so it is computed once (at construction or unflatten) and
# JAX's flatten becomes `operator.attrgetter(FLAT)`: a C call with no Python frame.
FLAT: Final = "__tc_flat__"
LAYOUT: Final = "__tc_layout__"

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
    initvars: tuple[dataclasses.Field[Any], ...]
    dynamic: tuple[str, ...]
    static: tuple[str, ...]
    converters: dict[str, Callable[[Any], Any]]
    post_init: bool
    user_init: Callable[..., None] | None
    """The class's own `__init__`, if it wrote one (dataclasses then keeps it)."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def simple(self) -> bool:
        """True when `__init__` alone assigns every field, so it can build the flatten
        cache from its local variables instead of reading the fields back."""
        if self.post_init or self.user_init is not None:
            return False
        return all(
            f.init
            or f.default is not dataclasses.MISSING
            or f.default_factory is not dataclasses.MISSING
            for f in self.fields
        )


def analyse(cls: type, user_init: Callable[..., None] | None) -> Layout:
    fields = dataclasses.fields(cls)
    # Checkers do not know `__dataclass_fields__` (set by dataclasses at runtime).
    all_fields = cast("dict[str, dataclasses.Field[Any]]", cls.__dataclass_fields__)  # type: ignore[attr-defined]
    initvars = tuple(
        f
        for f in all_fields.values()
        if getattr(f, "_field_type", None) is _FIELD_INITVAR and _FIELD_INITVAR is not None
    )
    return Layout(
        cls=cls,
        fields=fields,
        initvars=initvars,
        dynamic=tuple(f.name for f in fields if not f.metadata.get(STATIC, False)),
        static=tuple(f.name for f in fields if f.metadata.get(STATIC, False)),
        converters={f.name: f.metadata[CONVERTER] for f in fields if CONVERTER in f.metadata},
        post_init=hasattr(cls, "__post_init__"),
        user_init=user_init,
    )


def compile_function(source: str, name: str, cls: type, namespace: dict[str, Any]) -> Any:
    """Compiles generated `source` defining `name`, registered with `linecache` under a
    filename that names the class, so tracebacks and `inspect.getsource` show it."""
    filename = f"<treeclass {cls.__module__}.{cls.__qualname__}.{name}>"
    code = compile(source, filename, "exec")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(code, namespace)  # noqa: S102 - our own generated source, shown above
    fn = namespace[name]
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    fn.__module__ = cls.__module__
    return fn


def flat_expr(layout: Layout, value: Callable[[str], str]) -> str:
    """Source for the `(children, statics)` tuple, each field read through `value`."""

    def tup(names: tuple[str, ...]) -> str:
        return "(" + "".join(f"{value(n)}, " for n in names) + ")"

    return f"({tup(layout.dynamic)}, {tup(layout.static)})"
