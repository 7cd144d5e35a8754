"""Strict settings for the whole suite: JAX refuses implicit rank and dtype promotion,
and (pyproject.toml) every warning is an error."""

import os
from collections.abc import Generator

import hypothesis
import jax
import pytest
from forms import FORMS, Form

jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")

# Generated classes compile jitted functions: no per-example deadline, and fewer
# examples on CI's 2 cores. HYPOTHESIS_PROFILE=dev runs more locally.
hypothesis.settings.register_profile(
    "ci", max_examples=40, deadline=None, print_blob=True,
    suppress_health_check=[hypothesis.HealthCheck.too_slow],
)
hypothesis.settings.register_profile(
    "dev", max_examples=300, deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow],
)
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(params=FORMS, ids=lambda form: form.name)
def form(request: pytest.FixtureRequest) -> Form:
    """Each of the two ways to declare a treeclass (tests/forms.py)."""
    return request.param


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> Generator[None]:
    # pytest-randomly shuffles the tests and prints its seed in the header, which -q
    # hides. This line comes last before the counts, under -q too, so a failure seen
    # once can be replayed.
    result = yield
    seed = getattr(config.option, "randomly_seed", None)  # absent under -p no:randomly
    order = f"random, --randomly-seed={seed}" if isinstance(seed, int) else "as collected"
    hashing = os.environ.get("PYTHONHASHSEED", "unset (random per process)")
    terminalreporter.write_line(f"test order: {order}; PYTHONHASHSEED={hashing}")
    return result
