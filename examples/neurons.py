"""Spiking neurons (LIF, LIF with refractory period, ALIF, AdEx) and an E/I network as
treeclasses, simulated with `lax.scan`, spike for spike as in BrainPy.

What it shows:

- a neuron population is one `tc.TreeClass` instance: parameters (`tau`, `V_th`, ...)
  are static fields, the state (`V`, `spike`, ...) is dynamic arrays, and `step(t, I)`
  (a `@tc.jit` method) returns the next state; `neuron_models.simulate` scans it;
- the models follow BrainPy's equations, defaults, update order and exponential Euler
  integrator, so the spikes agree with BrainPy's (tests/examples/test_neurons.py compares them
  when BrainPy is installed); with constant input they also agree with the analytic
  solution, which this script checks;
- `jax.vmap` over input currents (an f-I curve) with the model passed as an unbatched
  argument (`in_axes=(None, 0)`): one compile, nothing baked in;
- an E/I network whose noise key is a dynamic field, split at every step: the
  RandomState problem of BrainPy's JIT tutorial (a global RNG that must be declared in
  `dyn_vars` or it repeats itself) does not arise, and a new seed is new data, not a
  recompile.

The models live in neuron_models.py beside this script.

    python examples/neurons.py                 # 4000-neuron network, 200 ms
    python examples/neurons.py --quick         # a few seconds, used by the tests
    python examples/neurons.py --plot neurons.png
"""

# The physics' names (V, n_E) over pep8-naming's lowercase.
# ruff: noqa: N806

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import neuron_models
import numpy as np
from neuron_models import ALIF, LIF, AdEx, EINet, LIFRef, Trace, simulate

DT = 0.1  # ms, BrainPy's default step


def spike_times(spikes: Any) -> np.ndarray:
    """Times (ms) of the spikes of a single neuron's bool[steps] record: a spike at step
    `i` ends the step started at `i * dt`, so it is reported at `(i + 1) * dt`."""
    return (np.flatnonzero(np.asarray(spikes)) + 1) * DT


def single_neurons(steps: int) -> dict[str, tuple[Any, Trace]]:
    """Each model, one neuron, a constant input, `steps` steps: `{name: (model, trace)}`."""
    runs = {
        "LIF": (LIF.create(1), 25.0),
        "LIFRef": (LIFRef.create(1, tau_ref=5.0), 25.0),
        "ALIF": (ALIF.create(1), 25.0),
        "AdEx": (AdEx.create(1), 20.0),
    }
    out = {}
    for name, (model, current) in runs.items():
        _, trace = simulate(model, jnp.full(steps, current))
        out[name] = (model, trace)
    return out


def lif_spike_count(model: LIF, current: float, steps: int) -> int:
    """The analytic spike count of one LIF neuron from rest under a constant current:
    its first spike ends step `ceil(T0 / dt)` and then one every `ceil(T / dt)` steps
    (exponential Euler samples the exact solution, so only the rounding to steps is
    left)."""
    first, period = model.first_spike(current), model.period(current)
    if math.isinf(first):
        return 0
    n_first, n_period = math.ceil(first / model.dt), math.ceil(period / model.dt)
    return 0 if n_first > steps else 1 + (steps - n_first) // n_period


@jax.jit
def f_i_curve(model: LIF, currents: jax.Array, steps_like: jax.Array) -> jax.Array:
    """Spike counts of `model` (one neuron) under each constant current, vmapped.

    The model is an argument with `in_axes=None`, not a closure: its arrays are traced
    inputs, not constants of the compiled code. `steps_like` f32[steps] sets the length.
    """

    def count(m: LIF, current: jax.Array) -> jax.Array:
        _, trace = simulate(m, jnp.full(steps_like.shape, current))
        return trace.spike.sum()

    return jax.vmap(count, in_axes=(None, 0))(model, currents)


def run_network(n: int, steps: int, seed: int) -> dict[str, Any]:
    net = EINet.create(n, seed=seed)
    drive = jnp.full(steps, 20.0)  # BrainPy's EINet input
    traces_before = neuron_models.trace_count
    final, trace = simulate(net, drive)
    start = time.perf_counter()
    _, again = simulate(net, drive)  # compiled: this one times the simulation alone
    jax.block_until_ready(again)
    seconds_run = time.perf_counter() - start
    reseeded = net.replace(key=jax.random.key(seed + 1))  # new noise, same structure
    _, other = simulate(reseeded, drive)
    compiles = neuron_models.trace_count - traces_before
    spikes = np.asarray(trace.spike)
    n_E = net.E.V.shape[0]
    seconds = steps * net.dt / 1000
    return {
        "net": net,
        "final": final,
        "trace": trace,
        "n_E": n_E,
        "rate_E": spikes[:, :n_E].sum() / (n_E * seconds),
        "rate_I": spikes[:, n_E:].sum() / ((n - n_E) * seconds),
        "same_seed_same_spikes": bool(np.array_equal(spikes, np.asarray(again.spike))),
        "new_seed_new_spikes": not np.array_equal(spikes, np.asarray(other.spike)),
        "key_advanced": not np.array_equal(
            jax.random.key_data(final.key), jax.random.key_data(net.key)
        ),
        "compiles": compiles,
        "seconds": seconds_run,
    }


def plot(singles: dict[str, tuple[Any, Trace]], network: dict[str, Any],
         fi: tuple[np.ndarray, np.ndarray, np.ndarray], path: str) -> None:
    import matplotlib  # optional: only --plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(11, 9))
    grid = fig.add_gridspec(3, 4, height_ratios=[1.3, 1, 1])
    trace, n_E = network["trace"], network["n_E"]
    steps, n = trace.spike.shape
    t = (np.arange(steps) + 1) * DT

    raster = fig.add_subplot(grid[0, :])
    step_i, neuron = np.nonzero(np.asarray(trace.spike))
    exc = neuron < n_E
    raster.scatter(t[step_i[exc]], neuron[exc], s=0.5, c="tab:blue", label="E")
    raster.scatter(t[step_i[~exc]], neuron[~exc], s=0.5, c="tab:red", label="I")
    raster.set(xlim=(0, t[-1]), ylim=(0, n), xlabel="t (ms)", ylabel="neuron",
               title=f"E/I network: {n} LIFRef neurons, COBA synapses, noisy input")
    raster.legend(loc="upper right", markerscale=10)

    traces = fig.add_subplot(grid[1, :2])
    V = np.asarray(trace.V)
    for i in range(3):
        traces.plot(t, V[:, i], lw=0.8, label=f"E neuron {i}")
    traces.set(xlabel="t (ms)", ylabel="V (mV)", title="network membrane potentials")
    traces.legend(fontsize=7)

    currents, simulated, analytic = fi
    fi_ax = fig.add_subplot(grid[1, 2:])
    fi_ax.plot(currents, analytic, "-", c="gray", label="analytic")
    fi_ax.plot(currents, simulated, "o", ms=4, label="simulated (vmap)")
    fi_ax.set(xlabel="I", ylabel="rate (Hz)", title="LIF f-I curve")
    fi_ax.legend(fontsize=7)

    for col, (name, (model, tr)) in enumerate(singles.items()):
        ax = fig.add_subplot(grid[2, col])
        v = np.asarray(tr.V)[:, 0]
        ts = (np.arange(v.shape[0]) + 1) * DT
        ax.plot(ts, v, lw=0.8)
        spikes = spike_times(np.asarray(tr.spike)[:, 0])
        for spike in spikes:
            ax.axvline(spike, c="k", lw=0.3, alpha=0.3)
        if isinstance(model, ALIF):  # a = sum over past spikes of exp(-(t - t_k) / tau_a)
            past = ts[:, None] >= spikes[None, :]
            a = (past * np.exp(-(ts[:, None] - spikes[None, :]) / model.tau_a)).sum(axis=1)
            ax.plot(ts, model.V_th + model.beta * a, "--", c="tab:red", lw=0.8, label="threshold")
            ax.legend(fontsize=7, loc="lower right")
        ax.set(xlabel="t (ms)", title=name)
        if col == 0:
            ax.set_ylabel("V (mV)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Spiking neurons and an E/I network as treeclasses, BrainPy-compatible."
    )
    parser.add_argument("--neurons", type=int, default=None, help="network size (4000)")
    parser.add_argument("--duration", type=float, default=None, help="network time in ms (200)")
    parser.add_argument("--seed", type=int, default=0, help="network connectivity and noise")
    parser.add_argument(
        "--quick", action="store_true", help="a small run for tests: 400 neurons, 100 ms"
    )
    parser.add_argument("--plot", metavar="PATH", help="save raster and traces (needs matplotlib)")
    args = parser.parse_args(argv)
    if args.neurons is None:
        args.neurons = 400 if args.quick else 4000
    if args.duration is None:
        args.duration = 100.0 if args.quick else 200.0
    if args.neurons < 5 or args.duration <= 0:
        parser.error("--neurons must be at least 5 and --duration positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    single_steps = 2000 if args.quick else 5000

    singles = single_neurons(single_steps)
    lif, lif_trace = singles["LIF"]
    t_lif = spike_times(lif_trace.spike[:, 0])
    print(f"LIF:      I=25, first spike {t_lif[0]:.1f} ms, ISI {np.diff(t_lif).mean():.2f} ms "
          f"(analytic {lif.first_spike(25.0):.2f} and {lif.period(25.0):.2f} ms, rounded up to "
          f"whole steps of {DT} ms)")
    ref, ref_trace = singles["LIFRef"]
    t_ref = spike_times(ref_trace.spike[:, 0])
    print(f"LIFRef:   I=25, tau_ref={ref.tau_ref} ms, min ISI {np.diff(t_ref).min():.1f} ms "
          f"(LIF {np.diff(t_lif).min():.1f} ms + refractory)")
    alif, alif_trace = singles["ALIF"]
    isi = np.diff(spike_times(alif_trace.spike[:, 0]))
    print(f"ALIF:     I=25, {isi.size + 1} spikes, ISI {isi[0]:.1f} -> {isi[-1]:.1f} ms "
          f"(threshold adapts: beta={alif.beta}, tau_a={alif.tau_a} ms)")
    _, adex_trace = singles["AdEx"]
    isi = np.diff(spike_times(adex_trace.spike[:, 0]))
    print(f"AdEx:     I=20, {isi.size + 1} spikes, ISI {isi[0]:.1f} -> {isi[-1]:.1f} ms "
          f"(adaptation current w)")

    currents = np.linspace(15.0, 60.0, 10, dtype=np.float32)
    counts = np.asarray(f_i_curve(lif, jnp.asarray(currents), jnp.zeros(single_steps)))
    expected = np.array([lif_spike_count(lif, float(c), single_steps) for c in currents])
    seconds = single_steps * DT / 1000
    agree = int((counts == expected).sum())
    print(f"f-I:      {currents.size} currents in one vmap, spike counts equal to the "
          f"analytic ones for {agree}/{currents.size}")

    steps = round(args.duration / DT)
    network = run_network(args.neurons, steps, args.seed)
    print(f"network:  {network['net'].E.V.shape[0]} E + {network['net'].I.V.shape[0]} I LIFRef, "
          f"{args.duration:g} ms: E {network['rate_E']:.1f} Hz, I {network['rate_I']:.1f} Hz; "
          f"{steps / network['seconds']:.0f} steps/s once compiled")
    print(f"noise:    key advanced each step: {network['key_advanced']}; same seed, same "
          f"spikes: {network['same_seed_same_spikes']}; new seed, new spikes: "
          f"{network['new_seed_new_spikes']}")
    compiles = network["compiles"]
    verdict = "compiled once" if compiles == 1 else f"compiled {compiles} times"
    print(f"jit:      network {verdict} for 3 runs (2 seeds)")
    if args.plot:
        fi = (currents, counts / seconds, expected / seconds)
        plot(singles, network, fi, args.plot)
        print(f"plot:     {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
