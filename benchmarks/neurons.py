"""A LIF population simulated with `lax.scan`: the treeclass model of
examples/neuron_models.py against the same simulation written with plain arrays.

Both versions compile the same math (BrainPy's `Lif` under exponential Euler, a
constant current per neuron, `dt` = 0.1 ms) into one jitted `lax.scan` whose output is
the population spike count per step; they must agree exactly (checked before timing).
The treeclass version scans `LIF.step`, a `@tc.jit` method, over an instance whose
parameters are static fields; the plain version carries `(V, spike)` and reads the
parameters from module constants. So this measures what the treeclass costs in a
long-running simulation: the target is treeclass / plain within 1.02 (`TARGET`).

Each round runs a batch of whole simulations of each version back to back (rotating
which goes first; one simulation per batch at full size) and blocks on the result. We
report the medians and quartiles of the seconds per simulation and of the per-round
ratio, and steps per second.

    python -m benchmarks.neurons            # 10,000 neurons x 10,000 steps, 21 rounds
    python -m benchmarks.neurons --quick    # 5,000 x 5,000, 15 rounds (seconds)

`run(quick)` returns one dict per size (the rows printed).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp

from benchmarks import _timing

TARGET = 1.02  # treeclass seconds / plain-array seconds, same round
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "neuron_models.py"

# quick -> (neurons, steps, rounds, seconds per batch). A quick simulation takes ~10 ms,
# so a batch repeats it for ~50 ms; a full one (~50 ms and up) is a batch on its own.
SIZES = {False: (10_000, 10_000, 21, 0.0), True: (5_000, 5_000, 15, 0.05)}

# BrainPy's Lif defaults, as module constants for the plain version.
V_REST, V_RESET, V_TH, R, TAU, DT = 0.0, -5.0, 20.0, 1.0, 10.0, 0.1


def _example() -> ModuleType:
    """examples/ is not a package: load examples/neuron_models.py by path, once."""
    if "neuron_models" in sys.modules:
        return sys.modules["neuron_models"]
    spec = importlib.util.spec_from_file_location("neuron_models", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["neuron_models"] = module  # before running: annotations resolve through it
    spec.loader.exec_module(module)
    return module


def _versions(nm: ModuleType) -> tuple[Any, Any]:
    """`(treeclass_run, plain_run)`: jitted, each `(state..., current, ts) -> counts`."""

    @jax.jit
    def treeclass_run(model: Any, current: jax.Array, ts: jax.Array) -> jax.Array:
        def body(m: Any, t: jax.Array) -> tuple[Any, jax.Array]:
            m = m.step(t, current)
            return m, m.spike.sum()

        return jax.lax.scan(body, model, ts)[1]

    @jax.jit
    def plain_run(V: jax.Array, spike: jax.Array, current: jax.Array, ts: jax.Array  # noqa: N803
                  ) -> jax.Array:
        def body(carry: tuple[jax.Array, jax.Array], t: jax.Array
                 ) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
            V, _ = carry  # noqa: N806
            V = nm.exp_euler(lambda v: (-v + V_REST + R * current) / TAU, V, DT)  # noqa: N806
            spike = V >= V_TH
            return (jnp.where(spike, V_RESET, V), spike), spike.sum()

        return jax.lax.scan(body, (V, spike), ts)[1]

    return treeclass_run, plain_run


def _bench(fn: Any, *args: Any) -> Any:
    def bench(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            out = fn(*args)
        jax.block_until_ready(out)
        return (time.perf_counter() - start) / n

    return bench


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Times both versions at one size; returns one row.

    The row: `benchmark`, `neurons`, `steps`, `rounds`, `spikes` (total, the same for
    both), `treeclass_s` and `plain_s` (median seconds per simulation) with quartiles
    (`*_iqr`), `ratio` (median per-round treeclass / plain) with quartiles, `target`,
    `met`, and `steps_per_s` / `neuron_steps_per_s` of each version.
    """
    nm = _example()
    neurons, steps, rounds, batch_s = SIZES[quick]
    model = nm.LIF.create(neurons)
    current = jnp.linspace(15.0, 40.0, neurons)  # from below rheobase (20) to ~120 Hz
    ts = jnp.arange(steps, dtype=jnp.float32) * DT
    treeclass_run, plain_run = _versions(nm)

    tree_counts = jax.block_until_ready(treeclass_run(model, current, ts))
    plain_counts = jax.block_until_ready(plain_run(model.V, model.spike, current, ts))
    if not bool(jnp.array_equal(tree_counts, plain_counts)):
        msg = "treeclass and plain-array LIF simulations disagree: not the same simulation"
        raise AssertionError(msg)

    stats = _timing.interleaved(
        {
            "treeclass": _bench(treeclass_run, model, current, ts),
            "plain": _bench(plain_run, model.V, model.spike, current, ts),
        },
        baseline="plain",
        rounds=rounds,
        batch_s=batch_s,
    )
    tree, plain = stats["treeclass"], stats["plain"]
    return [{
        "benchmark": "neurons",
        "model": "LIF",
        "neurons": neurons,
        "steps": steps,
        "rounds": rounds,
        "spikes": int(tree_counts.sum()),
        "treeclass_s": tree.median,
        "treeclass_s_iqr": tree.iqr,
        "plain_s": plain.median,
        "plain_s_iqr": plain.iqr,
        "ratio": tree.ratio,
        "ratio_iqr": tree.ratio_iqr,
        "target": TARGET,
        "met": tree.ratio <= TARGET,
        "steps_per_s": {"treeclass": steps / tree.median, "plain": steps / plain.median},
        "neuron_steps_per_s": {
            "treeclass": neurons * steps / tree.median, "plain": neurons * steps / plain.median,
        },
    }]


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a fixed-width text table."""
    lines = [
        "LIF population in lax.scan, treeclass vs plain arrays; "
        "median [quartiles] over interleaved rounds",
        f"{'neurons':>8} {'steps':>7} {'rounds':>6} {'treeclass s':>24} {'plain s':>24} "
        f"{'ratio':>21} {'steps/s (tc)':>13} {'neuron-steps/s':>15}",
    ]
    for r in rows:
        tq, pq, rq = r["treeclass_s_iqr"], r["plain_s_iqr"], r["ratio_iqr"]
        lines.append(
            f"{r['neurons']:>8} {r['steps']:>7} {r['rounds']:>6} "
            f"{r['treeclass_s']:>8.4f} [{tq[0]:.4f}, {tq[1]:.4f}] "
            f"{r['plain_s']:>8.4f} [{pq[0]:.4f}, {pq[1]:.4f}] "
            f"{r['ratio']:>6.3f} [{rq[0]:.3f}, {rq[1]:.3f}] "
            f"{r['steps_per_s']['treeclass']:>13.0f} {r['neuron_steps_per_s']['treeclass']:>15.3g}"
        )
        verdict = "met" if r["met"] else "MISSED"
        lines.append(
            f"target: treeclass within {r['target']}x of plain arrays: {verdict} "
            f"({r['ratio']:.3f}); {r['spikes']} spikes in both"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.neurons",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="5,000 neurons x 5,000 steps")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print(table(run(quick=args.quick)))
    print(f"total runtime: {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
