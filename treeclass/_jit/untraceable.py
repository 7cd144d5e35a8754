"""Which field of the arguments JAX could not trace, or could not trace as a concrete
value: the errors that name it.

JAX rejects a string or a function among a traced argument's leaves with an error that
gives a path at best ("Error interpreting argument to <fn> as an abstract array ... at
path x.name"). When the leaf sits in a treeclass field, `untraceable_field()` builds
the error users need instead: `Class.field`, the value found, and the two fixes (make
the field static, or store an array). `tc.jit` asks for it when JAX rejected an
argument (`is_argument_error`); `tc.grad` asks before it differentiates, as its split
of the model leaves such leaves where JAX would not look.

A Python int or bool in a dynamic field is traced as an array too, so a body that needs
its value (a shape, a loop length, an `if`) fails with JAX's ConcretizationTypeError or
a shape TypeError that does not say which field. `concrete_field()` names it, with the
fix (`tc.Static[int]`), after checking that the int or bool was the cause.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from typing import Any, Final

import jax
from jax.tree_util import DictKey, SequenceKey

from treeclass._core.layout import instance_layout, layout_of
from treeclass._core.show import describe, short_repr
from treeclass._core.walk import PYTHON_SCALARS, KeyPath, is_array, path_str, walk

__all__ = [
    "concrete_field",
    "is_argument_error",
    "is_traceable",
    "labelled_arguments",
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

# JAX's words when an argument's leaf is not an array (jax.jit: "Error interpreting
# argument to <fn> as an abstract array ... at path x.name"; jax.grad:
# "Argument 'oops' of type <class 'str'> is not a valid JAX type"). Only these are
# rewritten: any other TypeError is the user's own and must surface unchanged.
# tests/test_untraceable.py triggers both from JAX itself, so a change of wording in a
# new JAX fails there (and, until fixed, JAX's own error surfaces: nothing is lost).
_ARGUMENT_ERRORS: Final = ("Error interpreting argument", "is not a valid JAX type")


def is_argument_error(error: BaseException) -> bool:
    """True for JAX's error about an argument leaf that is not an array."""
    return isinstance(error, TypeError) and any(m in str(error) for m in _ARGUMENT_ERRORS)


def is_traceable(leaf: Any) -> bool:
    """True for the leaves JAX traces: arrays, Python numbers, array-likes."""
    # Python numbers become weakly typed arrays; `__jax_array__` is JAX's protocol for
    # array-likes. (None is no leaf: JAX flattens it to nothing.)
    return isinstance(leaf, PYTHON_SCALARS) or is_array(leaf) or hasattr(leaf, "__jax_array__")


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
function needed its value while tracing (a shape, a loop length, an `if`), and a traced
value has none. If it is configuration, make it static (each value compiles once):

{fixes}

JAX's error, above, says where the value was needed."""


def concrete_field(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    static: Collection[str | int] = (),
) -> TypeError | None:
    """The error naming the dynamic fields that hold a Python int or bool the body
    needed as a concrete value, for a `TypeError` the body raised while `tc.jit` traced
    it; None when no such field caused it.

    Cause, not coincidence: the body is traced again, abstractly (`jax.eval_shape`),
    with those ints and bools kept as constants, as static fields would keep them, all
    together and then one at a time, to name the one(s) it needed. This runs on the
    error path alone, and only where a dynamic field holds a Python int or bool."""
    flat, structure = jax.tree_util.tree_flatten_with_path((args, kwargs))
    treedef: Any = structure  # a PyTreeDef: jaxlib ships no stubs
    index = {path: i for i, (path, _) in enumerate(flat)}
    found: dict[int, tuple[str, str]] = {}  # flat index -> (the leaf's path, its fix)
    for label, value, root in labelled_arguments(fun, args, kwargs, static):
        for v in walk(value):
            if v.kind == "leaf" and v.owner is not None and type(v.value) in (int, bool):
                at = f"{path_str(root_name(label, value), v.path)} ({v.value!r})"
                fix = f"    {v.name}: tc.Static[{type(v.value).__name__}]   # in {v.owner.__name__}"
                found[index[(*root, *v.path)]] = (at, fix)
    leaves = [x for _, x in flat]

    def traces(constant: Collection[int]) -> bool:
        """Whether `fun` traces with these leaves constant (and every other int, bool
        or static argument's value, as under jit), the rest abstract."""
        vary = [
            i not in constant and (i in found or is_array(x) or type(x) in (float, complex))
            for i, x in enumerate(leaves)
        ]

        def again(*values: Any) -> Any:
            it = iter(values)
            a, k = treedef.unflatten([next(it) if v else x for x, v in zip(leaves, vary, strict=True)])
            return fun(*a, **k)

        try:
            jax.eval_shape(again, *[x for x, v in zip(leaves, vary, strict=True) if v])
        except Exception:  # noqa: BLE001 - still failing: these were not the cause
            return False
        return True

    if not found or not traces(found):
        return None
    needed = [i for i in found if traces({i})] or list(found)
    kinds = " or ".join(sorted({type(leaves[i]).__name__ for i in needed}))
    named = ", ".join(found[i][0] for i in needed)
    verb = "is" if len(needed) == 1 else "are each"
    fixes = "\n".join(dict.fromkeys(found[i][1] for i in needed))
    return TypeError(_MSG_CONCRETE.format(fields=f"{named} {verb}", kinds=kinds, fixes=fixes))
