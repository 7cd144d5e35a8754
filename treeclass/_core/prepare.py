"""The class body before `dataclasses` sees it: `Static[T]` annotations (also aliased,
also as strings) become static fields, and defaults are checked, naming `Class.field`."""

from __future__ import annotations

import ast
import collections
import contextlib
import dataclasses
import inspect
import re
import sys
import traceback
import typing
from collections.abc import Callable
from typing import Any, Final

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core

from treeclass._core import checks
from treeclass._core.fields import STATIC, STATIC_MARKER, TRAINABLE, static

MSG_STATIC_NOT_TRAINABLE: Final = """\
{cls}.{name} is static and declared trainable=False. trainable=False marks the leaves
of a dynamic field as state (traced, but never differentiated or optimised); a static
value is never traced at all. Drop trainable=False, or make the field dynamic:

    {name}: ... = tc.field(trainable=False)"""


_MSG_UNRESOLVED: Final = """\
{cls}.{name} is annotated {text!r}, which treeclass cannot resolve when the class
is created, so it cannot tell whether the field is static (a tc.Static alias would
make it static): {error}.

Define or import the name before the class, or declare the field's kind with a field
specifier, which then decides:

    {name}: {text} = tc.field()      # dynamic
    {name}: {text} = tc.static()     # static"""


def _scopes(cls: type) -> tuple[dict[str, Any], collections.ChainMap[str, Any]]:
    """The globals and locals the string annotations of `cls` were written in: those of
    the code running the class statement, then the class, its namespace, the locals of
    every frame on the stack in those globals (innermost first), and the module's."""
    stack = traceback.walk_stack(sys._getframe(1))  # where the class statement runs, or above
    core = "treeclass._core"
    frames = [f for f, _ in stack if not str(f.f_globals.get("__name__", "")).startswith(core)]
    ours = [f for f in frames if f.f_globals.get("__name__") == cls.__module__] or frames[:1]
    globals_ = ours[0].f_globals if ours else {}
    module = sys.modules.get(cls.__module__)
    scopes = [dict(f.f_locals) for f in frames if f.f_globals is globals_ and f.f_locals is not globals_]
    return globals_, collections.ChainMap({cls.__name__: cls}, dict(vars(cls)), *scopes, vars(module) if module else {})


def _evaluate(text: str, cls: type, name: str, scopes: tuple[dict[str, Any], Any]) -> Any:
    """The annotation `text` evaluated, else its head (`tc.Static` of `tc.Static[Later]`),
    which decides whether it is `Static`; else raises naming `Class.field`."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError as e:
        raise TypeError(_MSG_UNRESOLVED.format(cls=cls.__name__, name=name, text=text, error=e.msg)) from None
    if not isinstance(node, ast.Subscript | ast.Name | ast.Attribute):
        return None  # a union, a literal: not Static at the top, whatever its parts
    error: Exception | None = None
    for expr in (node, node.value) if isinstance(node, ast.Subscript) else (node,):
        try:
            value = eval(compile(ast.Expression(expr), "<annotation>", "eval"), *scopes)  # noqa: S307
        except Exception as e:  # noqa: BLE001 - any failure: try the head, then name the field
            error = error or e
            continue
        if expr is node or value is not typing.Annotated:  # Annotated[T, m]: m decides
            return value
    detail = f"{type(error).__name__}: {error}"
    raise TypeError(_MSG_UNRESOLVED.format(cls=cls.__name__, name=name, text=text, error=detail))


def _is_static_annotation(annotation: Any) -> bool:
    annotated = typing.get_origin(annotation) is typing.Annotated
    return annotated and any(m is STATIC_MARKER for m in annotation.__metadata__)


def _mark_static_annotations(cls: type) -> None:
    annotations = inspect.get_annotations(cls)
    scopes = _scopes(cls) if any(isinstance(a, str) for a in annotations.values()) else None
    for name, annotation in annotations.items():
        value = cls.__dict__.get(name, dataclasses.MISSING)
        if isinstance(annotation, str) and scopes is not None:
            if isinstance(value, dataclasses.Field) and STATIC in value.metadata:
                # A field specifier declares the kind; an alias it cannot see is no matter.
                with contextlib.suppress(TypeError):
                    annotation = _evaluate(annotation, cls, name, scopes)
            else:
                annotation = _evaluate(annotation, cls, name, scopes)
        if not _is_static_annotation(annotation):
            continue
        if isinstance(value, dataclasses.Field):
            if not value.metadata.get(STATIC, False):
                if "axes" in value.metadata or "converter" in value.metadata:
                    msg = f"{cls.__name__}.{name} is annotated Static[...] but its field() "
                    msg += "has axes= or converter=, which only dynamic fields take."
                    raise TypeError(msg)
                if value.metadata.get(TRAINABLE) is False:
                    raise TypeError(MSG_STATIC_NOT_TRAINABLE.format(cls=cls.__name__, name=name))
                # default and default_factory pass through (one is MISSING): no overload.
                replacement = static(  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue]
                    default=value.default,
                    default_factory=value.default_factory,
                    init=value.init,
                    repr=value.repr,
                    kw_only=value.kw_only,
                    metadata=value.metadata,
                )
                setattr(cls, name, replacement)
        elif value is dataclasses.MISSING:
            setattr(cls, name, static())
        else:
            setattr(cls, name, static(default=value))


_MSG_MUTABLE_DEFAULT: Final = """\
{cls}.{name} has a mutable default ({value}): one object would be shared by every
instance, and a change to it would show in all of them. Give the field a factory
that makes a new one per instance:

    {name}: ... = tc.field(default_factory=lambda: ...)

(A jax.Array default is fine as it is: JAX arrays are immutable.)"""

_CLASSVAR: Final = re.compile(r"^\s*(?:\w+\.)?ClassVar\b")


class _Shared(typing.NamedTuple):
    """Hides a `jax.Array` default (immutable: safe to share) from dataclasses' mutable check."""

    value: Any


def _is_classvar(annotation: object) -> bool:
    if isinstance(annotation, str):
        return bool(_CLASSVAR.match(annotation))
    return annotation is typing.ClassVar or typing.get_origin(annotation) is typing.ClassVar


def _check_defaults(cls: type) -> Callable[[], None]:
    """Checks static defaults as static values, refuses mutable dynamic ones naming the
    field, hides `jax.Array` ones; returns what puts the arrays back afterwards."""
    for name, annotation in inspect.get_annotations(cls).items():
        value = cls.__dict__.get(name, dataclasses.MISSING)
        field = value if isinstance(value, dataclasses.Field) else None
        default = field.default if field is not None else value
        if default is dataclasses.MISSING or _is_classvar(annotation):
            continue
        if field is not None and field.metadata.get(STATIC, False):
            checks.check_static(cls, name, default)
        elif isinstance(default, jax.Array) and not isinstance(default, jax.core.Tracer):
            if field is None:
                setattr(cls, name, _Shared(default))
            else:
                field.default = _Shared(default)
        elif type(default).__hash__ is None:
            value = f"{type(default).__module__}.{type(default).__qualname__}".removeprefix("builtins.")
            raise ValueError(_MSG_MUTABLE_DEFAULT.format(cls=cls.__name__, name=name, value=f"a {value}"))

    def restore() -> None:
        for f in vars(cls).get("__dataclass_fields__", {}).values():
            if isinstance(f.default, _Shared):
                f.default = f.default.value
                setattr(cls, f.name, f.default)

    return restore


def prepare(cls: type) -> Callable[[], None]:
    """Rewrites `cls`'s body for `dataclasses.dataclass`; returns what to call after it."""
    _mark_static_annotations(cls)
    return _check_defaults(cls)
