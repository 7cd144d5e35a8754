"""Whole models: nested update, and training a model that holds more than parameters.

1. `tc.replace_at` called eagerly against the hand-written chain of `replace()` calls
   that makes the same change (each table's baseline), and `eqx.tree_at` on the same
   `where` when equinox is installed, on the example models: through three treeclasses,
   `lambda m: m.norm1.stats.mean` (examples/cnn.py); through a tuple item,
   `lambda m: m.layers[i].w` (examples/mlp.py) with `i` a closure cell, so the path may
   differ from call to call.
2. One jitted adamw step of examples/cnn.py's conv net (BatchNorm statistics, a dropout
   key, a step counter), batch 64: its `train_step` (`tc.value_and_grad` on the whole
   model); the same step with `jax.value_and_grad` on parameters split from the rest
   once, outside it (the baseline); the same network in equinox and in flax nnx, each in
   its documented form. XLA's cost analysis of each compiled step says whether two
   steps compile to the same program, whatever the timing noise.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import jax
import optax  # type: ignore[import-untyped]

import treeclass as tc
from benchmarks import core
from benchmarks._examples import example
from benchmarks._table import Table

try:
    import equinox as eqx
except ImportError:  # a peer: its rows are left out
    eqx = None


def _replace_tables(quick: bool) -> list[Table]:
    cnn = example("cnn").init_model(jax.random.key(0))
    mlp = example("mlp").init_model(jax.random.key(0))
    i = 1  # a closure cell of the `where` below, as in a loop
    cases = {  # title -> (model, where, the same change by hand)
        "m.norm1.stats.mean (examples/cnn.py, 3 treeclasses)": (
            cnn,
            lambda m: m.norm1.stats.mean,
            "m.replace(norm1=m.norm1.replace(stats=m.norm1.stats.replace(mean=v)))",
        ),
        "m.layers[i].w (examples/mlp.py, i a closure variable)": (
            mlp,
            lambda m: m.layers[i].w,
            "m.replace(layers=(*m.layers[:i], m.layers[i].replace(w=v), *m.layers[i + 1 :]))",
        ),
    }
    tables = []
    for title, (m, where, chain) in cases.items():
        stmts = {"replace chain": chain, "tc.replace_at": "tc.replace_at(m, where, v)"}
        if eqx is not None:
            stmts["eqx.tree_at"] = "eqx.tree_at(where, m, v)"
        ns = {"m": m, "v": where(m), "where": where, "i": i, "tc": tc, "eqx": eqx}
        setups = {k: (stmt, ns, None) for k, stmt in stmts.items()}
        notes = {"replace chain": chain, "eqx.tree_at": "runs no checks; reaches leaves only"}
        measurement = core.Measurement(f"nested update, eager: {title}", base="chain")
        tables.append(core.measure(measurement, setups, quick=quick, notes=notes))
    return tables


def _equinox_step(ex: Any, x: jax.Array, y: jax.Array) -> tuple[Any, Any]:
    """equinox: `eqx.nn` layers on one image (C, H, W) under `jax.vmap`, BatchNorm's
    statistics in an `eqx.nn.State`, the step under `eqx.filter_jit`."""
    (c1, c2), (k1, k2, k3) = ex.CHANNELS, jax.random.split(jax.random.key(0), 3)
    relu = eqx.nn.Lambda(jax.nn.relu)
    norm = functools.partial(eqx.nn.BatchNorm, axis_name="batch", momentum=0.9, mode="batch")
    layers = [eqx.nn.Conv2d(1, c1, 3, padding=1, key=k1), norm(c1), relu, eqx.nn.MaxPool2d(2, 2)]
    layers += [eqx.nn.Conv2d(c1, c2, 3, padding=1, key=k2), norm(c2), relu]
    layers += [eqx.nn.Lambda(lambda h: h.mean((1, 2))), eqx.nn.Dropout(0.1)]
    layers += [eqx.nn.Linear(c2, ex.CLASSES, key=k3)]
    model, state = eqx.nn.make_with_state(eqx.nn.Sequential)(layers)

    def loss(model: Any, state: Any, x: jax.Array, y: jax.Array, key: jax.Array) -> Any:
        one = lambda x, state, key: model(x, state, key=key)  # noqa: E731
        batched = jax.vmap(one, axis_name="batch", in_axes=(0, None, 0), out_axes=(0, None))
        logits, state = batched(x, state, jax.random.split(key, x.shape[0]))
        return ex.cross_entropy(logits, y), state

    @eqx.filter_jit
    def step(model: Any, state: Any, opt: Any, x: jax.Array, y: jax.Array, key: jax.Array) -> Any:
        (_, state), grads = eqx.filter_value_and_grad(loss, has_aux=True)(model, state, x, y, key)
        params = eqx.filter(model, eqx.is_inexact_array)
        updates, opt = ex.OPTIMIZER.update(grads, opt, params)
        return eqx.apply_updates(model, updates), state, opt

    opt = ex.OPTIMIZER.init(eqx.filter(model, eqx.is_inexact_array))
    return step, (model, state, opt, x.transpose(0, 3, 1, 2), y, jax.random.key(1))


def _nnx_steps(ex: Any, x: jax.Array, y: jax.Array) -> dict[str, tuple[Any, Any]]:
    """flax nnx: the step under `nnx.jit` (its tutorials' form), and under `jax.jit`
    with `nnx.split` outside and `nnx.merge` inside (its performance guide's form)."""
    from flax import nnx

    (c1, c2), rngs = ex.CHANNELS, nnx.Rngs(0)
    norm = functools.partial(nnx.BatchNorm, momentum=0.9, rngs=rngs)
    pool = functools.partial(nnx.max_pool, window_shape=(2, 2), strides=(2, 2))

    def made() -> tuple[Any, Any]:
        layers = [nnx.Conv(1, c1, kernel_size=(3, 3), rngs=rngs), norm(c1), nnx.relu, pool]
        layers += [nnx.Conv(c1, c2, kernel_size=(3, 3), rngs=rngs), norm(c2), nnx.relu]
        layers += [lambda h: h.mean((1, 2)), nnx.Dropout(0.1, rngs=rngs)]
        model = nnx.Sequential(*layers, nnx.Linear(c2, ex.CLASSES, rngs=rngs))
        return model, nnx.Optimizer(model, ex.OPTIMIZER, wrt=nnx.Param)

    def update(model: Any, optimizer: Any, x: jax.Array, y: jax.Array) -> Any:
        loss, grads = nnx.value_and_grad(lambda m: ex.cross_entropy(m(x), y))(model)
        optimizer.update(model, grads)
        return loss

    @jax.jit
    def functional(graphdef: Any, state: Any, x: jax.Array, y: jax.Array) -> Any:
        model, optimizer = nnx.merge(graphdef, state)
        update(model, optimizer, x, y)
        return nnx.state((model, optimizer))

    return {
        "nnx.jit": (nnx.jit(update), (*made(), x, y)),
        "nnx split/merge, jax.jit": (functional, (*nnx.split(made()), x, y)),
    }


def _steps() -> dict[str, tuple[Any, Any]]:
    """name -> (jitted step, its arguments), for each library installed."""
    ex = example("cnn")
    model, (x, y) = ex.init_model(jax.random.key(0)), ex.make_data(jax.random.key(1), ex.BATCH)
    params, rest = tc.partition(model)

    @jax.jit
    def jax_step(params: Any, rest: Any, opt: Any, x: jax.Array, y: jax.Array) -> Any:
        def f(p: Any) -> Any:
            return ex.loss(tc.combine(p, rest), x, y)

        (_, updated), grads = jax.value_and_grad(f, has_aux=True)(params)
        updates, opt = ex.OPTIMIZER.update(grads, opt, params)
        rest = tc.partition(updated)[1]  # the statistics the forward pass computed
        return optax.apply_updates(params, updates), rest.replace(step=rest.step + 1), opt

    opt = ex.OPTIMIZER.init(params)
    steps = {
        "jax.value_and_grad, split params": (jax_step, (params, rest, opt, x, y)),
        "tc.value_and_grad": (jax.jit(ex.train_step), (model, opt, x, y)),
    }
    if eqx is not None:
        steps["eqx.filter_value_and_grad + filter_jit"] = _equinox_step(ex, x, y)
    with contextlib.suppress(ImportError):  # flax not installed: no nnx rows
        steps.update(_nnx_steps(ex, x, y))
    return steps


def _compiled_cost(step: Any, args: Any) -> str:
    """`flops / bytes accessed` of the compiled step, by XLA's cost analysis."""
    compiled = step.lower(*args).compile()
    cost = getattr(compiled, "compiled", compiled).cost_analysis()  # equinox wraps jax's
    return f"{cost.get('flops', 0):.0f} / {cost.get('bytes accessed', 0):.0f}"


def _step_table(quick: bool) -> Table:
    setups: dict[str, core.Setup] = {}
    costs = {}
    for name, (step, args) in _steps().items():
        jax.block_until_ready(step(*args))  # compile, and check the step runs
        costs[name] = f"{_compiled_cost(step, args)}; {len(jax.tree.leaves(args))} leaves in"
        setups[name] = ("step(*args)", {"step": step, "args": args}, jax.block_until_ready)
    notes = {"tc.value_and_grad": "whole model in and out", "nnx.jit": "its tutorials' form"}
    notes["nnx split/merge, jax.jit"] = "its performance guide's form"
    measurement = core.Measurement(
        "one jitted adamw training step, examples/cnn.py's CNN with BatchNorm, batch 64",
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
