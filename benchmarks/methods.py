"""Jitted methods written the way each library teaches them, and what `obj.method`
costs before the call.

For each idiom, `INSTANCES` instances of the 8-field class with different array values
go through the jitted method once each; its body, `obj.a0 + obj.a3` (a fresh function
object per idiom, so no two share JAX's trace cache), increments a counter while JAX
traces, which counts the traces. Then one more call is timed. The last row is the
common trap: `jax.jit(static_argnums=0)` on a plain class's method, so every instance
is a new cache key, its arrays baked into its own compile.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

import treeclass as tc
from benchmarks import contenders, core, peers
from benchmarks._table import Table

INSTANCES = 200
_TRACES = [0]  # reset before each idiom; its function bodies increment it at trace time

JIT_METHODS = core.Measurement(
    f"jitted methods, each library's idiom: one call ({INSTANCES} instances traced)",
    batch_scale=core.JIT_BATCH,
    rounds_scale=0.25,
)
ACCESS = core.Measurement("method access: obj.method, no call", base="plain")


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
    """The 8-field class (contenders.Plain) with `fun` as its `@tc.jit` method `total`."""

    @tc.treeclass
    class Model(contenders.Plain):
        total = tc.jit(fun)

        def plain(self) -> Any:
            return self.a0

    return Model


def _equinox_model(fun: Callable[[Any], Any]) -> type:
    import equinox as eqx

    base = peers.build("equinox").new  # the class the other tables time

    class EqxModel(base):  # type: ignore[misc, valid-type]
        total = eqx.filter_jit(fun)

        def plain(self) -> Any:
            return self.a0

    return EqxModel


class _Trap:
    """The common trap: a plain class with `jax.jit(static_argnums=0)` on a method."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)

    total = jax.jit(_make_total(), static_argnums=0)

    def plain(self) -> Any:
        return self.a0


def _instances(new: Callable[..., Any], n: int) -> list[Any]:
    """`n` instances of the 8-field class that differ in the values of `a0`."""
    kw = contenders.all_kwargs()
    return [new(**{**kw, "a0": jnp.full((4,), float(i), jnp.float32)}) for i in range(n)]


def _jit_methods() -> tuple[dict[str, core.Setup], dict[str, str]]:
    """The idioms of the module docstring that import, the tuple first: what to time,
    and the traces each idiom took for `INSTANCES` instances."""
    setups: dict[str, core.Setup] = {}
    traces: dict[str, str] = {}

    def add(name: str, new: Callable[..., Any], f: Callable[[Any], Any], stmt: str) -> None:
        objs = _instances(new, INSTANCES)
        _TRACES[0] = 0
        for obj in objs:
            jax.block_until_ready(f(obj))
        traces[name] = str(_TRACES[0])
        for _ in range(2):
            jax.block_until_ready(f(objs[0]))
        setups[name] = (stmt, {"f": f, "obj": objs[0]}, jax.block_until_ready)

    add("tuple: jax.jit(f)(t)", contenders.make_tuple, jax.jit(_tuple_total), "f(obj)")
    total = _make_total()
    model = treeclass_model(total)
    add("treeclass: @tc.jit method", model, model.total, "obj.total()")
    # The same function object: tc.jit traces its own wrapper of it.
    add("treeclass: jax.jit(f)(obj)", model, jax.jit(total), "f(obj)")
    with contextlib.suppress(ImportError):  # a peer that is not installed has no rows
        eqx_model = _equinox_model(_make_total())
        add("equinox: @eqx.filter_jit method", eqx_model, lambda m: m.total(), "obj.total()")
        add("equinox: jax.jit(f)(module)", eqx_model, jax.jit(_make_total()), "f(obj)")
    with contextlib.suppress(ImportError):
        flax_struct = peers.build("flax").new
        add("flax.struct: jax.jit(f)(obj)", flax_struct, jax.jit(_make_total()), "f(obj)")
    dataclass = contenders.FrozenDataclass
    add("register_dataclass: jax.jit(f)(obj)", dataclass, jax.jit(_make_total()), "f(obj)")
    add("plain class: jax.jit(static_argnums=0) method", _Trap, lambda t: t.total(), "obj.total()")
    return setups, traces


def _access() -> dict[str, core.Setup]:
    """`obj.method` (no call): a plain class's plain method first (the baseline)."""
    kw = contenders.all_kwargs()
    owners = {  # name -> (instance, how its `total` is jitted)
        "plain class": (_Trap(**kw), "jax.jit(static_argnums=0)"),
        "treeclass": (treeclass_model(_make_total())(**kw), "@tc.jit"),
    }
    with contextlib.suppress(ImportError):  # equinox not installed
        owners["equinox"] = (_equinox_model(_make_total())(**kw), "@eqx.filter_jit")
    setups: dict[str, core.Setup] = {}
    for owner, (obj, jitted) in owners.items():
        setups[f"{owner}: plain method"] = ("obj.plain", {"obj": obj}, None)
        setups[f"{owner}: {jitted} method"] = ("obj.total", {"obj": obj}, None)
    return setups


def run(quick: bool) -> list[Table]:
    """The section: jitted methods (one call, traces) and `obj.method`. (That a
    `@tc.jit` method traces once for any number of instances is pinned by
    tests/jit/test_jit.py, not measured here.)"""
    setups, traced = _jit_methods()
    notes = {
        "tuple: jax.jit(f)(t)": "8 arrays only",
        "plain class: jax.jit(static_argnums=0) method": "self static: one trace per instance, "
        "arrays baked in",
    }
    return [
        core.measure(JIT_METHODS, setups, quick=quick, notes=notes, extra=("traces", traced)),
        core.measure(ACCESS, _access(), quick=quick),
    ]
