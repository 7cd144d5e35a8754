"""`tc.jit`: `jax.jit` that is also a method decorator, with `self` traced, so instances
of one structure share a compile (`static_argnums=(0,)` compiles one per instance and
loses mutations made while tracing). It is a plain function around the `jax.jit` object,
so it binds like any method; on a `TypeError` it names the field (`untraceable.py`)."""

import functools
import inspect
import types
import weakref
from collections.abc import Callable, Hashable
from typing import Any, ParamSpec, TypeVar, cast, overload

import jax

from treeclass._core.layout import instance_layout
from treeclass._jit.protocols import JitDecorator, JitFunction, Method
from treeclass._jit.retrace import TraceLog
from treeclass._jit.untraceable import Carrier, Restart, carried, field_error, note_held

_PINNED: weakref.WeakKeyDictionary[type, list[Callable[..., Any]]] = weakref.WeakKeyDictionary()
_BOUND: weakref.WeakValueDictionary[Hashable, Callable[..., Any]] = weakref.WeakValueDictionary()
_P = ParamSpec("_P")
_R = TypeVar("_R")


def _make(
    fun: Callable[..., Any], jit_kwargs: dict[str, Any], max_traces: int | None, explain: bool
) -> Callable[..., Any]:
    log = TraceLog(fun, max_traces, explain)
    static: set[str | int] = set()  # the names and positions made static
    for value in (jit_kwargs.get("static_argnames", ()), jit_kwargs.get("static_argnums", ())):
        static.update((value,) if isinstance(value, str | int) else value)
    carrier = Carrier(fun, static)

    @functools.wraps(fun)
    def traced(*args: Any, **kwargs: Any) -> Any:
        if carrier.starts(args, kwargs):  # an equinox Module's configuration was traced
            raise Restart  # before the body runs or the trace is logged: no side effect twice
        log.record(args, kwargs)  # runs only while JAX traces, never per call
        try:
            return carried(fun(*args, **kwargs))
        except TypeError as error:
            note_held(error, (args, kwargs))  # the body's, not JAX's about an argument
            raise

    jitted: Any = jax.jit(traced, **jit_kwargs)  # its clear_cache is not in its stub

    @functools.wraps(fun)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            if carrier.active:
                args, kwargs = carrier.hide(args, kwargs)
            return jitted(*args, **kwargs)
        except Restart:
            pass  # traced again below, the configuration held static
        except TypeError as error:
            if not carrier.start(error, args, kwargs):
                found = field_error(error, fun, args, kwargs, static)
                if found is None:
                    raise  # the body's own error, or JAX's about something else: unchanged
                raise found from error
        return call(*args, **kwargs)  # again, with the configuration leaves carried

    def staged(name: str) -> Callable[..., Any]:
        @functools.wraps(getattr(jitted, name))
        def run(*args: Any, **kwargs: Any) -> Any:
            body, args, kwargs = carrier.pin(traced, args, kwargs)
            # A model with configuration: its own jax.jit, taking the arguments as JAX
            # flattens them (Carrier.pin), so the stages JAX builds are called with them.
            method = getattr(jitted if body is traced else jax.jit(body, **jit_kwargs), name)
            try:
                return method(*args, **kwargs)
            except Restart:  # the first equinox Module seen: held static from now on
                return method(*args, **kwargs)

        return run

    # What protocols.JitFunction declares for the type checkers.
    extra = {name: staged(name) for name in ("lower", "trace", "eval_shape")}
    vars(call).update(extra, clear_cache=jitted.clear_cache, __tc_jit__=jitted, trace_log=log)
    return call


# A staticmethod is callable too, so its overload comes first: the first match wins.
@overload
def jit(
    fun: Method,
    /,
    *,
    static_argnames: str | tuple[str, ...] = (),
    donate_argnames: str | tuple[str, ...] = (),
    max_traces: int | None = None,
    explain: bool = False,
    **jax_jit_kwargs: Any,
) -> Method: ...
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

    - `fun`: a function, a method (`@tc.jit` above `@staticmethod`/`@classmethod`), or a
      bound method of a treeclass instance; omitted: `@tc.jit(static_argnames="n")`.
    - `static_argnames`, `donate_argnames`, `**jax_jit_kwargs`: passed to `jax.jit`.
    - `max_traces`: raise `RetraceError` past this many traces (a guard for tests).
    - `explain`: warn (`RetraceWarning`) with what changed on every retrace.

    **Returns**

    A function with `fun`'s signature, carrying `trace_log` and `jax.jit`'s `lower`,
    `trace`, `eval_shape` and `clear_cache`.

    **Raises**

    At call time, `TypeError` naming a `Class.field` JAX cannot trace; `RetraceError` past
    `max_traces`; `FrozenInstanceError` if the function assigns to a treeclass attribute.

    **Example**

    >>> class Counter(tc.TreeClass):
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
    options = dict(jax_jit_kwargs, static_argnames=static_argnames, donate_argnames=donate_argnames)
    if fun is None:
        return functools.partial(jit, max_traces=max_traces, explain=explain, **options)
    make = functools.partial(_make, jit_kwargs=options, max_traces=max_traces, explain=explain)
    if isinstance(fun, staticmethod):
        return staticmethod(make(fun.__func__))
    if isinstance(fun, classmethod):
        # The class is a hashable constant: static, by name. (The cast: for pyright.)
        func = cast("Callable[..., Any]", fun.__func__)
        names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
        options["static_argnames"] = (next(iter(inspect.signature(func).parameters)), *names)
        return classmethod(make(func))
    if isinstance(fun, types.MethodType) and hasattr(fun.__func__, "__tc_jit__"):
        return fun  # already a tc.jit method, bound
    if isinstance(fun, types.MethodType) and instance_layout(fun.__self__) is not None:
        # One compiled function per method and options, held weakly: a dropped function
        # (and its executables) is freed, and while it lives its id is its own.
        func = fun.__func__
        key = (id(func), tuple(sorted(options.items())), max_traces, explain)
        try:
            call = _BOUND.get(key)
            if call is None:
                call = _BOUND.setdefault(key, make(func))
                cls = type(fun.__self__)
                if inspect.getattr_static(cls, func.__name__, None) is func:
                    # Pinned to the class, so `tc.jit(model.loss)(x)` in a loop compiles
                    # once (jax.jit(model.loss) compiles on every call).
                    _PINNED.setdefault(cls, []).append(call)
        except TypeError:  # unhashable options
            call = make(func)
        return types.MethodType(call, fun.__self__)
    if not callable(fun):
        msg = f"tc.jit() takes a function or method; got {fun!r}."
        raise TypeError(msg)
    return make(fun)
