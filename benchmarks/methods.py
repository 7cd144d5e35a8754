"""Jitted methods written the way each library teaches them, and what `obj.method`
costs before the call.

`jit_method_cases()`: for each idiom, `INSTANCES` instances of the 8-field class with
different array values go through the jitted method (or function) once each. A trace
increments a counter (a side effect that runs only while JAX traces), so the case
records how many traces the instances cost; then one more call on the first instance
is timed. Every idiom jits the same body, `obj.a0 + obj.a3` (a fresh function object
per case, so no two cases share JAX's trace cache):

| case                                  | what the user writes                             |
|---------------------------------------|--------------------------------------------------|
| tuple: jax.jit(f)(t) (the baseline)   | a function of a tuple                            |
| treeclass: @tc.jit method             | `total = tc.jit(f)` in the class, `obj.total()`  |
| treeclass: jax.jit(f)(obj)            | the same function under plain `jax.jit`          |
| equinox: @eqx.filter_jit method       | equinox's documented way to jit a method         |
| equinox: jax.jit(f)(module)           | a function taking the module                     |
| flax.struct: jax.jit(f)(obj)          | flax.struct has no jitted methods                |
| register_dataclass: jax.jit(f)(obj)   | JAX's own dataclass node                         |
| plain class: jax.jit(static_argnums=0)| the common trap: `self` static, so each          |
|                                       | instance is a new cache key: one trace apiece    |

`access_cases()`: `obj.method` without calling it, for plain methods and jitted ones.

`traces(n)`: the trace count for `n` instances through a `@tc.jit` method of a class
defined afresh (1: one compile serves every instance of one structure).

`run(quick)`, the section: the two tables and the trace count for 1000 instances.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

import treeclass as tc
from benchmarks import contenders, core, peers
from benchmarks._table import Table

INSTANCES = 200
_TRACES = [0]  # reset before each case; its function bodies increment it at trace time


def _make_total() -> Callable[[Any], Any]:
    """A new function object with the body every idiom jits."""

    def total(obj: Any) -> Any:
        _TRACES[0] += 1  # runs while JAX traces, never when a compiled call runs
        return obj.a0 + obj.a3

    return total


def _tuple_total(t: tuple[Any, ...]) -> Any:
    _TRACES[0] += 1
    return t[0] + t[3]


def treeclass_model(fun: Callable[[Any], Any]) -> type:
    """The benchmark class (contenders.Plain) with `fun` as its `@tc.jit` method `total`."""

    @tc.treeclass
    class Model(contenders.Plain):
        total = tc.jit(fun)

        def plain(self) -> Any:
            return self.a0

    return Model


class _Trap:
    """The common trap: a plain class with `jax.jit(static_argnums=0)` on a method."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)

    total = functools.partial(jax.jit, static_argnums=0)(_make_total())

    def plain(self) -> Any:
        return self.a0


@dataclasses.dataclass(frozen=True)
class Case:
    """One way of calling (or reaching) a jitted function, ready to time."""

    name: str
    group: str
    stmt: str
    namespace: dict[str, Any]
    sync: Callable[[Any], Any] | None = None
    traces: int | None = None
    note: str = ""


def _a0s(n: int) -> list[jax.Array]:
    return [jnp.full((4,), float(i), jnp.float32) for i in range(n)]


def _traced(
    name: str,
    group: str,
    new: Callable[..., Any],
    stmt: str,
    call: Callable[[Any], Any],
    namespace: dict[str, Any] | None = None,
    note: str = "",
) -> Case:
    """Builds `INSTANCES` instances with `new(**kw)` (a0 differing), calls `call` on each
    (blocking), and returns the case timing `stmt` on the first, with the trace count."""
    kw = contenders.all_kwargs()
    objs = [new(**{**kw, "a0": a0}) for a0 in _a0s(INSTANCES)]
    _TRACES[0] = 0
    for obj in objs:
        jax.block_until_ready(call(obj))
    traces = _TRACES[0]
    for _ in range(2):
        jax.block_until_ready(call(objs[0]))
    ns = {**(namespace or {}), "obj": objs[0]}
    return Case(name, group, stmt, ns, jax.block_until_ready, traces, note)


def _equinox_model(fun: Callable[[Any], Any]) -> type:
    import equinox as eqx

    base = peers.build("equinox").new  # the class the other tables time

    class EqxModel(base):  # type: ignore[misc, valid-type]
        total = eqx.filter_jit(fun)

        def plain(self) -> Any:
            return self.a0

    return EqxModel


def jit_method_cases() -> list[Case]:
    """The idioms of the module docstring that import; the tuple first."""
    f = jax.jit(_tuple_total)
    cases = [
        _traced(
            "tuple: jax.jit(f)(t)",
            "floor",
            contenders.make_tuple,
            "f(obj)",
            f,
            {"f": f},
            "8 arrays only",
        )
    ]
    total = _make_total()
    model = treeclass_model(total)
    cases.append(
        _traced("treeclass: @tc.jit method", "treeclass", model, "obj.total()", model.total)
    )
    f = jax.jit(total)  # the same function object; tc.jit traces its own wrapper of it
    cases.append(_traced("treeclass: jax.jit(f)(obj)", "treeclass", model, "f(obj)", f, {"f": f}))
    try:
        eqx_model = _equinox_model(_make_total())
    except ImportError:
        pass
    else:
        cases.append(
            _traced(
                "equinox: @eqx.filter_jit method",
                "peer",
                eqx_model,
                "obj.total()",
                lambda m: m.total(),
            )
        )
        f = jax.jit(_make_total())
        cases.append(
            _traced("equinox: jax.jit(f)(module)", "peer", eqx_model, "f(obj)", f, {"f": f})
        )
    try:
        flax_cls = peers.build("flax").new
    except ImportError:
        pass
    else:
        f = jax.jit(_make_total())
        cases.append(
            _traced("flax.struct: jax.jit(f)(obj)", "peer", flax_cls, "f(obj)", f, {"f": f})
        )
    f = jax.jit(_make_total())
    cases.append(
        _traced(
            "register_dataclass: jax.jit(f)(obj)",
            "floor",
            contenders.FrozenDataclass,
            "f(obj)",
            f,
            {"f": f},
        )
    )
    cases.append(
        _traced(
            "plain class: jax.jit(static_argnums=0) method",
            "trap",
            _Trap,
            "obj.total()",
            lambda t: t.total(),
            note="self static: one trace per instance, arrays baked in",
        )
    )
    return cases


def access_cases() -> list[Case]:
    """`obj.method` (no call): a plain class's plain method first (the baseline)."""
    kw = contenders.all_kwargs()
    model = treeclass_model(_make_total())(**kw)
    trap = _Trap(**kw)
    cases = [
        Case("plain class: plain method", "floor", "obj.plain", {"obj": trap}),
        Case("plain class: jax.jit(static_argnums=0) method", "trap", "obj.total", {"obj": trap}),
        Case("treeclass: plain method", "treeclass", "obj.plain", {"obj": model}),
        Case("treeclass: @tc.jit method", "treeclass", "obj.total", {"obj": model}),
    ]
    try:
        eqx_model = _equinox_model(_make_total())(**kw)
    except ImportError:
        return cases
    cases += [
        Case("equinox: plain method", "peer", "obj.plain", {"obj": eqx_model}),
        Case("equinox: @eqx.filter_jit method", "peer", "obj.total", {"obj": eqx_model}),
    ]
    return cases


def traces(n: int) -> int:
    """Traces of a `@tc.jit` method, on a class defined afresh, for `n` instances that
    differ in their array values (1 expected)."""
    model = treeclass_model(_make_total())
    kw = contenders.all_kwargs()
    _TRACES[0] = 0
    for a0 in _a0s(n):
        jax.block_until_ready(model(**{**kw, "a0": a0}).total())
    return _TRACES[0]


def _case(c: Case) -> core.Setup:
    return c.stmt, c.namespace, c.sync


JIT_METHODS = core.Measurement(
    "jit_methods",
    f"jitted methods, each library's idiom: one call ({INSTANCES} instances traced)",
    _case,
    batch_scale=core.JIT_BATCH_SCALE,
    rounds_scale=0.25,
)
ACCESS = core.Measurement("method_access", "method access: obj.method, no call", _case, base="plain")
TRACE_INSTANCES = 1000


def run(quick: bool) -> list[Table]:
    """Jitted methods: one call and the traces per idiom, `obj.method`, and the trace
    count of a `@tc.jit` method for `TRACE_INSTANCES` instances."""
    cases = jit_method_cases()
    traced = {c.name: str(c.traces) for c in cases}
    n = TRACE_INSTANCES
    return [
        core.measure(JIT_METHODS, cases, quick=quick, extra=("traces", traced)),
        core.measure(ACCESS, access_cases(), quick=quick),
        Table(
            f"@tc.jit method of a class defined afresh, {n} instances differing in values",
            ("contender", "instances", "traces"),
            (("treeclass: @tc.jit method", str(n), str(traces(n))),),
        ),
    ]
