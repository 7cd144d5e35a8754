"""Every script in examples/ runs in its --quick mode and prints its key output; the
logistic regression example also fits what it claims to fit, checked in-process."""

from __future__ import annotations

import ast
import inspect
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import jax
import jax.numpy as jnp
import pytest
from example_modules import STRICT_VARIABLES, example_env, example_module, run_example

import treeclass as tc

pytestmark = [
    pytest.mark.newest_jax,  # not run on the jax floor (.ci/run)
    pytest.mark.usefixtures("jax_defaults"),  # as users run them (conftest.py)
]
ROOT = Path(__file__).parents[2]
# Every .py file in examples/ is a script that takes --help and --quick (the README
# says so), modules that other scripts import included: none is exempt.
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))

# What each example must print in --quick mode. A new example adds its line here.
KEY_OUTPUT = {
    "cnn.py": [
        "CNN.norm1.stats.mean  non-trainable",
        "60 adamw steps (weight decay 0.01) in one lax.scan",
        "none for the BatchNorm statistics",
        "bit for bit the same as without",
        "frozen:      everything but the head unchanged, bit for bit",
    ],
    "fit_logistic.py": ["loss:", "accuracy:", "jit:      compiled once for 2 fits"],
    "mlp.py": ["100 adamw steps in one lax.scan", "bit for bit the same as without"],
    "pln.py": [
        "treeclass",
        "namedtuple",
        "trajectories: the same for all 4 versions",
        "converged: B and Sigma profiled",
    ],
    "pln_profiled.py": ["profiled: float32,", "final ELBO", "recovery:"],
    "pln_containers.py": ["pytree_class", "trajectories: the same for all 3 versions"],
    "counter.py": ["tutorial:  counter 0 after 0..3 calls: [0, 1, 1, 1]", "1 compile", "scan:"],
    "neurons.py": ["f-I:", "for 10/10", "network:", "jit:      network compiled once"],
    "neuron_models.py": ["LIF:      I=25, 200 ms: 11 spikes, first at 16.1 ms", "AdEx:"],
    "brainpy_models.py": ["one jax.grad step: True", "linearnet:", "draws equal: False"],
    # Exits 1 unless scan == loop, vmap(init) == stack of inits, and a member trained
    # alone follows its loss curve in the ensemble.
    "stacked.py": [
        "Model(embed=f32[8,16], blocks=Block(w=f32[4,16,16], b=f32[4,16]), head=f32[16])",
        "the same as a loop over tc.unstack(blocks): True",
        "blocks=Block(w=f32[8,4,16,16], b=f32[8,4,16])",
        "the same as tc.stack of 8 inits: True",
        "8 members x 60 adamw steps, vmapped, in one lax.scan",
        "of the first loss: True",
        # tc.summary(model, depth=1): the stacked blocks are one row.
        "Model.blocks  trainable",
        "trainable: 1,232 parameters",
    ],
    # The script exits 1 unless both sharded runs match their one-device runs.
    "sharded.py": [
        "devices: 8 x cpu",
        "Y P('samples', None)",
        "V P('neurons',)",
        "result: the sharded runs match the single-device runs",
    ],
}


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (
        f"exit code {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    )
    return result.stdout


def test_examples_exist() -> None:
    assert [p.name for p in EXAMPLES] == sorted(KEY_OUTPUT)


@pytest.fixture(scope="module")
def settings_seen_by_module_fixtures() -> tuple[str, str]:
    # What an example loaded and run by a module-scoped fixture sees.
    return jax.config.jax_numpy_dtype_promotion, jax.config.jax_numpy_rank_promotion


def test_examples_run_under_jax_defaults(
    settings_seen_by_module_fixtures: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The library's own tests run strict (conftest.py); the examples run as users run
    # them, in this process and in subprocesses.
    assert settings_seen_by_module_fixtures == ("standard", "allow")
    assert (jax.config.jax_numpy_dtype_promotion, jax.config.jax_numpy_rank_promotion) == (
        "standard",
        "allow",
    )
    for name in STRICT_VARIABLES:
        monkeypatch.setenv(name, "strict")
    assert not set(STRICT_VARIABLES) & set(example_env())


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_quick(script: Path, tmp_path: Path) -> None:
    if script.name == "stacked.py" and "depth" not in inspect.signature(tc.summary).parameters:
        pytest.skip("tc.summary(depth=) is not here yet")
    out = _ok(run_example(script, "--quick", cwd=tmp_path))
    for line in KEY_OUTPUT[script.name]:
        assert line in out, f"{script.name} --quick did not print {line!r}:\n{out}"
    if script.name == "stacked.py":
        assert "Model.blocks.w" not in out  # depth=1 folds the blocks


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_help(script: Path, tmp_path: Path) -> None:
    out = _ok(run_example(script, "--help", cwd=tmp_path))
    assert "--quick" in out


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_says_what_it_shows(script: Path) -> None:
    docstring = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8")))
    assert docstring, f"{script.name} needs a module docstring saying what it shows"


def test_fit_logistic_adam(tmp_path: Path) -> None:
    pytest.importorskip("optax")  # the [examples] extra, not [test]
    script = ROOT / "examples" / "fit_logistic.py"
    out = _ok(run_example(script, "--quick", "--optimizer", "adam", cwd=tmp_path))
    assert "optimizer='adam'" in out
    assert "compiled once" in out


def test_fit_logistic_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the [examples] extra, not [test]
    script = ROOT / "examples" / "fit_logistic.py"
    png = tmp_path / "loss.png"
    _ok(run_example(script, "--quick", "--plot", str(png), cwd=tmp_path))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- the logistic regression, in-process ----------------------------------------------


@pytest.fixture(scope="module")
def logistic() -> Iterator[ModuleType]:
    with example_module("fit_logistic") as module:
        yield module

ACCURACY_THRESHOLD = 0.9  # the labels carry noise: the true rule scores about 0.95


def test_fit_logistic_learns(logistic: ModuleType) -> None:
    x, y = logistic.make_data(400)
    model, _ = logistic.initial_models()
    fitted, losses = logistic.fit(model, logistic.Fit(steps=300), x, y)

    assert losses.shape == (300,)
    assert float(losses[0]) == pytest.approx(float(jnp.log(2.0)), rel=1e-5)  # w = b = 0
    # Full-batch gradient descent with a step below 2/L on a smooth convex loss: every
    # step decreases it. In float32 the smallest decrease in these 300 steps (3.4e-5,
    # measured) is far above the rounding of a mean of losses near 0.3 (~1e-7), so the
    # 1e-6 slack is for rounding only and cannot hide an increase of that size.
    assert bool(jnp.all(jnp.diff(losses) <= 1e-6)), losses
    assert float(losses[-1]) < 0.5 * float(losses[0])
    assert float(fitted.accuracy(x, y)) > ACCURACY_THRESHOLD
    # The direction of the rule that generated the labels is recovered.
    true_w = jnp.array(logistic.TRUE_W)
    cosine = fitted.w @ true_w / (jnp.linalg.norm(fitted.w) * jnp.linalg.norm(true_w))
    assert float(cosine) > 0.99
    # Static hyper-parameters survive the fit; the weights are new arrays.
    assert fitted.l2 == model.l2
    assert type(fitted) is type(model)


def test_fit_logistic_compiles_once_per_static_config(logistic: ModuleType) -> None:
    x, y = logistic.make_data(64)
    zeros, random = logistic.initial_models()
    config = logistic.Fit(steps=17)  # a step count no other test uses
    before = logistic.trace_count
    logistic.fit(zeros, config, x, y)
    logistic.fit(random, config, x, y)  # new weights, same structure
    assert logistic.trace_count == before + 1
    logistic.fit(zeros, config.replace(learning_rate=0.25), x, y)  # a changed static
    assert logistic.trace_count == before + 2


def test_fit_logistic_rejects_unknown_optimizer(logistic: ModuleType) -> None:
    x, y = logistic.make_data(8)
    zeros, _ = logistic.initial_models()
    with pytest.raises(ValueError, match=r"Fit\.optimizer must be 'sgd' or 'adam'; got 'lbfgs'"):
        logistic.fit(zeros, logistic.Fit(steps=1, optimizer="lbfgs"), x, y)


def test_fit_logistic_model_is_a_pytree(logistic: ModuleType) -> None:
    model, _ = logistic.initial_models()
    assert repr(model) == "LogisticRegression(w=f32[2], b=f32[], l2=0.001)"
    leaves = jax.tree.leaves(model)
    assert len(leaves) == 2
    assert leaves[0] is model.w
    assert leaves[1] is model.b
