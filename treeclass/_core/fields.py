"""Field specifiers: `field()`, `static()`, `Static[T]`. A field is a plain `dataclasses.Field`
whose `metadata` holds what treeclass adds, so every tool reading it sees what we do."""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, TypedDict, TypeVar, Unpack, overload

_S = TypeVar("_S")
_T = TypeVar("_T")

STATIC: Final = "static"
CONVERTER: Final = "converter"
AXES: Final = "axes"
TRAINABLE: Final = "trainable"


class Sentinel:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


STATIC_MARKER: Final = Sentinel("treeclass.STATIC")

Static = Annotated[_T, STATIC_MARKER]
"""Marks a field as static: `tau: tc.Static[float] = 20.0` equals
`tau: float = tc.static(default=20.0)`.

A static value is part of the treedef, never traced: it must be hashable and should
compare by value. Changing it recompiles.

**Arguments**

- `T`: the field's type. Type checkers see `Static[T]` as `T`.

**Returns**

`Annotated[T, ...]`, with the marker `@treeclass` looks for.

**Raises**

`@treeclass` raises `TypeError` for a `Static[T]` field with `axes=` or `trainable=False`,
and for a `Static` nested inside another type (`list[Static[int]]`), naming the field.

**Example**

>>> class Neuron(tc.TreeClass):
...     v: jax.Array
...     tau: tc.Static[float] = 20.0
>>> jax.tree.structure(Neuron(jnp.zeros(2)))
PyTreeDef(CustomNode(Neuron[(20.0,)], [*]))
"""

_MSG_AXES: Final = (
    "field(axes=...) takes a tuple of logical axis names (str) or None, one per array "
    "dimension, e.g. field(axes=('batch', None)); got {axes!r}."
)


class _StaticOptions(TypedDict, total=False):
    init: bool
    repr: bool
    kw_only: bool
    metadata: Mapping[str, Any] | None


class _Options(_StaticOptions, total=False):
    static: bool
    trainable: bool
    axes: tuple[str | None, ...] | None


# The overloads mirror typeshed's `dataclasses.field`. With a converter the field holds
# what it returns (`_T`) and the default is one of its inputs (`_S`) (docs/faq.md).
@overload
def field(*, default: _S, converter: Callable[[_S], _T], **options: Unpack[_Options]) -> _T: ...
@overload
def field(
    *, default_factory: Callable[[], _S], converter: Callable[[_S], _T], **options: Unpack[_Options]
) -> _T: ...
@overload
def field(*, converter: Callable[[_S], _T], **options: Unpack[_Options]) -> _T: ...
@overload
def field(*, default: _T, converter: None = None, **options: Unpack[_Options]) -> _T: ...
@overload
def field(
    *, default_factory: Callable[[], _T], converter: None = None, **options: Unpack[_Options]
) -> _T: ...
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
    - `trainable`: False marks a dynamic field's leaves as state: traced, but never
      differentiated by `tc.grad` nor updated by `tc.apply_updates` (BatchNorm statistics).
    - `default`, `default_factory`, `init`, `repr`, `kw_only`, `metadata`: as `dataclasses.field`.
    - `converter`: applied at construction and `replace()`, before `__post_init__`; never by JAX.
    - `axes`: a dynamic array's axis names (or None), one per dimension, for `tc.shardings()`.

    **Returns**

    A `dataclasses.Field` whose `metadata` holds `"static"`, `"trainable"`, and
    `"converter"` and `"axes"` when given.

    **Raises**

    `TypeError` for bad `axes`, `metadata`, `default_factory` or `converter`; at class
    definition, naming the field, for `axes` or `trainable=False` on a static field.

    **Example**

    >>> class Layer(tc.TreeClass):
    ...     w: jax.Array = tc.field(converter=jnp.asarray, axes=("in", "out"))
    ...     mean: jax.Array = tc.field(trainable=False, default_factory=lambda: jnp.zeros(2))
    ...     act: str = tc.field(static=True, default="relu")
    >>> layer = Layer([[1.0, 2.0]])
    >>> [(f.name, f.metadata["static"], f.metadata["trainable"]) for f in tc.fields(Layer)]
    [('w', False, True), ('mean', False, False), ('act', True, False)]
    >>> tc.grad(lambda m: jnp.sum(m.w) + jnp.sum(m.mean))(layer).mean is None  # state
    True
    """
    # Untyped callers pass anything.
    if metadata is not None and not isinstance(metadata, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        msg = f"field(metadata=...) takes a mapping (a dict) or None; got {metadata!r}."
        raise TypeError(msg)
    if default_factory is not dataclasses.MISSING and not callable(default_factory):
        msg = (
            f"field(default_factory=...) takes a zero-argument callable; got {default_factory!r}."
            " For a constant, use default=... instead."
        )
        raise TypeError(msg)
    # `trainable` is checked against `static` by @treeclass, naming the field.
    meta: dict[str, Any] = {**(metadata or {}), STATIC: bool(static), TRAINABLE: bool(trainable)}
    if converter is not None:
        if not callable(converter):
            msg = f"field(converter=...) must be callable; got {converter!r}."
            raise TypeError(msg)
        meta[CONVERTER] = converter
    if axes is not None:
        # Untyped callers pass anything; @treeclass refuses axes on a static field, naming it.
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


@overload
def static(
    default: _S, *, converter: Callable[[_S], _T], **options: Unpack[_StaticOptions]
) -> _T: ...
@overload
def static(
    *,
    default_factory: Callable[[], _S],
    converter: Callable[[_S], _T],
    **options: Unpack[_StaticOptions],
) -> _T: ...
@overload
def static(*, converter: Callable[[_S], _T], **options: Unpack[_StaticOptions]) -> _T: ...
@overload
def static(default: _T, *, converter: None = None, **options: Unpack[_StaticOptions]) -> _T: ...
@overload
def static(
    *, default_factory: Callable[[], _T], converter: None = None, **options: Unpack[_StaticOptions]
) -> _T: ...
@overload
def static(*, converter: None = None, **options: Unpack[_StaticOptions]) -> Any: ...
def static(
    default: Any = dataclasses.MISSING,
    *,
    default_factory: Any = dataclasses.MISSING,
    init: bool = True,
    repr: bool = True,  # noqa: A002
    kw_only: Any = dataclasses.MISSING,
    converter: Callable[[Any], Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    **refused: Any,
) -> Any:
    """Declares a static field: shorthand for `field(static=True, ...)`.

    **Arguments**

    As `field()`, without `axes` and `trainable`. A `converter`'s result is checked as a
    static value.

    **Returns**

    A `dataclasses.Field` with `metadata["static"] == True`.

    **Raises**

    `ValueError` for both `default` and `default_factory`; at class definition, naming the
    field, `TypeError` for an array or unhashable default, and for `axes` or `trainable`.

    **Example**

    >>> class Neuron(tc.TreeClass):
    ...     v: jax.Array
    ...     tau: float = tc.static(default=20.0)
    ...     shape: tuple[int, ...] = tc.static(default=(2,), converter=tuple)
    >>> leaves, treedef = jax.tree.flatten(Neuron(jnp.zeros(2)))
    >>> len(leaves), treedef.unflatten(leaves).tau, Neuron(jnp.zeros(2), shape=[2, 3]).shape
    (1, 20.0, (2, 3))
    """
    # Type checkers flag `axes=`, `trainable=`; @treeclass refuses them with field()'s message.
    unknown = sorted(refused.keys() - {"axes", "trainable"})
    if unknown:
        msg = f"static() got an unexpected keyword argument {unknown[0]!r}"
        raise TypeError(msg)
    # No overload takes both `default` and `default_factory`; the implementation does.
    return field(  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue]
        static=True,
        default=default,
        default_factory=default_factory,
        init=init,
        repr=repr,
        kw_only=kw_only,
        converter=converter,
        metadata=metadata,
        **refused,
    )
