"""examples/neuron_models.py and examples/neurons.py: the integrator against the
analytic solution, each model's defining behaviour, the E/I network's noise key, and
(when BrainPy is installed) the spikes against BrainPy's, step for step."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from example_modules import example_module

pytestmark = [
    pytest.mark.newest_jax,  # not run on the jax floor (.ci/run)
    pytest.mark.usefixtures("jax_defaults"),  # the example runs as users run it (conftest.py)
]
EXAMPLES = Path(__file__).parents[2] / "examples"
STEPS = 2000  # single-neuron runs: neurons.py --quick's length, so compiles are shared
NETWORK = (200, 300)  # neurons, steps: --neurons 200 --duration 30


@pytest.fixture(scope="module")
def nm() -> Iterator[ModuleType]:
    with example_module("neuron_models") as module:
        yield module


@pytest.fixture(scope="module")
def neurons(nm: ModuleType) -> Iterator[ModuleType]:
    # neurons.py imports neuron_models, which the nm fixture has registered.
    with example_module("neurons") as module:
        yield module

def _spike_steps(trace_spike: jax.Array, neuron: int = 0) -> np.ndarray:
    return np.flatnonzero(np.asarray(trace_spike)[:, neuron])


# --- the integrator ----------------------------------------------------------------------


def test_exprel_matches_float64(nm: ModuleType) -> None:
    z = np.array([-2.0, -0.01, -1e-6, 0.0, 1e-6, 0.3], dtype=np.float32)
    z64 = z.astype(np.float64)
    expected = np.where(z64 == 0, 1.0, np.expm1(z64) / np.where(z64 == 0, 1.0, z64))
    # float32 (e^z - 1) / z: the subtraction loses up to |1/z| ulps of e^z (the series
    # takes over below 1e-5); at z = -0.01, ~100 ulps of 1 = 1.2e-5 absolute, and the
    # series' truncation error z**3/24 is 4e-17: rtol 1e-5 on values near 1 holds
    # (measured: < 2e-6) on every libm, since exp is correctly rounded to ~1 ulp.
    np.testing.assert_allclose(np.asarray(nm.exprel(jnp.asarray(z))), expected, rtol=1e-5)


@pytest.mark.parametrize("dt", [0.1, 2.0])
def test_exp_euler_step_is_the_analytic_lif_solution(nm: ModuleType, dt: float) -> None:
    # tau dV/dt = -(V - V_rest) + R I is linear: V(dt) = V_inf + (V0 - V_inf) e^{-dt/tau}.
    # Exact for any dt: at dt = 2 ms (tau = 10) forward Euler is off by about 2 %.
    V0 = np.array([-5.0, 0.0, 7.5, 19.0], dtype=np.float32)
    current = 12.0
    lif = nm.LIF.create(4, V=jnp.asarray(V0), dt=dt)
    stepped = lif.step(jnp.float32(0.0), jnp.float32(current))
    v_inf = lif.V_rest + lif.R * current
    analytic = v_inf + (V0.astype(np.float64) - v_inf) * math.exp(-dt / lif.tau)
    # One float32 step: a few roundings of values below 25 (ulp 1.9e-6): ~10 ulps.
    np.testing.assert_allclose(np.asarray(stepped.V), analytic, rtol=0, atol=2e-5)
    if dt == 2.0:  # not a small-step approximation: forward Euler is 0.3 mV off
        forward_euler = V0 + dt * (v_inf - V0) / lif.tau
        assert np.abs(forward_euler - analytic).max() > 0.1


def test_exp_euler_many_steps_track_the_analytic_solution(nm: ModuleType) -> None:
    lif = nm.LIF.create(1)
    _, trace = nm.simulate(lif, jnp.full(500, 15.0))  # V_inf = 15 < V_th: no spike
    assert not bool(trace.spike.any())
    t = (np.arange(500) + 1) * lif.dt
    analytic = 15.0 * (1.0 - np.exp(-t / lif.tau))
    # 500 float32 steps of a contracting map (factor e^{-0.01}): the rounding error
    # stays below 100 x ulp(15) ~ 1e-4 even if every rounding went the same way.
    np.testing.assert_allclose(np.asarray(trace.V)[:, 0], analytic, rtol=0, atol=1e-4)


# --- single neurons -------------------------------------------------------------------------


def test_lif_constant_input_spikes_at_the_analytic_times(nm: ModuleType) -> None:
    lif = nm.LIF.create(1)
    current = 25.0
    _, trace = nm.simulate(lif, jnp.full(STEPS, current))
    steps = _spike_steps(trace.spike)
    # Step i integrates over [i dt, (i + 1) dt]: the first spike ends step ceil(T0/dt).
    first = math.ceil(lif.first_spike(current) / lif.dt)
    period = math.ceil(lif.period(current) / lif.dt)
    assert (first, period) == (161, 180)  # T0 = 16.09 ms, T = 17.92 ms: no rounding ties
    # Exact spike steps are safe in float32: the closest approach to V_th (float64
    # analytic) is 0.0028 mV above it at step 161 and 0.0088 mV below it at step 179
    # after a reset, while float32 rounding over the <= 180 steps since the last exact
    # reset (V <- V_reset) stays under 180 x 2 ulp(20) = 7e-4 mV.
    np.testing.assert_array_equal(steps, np.arange(first - 1, STEPS, period))
    # And the potential right after each spike is V_reset.
    np.testing.assert_array_equal(np.asarray(trace.V)[steps, 0], lif.V_reset)


def test_lif_f_i_curve_by_vmap_matches_the_analytic_counts(neurons: ModuleType) -> None:
    lif = neurons.LIF.create(1)
    currents = np.array([10.0, 21.0, 25.0, 40.0, 60.0], dtype=np.float32)
    counts = neurons.f_i_curve(lif, jnp.asarray(currents), jnp.zeros(1000))
    expected = [neurons.lif_spike_count(lif, float(c), 1000) for c in currents]
    # No near-ties (as above): the narrowest margin to V_th over these currents is
    # 0.0019 mV (I = 21, 326 steps after a reset), above 330 x 2 ulp(20) = 1.3e-3 mV.
    assert np.asarray(counts).tolist() == expected
    assert expected[0] == 0  # below rheobase (V_rest + R I <= V_th)


def test_refractory_period_respected(nm: ModuleType) -> None:
    ref = nm.LIFRef.create(1, tau_ref=5.0)
    _, trace = nm.simulate(ref, jnp.full(STEPS, 100.0))  # drive far above threshold
    steps = _spike_steps(trace.spike)
    t_spike = steps.astype(np.float32) * np.float32(ref.dt)  # the `t` of each spike's step
    V = np.asarray(trace.V)[:, 0]
    assert steps.size > 5
    for s, ts in zip(steps[:-1], t_spike[:-1], strict=True):
        held = np.flatnonzero(np.arange(STEPS, dtype=np.float32) * np.float32(ref.dt) - ts <= 5.0)
        held = held[held > s]
        assert held.size in (50, 51)  # 5 ms of 0.1 ms steps, up to float32 rounding of t
        np.testing.assert_array_equal(V[held], ref.V_reset)  # clamped, no integration
    isi = np.diff(steps) * ref.dt
    assert isi.min() > ref.tau_ref
    # Without the refractory period the same neuron fires much faster.
    _, free = nm.simulate(nm.LIF.create(1), jnp.full(STEPS, 100.0))
    assert np.diff(_spike_steps(free.spike)).max() * ref.dt < ref.tau_ref


def test_alif_threshold_adapts(nm: ModuleType) -> None:
    alif = nm.ALIF.create(1)
    final, trace = nm.simulate(alif, jnp.full(STEPS, 25.0))
    steps = _spike_steps(trace.spike)
    isi = np.diff(steps)
    assert steps.size >= 5
    assert np.all(np.diff(isi) > 0)  # each spike raises the threshold: slower and slower
    # a is the sum of exp(-age / tau_a) over past spikes; the threshold follows it.
    ages = (STEPS - 1 - steps) * alif.dt
    # a decays by a float32 factor each step: ~2000 roundings of 6e-8 relative: < 1.2e-4
    # worst case, ~3e-6 typical; rtol 1e-4 (measured: < 1e-5).
    np.testing.assert_allclose(float(final.a[0]), np.exp(-ages / alif.tau_a).sum(), rtol=1e-4)
    assert float(final.threshold[0]) == pytest.approx(alif.V_th + alif.beta * float(final.a[0]))
    # Reset by V_th - V_rest = 10 mV (less the step's integration, < 0.1 mV here). With
    # BrainPy's `V -= V_th` and these defaults V would jump 60 mV up and fire every step.
    V = np.asarray(trace.V)[:, 0]
    drop = V[steps - 1] - V[steps]
    assert np.all((drop > 9.9) & (drop < 10.0)), drop


def test_adex_runs_and_spikes(nm: ModuleType) -> None:
    adex = nm.AdEx.create(1)
    final, trace = nm.simulate(adex, jnp.full(STEPS, 20.0))
    steps = _spike_steps(trace.spike)
    assert steps.size > 5
    assert bool(jnp.all(jnp.isfinite(trace.V)))
    np.testing.assert_array_equal(np.asarray(trace.V)[steps, 0], adex.V_reset)
    isi = np.diff(steps)
    assert isi[-1] > isi[0]  # spike-frequency adaptation through w
    assert float(final.w[0]) > 0


def test_parameters_are_static_and_state_dynamic(nm: ModuleType) -> None:
    lif = nm.LIFRef.create(3, tau_ref=2.0)
    assert len(jax.tree.leaves(lif)) == 3  # V, spike, t_last_spike
    assert repr(lif).startswith("LIFRef(\n  V=f32[3],\n  spike=bool[3],")
    assert lif.replace(tau=5.0) != lif  # a parameter is part of the treedef


# --- the network ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def network_runs(nm: ModuleType) -> dict[str, object]:
    n, steps = NETWORK
    net = nm.EINet.create(n, seed=3)
    drive = jnp.full(steps, 20.0)
    before = nm.trace_count
    final, trace = nm.simulate(net, drive)
    _, again = nm.simulate(nm.EINet.create(n, seed=3), drive)
    _, reseeded = nm.simulate(net.replace(key=jax.random.key(4)), drive)
    return {"net": net, "final": final, "trace": trace, "again": again,
            "reseeded": reseeded, "compiles": nm.trace_count - before}


def test_network_runs_and_fires(network_runs: dict[str, object]) -> None:
    trace = network_runs["trace"]
    assert trace.spike.shape == NETWORK[::-1]
    assert 0 < int(trace.spike.sum()) < NETWORK[0] * NETWORK[1] // 10
    assert bool(jnp.all(jnp.isfinite(trace.V)))


def test_network_noise_key_advances_every_step(nm: ModuleType) -> None:
    net = nm.EINet.create(NETWORK[0], seed=0)  # the size other tests compiled
    noise = jax.jit(type(net).noise)  # one compile, not one per eager op
    key0, noise_E0, _ = noise(net)
    after = jax.jit(type(net).step)(net, jnp.float32(0.0), jnp.float32(20.0))
    assert np.array_equal(jax.random.key_data(after.key), jax.random.key_data(key0))
    _, noise_E1, _ = noise(after)
    assert not np.allclose(noise_E0, noise_E1)  # a fresh draw each step
    _, noise_E0_again, _ = noise(net)
    np.testing.assert_array_equal(noise_E0, noise_E0_again)  # pure: same key, same draw


def test_network_same_seed_same_result(network_runs: dict[str, object]) -> None:
    # Bit-exact by construction: the same compiled program on the same inputs and key,
    # in one process (XLA on CPU is deterministic run to run).
    np.testing.assert_array_equal(network_runs["trace"].spike, network_runs["again"].spike)
    np.testing.assert_array_equal(network_runs["trace"].V, network_runs["again"].V)


def test_network_new_key_new_noise_no_recompile(network_runs: dict[str, object]) -> None:
    assert not np.array_equal(network_runs["trace"].spike, network_runs["reseeded"].spike)
    assert network_runs["compiles"] <= 1  # 0 if another test compiled this shape first
    final, net = network_runs["final"], network_runs["net"]
    assert not np.array_equal(jax.random.key_data(final.key), jax.random.key_data(net.key))


def test_main_prints_and_plots(neurons: ModuleType, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")  # the [examples] extra, not [test]
    png = tmp_path / "neurons.png"
    n, steps = NETWORK
    argv = ["--quick", "--neurons", str(n), "--duration", str(steps * 0.1), "--plot", str(png)]
    assert neurons.main(argv) == 0
    out = capsys.readouterr().out
    assert "LIF:      I=25, first spike 16.1 ms, ISI 18.00 ms" in out
    assert "for 10/10" in out
    assert "same seed, same spikes: True; new seed, new spikes: True" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- BrainPy, spike for spike ---------------------------------------------------------------


def _brainpy_runs(
    bp: ModuleType, nm: ModuleType, n: int
) -> dict[str, tuple[object, object, float]]:
    """name: (BrainPy model, our model, input scale), with the same initial state."""
    return {
        "LIF": (bp.dyn.Lif(n), nm.LIF.create(n), 1.0),
        "LIFRef": (bp.dyn.LifRef(n, tau_ref=2.0), nm.LIFRef.create(n, tau_ref=2.0), 1.0),
        "AdEx": (bp.dyn.AdExIF(n, V_initializer=bp.init.Constant(-65.0)), nm.AdEx.create(n), 0.5),
        # V_rest = 0: the only case where BrainPy's ALIF reset (V -= V_th) is Bellec's.
        "ALIF": (
            bp.neurons.ALIFBellec2020(
                n, V_rest=0.0, V_th=10.0, tau_ref=2.0, V_initializer=bp.init.Constant(0.0)
            ),
            nm.ALIF.create(n, V_rest=0.0, V_th=10.0, tau_ref=2.0),
            0.5,
        ),
    }


@pytest.mark.parametrize("name", ["LIF", "LIFRef", "AdEx", "ALIF"])
def test_spikes_match_brainpy(nm: ModuleType, name: str) -> None:
    bp = pytest.importorskip("brainpy")
    n, steps = 30, 1500
    bp_model, ours, scale = _brainpy_runs(bp, nm, n)[name]
    inputs = np.tile(np.linspace(5.0, 60.0, n, dtype=np.float32) * scale, (steps, 1))
    runner = bp.DSRunner(bp_model, monitors=["spike", "V"], progress_bar=False)
    runner.run(inputs=inputs)
    _, trace = nm.simulate(ours, jnp.asarray(inputs))
    spikes = np.asarray(trace.spike)
    assert spikes.sum() > 100
    # Spike for spike, exactly: both sides run the same elementwise float32 operations
    # in the same order (neuron_models.py follows BrainPy's update order and its exprel
    # to the rounding), with no reduction in a step, compiled by the same XLA in this
    # process, and XLA does not reassociate float arithmetic. So the potentials are the
    # same IEEE results on any CPU (measured: max |V - V_brainpy| = 0 for all four
    # models) and no threshold comparison can differ. atol on V only guards against a
    # future XLA choosing FMA contraction differently for the two programs.
    np.testing.assert_array_equal(spikes, np.asarray(runner.mon["spike"]).astype(bool))
    np.testing.assert_allclose(np.asarray(trace.V), np.asarray(runner.mon["V"]), atol=1e-4)
