"""Whole models: nested update, and training a model that holds more than parameters.

1. `tc.replace_at` called eagerly against the hand-written chain of `replace()` calls
   that makes the same change 3 levels down (each table's baseline), and `eqx.tree_at`
   on the same `where` when equinox is installed: once through three treeclasses,
   `lambda m: m.block.layer.w`; once through a tuple item, `lambda m: m.layers[i].w`
   with `i` a closure cell, so the path may differ from call to call.
2. One jitted adamw training step of the examples/mlp.py model (parameters, a bool
   mask, a PRNG key and an int32 step counter): `jax.value_and_grad` on parameters split
   from the rest once, outside the step (the baseline); `tc.value_and_grad` and
   `tc.apply_updates` on the whole model; `eqx.filter_value_and_grad` under
   `eqx.filter_jit`. XLA's cost analysis of each compiled step says whether two steps
   compile to the same program, whatever the timing noise.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax  # type: ignore[import-untyped]

import treeclass as tc
from benchmarks import core
from benchmarks._examples import example
from benchmarks._table import Table

try:
    import equinox as eqx
except ImportError:  # a peer: its rows are left out
    eqx = None


@tc.treeclass
class Layer:
    w: jax.Array
    b: jax.Array
    act: str = tc.static(default="relu")


@tc.treeclass
class Block:
    layer: Layer
    scale: jax.Array


@tc.treeclass
class Model:
    block: Block
    layers: tuple[Layer, ...]
    bias: jax.Array


def _indexed(i: int) -> Any:
    """`lambda m: m.layers[i].w`, `i` a closure cell (the common form in a loop)."""
    return lambda m: m.layers[i].w


def _replace_tables(quick: bool) -> list[Table]:
    layer = Layer(jnp.ones(3), jnp.zeros(3))
    m = Model(Block(layer, jnp.ones(())), (layer, layer, layer), jnp.zeros(()))
    ns: dict[str, Any] = {"m": m, "v": jnp.zeros(3), "tc": tc, "eqx": eqx, "i": 1}
    cases = {  # title -> (where, the same change by hand)
        "m.block.layer.w (3 treeclasses)": (
            lambda m: m.block.layer.w,
            "m.replace(block=m.block.replace(layer=m.block.layer.replace(w=v)))",
        ),
        "m.layers[i].w (i a closure variable)": (
            _indexed(1),
            "m.replace(layers=(*m.layers[:i], m.layers[i].replace(w=v), *m.layers[i + 1 :]))",
        ),
    }
    tables = []
    for title, (where, chain) in cases.items():
        stmts = {"replace chain": chain, "tc.replace_at": "tc.replace_at(m, where, v)"}
        if eqx is not None:
            stmts["eqx.tree_at"] = "eqx.tree_at(where, m, v)"
        setups = {k: (stmt, {**ns, "where": where}, None) for k, stmt in stmts.items()}
        notes = {"replace chain": chain, "eqx.tree_at": "runs no checks; reaches leaves only"}
        measurement = core.Measurement(f"nested update, eager: {title}", base="chain")
        tables.append(core.measure(measurement, setups, quick=quick, notes=notes))
    return tables


def _steps() -> dict[str, tuple[Any, Any]]:
    """name -> (jitted step, its arguments); each step returns what it takes."""
    ex = example("mlp")
    model = ex.init_model(jax.random.key(0))
    x, y = ex.make_data(jax.random.key(1), ex.QUICK.samples)
    opt = optax.adamw(1e-3)
    params, rest = tc.partition(model)

    @jax.jit
    def jax_step(params: Any, rest: Any, opt_state: Any) -> Any:
        def f(p: Any) -> Any:
            return ex.loss(tc.combine(p, rest), x, y)

        _, grads = jax.value_and_grad(f)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        params, rest = tc.partition(ex.advance(tc.combine(params, rest)))  # the same state update
        return params, rest, opt_state

    @jax.jit
    def tc_step(model: Any, opt_state: Any) -> Any:
        _, grads = tc.value_and_grad(ex.loss)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, tc.partition(model)[0])
        return ex.advance(tc.apply_updates(model, updates)), opt_state

    steps = {
        "jax.value_and_grad, split params": (jax_step, (params, rest, opt.init(params))),
        "tc.value_and_grad": (tc_step, (model, opt.init(params))),
    }
    if eqx is not None:

        @eqx.filter_jit
        def eqx_step(model: Any, opt_state: Any) -> Any:
            _, grads = eqx.filter_value_and_grad(ex.loss)(model, x, y)
            params = eqx.filter(model, eqx.is_inexact_array)
            updates, opt_state = opt.update(grads, opt_state, params)
            return ex.advance(eqx.apply_updates(model, updates)), opt_state

        steps["eqx.filter_value_and_grad + filter_jit"] = (eqx_step, (model, opt.init(params)))
    return steps


def _compiled_cost(step: Any, args: Any) -> str:
    """`flops / bytes accessed` of the compiled step, by XLA's cost analysis."""
    compiled = step.lower(*args).compile() if hasattr(step, "lower") else None
    if not hasattr(compiled, "cost_analysis"):
        return "-"  # eqx.filter_jit's lowering has no cost analysis to ask
    cost = compiled.cost_analysis()  # type: ignore[union-attr]
    return f"{cost.get('flops', 0):.0f} / {cost.get('bytes accessed', 0):.0f}"


def _step_table(quick: bool) -> Table:
    setups: dict[str, core.Setup] = {}
    costs = {}
    for name, (step, args) in _steps().items():
        out = jax.block_until_ready(step(*args))  # compile, and check the step runs
        jax.tree.map(lambda a, b: None, out, args)  # and returns what it takes
        costs[name] = f"{_compiled_cost(step, args)}; {len(jax.tree.leaves(args))} leaves in"
        setups[name] = ("step(*args)", {"step": step, "args": args}, jax.block_until_ready)
    notes = {
        "tc.value_and_grad": "whole model in and out",
        "eqx.filter_value_and_grad + filter_jit": "filter_jit partitions on every call",
    }
    measurement = core.Measurement(
        "one jitted adamw training step, MLP with key, mask and step fields",
        base="jax",
        batch_scale=10.0,  # a step is far longer than a statement (RESULTS.md, "training step")
        rounds_scale=0.2,
        min_rounds=21,
    )
    extra = ("XLA flops / bytes", costs)
    return core.measure(measurement, setups, quick=quick, notes=notes, extra=extra)


def run(quick: bool) -> list[Table]:
    """The section: the two nested-update tables, then the training step."""
    return [*_replace_tables(quick), _step_table(quick)]
