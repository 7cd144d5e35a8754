"""Construction-time checks and their messages: each runs where the mistake is made,
never when JAX rebuilds an instance, and names `Class.field`, what was found and the fix."""

import difflib
import enum
import functools
import types
import warnings
from collections.abc import Iterable
from typing import Any, Final, NamedTuple

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core
import numpy as np
from jax.tree_util import DictKey, GetAttrKey, SequenceKey

from treeclass._core.show import short_repr
from treeclass._core.walk import KeyPath, children, path_str

# Hashable and compared by value: the per-value check skips these exact types.
TRUSTED_STATIC_TYPES: Final = frozenset(
    {int, float, bool, str, bytes, complex, type(None), type(Ellipsis), np.dtype}
)

_MSG_STATIC_ARRAY: Final = """\
{cls}.{name} is a static field but holds {kind} ({summary}).

Static values are part of the treedef: JAX hashes them and compares them with ==, and
an array can do neither (under jit it would be a tracer). Either

    {name}: jax.Array                          # make the field dynamic (a traced leaf)

or store a hashable Python value instead of the array:

    {cls}(..., {name}=float(x))            # or tuple(x.tolist()) for a vector"""

_MSG_STATIC_ARRAY_INSIDE: Final = """\
{cls}.{name} is a static field but holds {kind} at {path} ({summary}).

A static value is part of the treedef: every array in it would be a compile-time
constant, never traced, never differentiated, and each new value a recompile. Make the
field dynamic (drop tc.Static / tc.static), so its arrays are leaves:

    {name}: tuple[Any, ...]                     # layers and all: a pytree child

A plain function among the layers (jax.nn.relu) is then a leaf JAX cannot trace; wrap
just the function, which puts it in the treedef with no leaves:

    {name}=(Linear(...), jax.tree_util.Partial(jax.nn.relu), Linear(...))"""

_MSG_STATIC_ARRAY_CAPTURED: Final = """\
{cls}.{name} is a static field but holds {kind} at {path} ({summary}),
captured by {captor}.

A static value is part of the treedef: every array it captures would be a compile-time
constant, never traced, never differentiated, and each new value a recompile. {fix}"""

# The fix for each kind of callable that captures an array, written for the field.
_FIXES: Final = {
    "bound method": """\
Make the
field dynamic (drop tc.Static / tc.static) and bind the method as a pytree:

    {name}: Callable[..., Any]
    {cls}(..., {name}=tc.bind(obj.method))      # obj is its child: traced, differentiated""",
    "closure": """\
Hold what
the closure captured in a dynamic field, and make its body a method (in place of the
field {name}):

    {var}: Any                                  # a dynamic field: its arrays are leaves
    def {name}(self, *args): ...                # the closure's body, reading self.{var}

or keep the field, dynamic, holding a module-level function that takes {var}:

    {name}: Callable[..., Any]
    {cls}(..., {name}=jax.tree_util.Partial(fn, {var}))   # def fn({var}, *args): ...""",
    "partial": """\
Make the
field dynamic (drop tc.Static / tc.static) and hold a jax.tree_util.Partial, whose
arguments are leaves:

    {name}: Callable[..., Any]
    {cls}(..., {name}=jax.tree_util.Partial(fn, *args, **kwargs))

Partial keeps fn itself in the treedef: pass an object holding arrays as an argument,
Partial(Encoder.apply, encoder), not inside fn (a bound method, a closure).""",
}

_MSG_STATIC_UNHASHABLE: Final = """\
{cls}.{name} is a static field but holds an unhashable {type} ({value}).

Static values are part of the treedef, so JAX must hash them. Use a hashable value
(a tuple instead of a list, a frozenset instead of a set, a tuple of pairs instead of
a dict), or make the field dynamic:

    {name}: {type} = tc.field()        # instead of tc.static(...)"""

_MSG_STATIC_IDENTITY: Final = """\
{cls}.{name} is a static field holding {what}, which compares by identity.

An equal-looking but new object in each instance makes every instance a new treedef,
so jax.jit silently recompiles for each one. Create the object once and pass that one
to every instance:

    {const} = ...   # once, at module level (a def, not a lambda or a nested function)
    {cls}(..., {name}={const})

or give its class __eq__ and __hash__, or make the field dynamic if it holds data."""

MSG_FROZEN: Final = """\
cannot {verb} {cls}.{name}: treeclass instances are immutable.

Build a changed copy instead, and keep it:

    self.replace({name}=...)

Inside a method, return the copy: a change made in place inside jax.jit would be lost
when the function returns. (`self.{name} = ...` works only inside the class's own
__init__, while it builds the instance.)"""

MSG_NOT_SET: Final = """\
{cls}.{name} was not initialized.

It is declared with init=False and has no default, so __post_init__ must set it:

    def __post_init__(self):
        object.__setattr__(self, "{name}", ...)"""

MSG_NOT_SET_BY_INIT: Final = """\
{cls}.{name} was not initialized.

{cls}.__init__ does not set it and the field has no default. Set it there:

    self.{name} = ...

or give the field a default (fields with one are filled in after __init__)."""

MSG_UNDECORATED_SUBCLASS: Final = """\
{sub} subclasses the treeclass {base} but is not decorated itself, so JAX would treat
its instances as opaque leaves. Decorate it:

    @tc.treeclass
    class {sub}({base}):
        ..."""

MSG_RESERVED_NAME: Final = """\
{cls}.{name}: this name is reserved by treeclass ({why}). Rename the {what}."""

# The first match names the kind: a tracer is a jax.Array too.
_ARRAY_KINDS: Final = {
    jax.core.Tracer: "a JAX tracer",
    jax.Array: "a jax.Array",
    np.ndarray: "a numpy.ndarray",
}
_ARRAY_TYPES: Final = tuple(_ARRAY_KINDS)


def _identity_item(value: object, at: str) -> tuple[str, str] | None:
    """Where (`opt.init`) and what compares by identity: `value`, or the first item in it."""
    if isinstance(value, types.FunctionType):
        qualname = value.__qualname__
        if "<lambda>" in qualname or "<locals>" in qualname:
            return at, f"the function {qualname}"
        return None  # a module-level function is one object: safe to reuse.
    if isinstance(value, functools.partial):
        return at, f"a functools.partial of {getattr(value.func, '__qualname__', value.func)!r}"
    cls = type(value)
    # A data object without __eq__ is usually built per instance, and then recompiles;
    # callables (jnp.tanh), classes, modules and enum members are usually singletons.
    if (
        cls.__eq__ is object.__eq__
        and not callable(value)
        and not isinstance(value, types.ModuleType | enum.Enum)
        and cls.__module__ != "builtins"
    ):
        return at, f"a {cls.__qualname__} instance (its class has no __eq__)"
    names: Any = getattr(value, "_fields", None)
    for i, item in enumerate(value if isinstance(value, tuple | frozenset) else ()):
        if type(item) in TRUSTED_STATIC_TYPES:
            continue
        sub = at if isinstance(value, frozenset) else f"{at}.{names[i]}" if names else f"{at}[{i}]"
        if (found := _identity_item(item, sub)) is not None:
            return found
    return None


# Never a pytree node nor an array (activations often stand here: `jax.nn.relu` is a custom_jvp).
# Functions are not here: a closure's cells are looked into.
_OPAQUE: Final = (
    type,
    types.BuiltinFunctionType,
    types.ModuleType,
    enum.Enum,
    jax.custom_jvp,
    jax.custom_vjp,
    type(jax.jit(abs)),
)


class _Cell:
    """A closure's cell or a default in a path, by its variable: `Head.fn.__closure__[scale]`."""

    __slots__ = ("name",)  # not a NamedTuple: one is made per cell searched, and this is 3x faster

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return f"[{self.name}]"


def _captor(value: object) -> tuple[str, str] | None:
    """`(kind, qualname)` of a callable that holds values out of JAX's sight, else None."""
    func = getattr(value, "__func__", None)  # a bound method, `tc.bind`'s pytree one too
    if func is not None and hasattr(value, "__self__"):
        return "bound method", getattr(func, "__qualname__", repr(func))
    if isinstance(value, types.FunctionType):
        return "closure", value.__qualname__
    if isinstance(value, functools.partial):
        return "partial", f"{type(value).__name__}({getattr(value.func, '__qualname__', '...')})"
    return None


_FUNC: Final = (GetAttrKey("__func__"),)  # a bound method's function, in a path


def _captured_by(fn: types.FunctionType) -> list[tuple[KeyPath, object]]:
    """What a function holds besides its code, each by its variable's name: its closure's
    cells (`__closure__[w]`), and its defaults (`__defaults__[w]`, `__kwdefaults__[w]`),
    which are captured as much as a cell is, once, when `def` runs:

        def make(w):
            return lambda x, w=w: x * w   # `w` is in __defaults__, not in a cell
    """
    cells: list[tuple[KeyPath, object]] = []
    # `__closure__` is None without free variables (a module-level function, the usual case).
    for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        try:
            cells.append(((GetAttrKey("__closure__"), _Cell(var)), cell.cell_contents))
        except ValueError:  # an empty cell: a variable the enclosing function has not set yet
            continue
    defaults = fn.__defaults__ or ()
    code = fn.__code__
    params = code.co_varnames[code.co_argcount - len(defaults) : code.co_argcount]
    positional = [
        ((GetAttrKey("__defaults__"), _Cell(var)), item)
        for var, item in zip(params, defaults, strict=True)
    ]
    keywords = (fn.__kwdefaults__ or {}).items()
    named = [((GetAttrKey("__kwdefaults__"), _Cell(var)), item) for var, item in keywords]
    return cells + positional + named


def _inside(value: object) -> Iterable[tuple[KeyPath | int, object]]:
    """The values directly inside `value` that the deep check looks at, each with its path
    from `value`: key entries, or a tuple's or a list's index (keys are made for the path
    found only: most static values are small tuples, and this check runs per construction).

    JAX sees a bound method, a function and a functools.partial as one leaf; what they
    hold (`__self__`, closure cells, `args`/`keywords`/`func`) is read here all the same:
    in a static field it is baked into the compiled code as much as a tuple's items.
    """
    if type(value) is tuple or type(value) is list:
        return enumerate(value)
    if isinstance(value, types.FunctionType):
        return _captured_by(value)
    if isinstance(value, types.MethodType):
        return [
            ((GetAttrKey("__self__"),), value.__self__),
            (_FUNC, value.__func__),
        ]
    if isinstance(value, functools.partial):  # jax.tree_util.Partial too: its func is static
        func: list[tuple[KeyPath, object]] = [((GetAttrKey("func"),), value.func)]
        args = [((GetAttrKey("args"), SequenceKey(i)), a) for i, a in enumerate(value.args)]
        keywords = [((GetAttrKey("keywords"), DictKey(k)), v) for k, v in value.keywords.items()]
        return func + args + keywords
    if isinstance(value, frozenset):  # a leaf to JAX: its items have no key
        return [((), item) for item in value]
    if isinstance(value, tuple) and (names := getattr(value, "_fields", None)):  # a NamedTuple
        return [((GetAttrKey(n),), item) for n, item in zip(names, value, strict=False)]
    if isinstance(value, tuple | list):
        return enumerate(value)
    if type(value) is dict:  # JAX would sort the keys, and fail on mixed types
        return [((DictKey(k),), v) for k, v in value.items()]
    # A treeclass's dynamic fields (its statics were checked when built), another node's.
    return [((key,), child) for key, child in children(value) or ()]


class _Found(NamedTuple):
    path: KeyPath
    array: object
    captor: tuple[str, str] | None  # the outermost callable on the path that captured it


def _array_in(value: object, searched: dict[int, object]) -> _Found | None:
    """The first array in `value`, with its path: in any pytree, and in what callables hold.

    `searched` holds what was looked into already, kept alive so that no id is reused: a
    cycle (a closure that names itself, an object whose bound method it holds) ends, and
    an object shared by many closures is read once.
    """
    if type(value) in TRUSTED_STATIC_TYPES or isinstance(value, _OPAQUE):
        return None
    if isinstance(value, _ARRAY_TYPES):
        return _Found((), value, None)
    if id(value) in searched:
        return None
    searched[id(value)] = value
    for path, item in _inside(value):
        if type(item) in TRUSTED_STATIC_TYPES:  # most items and cells: saves a call
            continue
        found = _array_in(item, searched)
        if found is not None:
            keys = (SequenceKey(path),) if isinstance(path, int) else path
            # Through a method's function (a closure), the function is what needs the fix.
            captor = found.captor if keys == _FUNC else _captor(value) or found.captor
            return _Found((*keys, *found.path), found.array, captor)
    return None


def _array_error(cls: type, name: str, found: _Found) -> TypeError:
    """The `TypeError` for an array in a static value: where, what, and the fix for its holder."""
    array = found.array
    kind = next(k for t, k in _ARRAY_KINDS.items() if isinstance(array, t))
    summary = f"shape {getattr(array, 'shape', '?')}, dtype {getattr(array, 'dtype', '?')}"
    where = path_str(f"{cls.__name__}.{name}", found.path)
    names = {"cls": cls.__name__, "name": name, "kind": kind, "summary": summary, "path": where}
    if found.captor is not None:
        captor, qualname = found.captor
        cell = next((k for k in found.path if isinstance(k, _Cell)), _Cell("value"))
        fix = _FIXES[captor].format(cls=cls.__name__, name=name, var=cell.name)
        return TypeError(
            _MSG_STATIC_ARRAY_CAPTURED.format(**names, captor=f"the {captor} {qualname}", fix=fix)
        )
    template = _MSG_STATIC_ARRAY if not found.path else _MSG_STATIC_ARRAY_INSIDE
    return TypeError(template.format(**names))


def check_static(cls: type, name: str, value: object) -> None:
    """Raises `TypeError` for an array in `value` or an unhashable one; warns for identity ==.

    A value of `TRUSTED_STATIC_TYPES` passes every check (the generated code does not call
    it for one, and `_array_in` returns at once)."""
    found = _array_in(value, {})
    if found is not None:
        raise _array_error(cls, name, found)
    try:
        hash(value)
    except TypeError:
        kind, shown = type(value).__name__, short_repr(value)
        msg = _MSG_STATIC_UNHASHABLE.format(cls=cls.__name__, name=name, type=kind, value=shown)
        raise TypeError(msg) from None
    found_identity = _identity_item(value, name)
    if found_identity is not None:
        at, what = found_identity
        what += "" if at == name else f" ({cls.__name__}.{at})"
        msg = _MSG_STATIC_IDENTITY.format(
            cls=cls.__name__, name=name, what=what, const=name.upper()
        )
        # stacklevel 4: check_static <- generated __init__/replace <- the user's call.
        warnings.warn(msg, RecompileWarning, stacklevel=4)


class RecompileWarning(UserWarning):
    """A static value compares by identity, so new instances would recompile.

    **Raised by**

    Construction and `replace()`, for a static lambda, nested function, partial or an
    instance without `__eq__`.

    **Example**

    >>> import warnings
    >>> class Model(tc.TreeClass):
    ...     act: object = tc.static(default=None)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = Model(act=lambda v: v)
    >>> caught[0].category is tc.RecompileWarning
    True
    >>> str(caught[0].message).splitlines()[0]
    'Model.act is a static field holding the function <lambda>, which compares by identity.'
    """

    __module__ = "treeclass"  # shown as treeclass.RecompileWarning, where users import it


def closest(name: str, names: Iterable[str]) -> str | None:
    """The "did you mean" of `name`: a close spelling, else an abbreviation either way; or None."""
    names = list(names)
    close = difflib.get_close_matches(name, names, n=1)
    abbreviation = (n for n in names if name.startswith(n) or n.startswith(name))
    return close[0] if close else next(abbreviation, None)


def unknown_field_error(
    cls: type,
    bad: Iterable[str],
    valid: Iterable[str],
    *,
    call: str = "replace",
    kind: str = "field",
) -> TypeError:
    """The `TypeError` for `replace()` (or `prefix()`) with names that are not fields."""
    valid = list(valid)
    where = (
        f"{cls.__name__}.replace()"
        if call == "replace"
        else f"treeclass.{call}() of {cls.__name__}"
    )
    parts: list[str] = []
    for name in bad:
        close = closest(name, valid)
        hint = f" Did you mean {close!r}?" if close else ""
        parts.append(f"{where} got an unexpected {kind} {name!r}.{hint}")
    parts.append(f"Valid {kind}s: {', '.join(valid)}.")
    return TypeError("\n".join(parts))
