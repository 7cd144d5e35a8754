"""A PLN fit that converges: pyPLNmodels' algorithm (B and Sigma profiled in closed form,
Rprop on the variational M and S) in ONE compiled call, the whole state a treeclass.

The tutorial's optimizer (examples/pln.py: RAdam with a clipped unit step on B, M, S) is
still hundreds of ELBO units from the optimum after 1000 iterations. pyPLNmodels fits
the same model differently, and this module does what it does:

- the latent mean M is the mean of Z itself (not of Z - XB); for given M and S the
  ELBO's best B and Sigma have closed forms, B = (X'X)^-1 X'M and
  Sigma = ((M - XB)'(M - XB) + diag(sum S**2)) / n, so they are not optimised: the
  ELBO is "profiled" and only (M, S) move;
- the gradient of the profiled ELBO is the partial gradient at the closed-form B and
  Sigma (they are stationary points), written out: dM = Y - A - (M - XB) Omega and
  dS = 1/S - S A - S diag(Omega), with A = exp(O + M + S**2 / 2); it is checked
  against `jax.grad` in tests/examples/test_pln_profiled.py;
- the step is Rprop, with torch's rule and pyPLNmodels' settings (see `Rprop`);
- the loop is a `lax.while_loop` that stops when the ELBO has moved less than `tol`
  (relative) over the last `WINDOW` iterations, or at `max_iter`: one compiled call,
  no Python between iterations;
- float32 or float64: `--dtype float64` turns on `jax_enable_x64` before any array
  exists (the script's process only).

    python examples/pln_profiled.py --quick            # simulated, small
    python examples/pln_profiled.py --data oaks        # needs pyPLNmodels
    python examples/pln_profiled.py --dtype float64
"""

# ruff: noqa: N802, N803, N806, E741 - the PLN literature's names: Y, O, X, B, M, S, Sigma, Omega

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import treeclass as tc

WINDOW = 50  # iterations over which the ELBO's progress is measured for the stop


class Rprop(tc.TreeClass):
    """torch.optim.Rprop's rule, state and settings (pyPLNmodels: lr 0.01, step sizes
    in [1e-10, 50]), for a pytree of parameters. Per coordinate, with g the gradient of
    the loss and g_prev the one kept from the last step:

        g * g_prev > 0:  step *= eta_plus;  move by -sign(g) * step;  keep g
        g * g_prev < 0:  step *= eta_minus; do not move;               keep 0
        otherwise:       step unchanged;    move by -sign(g) * step;  keep g

    with the step clipped to [step_min, step_max]. Why not `optax.rprop`: optax 0.2.8
    applies each update one step late (its first update is zero), so its iterates are
    not torch's and the fit would not be pyPLNmodels'.
    """

    step: Any  # per-coordinate step sizes, the parameters' structure
    prev: Any  # the gradients kept from the last step
    eta_minus: tc.Static[float] = 0.5
    eta_plus: tc.Static[float] = 1.2
    step_min: tc.Static[float] = 1e-10
    step_max: tc.Static[float] = 50.0

    @classmethod
    def init(cls, params: Any, lr: float = 0.01) -> Rprop:
        return cls(
            step=jax.tree.map(lambda p: jnp.full_like(p, lr), params),
            prev=jax.tree.map(jnp.zeros_like, params),
        )

    def update(self, params: Any, grads: Any) -> tuple[Any, Rprop]:
        """One step on the loss whose gradient is `grads`: (new params, new state)."""

        def leaf(p: jax.Array, g: jax.Array, step: jax.Array, prev: jax.Array) -> Any:
            agree = jnp.sign(g * prev)
            factor = jnp.where(agree > 0, self.eta_plus, jnp.where(agree < 0, self.eta_minus, 1.0))
            step = jnp.clip(step * factor.astype(step.dtype), self.step_min, self.step_max)
            g = jnp.where(agree < 0, jnp.zeros_like(g), g)
            return p - jnp.sign(g) * step, step, g

        out = jax.tree.map(leaf, params, grads, self.step, self.prev)
        pick = lambda i: jax.tree.map(lambda _, o: o[i], params, out)  # noqa: E731
        return pick(0), self.replace(step=pick(1), prev=pick(2))


class Latent(tc.TreeClass):
    """The variational parameters: q(Z_i) = N(M_i, diag(S_i**2))."""

    M: jax.Array = tc.field(axes=("samples", None))  # (n, p) means of Z
    S: jax.Array = tc.field(axes=("samples", None))  # (n, p) standard deviations


class ProfiledPLN(tc.TreeClass):
    """The data, the variational parameters, the optimizer's state and the loop's
    counters: everything the compiled fit carries, one pytree."""

    Y: jax.Array = tc.field(axes=("samples", None))  # (n, p) counts
    O: jax.Array = tc.field(axes=("samples", None))  # (n, p) log offsets
    X: jax.Array = tc.field(axes=("samples", None))  # (n, d) covariates
    projector: jax.Array  # (d, n) (X'X)^-1 X', computed once: B = projector @ M
    log_y_factorial: jax.Array  # (n, p) Stirling's log Y!, float64 numpy, once
    latent: Latent
    rprop: Rprop
    elbo: jax.Array  # () the ELBO at `latent`
    gradient: Latent  # the negative ELBO's gradient at `latent`: one evaluation a step
    history: jax.Array  # (WINDOW,) the last ELBOs, for the stop
    iteration: jax.Array  # () int32, iterations done

    @classmethod
    def from_data(cls, Y: Any, O: Any, X: Any, dtype: Any = jnp.float32) -> ProfiledPLN:
        """pyPLNmodels' starting point: M = log(Y), with log 0 taken as log 1; S = 1/2."""
        Y64, X64 = np.asarray(Y, np.float64), np.asarray(X, np.float64)
        y = Y64 + (Y64 == 0)
        log_y = 0.5 * np.log(2 * np.pi * y) + y * np.log(y / np.e)
        as_ = lambda a: jnp.asarray(a, dtype)  # noqa: E731
        latent = Latent(M=as_(np.log(y)), S=as_(np.full(Y64.shape, 0.5)))
        model = cls(
            Y=as_(Y64),
            O=as_(O),
            X=as_(X64),
            projector=as_(np.linalg.solve(X64.T @ X64, X64.T)),
            log_y_factorial=as_(log_y),
            latent=latent,
            rprop=Rprop.init(latent),
            elbo=as_(-np.inf),
            gradient=latent,
            history=as_(np.full(WINDOW, -np.inf)),
            iteration=jnp.zeros((), jnp.int32),
        )
        elbo, gradient = model.grad(latent)
        return model.replace(elbo=elbo, gradient=gradient)

    @property
    def B(self) -> jax.Array:
        """(d, p) regression coefficients, closed form."""
        return self.projector @ self.latent.M

    @property
    def Sigma(self) -> jax.Array:
        """(p, p) latent covariance, closed form."""
        return self.profiled(self.latent)[1]

    def profiled(self, v: Latent) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """(ELBO, Sigma, Omega, A) at `v` with B and Sigma in closed form.

        ELBO = -n/2 log det Sigma + sum(Y (O + M) - A + log(S**2) / 2) - sum log Y!
        (the trace term equals n p / 2 at the closed-form Sigma and cancels the
        entropy's constant), as pyPLNmodels' `profiled_elbo_pln`.
        """
        n = self.Y.shape[0]
        R = v.M - self.X @ (self.projector @ v.M)
        S2 = jnp.square(v.S)
        Sigma = (R.T @ R + jnp.diag(jnp.sum(S2, axis=0))) / n
        chol = jnp.linalg.cholesky(Sigma)
        eye = jnp.eye(Sigma.shape[0], dtype=Sigma.dtype)
        Omega = jax.scipy.linalg.cho_solve((chol, True), eye)
        logdet = 2 * jnp.sum(jnp.log(jnp.diagonal(chol)))
        A = jnp.exp(self.O + v.M + S2 / 2)
        # log Y! is subtracted per entry, not as one precomputed total: Y (O + M), A and
        # log Y! nearly cancel entry by entry, and a float32 sum of the raw terms (~1e6)
        # followed by subtracting the total rounds the ELBO to multiples of 0.125,
        # coarser than the progress the stop rule has to see. log|S| = log(S**2) / 2:
        # S's sign is free.
        terms = self.Y * (self.O + v.M) - A - self.log_y_factorial + jnp.log(S2) / 2
        elbo = -n / 2 * logdet + jnp.sum(terms)
        return elbo, Sigma, Omega, A

    def grad(self, v: Latent) -> tuple[jax.Array, Latent]:
        """(ELBO, gradient of the negative profiled ELBO in M and S), written out."""
        elbo, _, Omega, A = self.profiled(v)
        R = v.M - self.X @ (self.projector @ v.M)
        dM = self.Y - A - R @ Omega
        dS = 1 / v.S - v.S * A - v.S * jnp.diagonal(Omega)[None, :]
        return elbo, Latent(M=-dM, S=-dS)

    @tc.jit
    def fit(self, max_iter: Any = 2000, tol: Any = 5e-7) -> ProfiledPLN:
        """Rprop steps until the ELBO gains less than `tol` (relative) over `WINDOW`
        iterations, or `max_iter` iterations: one compiled call. Both limits are traced,
        so changing them does not recompile."""
        tol = jnp.asarray(tol, self.elbo.dtype)

        def running(m: ProfiledPLN) -> jax.Array:
            gain = m.elbo - m.history[m.iteration % WINDOW]  # vs WINDOW iterations ago
            return (m.iteration < max_iter) & ~(jnp.abs(gain) <= tol * jnp.abs(m.elbo))

        def step(m: ProfiledPLN) -> ProfiledPLN:
            latent, rprop = m.rprop.update(m.latent, m.gradient)
            elbo, gradient = m.grad(latent)  # for the stop now, for the step next time
            return m.replace(
                latent=latent,
                rprop=rprop,
                elbo=elbo,
                gradient=gradient,
                history=m.history.at[m.iteration % WINDOW].set(m.elbo),
                iteration=m.iteration + 1,
            )

        return jax.lax.while_loop(running, step, self)


def fit_and_time(Y: Any, O: Any, X: Any, dtype: Any, max_iter: int, tol: float) -> dict[str, Any]:
    """Fits twice: the first call's wall time (trace, compile, run) and a compiled
    call's. Returns the fitted model and both times."""
    model = ProfiledPLN.from_data(Y, O, X, dtype)
    t0 = time.perf_counter()
    fitted = jax.block_until_ready(model.fit(max_iter, tol))
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    fitted = jax.block_until_ready(model.fit(max_iter, tol))
    return {"model": fitted, "first_s": first, "run_s": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="PLN fit with profiled B and Sigma and Rprop on (M, S), one compiled call."
    )
    parser.add_argument("--quick", action="store_true", help="n=200, p=5 simulated data")
    parser.add_argument("--data", choices=("simulated", "oaks"), default="simulated")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--max-iter", type=int, default=2000, help="iteration cap (2000)")
    parser.add_argument("--tol", type=float, default=5e-7, help="relative ELBO gain over 50 iterations")
    args = parser.parse_args(argv)
    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)  # before any array: this process only
    pln = _sibling_pln()
    if args.data == "oaks":
        data = pln.load_oaks_data()
    else:
        data = pln.simulate(200, 5, 2) if args.quick else pln.simulate(1000, 20, 2)
    out = fit_and_time(data.Y, data.O, data.X, jnp.dtype(args.dtype), args.max_iter, args.tol)
    m = out["model"]
    print(f"data:     {data.label}: n={data.Y.shape[0]}, p={data.Y.shape[1]}, d={data.X.shape[1]}")
    print(
        f"profiled: {args.dtype}, {int(m.iteration)} Rprop iterations, final ELBO "
        f"{float(m.elbo):.2f}; first call {out['first_s']:.2f} s (trace + compile + run), "
        f"compiled call {out['run_s']:.3f} s"
    )
    if data.B is not None and data.Sigma is not None:
        print(
            f"recovery: max |B - B_true| = {np.abs(np.asarray(m.B) - data.B).max():.3f}, "
            f"max |Sigma - Sigma_true| = {np.abs(np.asarray(m.Sigma) - data.Sigma).max():.3f}"
        )
    return 0


def _sibling_pln() -> Any:
    """examples/pln.py (the data loaders), loaded as pln.py loads its siblings."""
    import importlib.util
    from pathlib import Path

    if "pln" in sys.modules:
        return sys.modules["pln"]
    spec = importlib.util.spec_from_file_location("pln", Path(__file__).with_name("pln.py"))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pln"] = module
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    sys.exit(main())
