"""The five NamedTuples: Gaussians in two forms, a model, and the two scan elements."""

# The filtering literature's names (F, Q, P, K: matrices), kept as parsmooth writes them.
# ruff: noqa: N806

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class MVNStandard(NamedTuple):
    """A Gaussian by its mean and covariance (one point, or a trajectory of them)."""

    mean: Any
    cov: Any


class MVNSqrt(NamedTuple):
    """A Gaussian by its mean and the lower Cholesky factor of its covariance."""

    mean: Any
    chol: Any


class FunctionalModel(NamedTuple):
    """x' = function(x) + noise, the noise a Gaussian."""

    function: Callable[[Any], Any]
    mvn: Any


class FilteringElement(NamedTuple):
    """One element of the parallel filter's associative scan."""

    A: Any
    b: Any
    C: Any
    eta: Any
    J: Any


class SmoothingElement(NamedTuple):
    """One element of the parallel smoother's associative scan."""

    E: Any
    g: Any
    L: Any


def to_standard(x: MVNStandard | MVNSqrt) -> MVNStandard:
    """Either form as a standard Gaussian."""
    if isinstance(x, MVNSqrt):
        m, chol = x
        return MVNStandard(m, chol @ chol.T)
    return x


def to_sqrt(x: MVNStandard) -> MVNSqrt:
    m, P = x
    return MVNSqrt(m, jnp.linalg.cholesky(P))


def none_or_concat(x0: MVNStandard, xs: MVNStandard) -> MVNStandard:
    """The trajectory with its first point in front."""
    return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), x0, xs)


def take(traj: MVNStandard, start: int, stop: int | None) -> MVNStandard:
    return jax.tree.map(lambda a: a[start:stop], traj)
