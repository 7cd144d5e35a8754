"""The errors naming the field JAX could not trace (`untraceable_field`: a str, a function), or
not as a concrete value (`field_error`: the int or bool fields whose tracers the raising frame
held, recorded by `note_held`), found from the exception's type and the leaves, never from JAX's
wording or a rerun. A leaf its owner's rule makes configuration (`walk.is_config`: an equinox
layer's bool or str, a function in another library's node) is no error: `Carrier` holds it in
the treedef, as equinox's filtered transforms do."""

import functools
import inspect
from collections.abc import Callable, Collection
from typing import Any, Final

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core
from jax.tree_util import DictKey, GetAttrKey, SequenceKey

from treeclass._core.layout import instance_layout
from treeclass._core.show import describe, short_repr
from treeclass._core.walk import (
    ARRAY_TYPES,
    KeyPath,
    Rule,
    Visit,
    is_config,
    path_str,
    rule_of,
    walk,
)

_MSG_UNTRACEABLE_LEAF: Final = """\
{at} holds {what}, which JAX cannot trace (argument {label!r}).

JAX traces arrays and Python numbers. Pass an array (jnp.asarray(...)) if it is data;
keep configuration in a static field of a treeclass (tc.Static[{type}])."""

_MSG_UNTRACEABLE_FIELD: Final = """\
{field} is a dynamic field holding {what}, which JAX cannot trace ({where}).

Dynamic fields are traced as arrays. If the value is configuration, make it static:

    {name}: tc.Static[{type}]

or pass an array (jnp.asarray(...)) if it is data."""

_MSG_INSIDE_NODE: Final = """\
{at} holds {what}, which JAX cannot trace (argument {label!r}).

It lies inside {node}, a node another library registered, whose leaves are what plain
JAX makes of them. Pass an array (jnp.asarray(...)) if it is data; if it is configuration,
keep it out of {node} (a static field of a treeclass holds it: tc.Static[{type}])."""

_MSG_FUNCTION_AMONG: Final = """\
{field} is a dynamic field holding {what} at {at}, which JAX cannot trace (argument {label!r}).

Making the whole field static would make every array beside it a compile-time constant.
Hold just the function as static: jax.tree_util.Partial keeps it in the tree's structure
and calls it as before:

    jax.tree_util.Partial({name})   # in place of {name}"""


def is_traceable(leaf: Any) -> bool:
    """True for the leaves JAX traces (arrays, numbers), as `jax.typeof` decides."""
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


def _annotation(v: Visit) -> str:
    """The annotation of the field holding `v`, as written; for a list, dict or set, its
    hashable form."""
    found: Any = "Any" if v.declared is None else v.declared.type
    hint: str = found if isinstance(found, str) else repr(found).replace("typing.", "")
    if isinstance(found, type):
        hint = found.__name__
    base, _, args = hint.partition("[")
    if base in _HASHABLE and (not args or args.endswith("]")):  # not in a union
        return _HASHABLE[base].format(args[:-1] or ("Any, Any" if base == "dict" else "Any"))
    return hint


def root_name(label: str, value: object) -> str:
    """An argument's name at a path's root: its class if a treeclass, else `label`."""
    return type(value).__name__ if instance_layout(value) is not None else label


def labelled_arguments(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    static: Collection[str | int] = (),
) -> list[tuple[str, Any, KeyPath]]:
    """`(name or args[i], value, key path in (args, kwargs))` of each argument not in `static`."""
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
    """The `TypeError` naming `Class.field` (or the path) of the first leaf JAX cannot trace."""
    for label, value, _ in labelled_arguments(fun, args, kwargs, static):
        visits = list(walk(value))
        nodes = {v.path: v.value for v in visits if v.kind == "node"}
        for v in visits:
            if v.kind != "leaf" or is_traceable(v.value) or v.config:  # config: held static
                continue
            at = path_str(root_name(label, value), v.path)
            what = f"{describe(v.value)} ({short_repr(v.value)})"
            info = {"at": at, "what": what, "label": label, "field": v.field, "name": v.name}
            if v.rule == "other":  # inside another library's node: its class is not ours to fix
                above = (nodes[v.path[:k]] for k in range(len(v.path) - 1, -1, -1))
                node = next(n for n in above if rule_of(n, "plain") == "other")
                kind = type(v.value).__name__
                return TypeError(
                    _MSG_INSIDE_NODE.format(node=type(node).__name__, type=kind, **info)
                )
            if v.owner is None:
                kind = "Callable[..., Any]" if callable(v.value) else type(v.value).__name__
                return TypeError(_MSG_UNTRACEABLE_LEAF.format(type=kind, **info))
            if callable(v.value) and v.path[-1:] != (GetAttrKey(str(v.name)),):
                info["name"] = getattr(v.value, "__name__", "fn")  # among layers: no tc.Static
                return TypeError(_MSG_FUNCTION_AMONG.format(**info))
            where = f"argument {label!r}" if at == v.field else f"{at}, argument {label!r}"
            hint = _annotation(v)  # the fix keeps what the user wrote
            return TypeError(_MSG_UNTRACEABLE_FIELD.format(where=where, type=hint, **info))
    return None


class _Carried:
    """A configuration leaf held in the treedef: no children, unflattened to the leaf itself."""

    def __init__(self, value: Any) -> None:
        self.value = value


jax.tree_util.register_pytree_node(_Carried, lambda c: ((), c.value), lambda value, _: value)


class Restart(Exception):  # noqa: N818 - a signal, not an error: the trace starts again
    """Raised while tracing, before the function runs, to trace again with `Carrier.hide`."""


class Carrier:
    """Holds in the treedef the leaves of `tc.jit`'s arguments that their owner's rule makes
    configuration (`walk.is_config`): an equinox layer's bool, str or float, a function in
    another library's node. As `eqx.filter_jit` does; JAX would trace them, or refuse them."""

    def __init__(self, fun: Callable[..., Any], static: Collection[str | int]) -> None:
        self.fun, self.static, self.active = fun, static, False
        # treedef -> (index, rule) of the leaves under an equinox Module or another library's
        # node, in no static argument: those whose value may be configuration.
        self._at: dict[Any, tuple[tuple[int, Rule], ...]] = {}

    def starts(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Called while JAX traces (so once per structure): whether the arguments hold an
        equinox Module, whose Python numbers and bools JAX has just traced in silence. Then
        every call goes through `hide` from now on, and this trace must start again
        (`Restart`). A function that never sees one pays nothing per call."""
        if self.active:
            return False
        dynamic = labelled_arguments(self.fun, args, kwargs, self.static)
        self.active = any(v.rule == "equinox" for _, value, _ in dynamic for v in walk(value))
        return self.active

    def start(self, error: BaseException, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether `error` came from a leaf `hide` carries (refused before tracing, so once)."""
        if self.active or hasattr(error, _HELD):
            return False
        self.active = self.hide(args, kwargs)[0] is not args  # rebuilt: a leaf was carried
        return self.active

    def hide(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """`(args, kwargs)` with each configuration leaf held static."""
        leaves, treedef, held = self._held(args, kwargs)
        for i in held:
            leaves[i] = _Carried(leaves[i])
        return jax.tree.unflatten(treedef, leaves) if held else (args, kwargs)

    def _held(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[list[Any], Any, dict[int, Any]]:
        """`(leaves, treedef, held)` of `(args, kwargs)`, `held` giving each configuration leaf
        by its index, looked for among the indices `_at` keeps for the treedef."""
        tree = (args, kwargs)
        leaves, treedef = jax.tree.flatten(tree)
        at = self._at.get(treedef)
        if at is None:
            if len(self._at) > 64:  # structures seen: bounded as jax.jit's cache is not
                self._at.clear()
            dynamic = {root for _, _, root in labelled_arguments(self.fun, *tree, self.static)}
            visits = [v for v in walk(tree) if v.kind == "leaf"]
            at = self._at[treedef] = tuple(
                (i, v.rule)
                for i, v in enumerate(visits)
                if v.rule in ("equinox", "other") and v.path[:2] in dynamic
            )
        return leaves, treedef, {i: leaves[i] for i, rule in at if is_config(rule, leaves[i])}

    def pin(
        self, fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]:
        """`(fun, args, kwargs)` for the staged forms (`lower`, `trace`, `eval_shape`).

        A `Lowered`, its `Compiled` and `jax.export`'s `Exported` are called with the
        arguments as the user holds them, flattened by JAX alone: a leaf carried in the
        treedef would make them count one input less. So each configuration leaf JAX can
        type (an equinox layer's bool, int or float) stays an input here, and the returned
        `fun` swaps it back for its value now, before the body sees it: the computation
        never reads that input, and JAX leaves it out of the compiled module. A leaf JAX
        cannot type (a str, a function) is carried in the treedef, as `hide` does.
        """
        leaves, treedef, held = self._held(args, kwargs)
        if not held:
            return fun, args, kwargs
        for i, value in held.items():
            if not is_traceable(value):
                leaves[i] = _Carried(value)
        args, kwargs = jax.tree.unflatten(treedef, leaves)

        @functools.wraps(fun)
        def pinned(*args: Any, **kwargs: Any) -> Any:  # while JAX traces: the leaves held
            xs, inner = jax.tree.flatten((args, kwargs))  # a carried leaf: its bare value
            for i, value in held.items():
                xs[i] = value
            args, kwargs = jax.tree.unflatten(inner, xs)
            return fun(*args, **kwargs)

        return pinned, args, kwargs


def carried(tree: Any) -> Any:
    """`tree` (a traced result) with each configuration leaf held static."""
    xs, treedef = jax.tree.flatten(tree)
    if all(isinstance(x, ARRAY_TYPES) for x in xs):
        return tree
    visits = [v for v in walk(tree) if v.kind == "leaf"]
    return jax.tree.unflatten(treedef, [_Carried(v.value) if v.config else v.value for v in visits])


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
    """Marks `error` with the key paths of `tree`'s tracers the raising frame holds (per tc.jit).

    The one private hook here, and why it stays: JAX's errors for a tracer whose value was
    needed (`ConcretizationTypeError(tracer, context)` and its kin) do not keep the tracer,
    and the public routes left are the two this module refuses: reading JAX's message
    (its wording is no API) or tracing the user's function again, once per int or bool
    field, to see which one fixes it (its side effects would run again). The frame that
    raised holds the tracer it was given; tests/jit/test_untraceable.py fails if JAX moves it.
    """
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
    # From an inner tc.jit (field_error): the values of ours that the raising frame held.
    values = getattr(error, _UP, values)
    setattr(error, _HELD, {tracers[id(y)] for y in values if id(y) in tracers})


def field_error(
    error: TypeError,
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    static: Collection[str | int],
) -> TypeError | None:
    """The error naming `error`'s field: a leaf JAX cannot trace, or int/bool fields held."""
    if not hasattr(error, _HELD):
        return untraceable_field(fun, args, kwargs, static)
    held: set[KeyPath] = getattr(error, _HELD)
    # For a tc.jit tracing this call: the values of ours that the raising frame held.
    flat = jax.tree_util.tree_flatten_with_path((args, kwargs))[0]
    setattr(error, _UP, [x for path, x in flat if path in held])
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
    msg = _MSG_CONCRETE.format(
        fields=", ".join(at for at, _, _ in found) + (" is" if one else " are each"),
        kinds=" or ".join(sorted({kind for _, _, kind in found})),
        whose=whose if held else f"a value computed from {'it' if one else 'one of them'}",
        fixes="\n".join(dict.fromkeys(fix for _, fix, _ in found)),
    )
    return TypeError(msg)
