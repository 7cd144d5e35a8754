"""Regression tests from probing the owner rule, the deep static check and `repr` with
inputs their authors did not write (docs/with-other-libraries.md, "The owner rule").

Each test names the defect it pins; the generators that would have found them are
extended beside them (tests/reference_checks.py `mixed_check_shardings`,
tests/core/test_checks.py `_WRAPPERS`, tests/core/test_repr.py `_CONTAINERS`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pytest

import treeclass as tc

eqx = pytest.importorskip("equinox")

# equinox's layers are written for JAX's default promotion rules.
pytestmark = pytest.mark.usefixtures("jax_defaults")


class Regularised(tc.TreeClass):
    lin: Any
    drop: Any
    scale: float = 1.0


def regularised() -> Regularised:
    return Regularised(eqx.nn.Linear(2, 2, key=jax.random.key(0)), eqx.nn.Dropout(0.2))


def one_device_mesh() -> jax.sharding.Mesh:
    return jax.sharding.Mesh(jax.devices()[:1], ("data",))


def test_shardings_give_configuration_no_sharding() -> None:
    # A NamedSharding at Dropout's p made the tree of shardings disagree with the arrays
    # tc.partition keeps, and told jax.device_put to turn p = 0.2 into an array.
    model = regularised()
    shardings = tc.shardings(model, one_device_mesh())
    specs = tc.partition_specs(model)
    assert shardings.drop.p is None
    assert shardings.drop.inference is None
    assert specs.drop.p is None
    assert specs.drop.inference is None
    assert shardings.lin.weight.spec == jax.sharding.PartitionSpec()
    assert shardings.scale is not None  # a treeclass's own float is data: it is placed
    arrays, rest = tc.partition(model, only_trainable=False)
    placed = tc.combine(jax.device_put(arrays, shardings), rest)
    assert placed.drop.p == 0.2
    assert type(placed.drop.p) is float
    assert placed.drop.inference is False
    assert placed.lin.weight.sharding == shardings.lin.weight


def test_configuration_in_containers_inside_fields_keeps_the_rule() -> None:
    # equinox layers in lists, dicts and tuples inside a field: the container passes the
    # rule down, and every operation agrees with equinox's filtered transforms.
    class Holder(tc.TreeClass):
        layers: list[Any]
        named: dict[str, Any]

    key = jax.random.key(1)
    model = Holder([eqx.nn.Linear(2, 2, key=key), eqx.nn.Dropout(0.1)], {"d": eqx.nn.Dropout(0.3)})

    def loss(m: Holder) -> jax.Array:
        return jnp.sum(m.layers[1](m.layers[0](jnp.ones(2)), key=key))

    ours, theirs = tc.grad(loss)(model), eqx.filter_grad(loss)(model)
    assert jax.tree.structure(ours) == jax.tree.structure(theirs)
    params, _ = tc.partition(model)
    assert jax.tree.structure(params) == jax.tree.structure(
        eqx.partition(model, eqx.is_inexact_array)[0]
    )
    moved = tc.apply_updates(model, jax.tree.map(jnp.ones_like, params))
    assert moved.layers[1].p == 0.1
    assert moved.named["d"].p == 0.3


def test_a_treeclass_inside_an_equinox_module_keeps_treeclass_rules() -> None:
    # The rule flips back: the float in the inner treeclass's field trains, the equinox
    # Module's own float, bool, int, None and str around it are configuration.
    class Inner(tc.TreeClass):
        w: float

    class Wrapper(eqx.Module):
        inner: Inner
        p: float
        flag: bool
        n: int
        nothing: None
        name: str

    class Outer(tc.TreeClass):
        e: Wrapper

    model = Outer(Wrapper(Inner(2.0), 0.5, True, 3, None, "x"))

    def loss(m: Outer) -> jax.Array:
        return jnp.asarray(m.e.inner.w**2 + m.e.p)

    grads = tc.grad(loss)(model)
    assert float(grads.e.inner.w) == 4.0
    assert (grads.e.p, grads.e.flag, grads.e.n, grads.e.name) == (None, None, None, None)
    assert float(tc.jit(loss)(model)) == 4.5
    state = tc.to_state_dict(model)
    assert state == {"e": {"inner": {"w": 2.0}, "nothing": None}}
    assert tc.tree_equal(tc.from_state_dict(model, state), model)


def test_a_template_from_tc_jit_eval_shape_holds_equinox_configuration(tmp_path: Path) -> None:
    # jax.eval_shape traces Dropout's p into a ShapeDtypeStruct (then tc.load refuses it)
    # and refuses a layer's str; tc.jit's eval_shape holds both as a call does.
    class Named(eqx.Module):
        w: jax.Array
        name: str

    class Model(tc.TreeClass):
        named: Any
        drop: Any

    def make() -> Model:
        return Model(Named(jnp.arange(2.0), "n"), eqx.nn.Dropout(0.2))

    template = tc.jit(make).eval_shape()
    assert template.named.name == "n"
    assert template.drop.p == 0.2
    assert isinstance(template.named.w, jax.ShapeDtypeStruct)
    tc.save(tmp_path / "m.npz", make())
    restored = tc.load(tmp_path / "m.npz", template)
    assert tc.tree_equal(restored, make())


# Found by probing: `tc.jit`'s lower/trace held an equinox layer's configuration in the
# treedef, so the stages JAX builds from them counted it again when called with the model:
# the compiled computation took 3 inputs where the model's arguments flatten to 5, and
# jax.export failed inside JAX. Configuration JAX can type now stays an input, unread.
def test_a_compiled_lowering_takes_the_arguments_it_was_lowered_with() -> None:
    model = regularised()

    def forward(m: Regularised, x: jax.Array) -> jax.Array:
        return m.lin(x)

    compiled = tc.jit(forward).lower(model, jnp.ones(2)).compile()
    assert compiled(model, jnp.ones(2)).shape == (2,)


def test_jax_export_exports_a_tc_jit_function_of_a_model_with_configuration() -> None:
    model = regularised()

    def forward(m: Regularised, x: jax.Array) -> jax.Array:
        return m.lin(x)

    exported = jax.export.export(tc.jit(forward))(model, jnp.ones(2))
    assert exported.call(model, jnp.ones(2)).shape == (2,)


def test_a_lowering_describes_each_leaf_of_a_model_with_configuration() -> None:
    model = regularised()

    def forward(m: Regularised, x: jax.Array) -> jax.Array:
        return m.lin(x)

    lowered = tc.jit(forward).lower(model, jnp.ones(2))
    # One entry per leaf as JAX flattens them (Dropout's p and inference among them).
    n = len(jax.tree.leaves((model, jnp.ones(2))))
    assert len(jax.tree.leaves(lowered.in_avals)) == n
    assert len(jax.tree.leaves(lowered.args_info)) == n
    assert tc.jit(forward).eval_shape(model, jnp.ones(2)).shape == (2,)
    compiled = tc.jit(forward).trace(model, jnp.ones(2)).lower().compile()
    assert compiled(model, jnp.ones(2)).shape == (2,)


def test_stack_keeps_an_equinox_layers_configuration_once() -> None:
    # Found by probing: tc.stack stacked Dropout's p and inference into arrays
    # (`Dropout(p=weak_f32[3], inference=bool[3])`), which the layer then read as traced.
    keys = jax.random.split(jax.random.key(0), 3)
    layers = [Regularised(eqx.nn.Linear(2, 2, key=k), eqx.nn.Dropout(0.1)) for k in keys]
    stacked = tc.stack(layers)
    assert (stacked.drop.p, stacked.drop.inference) == (0.1, False)
    assert stacked.lin.weight.shape == (3, 2, 2)
    back = tc.unstack(stacked)
    assert all(tc.tree_equal(a, b) for a, b in zip(back, layers, strict=True))
    other = Regularised(layers[1].lin, eqx.nn.Dropout(0.2))
    with pytest.raises(ValueError, match=r"differ in Regularised\.drop\.p: 0\.1 and 0\.2\. It is"):
        tc.stack([layers[0], other])
