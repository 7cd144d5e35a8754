"""Whole models: nested update and training a model that holds more than parameters.

Two measurements, each interleaved round by round (`_timing.interleaved`), medians
with their interquartile range and the median per-round ratio to the first row:

1. Replacing a leaf 3 levels down (`m.block.layer.w`, three treeclasses):
   - the hand-written chain of `replace()` calls (the baseline),
   - `tc.replace_at(m, lambda m: m.block.layer.w, w)` (target: at most `REPLACE_TARGET`
     times the chain),
   - the same through a `where` that reads a closure variable, so its path is recorded
     on every call (the reader that is used when the path is not constant),
   - `eqx.tree_at` (when equinox is installed).
2. One jitted training step (forward, gradient, optax adamw, update; the model of
   examples/mlp.py: two `Linear` layers in a tuple, a bool mask, a PRNG key and an
   int32 step counter as fields):
   - `jax.value_and_grad` on parameters split from the rest once, outside the step,
     the step taking and returning `(params, rest, opt_state)` (the baseline),
   - `tc.value_and_grad` and `tc.apply_updates` on the whole model inside `jax.jit`
     (target: at most `STEP_TARGET` times the baseline, per call),
   - `eqx.filter_value_and_grad` inside `eqx.filter_jit` on the same model.

    python -m benchmarks.whole_models            # 1001 / 201 rounds
    python -m benchmarks.whole_models --quick    # 61 / 21 rounds (seconds)

`run(quick)` returns the tables (the `whole_models` section of `python -m benchmarks`).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import optax  # type: ignore[import-untyped]

import treeclass as tc
from benchmarks import _timing
from benchmarks._table import Table, stats_table

REPLACE_TARGET = 1.5  # tc.replace_at / the hand-written replace chain, same round
STEP_TARGET = 1.05  # tc.value_and_grad step / jax.value_and_grad step, same round
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "mlp.py"
STEP_ROUNDS = {True: 21, False: 201}
STEP_BATCH_S = 0.005  # a step takes tens of microseconds: batches of ~5 ms


@tc.treeclass
class Layer:
    w: jax.Array
    b: jax.Array
    act: str = tc.static("relu")


@tc.treeclass
class Block:
    layer: Layer
    scale: jax.Array


@tc.treeclass
class Model:
    block: Block
    bias: jax.Array


def _equinox() -> Any:
    try:
        import equinox
    except ImportError:
        return None
    return equinox


def _replace_table(quick: bool) -> Table:
    rounds, batch_s = _timing.mode(quick)
    m = Model(Block(Layer(jnp.ones(3), jnp.zeros(3)), jnp.ones(())), jnp.zeros(()))
    ns: dict[str, Any] = {"m": m, "v": jnp.zeros(3), "tc": tc, "where": lambda m: m.block.layer.w}
    name = "w"
    ns["where_closure"] = lambda m: getattr(m.block.layer, name)
    stmts = {
        "replace chain": "m.replace(block=m.block.replace(layer=m.block.layer.replace(w=v)))",
        "tc.replace_at": "tc.replace_at(m, where, v)",
        "tc.replace_at (recorded)": "tc.replace_at(m, where_closure, v)",
    }
    notes = {
        "tc.replace_at": f"target <= {REPLACE_TARGET}x; constant path, read once from the lambda",
        "tc.replace_at (recorded)": "where reads a closure variable: path recorded per call",
    }
    eqx = _equinox()
    if eqx is not None:
        ns["eqx"] = eqx
        stmts["eqx.tree_at"] = "eqx.tree_at(where, m, v)"
        notes["eqx.tree_at"] = "no checks run; leaves only"
    benches = {k: _timing.compile_loop(s, ns) for k, s in stmts.items()}
    stats = _timing.interleaved(benches, baseline="replace chain", rounds=rounds, batch_s=batch_s)
    return stats_table(
        "replace a leaf 3 treeclasses down", stats, base="chain", rounds=rounds, notes=notes
    )


def _example() -> ModuleType:
    """examples/ is not a package: load examples/mlp.py by path, once."""
    if "mlp_example" in sys.modules:
        return sys.modules["mlp_example"]
    spec = importlib.util.spec_from_file_location("mlp_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mlp_example"] = module  # before running: annotations resolve through it
    spec.loader.exec_module(module)
    return module


def _steps() -> dict[str, tuple[Any, Any]]:
    """name -> (jitted step, its arguments); each step returns what it takes."""
    ex = _example()
    model = ex.init_model(jax.random.key(0))
    x, y = ex.make_data(jax.random.key(1), ex.QUICK.samples)
    opt = optax.adamw(1e-3)

    @jax.jit
    def tc_step(model: Any, opt_state: Any) -> Any:
        _, grads = tc.value_and_grad(ex.loss)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, tc.partition(model)[0])
        model = tc.apply_updates(model, updates)
        return ex.advance(model), opt_state

    params, rest = tc.partition(model)

    @jax.jit
    def jax_step(params: Any, rest: Any, opt_state: Any) -> Any:
        def f(p: Any) -> Any:
            return ex.loss(tc.combine(p, rest), x, y)

        _, grads = jax.value_and_grad(f)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        rest = ex.advance(tc.combine(params, rest))  # the same state update
        return tc.partition(rest)[0], tc.partition(rest)[1], opt_state

    steps = {
        "jax.value_and_grad, split params": (jax_step, (params, rest, opt.init(params))),
        "tc.value_and_grad": (tc_step, (model, opt.init(params))),
    }
    eqx = _equinox()
    if eqx is not None:

        @eqx.filter_jit
        def eqx_step(model: Any, opt_state: Any) -> Any:
            _, grads = eqx.filter_value_and_grad(ex.loss)(model, x, y)
            updates, opt_state = opt.update(grads, opt_state, eqx.filter(model, eqx.is_inexact_array))
            model = eqx.apply_updates(model, updates)
            return ex.advance(model), opt_state

        steps["eqx.filter_value_and_grad + filter_jit"] = (eqx_step, (model, opt.init(params)))
    return steps


def _compiled_cost(step: Any, args: Any) -> str:
    """`flops / bytes accessed` of the compiled step, by XLA's cost analysis: equal
    figures say that two steps compile the same program, whatever the timing noise."""
    compiled = step.lower(*args).compile() if hasattr(step, "lower") else None
    if not hasattr(compiled, "cost_analysis"):
        return "-"  # eqx.filter_jit's lowering has no cost analysis to ask
    cost = compiled.cost_analysis()  # type: ignore[union-attr]
    return f"{cost.get('flops', 0):.0f} / {cost.get('bytes accessed', 0):.0f}"


def _step_table(quick: bool) -> Table:
    rounds = STEP_ROUNDS[quick]
    benches = {}
    costs = {}
    for name, (step, args) in _steps().items():
        out = jax.block_until_ready(step(*args))  # compile, and check the step runs
        jax.tree.map(lambda a, b: None, out, args)  # returns what it takes
        costs[name] = f"{_compiled_cost(step, args)}; {len(jax.tree.leaves(args))} leaves in"
        benches[name] = _timing.compile_loop(
            "step(*args)", {"step": step, "args": args}, sync=jax.block_until_ready
        )
    base = "jax.value_and_grad, split params"
    stats = _timing.interleaved(benches, baseline=base, rounds=rounds, batch_s=STEP_BATCH_S)
    notes = {
        "tc.value_and_grad": f"target <= {STEP_TARGET}x; whole model in and out",
        "eqx.filter_value_and_grad + filter_jit": "filter_jit partitions on every call",
    }
    return stats_table(
        "one jitted adamw training step, MLP with key, mask and step fields",
        stats,
        base="jax",
        rounds=rounds,
        notes=notes,
        extra=("XLA flops / bytes", costs),
    )


def run(quick: bool) -> list[Table]:
    """Both tables: nested update, then the training step."""
    print("  replace_at vs the replace chain ...", file=sys.stderr, flush=True)
    tables = [_replace_table(quick)]
    print("  training step ...", file=sys.stderr, flush=True)
    tables.append(_step_table(quick))
    return tables


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.whole_models",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="61 / 21 rounds (seconds)")
    args = parser.parse_args(argv)
    for table in run(args.quick):
        print(table.text(), end="\n\n")


if __name__ == "__main__":
    main()
