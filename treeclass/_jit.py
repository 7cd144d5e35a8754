"""`tc.jit`: `jax.jit` that is also a method decorator, with `self` traced.

The trap it removes (seed tutorial 003):

    class Counter:
        count = 0
        @functools.partial(jax.jit, static_argnums=(0,))
        def inc(self):
            self.count += 1     # runs once, at trace time; later calls lose it

`self` static means one compile per instance, and the mutation happens only while
tracing. With `tc.jit` on a treeclass method, `self` is an ordinary traced pytree
argument of ONE class-level `jax.jit` function, so instances of the same structure
share a compile, arrays are never baked in as constants, and mutating `self` raises
`FrozenInstanceError` (instances are frozen) instead of being lost.

What `tc.jit(fun)` returns is a plain Python function (`call`) wrapping the
`jax.jit` object. Being a plain function it binds like any method, through the C
descriptor: `obj.step` costs what any bound method costs, and no per-instance compile
or cache exists. Its job on each call is a `try` around the jitted call (free unless
it raises), to turn JAX's "not a valid JAX type" for a treeclass field into an error
naming `Class.field`. At trace time only, a `TraceLog` records why it traced.
"""

from __future__ import annotations

import functools
import inspect
import types
import weakref
from collections.abc import Callable, Collection, Hashable
from typing import Any, Final, ParamSpec, TypeVar, cast, overload

import jax

from treeclass._repr import short_repr
from treeclass._retrace import TraceLog
from treeclass._typing import JitDecorator, JitFunction
from treeclass._walk import instance_layout, is_array, walk

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")

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
    """The traced arguments, labelled by parameter name (`args[i]` where `fun` has no
    signature): those neither named nor numbered in `static`."""
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):  # a builtin without a signature: number the arguments
        params = []
    out: list[tuple[str, Any]] = []
    for i, value in enumerate(args):
        name = params[i] if i < len(params) else f"args[{i}]"
        if i not in static and name not in static:
            out.append((name, value))
    for name, value in kwargs.items():
        index = params.index(name) if name in params else None
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

    >>> from treeclass._jit import untraceable_field_error
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


def _static_args(jit_kwargs: dict[str, Any]) -> frozenset[str | int]:
    found: set[str | int] = set()
    for option in ("static_argnames", "static_argnums"):
        value: Any = jit_kwargs.get(option, ())
        found.update((value,) if isinstance(value, str | int) else value)
    return frozenset(found)


# Set on an exception that the function's own body raised while JAX traced it, so
# that `call` never mistakes it for an argument JAX could not interpret.
_FROM_BODY: Final = "__tc_from_body__"


def _make(
    fun: Callable[..., Any], jit_kwargs: dict[str, Any], max_traces: int | None, explain: bool
) -> Callable[..., Any]:
    log = TraceLog(fun, max_traces, explain)

    static = _static_args(jit_kwargs)

    @functools.wraps(fun)
    def traced(*args: Any, **kwargs: Any) -> Any:
        log.record(args, kwargs)  # runs only while JAX traces, never per call
        try:
            return fun(*args, **kwargs)
        except TypeError as error:
            setattr(error, _FROM_BODY, True)
            raise

    jitted = jax.jit(traced, **jit_kwargs)

    @functools.wraps(fun)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return jitted(*args, **kwargs)
        except TypeError as error:
            if getattr(error, _FROM_BODY, False):
                raise
            found = untraceable_field_error(error, fun, args, kwargs, static)
            if found is None:
                raise
            raise found from error

    call.__tc_jit__ = jitted  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
    call.trace_log = log  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
    for name in ("lower", "trace", "eval_shape", "clear_cache"):
        if hasattr(jitted, name):
            setattr(call, name, getattr(jitted, name))
    return call


# tc.jit(obj.method) for many instances must reuse one compiled function per method.
_BOUND: weakref.WeakKeyDictionary[Callable[..., Any], dict[Hashable, Callable[..., Any]]] = (
    weakref.WeakKeyDictionary()
)


def _jit_bound(method: types.MethodType, jit_kwargs: dict[str, Any], max_traces: int | None, explain: bool) -> Any:
    func = method.__func__
    key: Hashable = (tuple(sorted(jit_kwargs.items())), max_traces, explain)
    try:
        hash(key)
    except TypeError:
        return types.MethodType(_make(func, jit_kwargs, max_traces, explain), method.__self__)
    per_func = _BOUND.setdefault(func, {})
    call = per_func.get(key)
    if call is None:
        call = per_func[key] = _make(func, jit_kwargs, max_traces, explain)
    return types.MethodType(call, method.__self__)


# The overloads keep the wrapped signature and declare `trace_log` & co (see
# _typing.py). A staticmethod object is callable too, so its overload comes first;
# pyright calls that an overlap, but the first match is the one it uses.
@overload
def jit(  # pyright: ignore[reportOverlappingOverload]
    fun: staticmethod[_P, _R],
    /,
    *,
    static_argnames: str | tuple[str, ...] = (),
    donate_argnames: str | tuple[str, ...] = (),
    max_traces: int | None = None,
    explain: bool = False,
    **jax_jit_kwargs: Any,
) -> staticmethod[_P, _R]: ...
@overload
def jit(
    fun: classmethod[_T, _P, _R],
    /,
    *,
    static_argnames: str | tuple[str, ...] = (),
    donate_argnames: str | tuple[str, ...] = (),
    max_traces: int | None = None,
    explain: bool = False,
    **jax_jit_kwargs: Any,
) -> classmethod[_T, _P, _R]: ...
@overload
def jit(
    fun: Callable[_P, _R],
    /,
    *,
    static_argnames: str | tuple[str, ...] = (),
    donate_argnames: str | tuple[str, ...] = (),
    max_traces: int | None = None,
    explain: bool = False,
    **jax_jit_kwargs: Any,
) -> JitFunction[_P, _R]: ...
@overload
def jit(
    fun: None = None,
    /,
    *,
    static_argnames: str | tuple[str, ...] = (),
    donate_argnames: str | tuple[str, ...] = (),
    max_traces: int | None = None,
    explain: bool = False,
    **jax_jit_kwargs: Any,
) -> JitDecorator: ...
def jit(
    fun: Any = None,
    /,
    *,
    static_argnames: str | tuple[str, ...] = (),
    donate_argnames: str | tuple[str, ...] = (),
    max_traces: int | None = None,
    explain: bool = False,
    **jax_jit_kwargs: Any,
) -> Any:
    """`jax.jit` for functions and treeclass methods, with `self` traced.

    **Arguments**

    - `fun`: a function, a method in a class body (also under `@staticmethod` or
      `@classmethod`: put `@tc.jit` above them), or a bound method `obj.method` of a
      treeclass instance. Omit it to pass options: `@tc.jit(static_argnames="n")`.
    - `static_argnames`, `donate_argnames`, `**jax_jit_kwargs`: passed to `jax.jit`;
      `donate_argnames=("self",)` donates the instance's buffers.
    - `max_traces`: raise `RetraceError` (saying what changed) when the function
      would trace more often than this: a guard for tests.
    - `explain`: warn (`RetraceWarning`) with what changed on every retrace.

    **Returns**

    A function with `fun`'s signature that calls the compiled function; on a class it
    binds as a method. It carries `trace_log` (`.count`, `.reasons`) and `jax.jit`'s
    `lower`, `trace`, `eval_shape` and `clear_cache`.

    **Raises**

    At call time, `TypeError` naming `Class.field` when a dynamic field holds a value
    JAX cannot trace (a string, a function); `RetraceError` past `max_traces`;
    `FrozenInstanceError` if the function assigns to a treeclass attribute.

    **Example**

    >>> @tc.treeclass
    ... class Counter:
    ...     count: jax.Array
    ...     @tc.jit
    ...     def inc(self):
    ...         return self.replace(count=self.count + 1)
    >>> counters = [Counter(jnp.array(i)) for i in range(5)]
    >>> [int(c.inc().count) for c in counters]
    [1, 2, 3, 4, 5]
    >>> Counter.inc.trace_log.count  # five instances, one trace
    1
    """
    if fun is None:
        return functools.partial(
            jit,
            static_argnames=static_argnames,
            donate_argnames=donate_argnames,
            max_traces=max_traces,
            explain=explain,
            **jax_jit_kwargs,
        )
    jit_kwargs = dict(static_argnames=static_argnames, donate_argnames=donate_argnames, **jax_jit_kwargs)
    if isinstance(fun, staticmethod):
        return staticmethod(_make(fun.__func__, jit_kwargs, max_traces, explain))
    if isinstance(fun, classmethod):
        # The class is a hashable constant: make it static, by name.
        # isinstance leaves classmethod's type arguments unknown to pyright.
        func = cast("Callable[..., Any]", fun.__func__)
        cls_param = next(iter(inspect.signature(func).parameters))
        names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
        jit_kwargs["static_argnames"] = (cls_param, *names)
        return classmethod(_make(func, jit_kwargs, max_traces, explain))
    if isinstance(fun, types.MethodType):
        if hasattr(fun.__func__, "__tc_jit__"):
            return fun  # already a tc.jit method, bound
        if instance_layout(fun.__self__) is not None:
            return _jit_bound(fun, jit_kwargs, max_traces, explain)
    if not callable(fun):
        msg = f"tc.jit() takes a function or method; got {fun!r}."
        raise TypeError(msg)
    return _make(fun, jit_kwargs, max_traces, explain)
