"""examples/counter.py: the tutorial's `jax.jit(static_argnums=(0,))` Counter loses its
count and compiles once per instance; the treeclass Counter counts, compiles once for
many instances, and steps in `lax.scan`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from types import ModuleType

import jax.numpy as jnp
import numpy as np
import pytest
from example_modules import example_module

pytestmark = [
    pytest.mark.newest_jax,  # not run on the jax floor (.ci/run)
    pytest.mark.usefixtures("jax_defaults"),  # the example runs as users run it (conftest.py)
]

@pytest.fixture(scope="module")
def counter() -> Iterator[ModuleType]:
    with example_module("counter", "counter_example") as module:
        yield module

def test_tutorial_counter_loses_its_count(counter: ModuleType) -> None:
    a = counter.TutorialCounter()
    a.inc()
    a.inc()
    a.inc()
    assert a.count == 1  # incremented once, while tracing; the compiled calls do nothing


def test_tutorial_counter_compiles_once_per_instance(counter: ModuleType) -> None:
    results = counter.tutorial_results(instances=6)
    assert results["seen"] == [0, 1, 1, 1]
    assert results["compiles"] == 6
    assert results["counts"] == [1] * 6
    assert results["kept_alive"]  # the jit cache holds every `self` it has seen


def test_treeclass_counter_counts_with_one_compile(counter: ModuleType) -> None:
    results = counter.treeclass_results(instances=200, scan_steps=50)
    assert results["seen"] == [0, 1, 2, 3]
    assert results["compiles"] == 1  # 200 instances x 3 calls
    assert results["counts"] == [i + 3 for i in range(200)]


def test_treeclass_counter_in_scan(counter: ModuleType) -> None:
    start = counter.Counter(count=jnp.asarray(7, jnp.int32))
    final, history = counter.count_in_scan(start, jnp.zeros(50))
    assert int(final.count) == 57
    np.testing.assert_array_equal(history, np.arange(7, 57))
    assert int(start.count) == 7  # the input counter is untouched


def test_mutating_method_raises_instead_of_losing_the_update(counter: ModuleType) -> None:
    bad = counter.MutatingCounter(count=jnp.zeros((), jnp.int32))
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"MutatingCounter\.count"):
        bad.inc()
    assert counter.mutation_error().startswith("FrozenInstanceError: cannot assign to")


def test_main_prints_the_comparison(
    counter: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert counter.main(["--instances", "4"]) == 0
    out = capsys.readouterr().out
    assert "tutorial:  counter 0 after 0..3 calls: [0, 1, 1, 1]" in out
    assert "tutorial:  4 counters x 3 calls: 4 compiles" in out
    assert "treeclass: 4 counters x 3 calls: 1 compile" in out
    assert "final count 100" in out
