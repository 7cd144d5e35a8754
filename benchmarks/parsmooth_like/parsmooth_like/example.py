"""A pendulum observed through the sine of its angle: every method run once."""

# The filtering literature's names (F, Q, P, K: matrices), kept as parsmooth writes them.
# ruff: noqa: N806

from typing import Any

import jax
import jax.numpy as jnp

from parsmooth_like import parallel, sequential
from parsmooth_like._base import FunctionalModel, MVNStandard, to_sqrt, to_standard
from parsmooth_like.iterated import iterated_smoothing

DT = 0.05
T = 40


def pendulum(x: Any) -> Any:
    angle, velocity = x
    return jnp.stack([angle + DT * velocity, velocity - 9.81 * DT * jnp.sin(angle)])


def sine_of_angle(x: Any) -> Any:
    return jnp.sin(x[:1])


def problem() -> tuple[Any, MVNStandard, FunctionalModel, FunctionalModel]:
    """Observations simulated from a fixed key, the prior, and the two models."""
    transition = FunctionalModel(pendulum, MVNStandard(jnp.zeros(2), 0.01 * DT * jnp.eye(2)))
    observation = FunctionalModel(sine_of_angle, MVNStandard(jnp.zeros(1), 0.1 * jnp.eye(1)))
    x0 = MVNStandard(jnp.array([1.0, 0.0]), 0.1 * jnp.eye(2))

    def simulate(x: Any, key: Any) -> tuple[Any, Any]:
        k1, k2 = jax.random.split(key)
        f, (_, Q) = transition
        x = f(x) + jnp.linalg.cholesky(Q) @ jax.random.normal(k1, (2,))
        return x, sine_of_angle(x) + 0.3 * jax.random.normal(k2, (1,))

    _, ys = jax.lax.scan(simulate, x0.mean, jax.random.split(jax.random.PRNGKey(0), T))
    return ys, x0, transition, observation


def run_all() -> dict[str, Any]:
    ys, x0, transition, observation = problem()
    # the models hold functions, not leaves: jit closes over them
    ekf, ell = jax.jit(lambda ys, x0: sequential.filtering(ys, x0, transition, observation))(ys, x0)
    ekf_smoothed = sequential.smoothing(transition, ekf)
    seq, _ = sequential.filtering(ys, x0, transition, observation, ekf_smoothed)
    par = jax.jit(
        lambda ys, x0, nominal: parallel.filtering(ys, x0, transition, observation, nominal)
    )(ys, x0, ekf_smoothed)
    par_smoothed = parallel.smoothing(transition, par, ekf_smoothed)
    iterated, n = iterated_smoothing(ys, x0, transition, observation, ekf_smoothed)
    sqrt = to_sqrt(jax.tree.map(lambda a: a[-1], iterated))
    return {
        "ekf": ekf,
        "log-likelihood": ell,
        "ekf smoothed": ekf_smoothed,
        "sequential filter": seq,
        "parallel filter": par,
        "parallel smoother": par_smoothed,
        "iterated": iterated,
        "iterations": n,
        "last point, sqrt form": to_standard(sqrt),
    }
