"""The Kalman filter and the Rauch-Tung-Striebel smoother, one step at a time (lax.scan)."""

# The filtering literature's names (F, Q, P, K: matrices), kept as parsmooth writes them.
# ruff: noqa: N803, N806

from typing import Any

import jax
import jax.numpy as jnp

from parsmooth_like._base import FunctionalModel, MVNStandard, none_or_concat, take
from parsmooth_like.linearization import along, extended


def predict(F: Any, Q: Any, b: Any, x: MVNStandard) -> MVNStandard:
    m, P = x
    return MVNStandard(F @ m + b, F @ P @ F.T + Q)


def update(H: Any, R: Any, c: Any, x: MVNStandard, y: Any) -> tuple[MVNStandard, Any]:
    m, P = x
    S = R + H @ P @ H.T
    K = jnp.linalg.solve(S, H @ P).T
    v = y - H @ m - c
    ell = -0.5 * v @ jnp.linalg.solve(S, v)
    return MVNStandard(m + K @ v, P - K @ S @ K.T), ell


def filtering(
    ys: Any,
    x0: MVNStandard,
    transition: FunctionalModel,
    observation: FunctionalModel,
    nominal: MVNStandard | None = None,
) -> tuple[MVNStandard, Any]:
    """The filtered trajectory (x0 first) and the log-likelihood, up to a constant.
    Linearized around `nominal` (T + 1 points) when given, else around the estimate."""
    if nominal is None:

        def body(carry: tuple[MVNStandard, Any], y: Any) -> tuple[tuple[MVNStandard, Any], Any]:
            x, ell = carry
            x = predict(*extended(transition, x), x)
            x, step_ell = update(*extended(observation, x), x, y)
            return (x, ell + step_ell), x

        (_, ell), xs = jax.lax.scan(body, (x0, jnp.zeros(())), ys)
        return none_or_concat(x0, xs), ell

    trans = along(transition, take(nominal, 0, -1))
    obs = along(observation, take(nominal, 1, None))

    def linearized(
        carry: tuple[MVNStandard, Any], inputs: tuple[Any, Any, Any]
    ) -> tuple[tuple[MVNStandard, Any], Any]:
        x, ell = carry
        (F, Q, b), (H, R, c), y = inputs
        x = predict(F, Q, b, x)
        x, step_ell = update(H, R, c, x, y)
        return (x, ell + step_ell), x

    (_, ell), xs = jax.lax.scan(linearized, (x0, jnp.zeros(())), (trans, obs, ys))
    return none_or_concat(x0, xs), ell


def smoothing(
    transition: FunctionalModel, filtered: MVNStandard, nominal: MVNStandard | None = None
) -> MVNStandard:
    """The smoothed trajectory, backwards from the last filtered point."""
    points = take(filtered if nominal is None else nominal, 0, -1)
    F, Q, b = along(transition, points)

    def body(smoothed: MVNStandard, inputs: Any) -> tuple[MVNStandard, MVNStandard]:
        (F, Q, b), x = inputs
        m, P = x
        m_pred, P_pred = predict(F, Q, b, x)
        G = jnp.linalg.solve(P_pred, F @ P).T
        ms, Ps = smoothed
        out = MVNStandard(m + G @ (ms - m_pred), P + G @ (Ps - P_pred) @ G.T)
        return out, out

    last = jax.tree.map(lambda a: a[-1], filtered)
    _, xs = jax.lax.scan(body, last, ((F, Q, b), take(filtered, 0, -1)), reverse=True)
    return jax.tree.map(lambda a, z: jnp.concatenate([a, z[None]]), xs, last)
