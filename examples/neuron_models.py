"""Spiking neuron models as treeclasses, ported from BrainPy (imported by neurons.py).

Each model is one `tc.TreeClass`: its parameters are static fields (Python floats in
the treedef, constants in the compiled code, hashable and printable) and its state is
dynamic (arrays of one entry per neuron: a population is one instance). A `step`
method returns the next state, so a simulation is `lax.scan(step, model, inputs)` and
no state is ever mutated.

The equations, parameter names, defaults and the order of each update follow BrainPy
(`brainpy.dyn.Lif`, `LifRef`, `AdExIF`, `ALIFBellec2020`, `Expon`, `COBA`, version
2.x), so that a run here and the same run in BrainPy give the same spikes (and, on CPU in
float32, bit-identical potentials: tests/examples/test_neurons.py compares them):

1. integrate every state variable over one step `dt` with the exponential Euler method
   (`exp_euler`), each variable holding the others at their old values (BrainPy's
   `JointEq`);
2. refractory neurons keep their old membrane potential;
3. spike where `V >= V_th`;
4. reset the spiking neurons, and record the spike time.

Units are BrainPy's: ms, mV, and currents in mV (R = 1). Deliberate differences from
BrainPy, each also noted where it applies:

- initial potentials default to `V_rest` (BrainPy initialises `V` to 0 mV for `Lif`,
  `LifRef` and `AdExIF`; equal for `Lif`'s default `V_rest = 0`);
- `ALIF` resets by `V_th - V_rest` (BrainPy subtracts `V_th`, which is the same only
  for `V_rest = 0`: see `ALIF`).
"""

# The physics names (V, I, E, tau_w) and BrainPy's parameter names (V_th, delta_T)
# are the point of this file: pep8-naming's lowercase rules, the ambiguous-name
# rule (for I) and the Yoda rule (which takes V for a constant) do not apply.
# ruff: noqa: N802, N803, N806, N815, E741, SIM300

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any, Self, TypeVar

import jax
import jax.numpy as jnp

import treeclass as tc

_N = TypeVar("_N", bound=Any)

# ---------------------------------------------------------------------------------------
# The integrator


def exprel(z: jax.Array) -> jax.Array:
    """`(e^z - 1) / z`, accurate near 0 (where it tends to 1).

    BrainPy's `bm.exprel`, to the rounding: the series `1 + z/2 + z^2/6` for
    `|z| <= 1e-5` (1e-8 in float64), `(exp(z) - 1)/z` elsewhere. `expm1(z)/z` would be
    more accurate in float32, but the last bits matter: the ALIF potential accumulates
    them, and with `expm1` one of 268 ALIF spikes (50 neurons, 3000 steps) came a step
    late (a near-tie with the adapted threshold). The `where` on the denominator keeps gradients
    finite at `z = 0`.
    """
    threshold = 1e-8 if z.dtype == jnp.float64 else 1e-5
    small = jnp.abs(z) <= threshold
    safe = jnp.where(small, jnp.ones_like(z), z)
    return jnp.where(small, 1.0 + z / 2.0 + z * z / 6.0, (jnp.exp(safe) - 1.0) / safe)


def exp_euler(f: Callable[[jax.Array], jax.Array], x: jax.Array, dt: float) -> jax.Array:
    """One exponential Euler step of `dx/dt = f(x)`, `f` acting elementwise.

        x_new = x + dt * exprel(dt * λ) * f(x),    λ = ∂f/∂x at x

    This is BrainPy's `exp_auto` method (the default of its neuron models), with `λ`
    from automatic differentiation as there: a vector-Jacobian product with ones,
    which for an elementwise `f` is the diagonal of the Jacobian. (`jax.jvp` gives the
    same slope but multiplies in another order; AdEx potentials then differ from
    BrainPy's in the last bits, enough to move about two dozen of 1215 spikes (50 neurons,
    3000 steps) by a step.) For a linear `f(x) = a x + b` the step is the exact
    solution over `dt`: `x_new = x e^{a dt} + (e^{a dt} - 1) b / a`.
    """
    fx, pullback = jax.vjp(f, x)
    (slope,) = pullback(jnp.ones_like(fx))
    return x + dt * exprel(dt * slope) * fx


# ---------------------------------------------------------------------------------------
# Neurons


class LIF(tc.TreeClass, kw_only=True):
    """Leaky integrate-and-fire population (BrainPy `bp.dyn.Lif`).

        tau dV/dt = -(V - V_rest) + R I;    V >= V_th  ->  spike, V <- V_reset

    Parameters (static; BrainPy's names and defaults): `V_rest` 0 mV, `V_reset` -5 mV,
    `V_th` 20 mV, `R` 1, `tau` 10 ms; `dt` 0.1 ms (BrainPy's default step).
    State (dynamic): `V` f32[n] membrane potential, `spike` bool[n] the last step's
    spikes.
    """

    V: jax.Array = tc.field(axes=("neurons",))  # named: tc.shardings splits the population
    spike: jax.Array = tc.field(axes=("neurons",))
    V_rest: tc.Static[float] = 0.0
    V_reset: tc.Static[float] = -5.0
    V_th: tc.Static[float] = 20.0
    R: tc.Static[float] = 1.0
    tau: tc.Static[float] = 10.0
    dt: tc.Static[float] = 0.1

    @classmethod
    def create(cls, n: int, *, V: jax.Array | None = None, **params: float) -> Self:
        """`n` neurons at rest (`V = V_rest`) unless `V` is given."""
        return _population(cls, n, V, params)

    def dV(self, V: jax.Array, I: jax.Array) -> jax.Array:
        return (-V + self.V_rest + self.R * I) / self.tau

    @tc.jit
    def step(self, t: jax.Array, I: jax.Array) -> Self:
        """The state after one step of `dt` ms from time `t` under input current `I`."""
        V = exp_euler(lambda v: self.dV(v, I), self.V, self.dt)
        spike = V >= self.V_th
        return self.replace(V=jnp.where(spike, self.V_reset, V), spike=spike)

    def period(self, I: float) -> float:
        """Analytic time (ms) from `V_reset` to `V_th` under a constant current `I`
        (`inf` if `V_rest + R I <= V_th`): `tau * log((V_inf - V_reset) / (V_inf - V_th))`."""
        return _time_to(self.V_reset, self.V_th, self.V_rest + self.R * I, self.tau)

    def first_spike(self, I: float) -> float:
        """Analytic time (ms) from `V_rest` to `V_th` under a constant current `I`."""
        return _time_to(self.V_rest, self.V_th, self.V_rest + self.R * I, self.tau)


class LIFRef(LIF, kw_only=True):
    """LIF with an absolute refractory period (BrainPy `bp.dyn.LifRef`).

    After a spike at time `t_spike` the potential is held (at `V_reset`) while
    `t - t_spike <= tau_ref`, exactly BrainPy's test, so the same float32 rounding of
    `t` decides the same boundary steps.

    Parameters: those of `LIF`, plus `tau_ref` (ms; BrainPy's default 0 means none).
    State: `V`, `spike`, and `t_last_spike` f32[n] (-1e7 before any spike).
    """

    t_last_spike: jax.Array
    tau_ref: tc.Static[float] = 0.0

    @tc.jit
    def step(self, t: jax.Array, I: jax.Array) -> Self:
        V = exp_euler(lambda v: self.dV(v, I), self.V, self.dt)
        refractory = (t - self.t_last_spike) <= self.tau_ref
        V = jnp.where(refractory, self.V, V)
        spike = V >= self.V_th
        return self.replace(
            V=jnp.where(spike, self.V_reset, V),
            spike=spike,
            t_last_spike=jnp.where(spike, t, self.t_last_spike),
        )


class ALIF(tc.TreeClass, kw_only=True):
    """Adaptive-threshold LIF of Bellec et al. 2020 (BrainPy `ALIFBellec2020`).

        tau dV/dt = -(V - V_rest) + R I;    tau_a da/dt = -a
        V >= V_th + beta a  ->  spike, V <- V - (V_th - V_rest), a <- a + 1

    Each spike raises the threshold by `beta`, decaying with `tau_a`: the neuron's
    firing rate adapts. Parameters (BrainPy's defaults): `V_rest` -70 mV, `V_th`
    -60 mV, `R` 1, `beta` 1.6, `tau` 20 ms, `tau_a` 2000 ms, `tau_ref` None (no
    refractory period). State: `V` (initially `V_rest`, BrainPy's -70 mV), `a` the
    adaptation (0), `spike`, `t_last_spike`.

    Reset: Bellec's `v <- v - v_th` measures `v` from rest. BrainPy writes
    `V -= V_th * spike`, which with its own defaults (`V_rest = -70`, `V_th = -60`)
    raises `V` by 60 mV at each spike; we subtract `V_th - V_rest`, which equals
    BrainPy's reset whenever `V_rest = 0`.
    """

    V: jax.Array
    a: jax.Array
    spike: jax.Array
    t_last_spike: jax.Array
    V_rest: tc.Static[float] = -70.0
    V_th: tc.Static[float] = -60.0
    R: tc.Static[float] = 1.0
    beta: tc.Static[float] = 1.6
    tau: tc.Static[float] = 20.0
    tau_a: tc.Static[float] = 2000.0
    tau_ref: tc.Static[float | None] = None
    dt: tc.Static[float] = 0.1

    @classmethod
    def create(cls, n: int, *, V: jax.Array | None = None, **params: float | None) -> Self:
        """`n` neurons at rest with no adaptation, unless `V` is given."""
        return _population(cls, n, V, params)

    @property
    def threshold(self) -> jax.Array:
        """The current spike threshold `V_th + beta a` (mV)."""
        return self.V_th + self.beta * self.a

    @tc.jit
    def step(self, t: jax.Array, I: jax.Array) -> Self:
        V = exp_euler(lambda v: (-(v - self.V_rest) + self.R * I) / self.tau, self.V, self.dt)
        a = exp_euler(lambda a: -a / self.tau_a, self.a, self.dt)
        t_last_spike = self.t_last_spike
        if self.tau_ref is not None:  # a static field: decided at trace time
            V = jnp.where((t - t_last_spike) <= self.tau_ref, self.V, V)
        spike = V >= self.V_th + self.beta * self.a  # the threshold before this spike
        if self.tau_ref is not None:
            t_last_spike = jnp.where(spike, t, t_last_spike)
        s = spike.astype(V.dtype)
        return self.replace(
            V=V - (self.V_th - self.V_rest) * s, a=a + s, spike=spike, t_last_spike=t_last_spike
        )


class AdEx(tc.TreeClass, kw_only=True):
    """Adaptive exponential integrate-and-fire population (BrainPy `bp.dyn.AdExIF`).

        tau   dV/dt = -(V - V_rest) + delta_T exp((V - V_T) / delta_T) - R w + R I
        tau_w dw/dt = a (V - V_rest) - w
        V >= V_th  ->  spike, V <- V_reset, w <- w + b

    Parameters (BrainPy's defaults): `V_rest` -65 mV, `V_reset` -68 mV, `V_th` -55 mV,
    `V_T` -59.9 mV, `delta_T` 3.48 mV, `a` 1, `b` 1, `tau` 10 ms, `tau_w` 30 ms, `R` 1.
    State: `V` (initially `V_rest`; BrainPy starts at 0 mV, above threshold), `w` (0),
    `spike`. The exponential term makes `dV/dt` nonlinear: exponential Euler then
    linearises it at each step, as BrainPy does.
    """

    V: jax.Array
    w: jax.Array
    spike: jax.Array
    V_rest: tc.Static[float] = -65.0
    V_reset: tc.Static[float] = -68.0
    V_th: tc.Static[float] = -55.0
    V_T: tc.Static[float] = -59.9
    delta_T: tc.Static[float] = 3.48
    a: tc.Static[float] = 1.0
    b: tc.Static[float] = 1.0
    tau: tc.Static[float] = 10.0
    tau_w: tc.Static[float] = 30.0
    R: tc.Static[float] = 1.0
    dt: tc.Static[float] = 0.1

    @classmethod
    def create(cls, n: int, *, V: jax.Array | None = None, **params: float) -> Self:
        """`n` neurons at rest with no adaptation current, unless `V` is given."""
        return _population(cls, n, V, params)

    def dV(self, V: jax.Array, w: jax.Array, I: jax.Array) -> jax.Array:
        spike_current = self.delta_T * jnp.exp((V - self.V_T) / self.delta_T)
        return (-V + self.V_rest + spike_current - self.R * w + self.R * I) / self.tau

    def dw(self, w: jax.Array, V: jax.Array) -> jax.Array:
        return (self.a * (V - self.V_rest) - w) / self.tau_w

    @tc.jit
    def step(self, t: jax.Array, I: jax.Array) -> Self:
        V = exp_euler(lambda v: self.dV(v, self.w, I), self.V, self.dt)
        w = exp_euler(lambda w: self.dw(w, self.V), self.w, self.dt)  # old V, as JointEq
        spike = V >= self.V_th
        return self.replace(
            V=jnp.where(spike, self.V_reset, V), w=jnp.where(spike, w + self.b, w), spike=spike
        )


def _population(cls: type[_N], n: int, V: jax.Array | None, params: Mapping[str, object]) -> _N:
    """`n` neurons of `cls` with `params`, at `V` (default `V_rest`), no spike, and the
    other state variables at their initial values."""
    initial = {"t_last_spike": jnp.full(n, -1e7), "a": jnp.zeros(n), "w": jnp.zeros(n)}
    dynamic = {f.name for f in tc.fields(cls) if not f.metadata.get("static")}
    state = {name: value for name, value in initial.items() if name in dynamic}
    model = cls(V=jnp.zeros(n), spike=jnp.zeros(n, dtype=bool), **state, **params)
    return model.replace(V=jnp.full(n, model.V_rest) if V is None else jnp.asarray(V))


def _time_to(v0: float, v1: float, v_inf: float, tau: float) -> float:
    """Time for `tau dV/dt = v_inf - V` to go from `v0` to `v1` (`inf` if never)."""
    if v_inf <= v1:
        return math.inf
    return tau * math.log((v_inf - v0) / (v_inf - v1))


# ---------------------------------------------------------------------------------------
# Simulation


class Trace(tc.TreeClass):
    """What `simulate` records at every step: `V` f32[steps, n], `spike` bool[steps, n]."""

    V: jax.Array
    spike: jax.Array


trace_count = 0  # how many times `simulate` was traced, i.e. compiled


@jax.jit
def simulate(model: _M, inputs: jax.Array) -> tuple[_M, Trace]:
    """Runs `model.step` once per row of `inputs` in one `lax.scan`.

    `inputs` is f32[steps] (one current for every neuron) or f32[steps, n]; step `i`
    runs at time `t = i * dt`, computed as BrainPy's runner does (in float32). Returns
    the final model and the `Trace` of `V` and `spike` after each step. One compile per
    model class, population size, step count and static parameters.
    """
    global trace_count  # Python side effects run once per trace
    trace_count += 1
    ts = jnp.arange(inputs.shape[0], dtype=jnp.float32) * model.dt

    def body(m: _M, t_i: tuple[jax.Array, jax.Array]) -> tuple[_M, Trace]:
        m = m.step(*t_i)
        return m, Trace(V=m.V, spike=m.spike)

    return jax.lax.scan(body, model, (ts, inputs))


# ---------------------------------------------------------------------------------------
# Synapses and an E/I network


class Expon(tc.TreeClass, kw_only=True):
    """Exponential synapse conductance (BrainPy `bp.dyn.Expon`).

        tau dg/dt = -g;   on each step: g <- exp_euler(g) + (weighted input spikes)

    Parameters: `tau` (BrainPy's default 8 ms), `dt`. State: `g` f32[n_post].
    """

    g: jax.Array
    tau: tc.Static[float] = 8.0
    dt: tc.Static[float] = 0.1

    def step(self, x: jax.Array) -> Self:
        return self.replace(g=exp_euler(lambda g: -g / self.tau, self.g, self.dt) + x)


class Projection(tc.TreeClass, kw_only=True):
    """Presynaptic spikes -> sparse weights -> `Expon` conductance -> COBA current.

    BrainPy's `ProjAlignPostMg1(comm=..., syn=Expon, out=COBA(E))`: the postsynaptic
    current is `g (E - V)`. Each postsynaptic neuron `j` receives `k` connections, from
    the presynaptic neurons `pre[j]` (int32[n_post, k]) with weights `w[j]`
    (f32[n_post, k]); both are dynamic fields, so new weights never recompile. A step
    gathers `n_post * k` spikes: at 4000 neurons that is 50 times less work than a dense
    `spike @ W`.
    """

    pre: jax.Array
    w: jax.Array
    syn: Expon
    E: tc.Static[float]  # reversal potential (mV)

    @classmethod
    def fixed_in_degree(
        cls, u: jax.Array, n_pre: int, *, weight: float, E: float, tau: float
    ) -> Self:
        """Connections from uniform draws `u` f32[n_post, k] in [0, 1): presynaptic
        neurons picked with replacement (NEST's `fixed_indegree` default), all with the
        same `weight`."""
        pre = jnp.minimum((u * n_pre).astype(jnp.int32), n_pre - 1)
        w = jnp.full(u.shape, weight, dtype=jnp.float32)
        return cls(pre=pre, w=w, syn=Expon(g=jnp.zeros(u.shape[0]), tau=tau), E=E)

    def step(self, pre_spike: jax.Array) -> Self:
        x = jnp.sum(pre_spike[self.pre].astype(self.w.dtype) * self.w, axis=1)
        return self.replace(syn=self.syn.step(x))

    def current(self, V: jax.Array) -> jax.Array:
        return self.syn.g * (self.E - V)


class EINet(tc.TreeClass, kw_only=True):
    """Excitatory and inhibitory `LIFRef` populations, sparse random COBA projections
    between and within them, and a noisy input current whose RNG key is a dynamic field.

    BrainPy's `EINet` example (after Brette et al. 2007, COBA): `V_rest` -60 mV, `V_th`
    -50 mV, `V_reset` -60 mV, `tau` 20 ms, `tau_ref` 5 ms, initial `V` ~ N(-55, 2);
    excitatory synapses `tau` 5 ms, `E` 0 mV, weight 0.6; inhibitory `tau` 10 ms,
    `E` -80 mV, weight 6.7; 80 % excitatory neurons. Spikes reach their targets one
    step later, as through BrainPy's delay buffer. Connectivity: BrainPy connects each
    pair with probability 0.02 (4000 neurons); here each neuron receives exactly the
    mean of that, 80 inputs (64 from E, 16 from I), which keeps the step sparse.

    The noise: each step draws `I_std * N(0, 1)` per neuron from `key` and stores the
    next key in the returned network. In BrainPy the RNG is a global `RandomState`
    that must be listed in `dyn_vars`, or the jitted function returns the same numbers
    every call; here the key is state like `V`, so it advances by construction, and
    two seeds share one compile.
    """

    E: LIFRef
    I: LIFRef
    EE: Projection  # from E to E
    EI: Projection  # from E to I
    IE: Projection  # from I to E
    II: Projection  # from I to I
    key: jax.Array
    I_std: tc.Static[float] = 1.0

    @classmethod
    def create(cls, n: int, *, seed: int = 0, k: float = 80.0, I_std: float = 1.0) -> Self:
        """`n` neurons (80 % excitatory), each receiving `k` connections (at most `n`),
        80 % of them from E. Compiled: built op by op, each operation would compile on
        first use."""
        return _build_einet(cls, jnp.asarray(seed), n=n, k=k, I_std=I_std)

    @classmethod
    def _build(cls, seed: jax.Array, *, n: int, k: float, I_std: float) -> Self:
        n_E = int(0.8 * n)
        k_V, k_w, key = jax.random.split(jax.random.key(seed), 3)
        # One draw for all potentials and one for all connections, cut into blocks: each
        # distinct random shape costs a compile.
        V = -55.0 + 2.0 * jax.random.normal(k_V, (n,))
        k_total = min(round(k), n)
        k_E = round(0.8 * k_total)  # inputs from E and from I in proportion to their sizes
        u = jax.random.uniform(k_w, (n, k_total))
        lif = {"V_rest": -60.0, "V_th": -50.0, "V_reset": -60.0, "tau": 20.0, "tau_ref": 5.0}
        exc = {"weight": 0.6, "E": 0.0, "tau": 5.0}
        inh = {"weight": 6.7, "E": -80.0, "tau": 10.0}
        E, I = slice(0, n_E), slice(n_E, n)
        from_E, from_I = slice(0, k_E), slice(k_E, k_total)
        return cls(
            E=LIFRef.create(n_E, V=V[E], **lif),
            I=LIFRef.create(n - n_E, V=V[I], **lif),
            EE=Projection.fixed_in_degree(u[E, from_E], n_E, **exc),
            EI=Projection.fixed_in_degree(u[I, from_E], n_E, **exc),
            IE=Projection.fixed_in_degree(u[E, from_I], n - n_E, **inh),
            II=Projection.fixed_in_degree(u[I, from_I], n - n_E, **inh),
            key=key,
            I_std=I_std,
        )

    @property
    def dt(self) -> float:
        return self.E.dt

    @property
    def V(self) -> jax.Array:
        return jnp.concatenate([self.E.V, self.I.V])

    @property
    def spike(self) -> jax.Array:
        """bool[n]: the excitatory neurons first."""
        return jnp.concatenate([self.E.spike, self.I.spike])

    def noise(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        """`(next_key, noise_E, noise_I)`: this step's input noise, drawn from `key`,
        and the key the next step draws from (`jax.random.split`: never reuse a key)."""
        key, sub = jax.random.split(self.key)
        n_E = self.E.V.shape[0]
        noise = self.I_std * jax.random.normal(sub, (n_E + self.I.V.shape[0],))
        return key, noise[:n_E], noise[n_E:]

    def step(self, t: jax.Array, I: jax.Array) -> Self:
        """One step; `I` is the mean input current (BrainPy's example drives with 20)."""
        key, noise_E, noise_I = self.noise()
        EE, EI = self.EE.step(self.E.spike), self.EI.step(self.E.spike)
        IE, II = self.IE.step(self.I.spike), self.II.step(self.I.spike)
        to_E = EE.current(self.E.V) + IE.current(self.E.V) + I + noise_E
        to_I = EI.current(self.I.V) + II.current(self.I.V) + I + noise_I
        return self.replace(
            E=self.E.step(t, to_E), I=self.I.step(t, to_I), EE=EE, EI=EI, IE=IE, II=II, key=key
        )


@functools.partial(jax.jit, static_argnums=0, static_argnames=("n", "k", "I_std"))
def _build_einet(cls: type[EINet], seed: jax.Array, *, n: int, k: float, I_std: float) -> EINet:
    return cls._build(seed, n=n, k=k, I_std=I_std)


_M = LIF | ALIF | AdEx | EINet  # what `simulate` runs: anything with step(t, I), V, spike, dt


# ---------------------------------------------------------------------------------------
# As a script: one neuron of each model under one constant current (neurons.py has the
# full demonstration; this module is mostly imported).


def main(argv: list[str] | None = None) -> int:
    import argparse  # only the script needs it

    import numpy as np

    parser = argparse.ArgumentParser(
        description="One neuron of each model (LIF, LIFRef, ALIF, AdEx) under a constant "
        "current, in one lax.scan each: spike counts and first spike times. The models "
        "are imported by examples/neurons.py, which shows more."
    )
    parser.add_argument("--quick", action="store_true", help="200 ms instead of 1 s")
    parser.add_argument("--current", type=float, default=25.0, help="input, mV (R = 1): 25")
    args = parser.parse_args(argv)
    steps = 2000 if args.quick else 10000
    models = (LIF.create(1), LIFRef.create(1, tau_ref=5.0), ALIF.create(1), AdEx.create(1))
    for model in models:
        _, trace = simulate(model, jnp.full(steps, args.current, jnp.float32))
        spikes = np.flatnonzero(np.asarray(trace.spike)[:, 0])
        first = f"first at {(spikes[0] + 1) * model.dt:.1f} ms" if spikes.size else "none"
        print(f"{type(model).__name__ + ':':<9} I={args.current:g}, {steps * model.dt:g} ms: "
              f"{spikes.size} spikes, {first}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
