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
from collections.abc import Callable, Hashable
from typing import Any, Final, ParamSpec, TypeVar, cast, overload

import jax
import numpy as np

from treeclass._layout import LAYOUT
from treeclass._repr import short_repr
from treeclass._retrace import TraceLog
from treeclass._typing import JitDecorator, JitFunction

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")

_MSG_BAD_LEAF: Final = """\
{cls}.{name} is a dynamic field holding {what}, which jax.jit cannot trace (argument path: {path}).

Dynamic fields are traced as arrays. If the value is configuration, make it static:

    {name}: {type} = tc.static(...)

or pass an array (jnp.asarray(...)) if it is data."""

_VALID_SCALARS: Final = (bool, int, float, complex, np.generic, np.ndarray, jax.Array)


def _is_traceable(x: Any) -> bool:
    return isinstance(x, _VALID_SCALARS) or hasattr(x, "__jax_array__") or x is None


def _find_bad_leaf(path: str, x: Any) -> tuple[str, type, str, str, str] | None:
    """The first dynamic treeclass field (class, field, path) holding a value jax.jit
    cannot trace, searching through nested containers."""
    layout = type(x).__dict__.get(LAYOUT)
    if layout is not None:
        for name in layout.dynamic:
            value = x.__dict__.get(name)
            sub = f"{path}.{name}"
            if not _is_traceable(value) and jax.tree_util.treedef_is_leaf(
                jax.tree.structure(value)
            ):
                what = f"a {type(value).__name__} ({short_repr(value)})"
                return sub, type(x), name, what, type(value).__name__
            found = _find_bad_leaf(sub, value)
            if found is not None:
                return found
        return None
    if type(x) in (list, tuple):
        for i, item in enumerate(x):
            found = _find_bad_leaf(f"{path}[{i}]", item)
            if found is not None:
                return found
    if type(x) is dict:
        for key, item in x.items():
            found = _find_bad_leaf(f"{path}[{key!r}]", item)
            if found is not None:
                return found
    return None


def _explain_type_error(
    error: TypeError, fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Raises a TypeError naming `Class.field` if `error` came from a treeclass field
    JAX cannot trace; returns otherwise (the caller re-raises the original)."""
    try:
        names = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):  # a builtin without a signature: number the arguments
        names = []
    for i, value in enumerate(args):
        label = names[i] if i < len(names) else f"args[{i}]"
        found = _find_bad_leaf(label, value)
        if found is not None:
            break
    else:
        found = next(
            (f for k, v in kwargs.items() if (f := _find_bad_leaf(k, v)) is not None), None
        )
    if found is None:
        return
    path, cls, name, what, type_name = found
    msg = _MSG_BAD_LEAF.format(cls=cls.__name__, name=name, what=what, path=path, type=type_name)
    raise TypeError(msg) from error


def _make(
    fun: Callable[..., Any], jit_kwargs: dict[str, Any], max_traces: int | None, explain: bool
) -> Callable[..., Any]:
    log = TraceLog(fun, max_traces, explain)

    @functools.wraps(fun)
    def traced(*args: Any, **kwargs: Any) -> Any:
        log.record(args, kwargs)  # runs only while JAX traces, never per call
        return fun(*args, **kwargs)

    jitted = jax.jit(traced, **jit_kwargs)

    @functools.wraps(fun)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return jitted(*args, **kwargs)
        except TypeError as error:
            _explain_type_error(error, fun, args, kwargs)
            raise

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
        if LAYOUT in type(fun.__self__).__dict__:
            return _jit_bound(fun, jit_kwargs, max_traces, explain)
    if not callable(fun):
        msg = f"tc.jit() takes a function or method; got {fun!r}."
        raise TypeError(msg)
    return _make(fun, jit_kwargs, max_traces, explain)
