"""`Layout`: one class's fields split into children and treedef, and its hooks: it drives all
generated code. `Guard`: what keeps a field and its leaf in the flatten cache one value."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from collections.abc import Callable
from typing import Any, Final, cast

from treeclass._core.fields import CONVERTER, STATIC, TRAINABLE

# An instance's `(children, statics)`, cached (it is immutable): JAX's flatten reads it.
FLAT: Final = "__tc_flat__"
LAYOUT: Final = "__tc_layout__"
# In `__dict__` only while a hand-written `__init__` runs, the one time `self.w = ...` works.
INIT: Final = "__tc_init__"

# `ClassVar[int]` as a string (`from __future__ import annotations`), maybe module-qualified.
_CLASSVAR: Final = re.compile(r"^\s*(?:\w+\.)?ClassVar\b")

_MSG_SET_BUILT: Final = """\
cannot assign to {cls}.{name} with object.__setattr__: the instance is built, and
JAX flattens the values it was built with. Build a changed copy instead:

    obj = obj.replace({name}=...)

(object.__setattr__ works while the instance is built: in __init__ and __post_init__.)"""


class Guard:
    """Per field, on the class: refuses `object.__setattr__` on a built instance; no `__get__`."""

    __slots__ = ("default", "name")

    def __init__(self, name: str, default: Any) -> None:
        self.name, self.default = name, default

    def __set__(self, obj: object, value: Any) -> None:
        d = obj.__dict__
        if FLAT in d:
            msg = _MSG_SET_BUILT.format(cls=type(obj).__name__, name=self.name)
            raise dataclasses.FrozenInstanceError(msg)
        d[self.name] = value

    def __delete__(
        self, obj: object
    ) -> None:  # `object.__delattr__`: Python's own says "__delete__"
        msg = f"cannot delete {type(obj).__name__}.{self.name}: treeclass instances are immutable."
        raise dataclasses.FrozenInstanceError(msg)

    def __repr__(self) -> str:
        return f"<treeclass field {self.name!r}>"


@dataclasses.dataclass(frozen=True)
class Layout:
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


def _computed(cls: type, f: dataclasses.Field[Any]) -> bool:
    """An inherited `init=False` field the class overrides with a property (a data descriptor)."""
    if f.init:
        return False
    attr = inspect.getattr_static(cls, f.name, None)
    return not isinstance(attr, Guard) and (
        hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__")
    )


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
    """The `Layout` of a treeclass or instance (not inherited); None for anything else."""
    cls = x if isinstance(x, type) else type(x)
    return cast("Layout | None", cls.__dict__.get(LAYOUT))


def instance_layout(x: object) -> Layout | None:
    """The `Layout` of a treeclass instance; None else, a treeclass class included."""
    return None if isinstance(x, type) else layout_of(x)
