"""What `tc.jit` returns, as type checkers see it: a plain function carrying `trace_log`, `lower`,
..., which `Callable[P, R]` would hide. Protocols, not classes: a wrapper class would cost a
Python-level `__get__` on every `obj.method` access."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar, overload

if TYPE_CHECKING:
    import jax.stages

    from treeclass._jit.retrace import TraceLog


_P = ParamSpec("_P")
_Q = ParamSpec("_Q")
_R = TypeVar("_R")
_R_co = TypeVar("_R_co", covariant=True)
_S = TypeVar("_S")
# A staticmethod or a classmethod, given back as one (of the same parameters and result).
Method = TypeVar("Method", bound="staticmethod[..., Any] | classmethod[Any, ..., Any]")


class JitMethod(Protocol[_P, _R_co]):
    """A `tc.jit` method bound to an instance: `obj.method`, with `self` bound."""

    @property
    def trace_log(self) -> TraceLog:
        """Its traces: `.count`, `.reasons`, and the options `.max_traces` and `.explain`; a
        method's are those of the class-level compiled function, shared by all instances."""
        ...

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R_co: ...


class JitFunction(JitMethod[_P, _R_co], Protocol[_P, _R_co]):
    """A `tc.jit` function, or a `tc.jit` method read from its class: a `JitMethod` (its
    `trace_log`) with `jax.jit`'s stages, and bound when read from an instance."""

    # Declared again so that a type checker's message about a call names this protocol.
    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R_co: ...

    def lower(self, *args: _P.args, **kwargs: _P.kwargs) -> jax.stages.Lowered: ...

    def trace(self, *args: _P.args, **kwargs: _P.kwargs) -> jax.stages.Traced: ...

    def eval_shape(self, *args: _P.args, **kwargs: _P.kwargs) -> Any: ...

    def clear_cache(self) -> None: ...

    # Read from the class (`Counter.inc`): the function, `self` still a parameter.
    @overload
    def __get__(self, obj: None, owner: type[Any] | None = None, /) -> JitFunction[_P, _R_co]: ...

    # Read from an instance (`c.inc`): bound; `_S` accepts the instance (a subclass's too).
    @overload
    def __get__(
        self: JitFunction[Concatenate[_S, _Q], _R], obj: _S, owner: type[Any] | None = None, /
    ) -> JitMethod[_Q, _R]: ...


class JitDecorator(Protocol):
    """What `tc.jit(static_argnames=...)` (options, no function) returns."""

    # A staticmethod is callable too: its overload comes first; the first match wins.
    @overload
    def __call__(self, fun: Method, /) -> Method: ...  # type: ignore[overload-overlap]
    @overload
    def __call__(self, fun: Callable[_P, _R], /) -> JitFunction[_P, _R]: ...
