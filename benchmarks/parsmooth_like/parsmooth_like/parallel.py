"""The same filter and smoother in O(log T) span: lax.associative_scan over elements
(Sarkka and Garcia-Fernandez, 2021), linearized around a nominal trajectory."""

# The filtering literature's names (F, Q, P, K: matrices), kept as parsmooth writes them.
# ruff: noqa: N803, N806

from typing import Any

import jax
import jax.numpy as jnp

from parsmooth_like._base import (
    FilteringElement,
    FunctionalModel,
    MVNStandard,
    SmoothingElement,
    none_or_concat,
    take,
)
from parsmooth_like.linearization import along
from parsmooth_like.sequential import predict, update


def _first_element(F: Any, Q: Any, b: Any, H: Any, R: Any, c: Any, x0: MVNStandard, y: Any):
    m, P = update(H, R, c, predict(F, Q, b, x0), y)[0]
    zeros = jnp.zeros_like(P)
    return FilteringElement(zeros, m, P, jnp.zeros_like(m), zeros)


def _generic_element(F: Any, Q: Any, b: Any, H: Any, R: Any, c: Any, y: Any):
    S = H @ Q @ H.T + R
    K = jnp.linalg.solve(S, H @ Q).T
    v = y - H @ b - c
    HF = H @ F
    eta = HF.T @ jnp.linalg.solve(S, v)
    J = HF.T @ jnp.linalg.solve(S, HF)
    return FilteringElement(F - K @ HF, b + K @ v, Q - K @ H @ Q, eta, J)


def _filtering_operator(first: FilteringElement, second: FilteringElement) -> FilteringElement:
    A1, b1, C1, eta1, J1 = first
    A2, b2, C2, eta2, J2 = second
    eye = jnp.eye(A1.shape[0], dtype=A1.dtype)
    tmp = jnp.linalg.solve((eye + C1 @ J2).T, A2.T).T
    A = tmp @ A1
    b = tmp @ (b1 + C1 @ eta2) + b2
    C = tmp @ C1 @ A2.T + C2
    tmp = jnp.linalg.solve((eye + J2 @ C1).T, A1).T
    eta = tmp @ (eta2 - J2 @ b1) + eta1
    J = tmp @ J2 @ A1 + J1
    return FilteringElement(A, b, C, eta, J)


def filtering(
    ys: Any,
    x0: MVNStandard,
    transition: FunctionalModel,
    observation: FunctionalModel,
    nominal: MVNStandard,
) -> MVNStandard:
    """The filtered trajectory, x0 first."""
    F, Q, b = along(transition, take(nominal, 0, -1))
    H, R, c = along(observation, take(nominal, 1, None))
    first = _first_element(F[0], Q[0], b[0], H[0], R[0], c[0], x0, ys[0])
    rest = jax.vmap(_generic_element)(F[1:], Q[1:], b[1:], H[1:], R[1:], c[1:], ys[1:])
    elements = jax.tree.map(lambda a, z: jnp.concatenate([a[None], z]), first, rest)
    scanned = jax.lax.associative_scan(jax.vmap(_filtering_operator), elements)
    return none_or_concat(x0, MVNStandard(scanned.b, scanned.C))


def _smoothing_element(F: Any, Q: Any, b: Any, x: MVNStandard) -> SmoothingElement:
    m, P = x
    m_pred, P_pred = predict(F, Q, b, x)
    E = jnp.linalg.solve(P_pred, F @ P).T
    return SmoothingElement(E, m - E @ m_pred, P - E @ P_pred @ E.T)


def _smoothing_operator(later: SmoothingElement, earlier: SmoothingElement) -> SmoothingElement:
    E1, g1, L1 = later
    E2, g2, L2 = earlier
    return SmoothingElement(E2 @ E1, E2 @ g1 + g2, E2 @ L1 @ E2.T + L2)


def smoothing(
    transition: FunctionalModel, filtered: MVNStandard, nominal: MVNStandard
) -> MVNStandard:
    """The smoothed trajectory."""
    F, Q, b = along(transition, take(nominal, 0, -1))
    elements = jax.vmap(_smoothing_element)(F, Q, b, take(filtered, 0, -1))
    m_last, P_last = jax.tree.map(lambda a: a[-1], filtered)
    last = SmoothingElement(jnp.zeros_like(P_last), m_last, P_last)
    elements = jax.tree.map(lambda a, z: jnp.concatenate([a, z[None]]), elements, last)
    scanned = jax.lax.associative_scan(jax.vmap(_smoothing_operator), elements, reverse=True)
    return MVNStandard(scanned.g, scanned.L)
