"""What treeclass/_checkpoint/interop.py relies on in jax.export and flax.serialization, held
so that a test fails loudly the day upstream changes it (treeclass/README.md lists them).

Both libraries are reached through their public registration calls only. The one reach into
another library's import: flax finds serializers by exact type and has no hook, so classes
created before `flax.serialization` is imported are registered by a loader wrapped around
flax's own (the import system's public protocol), which hands the module its own loader back."""

import importlib.util
import inspect
import pathlib

import jax
import jax.numpy as jnp
import pytest
from fresh_process import run_fresh

import treeclass as tc

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_flax_registration_is_its_public_call():
    serialization = pytest.importorskip("flax.serialization")
    names = list(inspect.signature(serialization.register_serialization_state).parameters)
    assert names == ["ty", "ty_to_state_dict", "ty_from_state_dict", "override"]
    assert callable(serialization.current_path)  # named in our mismatch messages


def test_flax_serialization_is_loaded_by_a_loader_we_can_wrap():
    # `_RegisterAfter` delegates create_module and exec_module (PEP 451) to flax's loader.
    pytest.importorskip("flax")
    spec = importlib.util.find_spec("flax.serialization")
    assert spec is not None
    assert spec.loader is not None
    assert callable(spec.loader.create_module)
    assert callable(spec.loader.exec_module)


def test_flax_imported_later_keeps_its_own_loader_and_registers_earlier_classes():
    pytest.importorskip("flax")
    code = """
import sys
import jax.numpy as jnp
import treeclass as tc

class Early(tc.TreeClass):
    w: object

import flax.serialization as serialization
loaders = {type(serialization.__loader__), type(serialization.__spec__.loader)}
print([t.__name__ for t in loaders if t.__module__.startswith("treeclass")])
print([type(f).__name__ for f in sys.meta_path if type(f).__module__.startswith("treeclass")])
print(serialization.is_serializable(Early), serialization.to_state_dict(Early(1)))
"""
    assert run_fresh(code).splitlines() == [
        "[]",
        "[]",
        "True {'w': 1}",
    ]


def test_jax_export_builds_a_class_with_its_registered_unflatten():
    # No `from_children` is given: jax.export builds each node with the unflatten the class
    # registered (documented), and that runs no user code.
    pytest.importorskip("flatbuffers")
    parameters = inspect.signature(jax.export.register_pytree_node_serialization).parameters
    assert parameters["from_children"].default is None

    ran: list[str] = []

    class Built(tc.TreeClass):
        w: jax.Array

        def __post_init__(self) -> None:
            ran.append("post_init")

    exported = jax.export.export(jax.jit(lambda m: m))(Built(jnp.ones(2)))
    ran.clear()
    back = jax.export.deserialize(exported.serialize())
    assert type(jax.tree.unflatten(back.out_tree, [jnp.ones(2)])) is Built
    assert ran == []
