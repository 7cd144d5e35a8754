"""Why did a jitted function trace again? Trace signatures and their differences.

Each trace of a `tc.jit` function records a signature: for every argument, by path
(`Neuron.v`, `MLP.layers[0].w`, `i`), the abstract value JAX traced (`f32[100]`,
`f32[]{weak}`) or the static value it keyed the cache on (`Neuron.tau`: `20.0`). A
retrace is explained by the difference to the closest earlier signature:

    Neuron.step traced 2 times; what changed since the closest earlier trace:
      Neuron.tau (static): 20.0 -> 10.0
"""

from __future__ import annotations

import inspect
import threading
import warnings
from collections.abc import Callable
from typing import Any, Final

from treeclass._core.show import short_repr
from treeclass._core.walk import array_name, is_array, path_str, walk
from treeclass._jit.untraceable import root_name


class RetraceError(RuntimeError):
    """A `tc.jit` function traced more often than its `max_traces` allows.

    **Raised by**

    A call of a `tc.jit(..., max_traces=N)` function that would trace it for the
    N + 1st time. The message says what changed since the closest earlier trace.

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


def _abstract(x: Any) -> str:
    """`f32[100]` for an array or a tracer (`{weak}` if weakly typed); the value's
    short repr for anything else (a static argument, or a leaf JAX would reject)."""
    aval: Any = getattr(x, "aval", None)
    if aval is not None and hasattr(aval, "shape") and hasattr(aval, "dtype"):
        return array_name(aval.dtype, aval.shape, getattr(aval, "weak_type", False))
    if is_array(x):
        return array_name(x.dtype, x.shape)
    return short_repr(x)


def _node(x: Any) -> str:
    return "None" if x is None else type(x).__qualname__


_PASSED: Final = " (passed)"


def signature(sig: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, str]:
    """`{path: what JAX keys its cache on}` for one call: every leaf's abstract value,
    every static field's value, every node's type (a list that became a tuple), and
    how each argument was passed (JAX keys positional and keyword arguments apart)."""
    items: list[tuple[str, Any]]
    try:
        if sig is None:
            raise TypeError
        items = list(sig.bind(*args, **kwargs).arguments.items())
    except TypeError:
        items = [(f"args[{i}]", a) for i, a in enumerate(args)] + list(kwargs.items())
    # A treeclass argument is named by its class (`MLP.layers[0].w`), unless two
    # arguments share the class: then by their parameter names (`a.w`, `b.w`).
    roots = [root_name(name, value) for name, value in items]
    out: dict[str, str] = {}
    for (name, value), root in zip(items, roots, strict=True):
        out[name + _PASSED] = "by keyword" if name in kwargs else "positionally"
        root = name if roots.count(root) > 1 else root
        for v in walk(value):
            where = path_str(root, v.path)
            if v.kind == "static":
                out[f"{where} (static)"] = short_repr(v.value)
            else:
                out[where] = _abstract(v.value) if v.kind == "leaf" else _node(v.value)
    return out


def diff(old: dict[str, str], new: dict[str, str]) -> list[str]:
    absent = "<absent>"
    lines: list[str] = []
    for key in dict.fromkeys([*old, *new]):
        before, after = old.get(key, absent), new.get(key, absent)
        if before == after:
            continue
        if key.endswith(_PASSED):
            now, then = (x.replace(absent, "not at all") for x in (after, before))
            lines.append(f"argument {key[: -len(_PASSED)]!r} passed {now} now, {then} before")
        else:
            lines.append(f"{key}: {before} -> {after}")
    return lines


class TraceLog:
    """Counts the traces of one jitted function, explains retraces, enforces a limit."""

    def __init__(self, fun: Callable[..., Any], max_traces: int | None, explain: bool) -> None:
        self.name = getattr(fun, "__qualname__", repr(fun))
        try:
            self._sig: inspect.Signature | None = inspect.signature(fun)
        except (TypeError, ValueError):
            self._sig = None
        self.max_traces = max_traces
        self.explain = explain
        self.signatures: list[dict[str, str]] = []
        self.reasons: list[str] = []
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # Pickled with its class (cloudpickle, a class defined in __main__): no lock.
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    @property
    def count(self) -> int:
        return len(self.signatures)

    def __repr__(self) -> str:
        if not self.reasons:
            traced = "traced 1 time" if self.count else "not traced yet"
            return f"TraceLog({self.name}: {traced})"
        # The last reason, without its first line (which repeats name and count).
        last = self.reasons[-1].split("\n", 1)[1]
        return f"TraceLog({self.name}: traced {self.count} times; last retrace:\n{last})"

    def record(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        new = signature(self._sig, args, kwargs)
        with self._lock:
            earlier = list(self.signatures)
            self.signatures.append(new)
        if not earlier:
            return
        changes = min((diff(old, new) for old in earlier), key=len)
        if changes:
            detail = "".join(f"\n  {line}" for line in changes)
        else:
            detail = (
                "\n  nothing in the arguments (structure, shapes, dtypes, static values);"
                "\n  a jax config option, a global, or a cache clear?"
            )
        reason = (
            f"{self.name} traced {len(earlier) + 1} times; what changed since the "
            f"closest earlier trace:{detail}"
        )
        self.reasons.append(reason)
        if self.max_traces is not None and len(earlier) + 1 > self.max_traces:
            msg = f"{reason}\n(max_traces={self.max_traces})"
            raise RetraceError(msg)
        if self.explain:
            warnings.warn(reason, RetraceWarning, stacklevel=2)
