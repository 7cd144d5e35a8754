"""Which field of the arguments JAX could not trace, or could not trace as a concrete
value: the errors that name it, found from the exception's type and the arguments'
leaves, never from JAX's wording and never by running the function again.

JAX rejects a string or a function among a traced argument's leaves with a pathless
`TypeError` before the function runs. `untraceable_field()` finds the first leaf that
`jax.typeof` rejects and builds the error users need instead: `Class.field`, the value
found, and the two fixes (make the field static, or store an array). `tc.jit` asks for
it on a `TypeError` raised before its body ran; `tc.grad` asks before it
differentiates, as its split of the model leaves such leaves where JAX would not look.

A Python int or bool in a dynamic field is traced as an array too, so a body that needs
its value (a shape, a loop length, an `if`) fails with JAX's ConcretizationTypeError or
a shape TypeError that does not say which field. While the trace is still open,
`note_held()` records which arguments' tracers the frame that raised holds (the values
the failing operation was given); `field_error()` names the fields among them that hold
a Python int or bool, with the fix (`tc.Static[int]`). Where that frame holds none (a
value computed from the field), a ConcretizationTypeError names every such field, as
candidates.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from typing import Any, Final

import jax
from jax.tree_util import DictKey, SequenceKey

from treeclass._core.layout import instance_layout, layout_of
from treeclass._core.show import describe, short_repr
from treeclass._core.walk import KeyPath, path_str, walk

__all__ = [
    "field_error",
    "is_traceable",
    "labelled_arguments",
    "note_held",
    "root_name",
    "untraceable_field",
]

_MSG_UNTRACEABLE_LEAF: Final = """\
{at} holds {what}, which JAX cannot trace (argument {label!r}).

JAX traces arrays and Python numbers. Pass an array (jnp.asarray(...)) if it is data;
keep configuration in a static field of a treeclass (tc.Static[{type}])."""

_MSG_UNTRACEABLE_FIELD: Final = """\
{field} is a dynamic field holding {what}, which JAX cannot trace ({where}).

Dynamic fields are traced as arrays. If the value is configuration, make it static:

    {name}: tc.Static[{type}]

or pass an array (jnp.asarray(...)) if it is data."""


def is_traceable(leaf: Any) -> bool:
    """True for the leaves JAX traces (arrays, Python and numpy numbers), as
    `jax.typeof` decides on the leaf alone."""
    if isinstance(leaf, jax.Array | float | complex):  # the common leaves, without asking
        return True
    try:
        jax.typeof(leaf)
    except (TypeError, ValueError, OverflowError):  # a str, a function; an int past int64
        return False
    return True


def _annotation(owner: type, name: str) -> str:
    """The annotation of the field `owner.name`, as written (`tuple[str, ...]`)."""
    layout = layout_of(owner)
    hint: Any = next((f.type for f in layout.fields if f.name == name), "Any") if layout else "Any"
    if isinstance(hint, str):
        return hint
    return hint.__name__ if isinstance(hint, type) else repr(hint).replace("typing.", "")


def root_name(label: str, value: object) -> str:
    """How a message names an argument at the root of a path: its class when it is a
    treeclass instance (`MLP.layers[0].w`), else its parameter name (`x`, `params['w']`)."""
    return type(value).__name__ if instance_layout(value) is not None else label


def labelled_arguments(
    fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], static: Collection[str | int] = ()
) -> list[tuple[str, Any, KeyPath]]:
    """The traced arguments, labelled by parameter name (`args[i]` past the named
    positional parameters, e.g. into `*rest`): those neither named nor numbered in
    `static`. Each comes with its key path in the pytree `(args, kwargs)`."""
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    try:
        params = inspect.signature(fun).parameters.values()
        names = [p.name for p in params if p.kind in positional]
    except (TypeError, ValueError):  # a builtin without a signature: number the arguments
        names = []
    out: list[tuple[str, Any, KeyPath]] = []
    for i, value in enumerate(args):
        name = names[i] if i < len(names) else f"args[{i}]"
        if i not in static and name not in static:
            out.append((name, value, (SequenceKey(0), SequenceKey(i))))
    for name, value in kwargs.items():
        index = names.index(name) if name in names else None
        if name not in static and index not in static:
            out.append((name, value, (SequenceKey(1), DictKey(name))))
    return out


def untraceable_field(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    static: Collection[str | int] = (),
) -> TypeError | None:
    """The error naming `Class.field` for the first leaf of a traced argument that JAX
    cannot trace (or naming its path, outside every treeclass field); None if there is
    none.

    **Arguments**

    - `fun`, `args`, `kwargs`: the function and the call's arguments; `fun`'s
      signature names the arguments in the message.
    - `static`: names and positions of static arguments (`static_argnames`,
      `static_argnums`): never traced, so never blamed.

    **Returns**

    A `TypeError` saying which field holds what, where, and the two fixes (make it
    static, or store an array); None if every leaf can be traced.

    **Example**

    >>> from treeclass._jit.untraceable import untraceable_field
    >>> class Cfg(tc.TreeClass):
    ...     name: str
    >>> print(untraceable_field(lambda x, cfg: x, (1.0, Cfg("a")), {}))
    Cfg.name is a dynamic field holding a str ('a'), which JAX cannot trace (argument 'cfg').
    ...
    """
    for label, value, _ in labelled_arguments(fun, args, kwargs, static):
        for v in walk(value):
            if v.kind != "leaf" or is_traceable(v.value):
                continue
            at = path_str(root_name(label, value), v.path)
            kind = "Callable[..., Any]" if callable(v.value) else type(v.value).__name__
            what = f"{describe(v.value)} ({short_repr(v.value)})"
            if v.owner is None:
                return TypeError(_MSG_UNTRACEABLE_LEAF.format(at=at, what=what, label=label, type=kind))
            where = f"argument {label!r}" if at == v.field else f"{at}, argument {label!r}"
            hint = _annotation(v.owner, str(v.name))  # the fix keeps what the user wrote
            msg = _MSG_UNTRACEABLE_FIELD.format(field=v.field, what=what, where=where, name=v.name, type=hint)
            return TypeError(msg)
    return None


_MSG_CONCRETE: Final = """\
{fields} a dynamic field holding a Python {kinds}, which tc.jit traces as an array: the
function needed {whose} while tracing (a shape, a loop length, an `if`), and a traced
value has none. If it is configuration, make it static (each value compiles once):

{fixes}

JAX's error, above, says where the value was needed."""

# The errors JAX raises for a traced value whose concrete value was needed.
_NEEDS_VALUE: Final = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerIntegerConversionError,
    jax.errors.TracerArrayConversionError,
)
_HELD: Final = "__tc_held__"


def note_held(error: BaseException, tree: Any) -> None:
    """Marks `error`, raised by a function's body while JAX traced it with the tracers
    in `tree` (its arguments), with the positions among `tree`'s leaves of the tracers
    that the frame which raised it holds: the values the failing operation was given.
    It reads the traceback, not the message, and runs nothing again."""
    if hasattr(error, _HELD):  # already marked by an inner tc.jit
        return
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    tracers = {id(x): i for i, x in enumerate(jax.tree.leaves(tree)) if isinstance(x, jax.core.Tracer)}
    local = tb.tb_frame.f_locals.values() if tb is not None else ()
    values = [y for x in local for y in (x if type(x) in (tuple, list) else (x,))]
    setattr(error, _HELD, frozenset(tracers[id(y)] for y in values if id(y) in tracers))


def field_error(
    error: TypeError, fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], static: Collection[str | int]
) -> TypeError | None:
    """The error naming the field behind `error`, a `TypeError` from calling `tc.jit`'s
    `jax.jit` function with `args` and `kwargs`; None when no field is to blame. Raised
    before the body ran (unmarked): a leaf JAX cannot trace. Raised by the body
    (marked by `note_held`): a Python int or bool whose value it needed."""
    if hasattr(error, _HELD):
        return _concrete_field(error, fun, args, kwargs, static)
    return untraceable_field(fun, args, kwargs, static)


def _concrete_field(
    error: BaseException,
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    static: Collection[str | int] = (),
) -> TypeError | None:
    """The error naming the dynamic fields that hold a Python int or bool the body
    needed as a concrete value, for a `TypeError` the body raised while `tc.jit` traced
    it (marked by `note_held`); None when no such field caused it.

    Named are the fields whose tracer the frame that raised holds; when it holds none of
    the arguments' tracers (a value computed from them), a ConcretizationTypeError names
    every such field, as candidates."""
    held: frozenset[int] = getattr(error, _HELD, frozenset())
    if not held and not isinstance(error, _NEEDS_VALUE):
        return None
    index = {path: i for i, (path, _) in enumerate(jax.tree_util.tree_flatten_with_path((args, kwargs))[0])}
    found: dict[int, tuple[str, str, str]] = {}  # flat index -> (the leaf's path, its fix, its type)
    for label, value, root in labelled_arguments(fun, args, kwargs, static):
        for v in walk(value):
            if v.kind == "leaf" and v.owner is not None and type(v.value) in (int, bool):
                kind = type(v.value).__name__
                at = f"{path_str(root_name(label, value), v.path)} ({v.value!r})"
                fix = f"    {v.name}: tc.Static[{kind}]   # in {v.owner.__name__}"
                found[index[(*root, *v.path)]] = (at, fix, kind)
    needed = [found[i] for i in found if i in held] if held else list(found.values())
    if not needed:
        return None
    one = len(needed) == 1
    fields = ", ".join(at for at, _, _ in needed) + (" is" if one else " are each")
    whose = ("its value" if one else "their values") if held else f"a value computed from {'it' if one else 'one of them'}"
    kinds = " or ".join(sorted({kind for _, _, kind in needed}))
    fixes = "\n".join(dict.fromkeys(fix for _, fix, _ in needed))
    return TypeError(_MSG_CONCRETE.format(fields=fields, kinds=kinds, whose=whose, fixes=fixes))
