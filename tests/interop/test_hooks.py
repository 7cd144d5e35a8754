"""The hooks into other libraries' internals that have no public route, each held by a test
that fails loudly when the library changes (treeclass/README.md says why each stays)."""

from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import pytest

import treeclass as tc
from treeclass._core.decorator import ON_CLASS


@pytest.fixture
def processed() -> Iterator[list[type]]:
    """The classes `@treeclass` / `TreeClass` process from now on."""
    seen: list[type] = []
    ON_CLASS.append(seen.append)
    yield seen
    ON_CLASS.remove(seen.append)


def test_a_class_cloudpickle_rebuilds_by_value_is_not_processed_again(processed: list[type]) -> None:
    # cloudpickle rebuilds a class pickled by value as an empty skeleton (types.new_class,
    # which runs TreeClass.__init_subclass__), then sets the processed class's attributes.
    # Nothing public tells that skeleton from `class A(Base): pass`, so decorator.py
    # recognises cloudpickle's `_make_skeleton_class` frame; if cloudpickle renames it,
    # the skeleton is processed (registered with JAX for the wrong fields) and this fails.
    cloudpickle = pytest.importorskip("cloudpickle")

    class Local(tc.TreeClass):  # local: pickled by value
        w: jax.Array

    processed.clear()
    again: Any = cloudpickle.loads(cloudpickle.dumps(Local))
    assert processed == [], "update TreeClass.__init_subclass__ (treeclass/_core/decorator.py)"
    assert again(jnp.ones(2)).w.tolist() == [1.0, 1.0]
