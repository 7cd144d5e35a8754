"""The errors naming the field of the arguments that JAX could not trace, or could not
trace as a concrete value. The field is found from the exception's type and the
arguments' leaves: never from JAX's wording, never by running the function again.

- A leaf `jax.typeof` rejects (a string, a function) makes JAX raise a pathless
  `TypeError` before the body runs: `untraceable_field()` names it and the two fixes
  (make the field static, or store an array). `tc.grad` asks before it differentiates.
- A Python int or bool in a dynamic field is traced as an array, so a body needing its
  value (a shape, a loop length, an `if`) fails: `note_held()` records, while the trace
  is open, which arguments' tracers the raising frame holds, and `field_error()` names
  the int or bool fields among them, with the fix (`tc.Static[int]`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from typing import Any, Final

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core
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


# A static value is hashed: the hashable form of a list, dict or set annotation.
_HASHABLE: Final = {
    "list": "tuple[{}, ...]",
    "set": "frozenset[{}]",
    "dict": "tuple[tuple[{}], ...]",
}


def _annotation(owner: type, name: str) -> str:
    """The annotation of the field `owner.name`, as written (`tuple[str, ...]`), or
    its hashable form for a list, dict or set (`dict[str, str]` -> `tuple[tuple[str,
    str], ...]`), which a static field can hold."""
    layout = layout_of(owner)
    found: Any = next((f.type for f in layout.fields if f.name == name), "Any") if layout else "Any"
    hint: str = found if isinstance(found, str) else repr(found).replace("typing.", "")
    if isinstance(found, type):
        hint = found.__name__
    base, _, args = hint.partition("[")
    if base in _HASHABLE and (not args or args.endswith("]")):  # not in a union
        return _HASHABLE[base].format(args[:-1] or ("Any, Any" if base == "dict" else "Any"))
    return hint


def root_name(label: str, value: object) -> str:
    """How a message names an argument at the root of a path: its class when it is a
    treeclass instance (`MLP.layers[0].w`), else its parameter name (`x`, `params['w']`)."""
    return type(value).__name__ if instance_layout(value) is not None else label


def labelled_arguments(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    static: Collection[str | int] = (),
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
    """The `TypeError` naming `Class.field` (or the path, outside every treeclass field)
    for the first leaf of a traced argument that JAX cannot trace, with the two fixes;
    None if there is none. `fun`'s signature names the arguments; `static` holds the
    names and positions of static arguments, never traced, so never blamed.

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
                return TypeError(
                    _MSG_UNTRACEABLE_LEAF.format(at=at, what=what, label=label, type=kind)
                )
            where = f"argument {label!r}" if at == v.field else f"{at}, argument {label!r}"
            hint = _annotation(v.owner, str(v.name))  # the fix keeps what the user wrote
            msg = _MSG_UNTRACEABLE_FIELD.format(
                field=v.field, what=what, where=where, name=v.name, type=hint
            )
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
_UP: Final = "__tc_up__"


def note_held(error: BaseException, tree: Any) -> None:
    """Marks `error`, raised by a function's body while JAX traced it with the tracers
    in `tree` (its arguments), with the key paths in `tree` of the tracers that the frame
    which raised it holds: the values the failing operation was given (none when a plain
    `TypeError` was raised outside JAX's code: the body's own error). It reads the
    traceback, not the message, and runs nothing again. (Each tc.jit marks it anew: an
    inner one's paths are into its own arguments.)"""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    # A plain TypeError raised outside JAX's code is the body's own: no value to blame.
    module = tb.tb_frame.f_globals.get("__name__", "") if tb is not None else ""
    if not isinstance(error, _NEEDS_VALUE) and module.partition(".")[0] not in ("jax", "jaxlib"):
        tb = None
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    tracers = {id(x): path for path, x in flat if isinstance(x, jax.core.Tracer)}
    local = tb.tb_frame.f_locals.values() if tb is not None else ()
    values = [y for x in local for y in (x if type(x) in (tuple, list) else (x,))]
    # From a tc.jit called inside this trace: the values it was given that the raising
    # frame held (its own tracers are not ours).
    values = getattr(error, _UP, values)
    setattr(error, _HELD, {tracers[id(y)] for y in values if id(y) in tracers})


def _pass_up(error: BaseException, tree: Any) -> None:
    """Leaves on `error`, which no field of `tree` (this tc.jit's arguments) explains,
    the arguments' values the raising frame held, for a tc.jit tracing this call."""
    held: set[KeyPath] = getattr(error, _HELD, set())
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    setattr(error, _UP, [x for path, x in flat if path in held])


def field_error(
    error: TypeError,
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    static: Collection[str | int],
) -> TypeError | None:
    """The error naming the field behind `error`, a `TypeError` from calling `tc.jit`'s
    `jax.jit` function with `args` and `kwargs`; None when no field is to blame.

    Raised before the body ran (not marked by `note_held`): the first leaf JAX cannot
    trace. Raised by the body: the dynamic fields holding a Python int or bool whose
    tracer the raising frame holds; if it holds none of the arguments' tracers (a value
    computed from them), a ConcretizationTypeError names every such field, as candidates."""
    if not hasattr(error, _HELD):
        return untraceable_field(fun, args, kwargs, static)
    held: set[KeyPath] = getattr(error, _HELD)
    _pass_up(error, (args, kwargs))
    if not held and not isinstance(error, _NEEDS_VALUE):
        return None
    found: list[tuple[str, str, str]] = []  # (the leaf's path, its fix, its type)
    for label, value, root in labelled_arguments(fun, args, kwargs, static):
        for v in walk(value):
            owner, kind = v.owner, type(v.value).__name__
            if v.kind != "leaf" or owner is None or type(v.value) not in (int, bool):
                continue
            if not held or (*root, *v.path) in held:
                at = f"{path_str(root_name(label, value), v.path)} ({v.value!r})"
                fix = f"    {v.name}: tc.Static[{kind}]   # in {owner.__name__}"
                found.append((at, fix, kind))
    if not found:
        return None
    one = len(found) == 1
    whose = "its value" if one else "their values"
    return TypeError(
        _MSG_CONCRETE.format(
            fields=", ".join(at for at, _, _ in found) + (" is" if one else " are each"),
            kinds=" or ".join(sorted({kind for _, _, kind in found})),
            whose=whose if held else f"a value computed from {'it' if one else 'one of them'}",
            fixes="\n".join(dict.fromkeys(fix for _, fix, _ in found)),
        )
    )
