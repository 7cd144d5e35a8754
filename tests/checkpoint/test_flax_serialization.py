"""treeclasses in flax.serialization (treeclass/_checkpoint/interop.py): `to_state_dict`,
`from_state_dict`, `to_bytes`, `from_bytes` work on instances as on flax.struct classes,
whether the class was created before or after flax was imported; `import treeclass`
never imports flax. Skipped where flax is not installed."""

import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from checkpoints import Model, assert_identical, model
from forms import Form
from fresh_process import TESTS, run_fresh

import treeclass as tc

serialization = pytest.importorskip("flax.serialization")
struct = pytest.importorskip("flax.struct")

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_state_dict_is_treeclass_state_dict():
    m = model()
    state = serialization.to_state_dict(m)
    assert jax.tree.structure(state) == jax.tree.structure(tc.to_state_dict(m))
    assert state["head"]["w"] is m.head.w
    assert "act" not in state["head"]  # statics come from the target, as in flax.struct
    restored = serialization.from_state_dict(model(scale=1.0), state)
    assert type(restored) is Model
    assert_identical(restored, m)


def test_bytes_round_trip_in_both_forms(form: Form):
    @form.decorate
    class Layer(*form.bases):
        w: jax.Array
        b: Any
        act: tc.Static[str] = "relu"

    @form.decorate
    class Net(*form.bases):
        layers: list[Layer]
        step: int

    net = Net([Layer(jnp.arange(3.0), 0.5), Layer(jnp.ones((2, 2), jnp.bfloat16), None)], 7)
    target = Net([Layer(jnp.zeros(3), 0.0), Layer(jnp.zeros((2, 2), jnp.bfloat16), None)], 0)
    restored = serialization.from_bytes(target, serialization.to_bytes(net))
    assert type(restored) is Net
    assert type(restored.layers[0]) is Layer
    assert restored.layers[0].act == "relu"
    assert tc.tree_equal(restored, net)  # leaves come back as numpy, as flax gives them
    assert restored.layers[1].w.dtype == jnp.bfloat16


def test_flax_struct_and_treeclass_nest_both_ways():
    @struct.dataclass
    class Opt:
        lr: float
        mu: jax.Array

    @tc.treeclass
    class Train:
        opt: Opt
        w: jax.Array

    @struct.dataclass
    class Outer:
        train: Train

    outer = Outer(Train(Opt(0.1, jnp.ones(2)), jnp.arange(2.0)))
    state = serialization.to_state_dict(outer)
    assert state == {"train": {"opt": {"lr": 0.1, "mu": outer.train.opt.mu}, "w": outer.train.w}}
    target = Outer(Train(Opt(0.0, jnp.zeros(2)), jnp.zeros(2)))
    assert tc.tree_equal(serialization.from_bytes(target, serialization.to_bytes(outer)), outer)


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({"layers": {}}, r"^Model at \.: structure differs \(missing from the state dict: 'head'"),
        (
            {**tc.to_state_dict(model()), "extra": 1},
            r"^Model at \.: structure differs \(in the state dict but not the template: 'extra'\)",
        ),
        (
            {**tc.to_state_dict(model()), "head": 3},
            r"^Dense at \./head: a state dict expected, got a int",
        ),
    ],
)
def test_mismatch_names_the_path(state: dict[str, Any], message: str):
    with pytest.raises(tc.CheckpointError, match=message):
        serialization.from_state_dict(model(), state)


def test_classes_created_before_flax_is_imported():
    """The usual order: a model module imports treeclass only; the training script
    imports flax afterwards. Importing treeclass never imports flax."""
    code = """
import sys
import jax.numpy as jnp
import treeclass as tc
import checkpoints
assert not any(m == "flax" or m.startswith("flax.") for m in sys.modules), "flax imported"
m = checkpoints.model()
from flax import serialization
restored = serialization.from_bytes(checkpoints.model(scale=1.0), serialization.to_bytes(m))
print(type(restored).__name__, tc.tree_equal(restored, m))
"""
    assert run_fresh(code, TESTS) == "Model True\n"
