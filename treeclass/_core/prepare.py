"""The class body before `dataclasses` sees it: `Static[T]` annotations (also aliased, also as
strings) become static fields, static fields' options and defaults are checked."""

import builtins
import collections
import copy
import dataclasses
import functools
import inspect
import sys
import traceback
import types
import typing
from collections.abc import Callable
from typing import Any, Final

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core
import typing_extensions

from treeclass._core import checks
from treeclass._core.fields import AXES, CONVERTER, STATIC, STATIC_MARKER, TRAINABLE, static
from treeclass._core.layout import is_classvar

# One message per option a static field refuses, whichever spelling declared it.
_MSG_STATIC_OPTION: Final = """\
{cls}.{name} is static and declared {option}. {why} Drop {option}, or make the field dynamic:

    {name}: ... = tc.field({option})"""

_WHY_REFUSED: Final = {
    "trainable=False": "trainable=False marks the leaves of a dynamic field as state (traced,\n"
    "but never differentiated or optimised); a static value is never traced at all.",
    "axes=...": "axes= names the axes of a dynamic array for sharding; a static value is\n"
    "part of the treedef, never an array, never sharded.",
}

_MSG_UNRESOLVED: Final = """\
{cls}.{name} is annotated {text!r}, which treeclass cannot resolve when the class
is created, so it cannot tell whether the field is static (a tc.Static alias would
make it static): {error}.

Define or import the name before the class, or declare the field's kind with a field
specifier, which then decides:

    {name}: {text} = tc.field()      # dynamic
    {name}: {text} = tc.static()     # static"""

_MSG_NESTED: Final = """\
{cls}.{name} is annotated {text!r}: tc.Static stands inside {outer}, where treeclass
does not look. A field is static or dynamic as a whole, so Static marks the whole
annotation (also inside Optional[...], Union[...], X | None or Annotated[...]):

    {name}: tc.Static[tuple[int, ...]]    # the whole value static (hashable: a tuple)
    {name}: tuple[int, ...]               # or dynamic: no Static inside"""

# typing_extensions' own class on Python < 3.12 (and on some versions after); PEP 695's.
_ALIASES: Final = (
    typing_extensions.TypeAliasType,
    getattr(typing, "TypeAliasType", typing_extensions.TypeAliasType),
)
_UNIONS: Final = (typing.Union, types.UnionType)


class _Refused(Exception):  # noqa: N818 - a signal inside this module, never raised to users
    """`(template, detail)`: `Static` nested (`_MSG_NESTED`) or a name unresolved."""


class _Undefined:
    """A name not defined yet: `Static[Later]` is static, `Later | None` refused naming it."""

    def __class_getitem__(cls, item: object) -> type:
        return cls


class _Names(collections.ChainMap[str, Any]):
    def __missing__(self, key: str) -> Any:
        return getattr(builtins, key) if hasattr(builtins, key) else type(key, (_Undefined,), {})


def _scopes(cls: type) -> tuple[dict[str, Any], _Names]:
    """The scopes of `cls`'s string annotations; frames too, for a function-local `Hyper` alias."""
    stack = traceback.walk_stack(sys._getframe(1))  # where the class statement runs, or above
    core = "treeclass._core"
    frames = [f for f, _ in stack if not str(f.f_globals.get("__name__", "")).startswith(core)]
    ours = [f for f in frames if f.f_globals.get("__name__") == cls.__module__] or frames[:1]
    globals_ = ours[0].f_globals if ours else {}
    module = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else {}
    scopes = [
        dict(f.f_locals) for f in frames if f.f_globals is globals_ and f.f_locals is not globals_
    ]
    return globals_, _Names({cls.__name__: cls}, dict(vars(cls)), *scopes, module, globals_)


def _find(
    a: Any,
    outer: str | None,
    scopes: Callable[[], Any],
    seen: frozenset[tuple[int, bool]] = frozenset(),
) -> bool:
    """Finds `Static` at the top, in unions, `Annotated`, aliases; `outer`: the type looked into.

    `seen` holds the annotations on the way here, each with whether it stood nested: a
    recursive alias comes back to itself, and is not looked into twice at one level.

        ArrayTree = Union[Array, Iterable["ArrayTree"], Mapping[Any, "ArrayTree"]]  # chex
        type Tree = int | list[Tree]                                                 # PEP 695

    Its first return inside a container is still looked into (nested), so a `Static` at
    its top is refused there as anywhere else: `type T = tc.Static[int] | list[T]`.
    """
    origin = typing.get_origin(a)
    if isinstance(origin, _ALIASES):  # `Hyper[float]` of a generic alias: its value decides
        a = origin
    here = (id(a), outer is not None)
    if here in seen:  # the objects in `seen` are alive on the stack: ids are not reused
        return False
    seen |= {here}
    if isinstance(a, (*_ALIASES, str, typing.ForwardRef)):  # what it names decides
        try:
            if isinstance(a, _ALIASES):
                value = a.__value__  # a PEP 695 value is evaluated now, and may name the unknown
            else:
                text = a if isinstance(a, str) else a.__forward_arg__
                value = eval(text, *scopes())  # noqa: S307 - the class's own annotation
        except Exception as e:  # noqa: BLE001 - a NameError, a syntax error: name the field
            return _unresolved(f"{type(e).__name__}: {e}", outer)
        return _find(value, outer, scopes, seen)
    if origin is typing.Annotated:
        if any(m is STATIC_MARKER for m in a.__metadata__):
            if outer is not None:
                raise _Refused(_MSG_NESTED, outer)
            return True
        return _find(a.__origin__, outer, scopes, seen)
    if isinstance(a, type) and issubclass(a, _Undefined):
        return _unresolved(f"NameError: name {a.__name__!r} is not defined", outer)
    if origin is typing.Literal:
        return False
    if origin in _UNIONS:
        return any([_find(x, outer, scopes, seen) for x in typing.get_args(a)])  # every arm checked
    shown = origin or a
    inner = outer or f"{getattr(shown, '__name__', None) or repr(shown)}[...]"
    for arg in typing.get_args(a):
        for x in arg if isinstance(arg, list) else (arg,):  # Callable[[A, B], C]
            _find(x, inner, scopes, seen)
    return False


def _unresolved(error: str, outer: str | None) -> bool:
    # Inside `list[Later]`, where Static would be refused anyway, the field is dynamic.
    if outer is not None:
        return False
    raise _Refused(_MSG_UNRESOLVED, error)


_MSG_MUTABLE_DEFAULT: Final = """\
{cls}.{name} has a mutable default ({value}): one object would be shared by every
instance, and a change to it would show in all of them. Give the field a factory
that makes a new one per instance:

    {name}: ... = tc.field(default_factory=lambda: ...)

(A jax.Array default is fine as it is: JAX arrays are immutable.)"""


class _Shared(typing.NamedTuple):
    """Hides a `jax.Array` default (immutable: safe to share) from dataclasses' mutable check."""

    value: Any


def prepare(cls: type) -> Callable[[], None]:
    """Rewrites `cls`'s body for `dataclasses.dataclass`, one field at a time in declaration
    order (its kind, its options, its default), so the first mistake declared is the one
    reported; returns what to call after `dataclasses.dataclass`."""
    scopes = functools.cache(lambda: _scopes(cls))  # read from the frames at the first string only
    for name, annotation in inspect.get_annotations(cls).items():
        if is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, dataclasses.MISSING)
        specified = isinstance(value, dataclasses.Field) and STATIC in value.metadata
        try:
            is_static = _find(annotation, None, scopes)
        except _Refused as e:
            template, detail = e.args
            if (
                template is _MSG_NESTED or not specified
            ):  # else the field specifier declares the kind
                text = annotation if isinstance(annotation, str) else repr(annotation)
                msg = template.format(
                    cls=cls.__name__, name=name, text=text, outer=detail, error=detail
                )
                raise TypeError(msg) from None
            is_static = False
        if isinstance(value, dataclasses.Field):
            f: dataclasses.Field[Any] = value
            if is_static and not f.metadata.get(STATIC, False):
                # A copy: the same field() object may stand in another class, dynamic there.
                f = copy.copy(f)
                f.metadata = types.MappingProxyType({**f.metadata, STATIC: True})
                setattr(cls, name, f)
            # A static field takes every option of `field()` but `trainable=False` and `axes=`.
            if f.metadata.get(STATIC, False) and (
                AXES in f.metadata or f.metadata.get(TRAINABLE) is False
            ):
                option = "axes=..." if AXES in f.metadata else "trainable=False"
                why = _WHY_REFUSED[option]
                raise TypeError(
                    _MSG_STATIC_OPTION.format(cls=cls.__name__, name=name, option=option, why=why)
                )
        elif is_static:
            setattr(cls, name, static() if value is dataclasses.MISSING else static(default=value))
        # Its default, as the field now stands: static ones checked, jax.Array ones hidden.
        value = cls.__dict__.get(name, dataclasses.MISSING)
        field = value if isinstance(value, dataclasses.Field) else None
        default = field.default if field is not None else value
        if default is dataclasses.MISSING:
            continue
        if field is not None and field.metadata.get(STATIC, False):
            if CONVERTER not in field.metadata:  # else the converted value is checked, per instance
                checks.check_static(cls, name, default)
        elif isinstance(default, jax.Array) and not isinstance(default, jax.core.Tracer):
            field = dataclasses.field() if field is None else field  # as dataclasses makes one
            field.default = _Shared(default)
            setattr(cls, name, field)
        elif type(default).__hash__ is None:
            value = f"{type(default).__module__}.{type(default).__qualname__}".removeprefix(
                "builtins."
            )
            raise ValueError(
                _MSG_MUTABLE_DEFAULT.format(cls=cls.__name__, name=name, value=f"a {value}")
            )

    # After dataclasses.dataclass: the jax.Array defaults hidden from its check, given back.
    def restore() -> None:
        for f in vars(cls).get("__dataclass_fields__", {}).values():
            if isinstance(f.default, _Shared):
                f.default = f.default.value
                setattr(cls, f.name, f.default)

    return restore
