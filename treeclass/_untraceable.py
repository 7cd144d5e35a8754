"""Which field of the arguments JAX could not trace: the error that names it.

JAX rejects a string or a function among a traced argument's leaves with an error that
gives a path at best ("Error interpreting argument to <fn> as an abstract array ... at
path x.name"). When the leaf sits in a treeclass field, `untraceable_field_error()`
builds the error users need instead: `Class.field`, the value found, and the two fixes
(make the field static, or store an array). `tc.jit` and `tc.grad` share it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from typing import Any, Final

import jax

from treeclass._repr import short_repr
from treeclass._walk import is_array, walk

__all__ = ["static_args", "untraceable_field_error"]

_MSG_UNTRACEABLE_FIELD: Final = """\
{field} is a dynamic field holding {what}, which JAX cannot trace (argument path: {path}).

Dynamic fields are traced as arrays. If the value is configuration, make it static:

    {name}: {type} = tc.static(...)

or pass an array (jnp.asarray(...)) if it is data."""

# JAX's words when an argument's leaf is not an array (jax.jit: "Error interpreting
# argument to <fn> as an abstract array ... at path x.name"; jax.grad and vmap:
# "Argument 'oops' of type <class 'str'> is not a valid JAX type"). Only these are
# rewritten: any other TypeError is the user's own and must surface unchanged.
_ARGUMENT_ERRORS: Final = ("Error interpreting argument", "is not a valid JAX type")


def _is_traceable(leaf: Any) -> bool:
    # Python numbers become weakly typed arrays; `__jax_array__` is JAX's protocol for
    # array-likes. (None is no leaf: walk() meets it as an empty node.)
    python_number = isinstance(leaf, bool | int | float | complex)
    return python_number or is_array(leaf) or hasattr(leaf, "__jax_array__")


def _labelled(
    fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], static: Collection[str | int]
) -> list[tuple[str, Any]]:
    """The traced arguments, labelled by parameter name (`args[i]` past the named
    positional parameters, e.g. into `*rest`): those neither named nor numbered in
    `static`."""
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    try:
        params = inspect.signature(fun).parameters.values()
        names = [p.name for p in params if p.kind in positional]
    except (TypeError, ValueError):  # a builtin without a signature: number the arguments
        names = []
    out: list[tuple[str, Any]] = []
    for i, value in enumerate(args):
        name = names[i] if i < len(names) else f"args[{i}]"
        if i not in static and name not in static:
            out.append((name, value))
    for name, value in kwargs.items():
        index = names.index(name) if name in names else None
        if name not in static and index not in static:
            out.append((name, value))
    return out


def untraceable_field_error(
    error: BaseException,
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    static: Collection[str | int] = (),
) -> TypeError | None:
    """The error naming `Class.field` for JAX's "not a valid JAX type" `error`, when a
    dynamic treeclass field in a traced argument caused it; None otherwise.

    Shared by every transform that traces treeclass arguments (`tc.jit`, `tc.grad`):
    call it in an `except TypeError as error:` around the transform, and
    `raise found from error` when it returns one, else re-raise `error`.

    **Arguments**

    - `error`: what the transform raised. Only JAX's argument-interpretation errors
      are considered; any other error gives None (it is the user's own).
    - `fun`, `args`, `kwargs`: the function and the call's arguments; `fun`'s
      signature names the arguments in the message.
    - `static`: names and positions of static arguments (`static_argnames`,
      `static_argnums`): never traced, so never blamed.

    **Returns**

    A `TypeError` saying which field holds what, at which argument path, and the two
    fixes (make it static, or store an array); None if no such field is found.

    **Example**

    >>> from treeclass._untraceable import untraceable_field_error
    >>> @tc.treeclass
    ... class Cfg:
    ...     name: str
    >>> f = lambda cfg: cfg
    >>> try:
    ...     jax.jit(f)(Cfg("a"))
    ... except TypeError as error:
    ...     print(untraceable_field_error(error, f, (Cfg("a"),), {}))
    Cfg.name is a dynamic field holding a str ('a'), which JAX cannot trace (argument path: cfg.name).
    ...
    """
    if not isinstance(error, TypeError) or not any(m in str(error) for m in _ARGUMENT_ERRORS):
        return None
    for label, value in _labelled(fun, args, kwargs, static):
        for v in walk(value):
            if v.kind == "leaf" and v.owner is not None and not _is_traceable(v.value):
                kind = type(v.value).__name__
                msg = _MSG_UNTRACEABLE_FIELD.format(
                    field=v.field,
                    name=v.name,
                    what=f"a {kind} ({short_repr(v.value)})",
                    path=label + jax.tree_util.keystr(v.path),
                    type=kind,
                )
                return TypeError(msg)
    return None


def static_args(jit_kwargs: dict[str, Any]) -> frozenset[str | int]:
    """The names and positions that `static_argnames` / `static_argnums` make static."""
    found: set[str | int] = set()
    for option in ("static_argnames", "static_argnums"):
        value: Any = jit_kwargs.get(option, ())
        found.update((value,) if isinstance(value, str | int) else value)
    return frozenset(found)
