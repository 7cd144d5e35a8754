"""Why did a jitted function trace again? Each trace records a signature: per argument
path (`MLP.layers[0].w`), the abstract value traced (`f32[100]`) or the static value
keyed on; a retrace is explained by the difference to the closest earlier signature."""

import threading
import types
import warnings
from collections.abc import Callable
from typing import Any, Final

from treeclass._core.show import short_repr
from treeclass._core.tree import equal
from treeclass._core.walk import array_name, is_array, path_str, walk
from treeclass._jit.untraceable import labelled_arguments, root_name


class RetraceError(RuntimeError):
    """A `tc.jit` function traced more often than its `max_traces` allows.

    **Raised by**

    A call tracing a `tc.jit(..., max_traces=N)` function an N + 1st time; it says why.

    **Example**

    >>> @tc.jit(max_traces=1)
    ... def double(x):
    ...     return 2 * x
    >>> _ = double(jnp.ones(2))
    >>> try:
    ...     double(jnp.ones(3))
    ... except tc.RetraceError as e:
    ...     print(e)
    double traced 2 times; what changed since the closest earlier trace:
      x: f32[2] -> f32[3]
    (max_traces=1)
    """

    __module__ = "treeclass"  # shown as treeclass.RetraceError, where users import it


class RetraceWarning(UserWarning):
    """A `tc.jit(..., explain=True)` function traced again; the message says why.

    **Raised by**

    Every retrace of a `tc.jit(..., explain=True)` function (not the first trace).

    **Example**

    >>> import warnings
    >>> @tc.jit(explain=True)
    ... def double(x):
    ...     return 2 * x
    >>> _ = double(jnp.ones(2))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = double(jnp.ones(2, jnp.int32))
    >>> caught[0].category is tc.RetraceWarning
    True
    >>> print(caught[0].message)
    double traced 2 times; what changed since the closest earlier trace:
      x: f32[2] -> i32[2]
    """

    __module__ = "treeclass"  # shown as treeclass.RetraceWarning, where users import it


def _entry(v: Any) -> str | tuple[str, Any]:
    """What JAX keys its cache on at one visit: an aval, a node's type, or (repr, static value)."""
    aval: Any = getattr(v.value, "aval", None)
    if v.kind == "node":
        return "None" if v.value is None else type(v.value).__qualname__
    if v.kind == "leaf" and aval is not None and hasattr(aval, "shape"):
        return array_name(aval.dtype, aval.shape, getattr(aval, "weak_type", False))
    if v.kind == "leaf" and is_array(v.value):
        return array_name(v.value.dtype, v.value.shape)
    return short_repr(v.value), v.value


_PASSED: Final = " (passed)"


def signature(
    fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """`{path: what JAX keys its cache on}` for one call, and how each argument was passed."""
    items = labelled_arguments(fun, args, kwargs)
    roots = [root_name(name, value) for name, value, _ in items]
    out: dict[str, Any] = {}
    for (name, value, _), root in zip(items, roots, strict=True):
        out[name + _PASSED] = "by keyword" if name in kwargs else "positionally"
        for v in walk(value):
            where = path_str(name if roots.count(root) > 1 else root, v.path)
            out[f"{where} (static)" if v.kind == "static" else where] = _entry(v)
    return out


def _unequal(old: Any, new: Any, at: str) -> tuple[str, bool]:
    """Where `new` first differs from `old` inside alike tuples; True if it compares by identity."""
    if isinstance(new, tuple) and type(old) is type(new) and len(old) == len(new):
        names: Any = getattr(new, "_fields", None)
        for i, (o, n) in enumerate(zip(old, new, strict=True)):
            if not equal(o, n):
                return _unequal(o, n, f"{at}.{names[i]}" if names else f"{at}[{i}]")
    cls: type[object] = type(new)
    fn = isinstance(new, types.FunctionType)
    what = f"{at} is another {f'function {new.__qualname__}' if fn else cls.__qualname__}"
    if cls.__eq__ is not object.__eq__:
        return f"{what}, unequal by its __eq__", False
    return f"{what}, compared by identity: create it once and reuse it", True


def diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The lines saying what differs between two signatures, as `path: old -> new`."""
    lines: list[str] = []
    for key in dict.fromkeys([*old, *new]):
        before, after = old.get(key, "<absent>"), new.get(key, "<absent>")
        if isinstance(before, tuple) and isinstance(after, tuple):  # static values
            if equal(before[1], after[1]):
                continue
            why, identity = _unequal(before[1], after[1], key.removesuffix(" (static)"))
            note = f" ({why})" if identity or before[0] == after[0] else ""  # what repr hides
            lines.append(f"{key}: {before[0]} -> {after[0]}{note}")
        elif key.endswith(_PASSED) and before != after:
            now, then = (str(x).replace("<absent>", "not at all") for x in (after, before))
            lines.append(f"argument {key.removesuffix(_PASSED)!r} passed {now} now, {then} before")
        elif before != after:
            before, after = (x[0] if isinstance(x, tuple) else x for x in (before, after))
            lines.append(f"{key}: {before} -> {after}")
    return lines


class TraceLog:
    """Counts the traces of one jitted function, explains retraces, enforces a limit."""

    def __init__(self, fun: Callable[..., Any], max_traces: int | None, explain: bool) -> None:
        self.fun, self.name = fun, getattr(fun, "__qualname__", repr(fun))
        self.max_traces, self.explain = max_traces, explain
        self.signatures: list[dict[str, Any]] = []
        self.reasons: list[str] = []
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """Without its history: in another process nothing is compiled, so the first call traces."""
        return {k: self.__dict__[k] for k in ("fun", "name", "max_traces", "explain")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, signatures=[], reasons=[], _lock=threading.Lock())

    @property
    def count(self) -> int:
        return len(self.signatures)

    def __repr__(self) -> str:
        if not self.reasons:
            return f"TraceLog({self.name}: {'traced 1 time' if self.count else 'not traced yet'})"
        last = self.reasons[-1].split("\n", 1)[1]  # without the first line: name and count
        return f"TraceLog({self.name}: traced {self.count} times; last retrace:\n{last})"

    def record(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        new = signature(self.fun, args, kwargs)
        with self._lock:
            earlier = list(self.signatures)
            self.signatures.append(new)
        if not earlier:
            return
        # The latest of the closest: a value built anew is compared with the one before.
        changes = min((diff(old, new) for old in reversed(earlier)), key=len) or [
            "nothing in the arguments (structure, shapes, dtypes, static values);",
            "a jax config option, a global, or a cache clear?",
        ]
        what = "".join(f"\n  {line}" for line in changes)
        header = f"{self.name} traced {len(earlier) + 1} times"
        reason = f"{header}; what changed since the closest earlier trace:{what}"
        self.reasons.append(reason)
        if self.max_traces is not None and len(earlier) + 1 > self.max_traces:
            msg = f"{reason}\n(max_traces={self.max_traces})"
            raise RetraceError(msg)
        if self.explain:
            warnings.warn(reason, RetraceWarning, stacklevel=2)
