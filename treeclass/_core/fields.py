"""Field specifiers: `field()`, `static()` and the `Static[T]` annotation.

A treeclass field is a plain `dataclasses.Field`. Everything treeclass adds lives in
its read-only `metadata`, under the keys below, so `dataclasses.fields()` and every
tool that reads dataclass metadata (flax.serialization, orbax, jax's own
`register_dataclass`, which reads `metadata["static"]`) see the same thing we do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, TypedDict, TypeVar, Unpack, overload

__all__ = ["Static", "field", "static"]

_S = TypeVar("_S")
_T = TypeVar("_T")

STATIC: Final = "static"
CONVERTER: Final = "converter"
AXES: Final = "axes"
TRAINABLE: Final = "trainable"


class _StaticMarker:
    """The `Annotated` metadata that marks a field as static."""

    def __repr__(self) -> str:
        return "treeclass.STATIC"


STATIC_MARKER: Final = _StaticMarker()

Static = Annotated[_T, STATIC_MARKER]
"""Marks a field as static: `tau: tc.Static[float] = 20.0` equals `tau: float = tc.static(default=20.0)`.

A static value is part of the treedef, never traced: JAX compares it with `==` and
hashes it to find a compiled function, so it must be hashable and should compare by
value. Changing it recompiles.

**Arguments**

- `T`: the field's type. Type checkers see `Static[T]` as `T`.

**Returns**

`Annotated[T, ...]`, with the marker `@treeclass` looks for.

**Raises**

Nothing itself; `@treeclass` raises `TypeError` for a `Static[T]` field whose
`field()` has `axes=` or `converter=`, which only dynamic fields take.

**Example**

>>> class Neuron(tc.TreeClass):
...     v: jax.Array
...     tau: tc.Static[float] = 20.0
>>> [f.name for f in tc.fields(Neuron) if f.metadata["static"]]
['tau']
>>> jax.tree.structure(Neuron(jnp.zeros(2)))
PyTreeDef(CustomNode(Neuron[(20.0,)], [*]))
"""

_MSG_AXES: Final = (
    "field(axes=...) takes a tuple of logical axis names (str) or None, one per array "
    "dimension, e.g. field(axes=('batch', None)); got {axes!r}."
)


class _Options(TypedDict, total=False):
    """The options every overload of `field()` takes besides the default and converter."""

    static: bool
    trainable: bool
    init: bool
    repr: bool
    kw_only: bool
    metadata: Mapping[str, Any] | None
    axes: tuple[str | None, ...] | None


# The overloads mirror `dataclasses.field` in typeshed, so a type checker infers the
# field's type from `default`/`default_factory` and sees a required argument otherwise.
# With a converter, the field holds what the converter returns (`_T`) and the default
# is one of its inputs (`_S`): pyright reads the converter's parameter type as the
# `__init__` parameter's (`w: Array = field(converter=jnp.asarray)` takes a list);
# mypy does not, and keeps the annotation (docs/faq.md says what each does).
@overload
def field(*, default: _S, converter: Callable[[_S], _T], **options: Unpack[_Options]) -> _T: ...
@overload
def field(*, default_factory: Callable[[], _S], converter: Callable[[_S], _T], **options: Unpack[_Options]) -> _T: ...
@overload
def field(*, converter: Callable[[_S], _T], **options: Unpack[_Options]) -> _T: ...
@overload
def field(*, default: _T, converter: None = None, **options: Unpack[_Options]) -> _T: ...
@overload
def field(*, default_factory: Callable[[], _T], converter: None = None, **options: Unpack[_Options]) -> _T: ...
@overload
def field(*, converter: None = None, **options: Unpack[_Options]) -> Any: ...
def field(
    *,
    static: bool = False,
    trainable: bool = True,
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
    init: bool = True,
    repr: bool = True,  # noqa: A002
    kw_only: Any = dataclasses.MISSING,
    converter: Callable[[Any], Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    axes: tuple[str | None, ...] | None = None,
) -> Any:
    """Declares a treeclass field, like `dataclasses.field` with four additions.

    **Arguments**

    - `static`: if True the value goes into the treedef instead of being a pytree child.
    - `trainable`: False marks a dynamic field, and everything under it (arrays,
      containers, nested treeclasses), as state, not parameters: traced, vmapped,
      sharded, compared and checkpointed like any dynamic field, but never
      differentiated by `tc.grad` nor updated by `tc.apply_updates`
      (BatchNorm's running statistics, an EMA, a frozen encoder).
    - `default`, `default_factory`, `init`, `repr`, `kw_only`, `metadata`: as in
      `dataclasses.field`.
    - `converter`: a callable applied to the value at construction and in `replace()`,
      before `__post_init__`. Never applied when JAX rebuilds an instance.
    - `axes`: the logical axis names of a dynamic array field, one per dimension
      (`None` for an unnamed one), used by `treeclass.shardings()`.

    **Returns**

    A `dataclasses.Field` whose `metadata` holds `"static"` and `"trainable"` (False
    for static fields, which hold no leaves), and `"converter"` and `"axes"` when given.

    **Raises**

    `TypeError` if `axes` is not a tuple of `str | None` or is given on a static field,
    or if `converter` is not callable; when the class is defined, `TypeError` naming
    `Class.field` for `trainable=False` on a static field.

    **Example**

    >>> class Layer(tc.TreeClass):
    ...     w: jax.Array = tc.field(converter=jnp.asarray, axes=("in", "out"))
    ...     mean: jax.Array = tc.field(trainable=False, default_factory=lambda: jnp.zeros(2))
    ...     act: str = tc.field(static=True, default="relu")
    >>> layer = Layer([[1.0, 2.0]])
    >>> layer.w.shape, layer.act
    ((1, 2), 'relu')
    >>> [(f.name, f.metadata["static"], f.metadata["trainable"]) for f in tc.fields(Layer)]
    [('w', False, True), ('mean', False, False), ('act', True, False)]
    >>> tc.grad(lambda m: jnp.sum(m.w) + jnp.sum(m.mean))(layer).mean is None  # state
    True
    """
    # The annotation says Mapping; untyped callers pass anything.
    if metadata is not None and not isinstance(metadata, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        msg = f"field(metadata=...) takes a mapping (a dict) or None; got {metadata!r}."
        raise TypeError(msg)
    if default_factory is not dataclasses.MISSING and not callable(default_factory):
        msg = (
            f"field(default_factory=...) takes a zero-argument callable; got "
            f"{default_factory!r}. For a constant, use default=... instead."
        )
        raise TypeError(msg)
    meta: dict[str, Any] = dict(metadata or {})
    meta[STATIC] = bool(static)
    meta[TRAINABLE] = bool(trainable)  # checked against `static` by @treeclass, naming the field
    if converter is not None:
        if not callable(converter):
            msg = f"field(converter=...) must be callable; got {converter!r}."
            raise TypeError(msg)
        meta[CONVERTER] = converter
    if axes is not None:
        if static:
            msg = (
                "field(axes=...) names the axes of a dynamic array; a static field has "
                "none. Drop axes=, or make the field dynamic (static=False)."
            )
            raise TypeError(msg)
        # The annotation says tuple[str | None, ...]; untyped callers pass anything.
        if not isinstance(axes, tuple) or not all(a is None or isinstance(a, str) for a in axes):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(_MSG_AXES.format(axes=axes))
        meta[AXES] = axes
    return dataclasses.field(
        default=default,
        default_factory=default_factory,
        init=init,
        repr=repr,
        kw_only=kw_only,
        metadata=meta,
    )


class _StaticOptions(TypedDict, total=False):
    """The options every overload of `static()` takes besides the default."""

    init: bool
    repr: bool
    kw_only: bool
    metadata: Mapping[str, Any] | None


@overload
def static(default: _T, **options: Unpack[_StaticOptions]) -> _T: ...
@overload
def static(*, default_factory: Callable[[], _T], **options: Unpack[_StaticOptions]) -> _T: ...
@overload
def static(**options: Unpack[_StaticOptions]) -> Any: ...
def static(
    default: Any = dataclasses.MISSING,
    *,
    default_factory: Any = dataclasses.MISSING,
    init: bool = True,
    repr: bool = True,  # noqa: A002
    kw_only: Any = dataclasses.MISSING,
    metadata: Mapping[str, Any] | None = None,
) -> Any:
    """Declares a static field: shorthand for `field(static=True, ...)`.

    **Arguments**

    As `field()`, without `converter` and `axes`.

    **Returns**

    A `dataclasses.Field` with `metadata["static"] == True`.

    **Raises**

    `ValueError` if both `default` and `default_factory` are given (as
    `dataclasses.field`). A default that is an array or unhashable is refused with a
    `TypeError` naming the field when `@treeclass` decorates the class.

    **Example**

    >>> class Neuron(tc.TreeClass):
    ...     v: jax.Array
    ...     tau: float = tc.static(default=20.0)
    >>> leaves, treedef = jax.tree.flatten(Neuron(jnp.zeros(2)))
    >>> len(leaves), treedef.unflatten(leaves).tau
    (1, 20.0)
    """
    # No overload takes both `default` and `default_factory`; the implementation does,
    # and uses whichever is set.
    return field(  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue]
        static=True,
        default=default,
        default_factory=default_factory,
        init=init,
        repr=repr,
        kw_only=kw_only,
        metadata=metadata,
    )
