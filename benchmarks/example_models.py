"""The example models, timed as whole compiled programs: does the container cost
anything where a model spends its time?

- The PLN fit (examples/pln.py) in four containers, the same math in one `lax.scan`:
  `pln.compare()` times, round by round, the compile (after `jax.clear_caches()`) and
  one compiled call; the baseline is the PLN tutorial's NamedTuple.
- A LIF population (examples/neuron_models.py, BrainPy's `Lif`) in one jitted
  `lax.scan` returning the spike count per step: the treeclass `LIF` (a `@tc.jit`
  `step`, static parameters) against the same simulation with plain arrays, or (for
  compare.py) against brainpy. Every version must count the same spikes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from benchmarks import _timing
from benchmarks._examples import example
from benchmarks._table import Table, stats_table

# quick -> (n, p, d, iterations, compile rounds, run rounds)
PLN_SIZES = {False: (1000, 20, 2, 1000, 5, 15), True: (500, 20, 2, 200, 2, 9)}
# quick -> (neurons, steps, rounds, seconds per batch). A quick simulation is short
# enough to repeat within a batch; a full one is a batch on its own (0: one call).
LIF_SIZES = {False: (10_000, 10_000, 21, 0.0), True: (5_000, 5_000, 15, 0.05)}
# BrainPy's Lif defaults, as module constants for the plain version.
V_REST, V_RESET, V_TH, R, TAU, DT = 0.0, -5.0, 20.0, 1.0, 10.0, 0.1

Program = tuple[Callable[..., Any], tuple[Any, ...]]
"""A compiled simulation and its arguments; it returns the spike count per step."""


def pln_tables(quick: bool) -> list[Table]:
    """Compile time and one compiled call of the PLN fit, per container."""
    print("  PLN fit, four containers ...", file=sys.stderr, flush=True)
    pln = example("pln")
    n, p, d, steps, compile_rounds, run_rounds = PLN_SIZES[quick]
    results = pln.compare(
        pln.simulate(n, p, d, seed=0), steps, compile_rounds=compile_rounds, run_rounds=run_rounds
    )
    results.sort(key=lambda r: r.name != pln.BASELINE)  # the baseline first, as in every table
    last = {r.name: f"{float(r.losses[-1]):.2f}" for r in results}
    compiles = _timing.summarise({r.name: r.compile_s for r in results}, pln.BASELINE)
    runs = _timing.summarise({r.name: r.run_s for r in results}, pln.BASELINE)
    title = f"PLN fit, n={n} p={p} d={d}, {steps} iterations"
    return [
        stats_table(
            f"{title}: compile", compiles, base=pln.BASELINE, rounds=compile_rounds, unit="ms"
        ),
        stats_table(
            f"{title}: one compiled call",
            runs,
            base=pln.BASELINE,
            rounds=run_rounds,
            unit="ms",
            extra=("last loss", last),
        ),
    ]


def _ours(n: int, steps: int) -> dict[str, Program]:
    """The treeclass LIF and the same simulation with plain arrays."""
    nm = example("neuron_models")
    model = nm.LIF.create(n)
    current = jnp.linspace(15.0, 40.0, n)  # from below rheobase (V_TH / R) up
    ts = jnp.arange(steps, dtype=jnp.float32) * DT

    @jax.jit
    def treeclass_run(model: Any, current: jax.Array, ts: jax.Array) -> jax.Array:
        def body(m: Any, t: jax.Array) -> tuple[Any, jax.Array]:
            m = m.step(t, current)
            return m, m.spike.sum()

        return jax.lax.scan(body, model, ts)[1]

    @jax.jit
    def plain_run(v: jax.Array, spike: jax.Array, current: jax.Array, ts: jax.Array) -> jax.Array:
        def body(carry: tuple[jax.Array, jax.Array], t: jax.Array) -> tuple[Any, jax.Array]:
            v = nm.exp_euler(lambda x: (-x + V_REST + R * current) / TAU, carry[0], DT)
            spike = v >= V_TH
            return (jnp.where(spike, V_RESET, v), spike), spike.sum()

        return jax.lax.scan(body, (v, spike), ts)[1]

    return {
        "treeclass": (treeclass_run, (model, current, ts)),
        "plain arrays": (plain_run, (model.V, model.spike, current, ts)),
    }


def _brainpy(n: int, steps: int) -> dict[str, Program]:
    """brainpy's `Lif` under the same currents: `bm.for_loop` under `bm.jit`, and its
    `DSRunner` as a user calls it (whatever the runner does per call included)."""
    import brainpy as bp
    import brainpy.math as bm
    import numpy as np

    bm.set_dt(DT)

    class Driven(bp.DynamicalSystem):
        def __init__(self) -> None:
            super().__init__()
            self.lif = bp.dyn.Lif(n)
            self.current = bm.asarray(np.linspace(15.0, 40.0, n, dtype=np.float32))

        def update(self) -> Any:
            return self.lif(self.current)

    loop_net, runner_net = Driven(), Driven()

    @bm.jit
    def for_loop() -> Any:
        def step(i: Any) -> Any:
            loop_net.step_run(i)
            return loop_net.lif.spike.sum()

        return bm.for_loop(step, np.arange(steps))

    runner = bp.DSRunner(
        runner_net, monitors={"n": lambda: runner_net.lif.spike.sum()}, progress_bar=False
    )

    def run_runner() -> Any:
        runner.run(steps * DT)
        return runner.mon["n"]

    def from_rest(net: Any, run: Callable[[], Any]) -> Any:
        net.reset()  # every version starts from rest
        # brainpy promotes dtypes and ranks implicitly; JAX may be set stricter.
        with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
            return run()

    return {
        "brainpy bm.jit(for_loop)": (from_rest, (loop_net, for_loop)),
        "brainpy DSRunner.run": (from_rest, (runner_net, run_runner)),
    }


def lif_table(quick: bool, versus: str) -> Table:
    """The treeclass LIF against `versus`: "plain arrays" (the baseline, first) or
    "brainpy" (its two ways; the treeclass version is the baseline)."""
    print(f"  LIF population vs {versus} ...", file=sys.stderr, flush=True)
    n, steps, rounds, batch_s = LIF_SIZES[quick]
    ours, note = _ours(n, steps), ""
    if versus == "plain arrays":
        programs = {"plain arrays": ours["plain arrays"], "treeclass": ours["treeclass"]}
    else:
        programs = {"treeclass": ours["treeclass"]}
        try:
            programs.update(_brainpy(n, steps))
        except ImportError:
            note = "brainpy not installed (pip install '.[compare]'): ours only; "
    spikes = {name: int(jnp.sum(jnp.asarray(fn(*args)))) for name, (fn, args) in programs.items()}
    if len(set(spikes.values())) != 1:
        msg = f"the LIF versions count different spikes, so they are not the same simulation: {spikes}"
        raise AssertionError(msg)
    benches = {name: _timing.program(fn, *args) for name, (fn, args) in programs.items()}
    baseline = next(iter(programs))
    stats = _timing.interleaved(benches, baseline=baseline, rounds=rounds, batch_s=batch_s)
    return stats_table(
        f"LIF population, {n} neurons x {steps} steps, vs {versus}",
        stats,
        base=baseline,
        rounds=rounds,
        unit="ms",
        note=f"{note}{spikes[baseline]} spikes in every version (checked before timing)",
        extra=("steps/s", {name: f"{steps / s.median:,.0f}" for name, s in stats.items()}),
    )


def run(quick: bool) -> list[Table]:
    """The section: the PLN fit in four containers, the LIF population vs plain arrays."""
    return [*pln_tables(quick), lif_table(quick, "plain arrays")]
