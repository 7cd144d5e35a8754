"""examples/brainpy_models.py: BrainPy's JIT-tutorial models as treeclasses train with
`jax.grad` and a scan, with nothing declared (`dyn_vars`) and nothing baked in."""

from __future__ import annotations

from collections.abc import Iterator
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
POINTS = 500  # one data size (and main's 200 steps) throughout: the compiles are shared


@pytest.fixture(scope="module")
def bm() -> Iterator[ModuleType]:
    with example_module("brainpy_models") as module:
        yield module

def test_tutorial_logistic_update_is_a_gradient_step(bm: ModuleType) -> None:
    X, Y = bm.logistic_data(jax.random.key(0), POINTS)
    model = bm.LogisticRegression.create(10)
    by_hand, by_grad = bm.tutorial_vs_grad(model, X, Y)
    # The same 500-term float32 sums in two orders (a hand-written dot vs autodiff):
    # each differs by up to 500 x 6e-8 = 3e-5 of the summed magnitudes (entries of w
    # reach ~150, so ~5e-3 absolute where terms cancel). Measured: 1.5e-5 absolute.
    np.testing.assert_allclose(by_hand, by_grad, rtol=1e-4, atol=1e-2)
    grad = jax.eval_shape(jax.grad(bm.LogisticRegression.summed_loss), model, X, Y)
    assert isinstance(grad, bm.LogisticRegression)  # d/d(self) is a model


def test_logistic_loss_decreases(bm: ModuleType) -> None:
    X, Y = bm.logistic_data(jax.random.key(1), POINTS)
    fitted, losses = bm.train(bm.LogisticRegression.create(10), X, Y, 1.0, steps=200)
    assert losses.shape == (200,)
    # Gradient descent with a step below 2/L on a smooth convex loss: every step helps.
    # The smallest decrease (measured: 4.6e-4) is far above float32 rounding of the
    # loss (~1e-7 at 0.2): the 1e-6 slack cannot hide a real increase.
    assert bool(jnp.all(jnp.diff(losses) <= 1e-6)), losses
    assert float(losses[-1]) < 0.25 * float(losses[0])
    assert float(fitted.accuracy(X, Y)) > 0.9


def test_linearnet_loss_decreases_with_the_tutorial_settings(bm: ModuleType) -> None:
    k_net, k_x, k_y = jax.random.split(jax.random.key(2), 3)
    net = bm.LinearNet.create(k_net, 100, 200)
    xs, ys = jax.random.uniform(k_x, (1000, 100)), jax.random.uniform(k_y, (1000, 1))
    trained, losses = bm.train(net, xs, ys, 1e-6, steps=30)
    assert bool(jnp.all(jnp.diff(losses) < 0)), losses
    assert float(losses[-1]) < 1e-4 * float(losses[0])
    assert float(trained.loss(xs, ys)) < float(losses[-1])
    assert jax.tree.structure(trained) == jax.tree.structure(net)


def test_new_learning_rate_does_not_recompile(bm: ModuleType) -> None:
    X, Y = bm.logistic_data(jax.random.key(3), POINTS)
    model = bm.LogisticRegression.create(10)
    bm.train(model, X, Y, 0.5, steps=200)
    before = bm.train._cache_size()
    bm.train(model.replace(w=jnp.zeros(10)), X, Y, 0.25, steps=200)  # new data, new rate
    assert bm.train._cache_size() == before


def test_linear_field_change_is_seen_without_dyn_vars(bm: ModuleType) -> None:
    linear = bm.Linear.create(jax.random.key(4), 10, 3)
    x = jnp.zeros(10)
    np.testing.assert_array_equal(linear.update(x), np.zeros(3))
    before = bm.Linear.update.trace_log.count
    # The tutorial's `bm.jit(l.update, dyn_vars=[l.w])` kept returning 1 after `b = 2`.
    np.testing.assert_array_equal(linear.replace(b=jnp.full(3, 2.0, jnp.float32)).update(x), 2.0)
    assert bm.Linear.update.trace_log.count == before  # a new value, not a new compile


def test_random_state_advances_under_jit(bm: ModuleType) -> None:
    rng = bm.RandomState(key=jax.random.key(1234))
    rng1, first = bm.draw_normal(rng, shape=(10,))
    _, second = bm.draw_normal(rng1, shape=(10,))
    assert not bool(jnp.any(first == second))  # the tutorial's f1() == f1() was all True
    _, again = bm.draw_normal(rng, shape=(10,))
    np.testing.assert_array_equal(first, again)  # same state, same draw


def test_main_prints_the_loss_curve(bm: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert bm.main(["--points", str(POINTS)]) == 0
    out = capsys.readouterr().out
    assert "tutorial update == one jax.grad step: True" in out
    assert "linearnet: 30 SGD steps" in out
    assert "two jitted draws equal: False" in out
