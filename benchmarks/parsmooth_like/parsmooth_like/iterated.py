"""The iterated smoother: linearize around the last smoothed trajectory until it
stops moving (lax.while_loop, the trajectory in the carry)."""

from typing import Any

import jax
import jax.numpy as jnp

from parsmooth_like import parallel, sequential
from parsmooth_like._base import FunctionalModel, MVNStandard


def iterated_smoothing(
    ys: Any,
    x0: MVNStandard,
    transition: FunctionalModel,
    observation: FunctionalModel,
    init: MVNStandard,
    *,
    parallel_in_time: bool = True,
    n_iter: int = 20,
    tolerance: float = 1e-4,
) -> tuple[MVNStandard, Any]:
    """The smoothed trajectory and how many iterations it took."""
    method = parallel if parallel_in_time else sequential

    def step(traj: MVNStandard) -> MVNStandard:
        filtered = method.filtering(ys, x0, transition, observation, traj)
        if not parallel_in_time:
            filtered, _ = filtered
        return method.smoothing(transition, filtered, traj)

    def cond(carry: tuple[Any, MVNStandard, Any]) -> Any:
        i, _, change = carry
        return (i < n_iter) & (change > tolerance)

    def body(carry: tuple[Any, MVNStandard, Any]) -> tuple[Any, MVNStandard, Any]:
        i, traj, _ = carry
        new = step(traj)
        return i + 1, new, jnp.max(jnp.abs(new.mean - traj[0]))

    start = (jnp.zeros((), jnp.int32), init, jnp.asarray(jnp.inf, init.mean.dtype))
    n, traj, _ = jax.lax.while_loop(cond, body, start)
    return traj, n
