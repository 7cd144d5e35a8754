"""Strict settings for the library's tests: JAX refuses implicit rank and dtype
promotion, and (pyproject.toml) every warning is an error.

The docs and the examples are code users copy, and users run JAX's defaults: the tests
that run them ask for the `jax_defaults` fixture (and run scripts without the strict
environment variables), so nothing the suite needs leaks into what users read.
"""

import os
from collections.abc import Generator, Iterator

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


@pytest.fixture(scope="module")
def jax_defaults() -> Iterator[None]:
    """JAX's default promotion rules (standard dtypes, rank promotion allowed) for a
    whole test module: `pytestmark = pytest.mark.usefixtures("jax_defaults")`.

    Module scope, so that the module's own module-scoped fixtures (an example loaded
    and run once) run under it too: pytest sets up the `usefixtures` names before the
    other fixtures of the same scope. Warnings stay errors.
    """
    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        yield


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
