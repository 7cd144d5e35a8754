"""The parallel methods against the sequential ones, and the tuple uses of the states:
they must pass before and after treeclass.migrate rewrites the package."""

# The filtering literature's names (F, Q, P, K: matrices), kept as parsmooth writes them.
# ruff: noqa: N806

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from parsmooth_like import (
    FunctionalModel,
    MVNSqrt,
    MVNStandard,
    iterated_smoothing,
    parallel_filtering,
    parallel_smoothing,
    sequential_filtering,
    sequential_smoothing,
)
from parsmooth_like._base import to_sqrt, to_standard
from parsmooth_like.example import problem

# float32, 40 steps: the two orders of summation differ by a few ulps per step (1e-6
# measured on the means); 1e-4 leaves a hundredfold margin for other CPUs' kernels.
TOL = 1e-4


@pytest.fixture(scope="module")
def setup():
    ys, x0, transition, observation = problem()
    ekf, _ = sequential_filtering(ys, x0, transition, observation)
    nominal = sequential_smoothing(transition, ekf)
    return ys, x0, transition, observation, nominal


def test_parallel_filter_matches_sequential(setup):
    ys, x0, transition, observation, nominal = setup
    seq, ell = sequential_filtering(ys, x0, transition, observation, nominal)
    par = parallel_filtering(ys, x0, transition, observation, nominal)
    for a, b in zip(seq, par, strict=True):
        np.testing.assert_allclose(a, b, atol=TOL)
    assert np.isfinite(ell)


def test_parallel_smoother_matches_sequential(setup):
    ys, x0, transition, observation, nominal = setup
    filtered, _ = sequential_filtering(ys, x0, transition, observation, nominal)
    seq_m, seq_P = sequential_smoothing(transition, filtered, nominal)
    par_m, par_P = parallel_smoothing(transition, filtered, nominal)
    np.testing.assert_allclose(seq_m, par_m, atol=TOL)
    np.testing.assert_allclose(seq_P, par_P, atol=TOL)


def test_iterated_smoother_converges_either_way(setup):
    ys, x0, transition, observation, nominal = setup
    par, n_par = iterated_smoothing(ys, x0, transition, observation, nominal)
    seq, n_seq = iterated_smoothing(
        ys, x0, transition, observation, nominal, parallel_in_time=False
    )
    assert 1 <= int(n_par) < 20
    assert 1 <= int(n_seq) < 20
    np.testing.assert_allclose(par.mean, seq.mean, atol=10 * TOL)


def test_states_are_used_as_tuples(setup):
    *_, nominal = setup
    m, P = nominal
    assert nominal[0] is m
    assert nominal[1] is P
    assert len(nominal) == 2
    assert MVNStandard._fields == ("mean", "cov")
    moved = nominal._replace(mean=m + 1.0)
    np.testing.assert_array_equal(moved.mean, m + 1.0)
    assert moved.cov is P


def test_sqrt_form_round_trips_under_vmap(setup):
    *_, nominal = setup
    sqrt = jax.vmap(to_sqrt)(nominal)
    assert isinstance(sqrt, MVNSqrt)
    back = jax.vmap(to_standard)(sqrt)
    np.testing.assert_allclose(back.cov, nominal.cov, atol=TOL)


def test_a_model_unpacks_into_function_and_noise():
    _, _, transition, _ = problem()
    f, noise = transition
    assert isinstance(transition, FunctionalModel)
    assert f(jnp.zeros(2)).shape == (2,)
    assert noise.mean.shape == (2,)
