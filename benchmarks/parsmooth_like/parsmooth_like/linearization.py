"""Extended (first-order Taylor) linearization of a model around a Gaussian."""

# The filtering literature's names (F, Q, P, K: matrices), kept as parsmooth writes them.
# ruff: noqa: N806

from typing import Any

import jax

from parsmooth_like._base import FunctionalModel, MVNSqrt, MVNStandard, to_standard


def extended(model: FunctionalModel, x: MVNStandard | MVNSqrt) -> tuple[Any, Any, Any]:
    """(F, Q, b) with function(z) ~ F @ z + b - noise mean, the noise covariance Q."""
    f, q = model
    m, _ = to_standard(x)
    F = jax.jacfwd(f)(m)
    b = f(m) - F @ m + q.mean
    return F, q.cov, b


def along(model: FunctionalModel, traj: MVNStandard) -> tuple[Any, Any, Any]:
    """extended() at every point of a trajectory."""
    return jax.vmap(extended, in_axes=(None, 0))(model, traj)
