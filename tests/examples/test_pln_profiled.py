"""examples/pln_profiled.py: the PLN fit that converges (B and Sigma profiled, Rprop on
M and S). Its gradient against autodiff, its Rprop against torch's rule, the stop, the
recovery of B and Sigma on simulated data, float64 in its own process, and the oaks
data through pyPLNmodels' loader (the real one when installed, else its documented
return shape)."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from example_modules import example_module, run_example

pytestmark = [
    pytest.mark.newest_jax,  # not run on the jax floor (.ci/run)
    pytest.mark.usefixtures("jax_defaults"),  # the example runs as users run it (conftest.py)
]
pytest.importorskip("optax")  # examples/pln.py's tutorial optimizer (the [examples] extra)

EXAMPLE = Path(__file__).parents[2] / "examples" / "pln_profiled.py"
N, P, D = 2000, 5, 2  # tests/examples/test_pln.py's simulated data: the same truth, seed 0
OAKS_OPTIMUM = -31456.36  # the ELBO at pyPLNmodels' optimum on oaks (float64)


@pytest.fixture(scope="module")
def pln() -> Iterator[ModuleType]:
    with example_module("pln", "pln", "pln_containers", "pln_profiled") as module:
        yield module


@pytest.fixture(scope="module")
def pp(pln: ModuleType) -> ModuleType:
    return pln.profiled


@pytest.fixture(scope="module")
def data(pln: ModuleType) -> Any:
    return pln.simulate(N, P, D, seed=0)


@pytest.fixture(scope="module")
def fitted(pp: ModuleType, data: Any) -> Any:
    return pp.ProfiledPLN.from_data(data.Y, data.O, data.X).fit(2000, 5e-7)


# --- the gradient and the step ----------------------------------------------------------


def test_gradient_is_the_profiled_elbos(pp: ModuleType, data: Any) -> None:
    # The written-out gradient (partial derivatives at the closed-form B and Sigma)
    # against jax.grad of the profiled ELBO, B and Sigma differentiated through.
    model = pp.ProfiledPLN.from_data(data.Y[:200], data.O[:200], data.X[:200])
    rng = np.random.default_rng(0)
    v = model.latent.replace(
        M=model.latent.M + jnp.asarray(rng.normal(0, 0.3, (200, P)), jnp.float32),
        S=jnp.asarray(rng.uniform(0.2, 1.0, (200, P)), jnp.float32),
    )
    _, ours = jax.jit(model.grad)(v)
    auto = jax.jit(jax.grad(lambda v: -model.profiled(v)[0]))(v)
    # float32: entries up to ~180, each a handful of roundings; the terms that vanish
    # at the closed form (d/dB, d/dSigma) vanish in autodiff only to rounding through
    # a 5 x 5 Cholesky. Measured: 5e-8 of the largest entry; allowed 1e-5.
    for a, b in ((ours.M, auto.M), (ours.S, auto.S)):
        scale = float(jnp.abs(b).max())
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-5 * scale)


def test_rprop_is_torchs_rule(pp: ModuleType) -> None:
    # Four coordinates, one per branch of torch.optim.Rprop: gradient sign kept (step
    # x1.2, move), flipped (step x0.5, no move, gradient forgotten), no previous
    # gradient (step kept, move), and a step clipped at step_max.
    rprop = pp.Rprop(
        step=jnp.array([0.1, 0.1, 0.1, 45.0]), prev=jnp.array([2.0, 2.0, 0.0, 1.0])
    )
    params, grads = jnp.zeros(4), jnp.array([3.0, -3.0, -1.0, 1.0])
    new, state = rprop.update(params, grads)
    np.testing.assert_allclose(np.asarray(state.step), [0.12, 0.05, 0.1, 50.0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(new), [-0.12, 0.0, 0.1, -50.0], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(state.prev), [3.0, 0.0, -1.0, 1.0])
    # The next step after a sign flip: the forgotten gradient counts as "no previous".
    new2, state2 = state.update(new, jnp.array([3.0, -3.0, -1.0, 1.0]))
    assert float(state2.step[1]) == pytest.approx(0.05)
    assert float(new2[1]) == pytest.approx(0.05)


def test_optax_rprop_lags_one_step() -> None:
    # Why the rule is written out: optax's first update is zero, torch's is not.
    optax = pytest.importorskip("optax")
    opt = optax.rprop(0.01)
    params = jnp.ones(3)
    updates, _ = opt.update(jnp.ones(3), opt.init(params), params)
    np.testing.assert_array_equal(np.asarray(updates), 0.0)


# --- the loop ---------------------------------------------------------------------------


def test_stop_at_cap_and_at_tolerance_one_compile(pp: ModuleType, data: Any) -> None:
    model = pp.ProfiledPLN.from_data(data.Y[:200], data.O[:200], data.X[:200])
    before = pp.ProfiledPLN.fit.trace_log.count
    capped = model.fit(7, 0.0)  # tol 0: only the cap stops it
    assert int(capped.iteration) == 7
    loose = model.fit(5000, 1e-3)  # a 0.1 % gain over 50 iterations ends it early
    assert pp.WINDOW < int(loose.iteration) < 5000
    # The limits are traced arguments: neither call compiled anew.
    assert pp.ProfiledPLN.fit.trace_log.count - before <= 1
    assert float(loose.elbo) > float(capped.elbo) > float(model.elbo)


def test_fit_recovers_b_and_sigma(data: Any, fitted: Any) -> None:
    # The same truth and tolerances as tests/examples/test_pln.py (derived there: B's sampling
    # error ~0.02; Sigma's ~0.02 plus the variational estimate's bias towards smaller
    # variances). Measured for this fit, seed 0: 0.039 and 0.062 (relative 0.10); over
    # seeds 0-5: at most 0.047, 0.124 and 0.144.
    assert int(fitted.iteration) < 2000  # stopped by the tolerance, not the cap
    B, Sigma = np.asarray(fitted.B), np.asarray(fitted.Sigma)
    assert np.abs(B - data.B).max() < 0.1
    assert np.abs(Sigma - data.Sigma).max() < 0.2
    assert np.linalg.norm(Sigma - data.Sigma) / np.linalg.norm(data.Sigma) < 0.25


def test_converged_elbo_beats_the_tutorial_port(pln: ModuleType, data: Any, fitted: Any) -> None:
    # The port's loss is the negative of the same ELBO (same Stirling log Y!; its trace
    # and n p / 2 terms cancel at the closed-form Sigma), so the two compare directly.
    port = pln.PLN.from_data(data.Y, data.O, data.X)
    _, losses = port.fit(300)
    assert float(fitted.elbo) > -float(losses[-1])


def test_float64_in_its_own_process(tmp_path: Path) -> None:
    # jax_enable_x64 is process-wide: the script turns it on in a child process, so
    # this process stays float32. The two fits reach the same optimum: their ELBOs
    # agree to the stop's tolerance (5e-7 relative per 50 iterations, ~1e-3 here).
    outs = []
    for dtype in ("float32", "float64"):
        result = run_example(EXAMPLE, "--quick", "--dtype", dtype, cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"profiled: {dtype}," in result.stdout
        match = re.search(r"final ELBO (-?[\d.]+)", result.stdout)
        assert match, result.stdout
        outs.append(float(match.group(1)))
    assert outs[0] == pytest.approx(outs[1], abs=0.05)
    assert jnp.zeros(1).dtype == jnp.float32  # no x64 leaked into this process


# --- oaks --------------------------------------------------------------------------------


def _oaks_like(frame: Any = np.asarray) -> dict[str, Any]:
    """What pyPLNmodels' `load_oaks()` returns (pyPLNmodels/load_data/oaks.py, 1.0.x):
    `endog` counts (116 samples x 114 taxa, a DataFrame), `offsets` = np.log(raw
    offsets) (a DataFrame), and three per-sample covariate Series."""
    rng = np.random.default_rng(0)
    raw_offsets = rng.integers(1000, 50000, (116, 1)) * np.ones((1, 114), np.int64)
    return {
        "endog": frame(rng.poisson(3.0, (116, 114))),
        "offsets": frame(np.log(raw_offsets)),
        "tree": np.array(["susceptible"] * 116),
        "dist2ground": rng.uniform(0, 300, 116),
        "orientation": np.array(["SW", "NE"] * 58),
    }


@pytest.mark.parametrize("frames", ["numpy", "pandas"])
def test_oaks_adapter_reads_the_current_loader_shape(pln: ModuleType, frames: str) -> None:
    frame = np.asarray
    if frames == "pandas":
        pd = pytest.importorskip("pandas", reason="pandas is not installed (the real loader returns DataFrames)")
        frame = pd.DataFrame
    oaks = _oaks_like(frame)
    data = pln.oaks_data(oaks)
    assert data.Y.shape == data.O.shape == (116, 114)
    assert data.X.shape == (116, 1)
    np.testing.assert_array_equal(data.Y, np.asarray(oaks["endog"], np.float32))
    # The offsets are used as given: already logged, not logged again.
    np.testing.assert_allclose(data.O, np.asarray(oaks["offsets"]), rtol=1e-6)


def test_oaks_adapter_names_the_layout_it_needs(pln: ModuleType) -> None:
    old = {"counts": np.ones((3, 2)), "offsets": np.ones((3, 2))}  # an older loader's
    with pytest.raises(KeyError, match=r"keys \['counts', 'offsets'\].*counts under 'endog'"):
        pln.oaks_data(old)


_NO_PYPLN = importlib.util.find_spec("pyPLNmodels") is None


@pytest.mark.skipif(
    _NO_PYPLN,
    reason="pyPLNmodels is not installed (it pulls a ~6 GB CUDA torch, so neither CI nor "
    "the test extra installs it; pip install '.[compare]' to run this)",
)
# pyPLNmodels 1.0.10 imports pkg_resources, which setuptools deprecates on import, and
# its load_oaks() leaves the CSV files it reads open (ResourceWarning at collection).
@pytest.mark.filterwarnings("ignore:pkg_resources is deprecated:UserWarning")
@pytest.mark.filterwarnings("ignore:unclosed file:ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_oaks_with_the_real_loader_reaches_the_optimum(pln: ModuleType, pp: ModuleType) -> None:
    data = pln.load_oaks_data()
    assert data.Y.shape == (116, 114)
    fitted = pp.ProfiledPLN.from_data(data.Y, data.O, data.X).fit(5000, 5e-7)
    # float32: the ELBO's own rounding is ~0.005 here (measured against float64).
    assert abs(float(fitted.elbo) - OAKS_OPTIMUM) < 0.1
