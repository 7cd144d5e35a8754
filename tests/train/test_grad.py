"""tc.grad, tc.value_and_grad and tc.apply_updates on a model that holds a PRNG key, an
int counter, a bool mask and a static string beside its float parameters: gradients
with the model's structure (None where there is none), optax inside jit and scan, and
the untraceable-field error naming `Class.field`."""

from __future__ import annotations

import re
from typing import Any

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import optax  # type: ignore[import-untyped]
import pytest
from strategies import Instance, instances

import treeclass as tc


@tc.treeclass
class Linear:
    w: jax.Array
    b: jax.Array


@tc.treeclass
class MLP:
    layers: tuple[Linear, Linear]
    mask: jax.Array
    key: jax.Array
    step: jax.Array
    act: str = tc.static("tanh")

    def __call__(self, x: jax.Array) -> jax.Array:
        # Explicit [None]: the suite runs with jax_numpy_rank_promotion="raise".
        h = jnp.tanh(jnp.where(self.mask[None], x, 0.0) @ self.layers[0].w + self.layers[0].b[None])
        h = jnp.where(jax.random.bernoulli(jax.random.fold_in(self.key, self.step), 0.9, h.shape), h, 0.0)
        return (h @ self.layers[1].w + self.layers[1].b[None])[:, 0]


def mlp() -> MLP:
    k1, k2 = jax.random.split(jax.random.key(0))
    return MLP(
        (
            Linear(jax.random.normal(k1, (4, 8)), jnp.zeros(8)),
            Linear(jax.random.normal(k2, (8, 1)), jnp.zeros(1)),
        ),
        jnp.array([True, True, True, False]),
        jax.random.key(1),
        jnp.array(0, jnp.int32),
    )


X = jnp.linspace(-1.0, 1.0, 12).reshape(3, 4)
Y = jnp.array([0.5, -0.5, 1.0])


def loss(m: MLP, x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((m(x) - y) ** 2)


def test_jax_grad_refuses_the_model() -> None:
    # The problem tc.grad solves: jax.grad of the whole model fails on the bool mask
    # (JAX's message; its wording is JAX's to change).
    with pytest.raises(TypeError):
        jax.grad(loss)(mlp(), X, Y)
    assert tc.grad(loss)(mlp(), X, Y).mask is None


def test_grad_has_the_model_structure_with_none_where_no_gradient() -> None:
    m = mlp()
    grads = tc.grad(loss)(m, X, Y)
    assert type(grads) is MLP
    assert grads.mask is None
    assert grads.key is None
    assert grads.step is None
    assert grads.act == "tanh"
    params, _ = tc.partition(m)
    expected = jax.grad(lambda p: loss(tc.combine(p, tc.partition(m)[1]), X, Y))(params)
    assert tc.tree_equal(grads, expected)
    assert grads.layers[0].w.shape == (4, 8)
    assert float(jnp.abs(grads.layers[0].w).sum()) > 0  # a real gradient, not zeros


def test_value_and_grad_matches_jax_on_the_float_leaves() -> None:
    m = mlp()
    value, grads = tc.value_and_grad(loss)(m, X, Y)
    # The same function of the float leaves alone, by hand: bit for bit.
    params, rest = tc.partition(m)
    v2, g2 = jax.value_and_grad(lambda p: loss(tc.combine(p, rest), X, Y))(params)
    assert float(value) == float(v2)
    assert tc.tree_equal(grads, g2)


def test_gradient_values_against_finite_differences() -> None:
    # float32 central differences with h = 1e-3 on a loss of order 1: truncation error
    # O(h^2) ~ 1e-6 and rounding error ~ eps / h ~ 1e-4, so 1e-2 relative is safe on
    # any CPU while still catching a wrong or missing gradient.
    m = mlp()
    grads = tc.grad(loss)(m, X, Y)
    h = 1e-3
    for i, j in [(0, 0), (2, 5), (1, 3)]:
        def at(d: float, i: int = i, j: int = j) -> float:
            return float(loss(tc.replace_at(m, lambda m: m.layers[0].w, fn=lambda w: w.at[i, j].add(d)), X, Y))

        numeric = (at(h) - at(-h)) / (2 * h)
        np.testing.assert_allclose(float(grads.layers[0].w[i, j]), numeric, rtol=1e-2, atol=1e-4)


def test_has_aux() -> None:
    def with_aux(m: MLP, x: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        out = m(x)
        return jnp.mean(out**2), {"out": out}

    (value, aux), grads = tc.value_and_grad(with_aux, has_aux=True)(mlp(), X)
    assert aux["out"].shape == (3,)
    assert float(value) == float(jnp.mean(aux["out"] ** 2))
    grads2, aux2 = tc.grad(with_aux, has_aux=True)(mlp(), X)
    assert tc.tree_equal(grads, grads2)
    assert tc.tree_equal(aux, aux2)


def test_other_arguments_pass_through_and_are_not_differentiated() -> None:
    def f(m: MLP, scale: jax.Array, *, shift: float) -> jax.Array:
        return jnp.sum(m.layers[1].b * scale) + shift

    grads = tc.grad(f)(mlp(), jnp.array(3.0), shift=1.0)
    assert grads.layers[1].b.tolist() == [3.0]


def test_complex_leaves_are_differentiated() -> None:
    @tc.treeclass
    class C:
        z: jax.Array
        n: jax.Array

    grads = tc.grad(lambda c: jnp.real(jnp.sum(c.z * jnp.conj(c.z))))(C(jnp.ones(2, jnp.complex64), jnp.arange(2)))
    assert grads.z.dtype == jnp.complex64
    assert grads.n is None


@pytest.mark.parametrize("transform", [tc.grad, tc.value_and_grad])
def test_untraceable_dynamic_field_names_class_field(transform: Any) -> None:
    bad = mlp().replace(layers=(Linear("oops", jnp.zeros(8)), mlp().layers[1]))  # type: ignore[attr-defined, arg-type]
    with pytest.raises(TypeError, match=r"(?s)^Linear.w is a dynamic field holding a str \('oops'\).*"
                       r"\(MLP.layers\[0\].w, argument 'm'\).*w: tc.Static\[jax.Array\]"):
        transform(loss)(bad, X, Y)


def test_a_function_in_a_dynamic_field_names_class_field() -> None:
    bad = mlp().replace(mask=print)  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match=r"^MLP.mask is a dynamic field holding a builtin_function_or_method"):
        tc.value_and_grad(loss)(bad, X, Y)


def test_errors_of_the_loss_itself_are_left_alone() -> None:
    def broken(m: MLP) -> jax.Array:
        return jnp.sum(m.layers[0].w) + "x"  # type: ignore[operator]

    # JAX's error, whatever its wording: raised in the loss, not rewritten to blame a
    # field of the model.
    with pytest.raises(TypeError) as info:
        tc.grad(broken)(mlp())
    assert info.traceback[-1].name == "broken"
    assert "dynamic field" not in str(info.value)


# ---------------------------------------------------------------------------------------
# apply_updates and optax.


def test_apply_updates_skips_none_and_keeps_dtypes() -> None:
    m = mlp().replace(layers=(Linear(jnp.ones((4, 8), jnp.bfloat16), jnp.zeros(8)), mlp().layers[1]))  # type: ignore[attr-defined]
    updates = jax.tree.map(lambda x: jnp.full(x.shape, 0.5, jnp.float32), tc.partition(m)[0])
    new = tc.apply_updates(m, updates)
    assert new.layers[0].w.dtype == jnp.bfloat16
    assert float(new.layers[0].w[0, 0]) == 1.5
    assert new.layers[1].b.dtype == jnp.float32
    assert new.mask is m.mask  # None update: the leaf itself, shared
    assert new.key is m.key
    assert new.step is m.step


def test_apply_updates_takes_none_for_a_whole_subtree() -> None:
    # Regression: `None` stood only for a leaf; for a whole model (or the whole update,
    # as eqx.apply_updates takes it) JAX's "Custom node type mismatch" came out.
    m = mlp()
    one = jax.tree.map(lambda x: jnp.full(x.shape, 0.5, jnp.float32), tc.partition(m)[0])
    assert tc.apply_updates(m, None) == m
    new = tc.apply_updates((m, m), (one, None))
    assert new[1] == m
    assert new[0] == tc.apply_updates(m, one)
    first = one.replace(layers=(None, one.layers[1]))  # type: ignore[attr-defined]
    assert tc.apply_updates(m, first).layers[0] == m.layers[0]  # type: ignore[attr-defined]


def test_apply_updates_never_changes_a_leafs_shape() -> None:
    # Regression: a (1, 4, 8) update (a stray batch axis) on a (4, 8) weight made it
    # (1, 4, 8) in silence (optax and equinox add as well); a scalar still broadcasts.
    m = mlp()
    w = m.layers[0].w  # type: ignore[attr-defined]
    wrong = jax.tree.map(lambda x: None, tc.partition(m)[0])
    for update, did in ((jnp.ones((1, *w.shape)), r"change it to \(1, 4, 8\)"), (jnp.ones(3), "fail")):
        bad = wrong.replace(layers=(wrong.layers[0].replace(w=update), wrong.layers[1]))  # type: ignore[attr-defined]
        match = rf"^MLP\.layers\[0\]\.w: an update of shape {re.escape(str(update.shape))} for a leaf of shape \(4, 8\); adding it would {did}"
        with pytest.raises(ValueError, match=match):
            tc.apply_updates(m, bad)
    scalar = wrong.replace(layers=(wrong.layers[0].replace(w=jnp.float32(0.5)), wrong.layers[1]))  # type: ignore[attr-defined]
    assert tc.apply_updates(m, scalar).layers[0].w.shape == w.shape  # type: ignore[attr-defined]


def test_optax_adamw_in_jit_and_scan() -> None:
    m = mlp()
    opt = optax.adamw(1e-2)
    opt_state = opt.init(tc.partition(m)[0])

    def step(carry: tuple[MLP, Any], _: None) -> tuple[tuple[MLP, Any], jax.Array]:
        m, opt_state = carry
        value, grads = tc.value_and_grad(loss)(m, X, Y)
        updates, opt_state = opt.update(grads, opt_state, tc.partition(m)[0])
        m = tc.apply_updates(m, updates)
        return (m.replace(step=m.step + 1), opt_state), value  # type: ignore[attr-defined]

    # optax's bias correction computes `decay ** count` with an int32 count, which the
    # suite's strict dtype promotion refuses; optax itself, not treeclass.
    with jax.numpy_dtype_promotion("standard"):
        (trained, _), losses = jax.jit(lambda c: jax.lax.scan(step, c, length=50))((m, opt_state))
    assert int(trained.step) == 50
    assert trained.mask is not m.mask  # rebuilt by jit, the same values
    assert trained.mask.tolist() == m.mask.tolist()
    assert tc.tree_equal(trained.key, m.key)
    assert losses.shape == (50,)
    # It learns: under the same dropout draw (step 0), the trained weights fit better.
    before = float(loss(m, X, Y))
    assert float(loss(trained.replace(step=m.step), X, Y)) < 0.8 * before  # type: ignore[attr-defined]


def test_one_compile_for_the_jitted_step() -> None:
    traces = []
    opt = optax.sgd(0.1)

    @jax.jit
    def step(m: MLP, opt_state: Any) -> tuple[MLP, Any]:
        traces.append(1)
        grads = tc.grad(loss)(m, X, Y)
        updates, opt_state = opt.update(grads, opt_state)
        return tc.apply_updates(m, updates), opt_state

    m = mlp()
    state = opt.init(tc.partition(m)[0])
    for _ in range(3):
        m, state = step(m, state)
    assert len(traces) == 1


def test_apply_updates_keeps_weak_types_so_an_adam_step_compiles_once() -> None:
    # Regression: a weakly typed f32 parameter (a Python float, or an array made
    # from one) plus adam's strong f32 update became strong, and the step compiled again.
    class Scale(tc.TreeClass):
        w: jax.Array
        rate: float

    opt = optax.adam(0.1)
    traces = []

    @jax.jit
    def step(m: Scale, state: Any) -> tuple[Scale, Any]:
        traces.append(1)
        grads = tc.grad(lambda m: (m.w * m.rate - 3.0) ** 2)(m)
        with jax.numpy_dtype_promotion("standard"):  # optax under the suite's strict promotion
            updates, state = opt.update(grads, state, tc.partition(m)[0])
        return tc.apply_updates(m, updates), state

    m = Scale(jnp.asarray(1.0), 0.5)
    assert m.w.weak_type
    # optax's moments initialised from weak parameters turn strong after one update
    # (optax's doing): built strong, so that only the model could make it compile again.
    state = opt.init(jax.tree.map(lambda x: jnp.array(x, jnp.float32), tc.partition(m)[0]))
    for _ in range(3):
        m, state = step(m, state)
    assert len(traces) == 1
    assert m.w.weak_type
    assert m.w.dtype == jnp.float32
    assert m.rate.weak_type  # type: ignore[attr-defined]  # a weak scalar array, as JAX traces a float
    # Eagerly too, and for weak arrays with a shape (a vmapped Python float).
    weak = jnp.broadcast_to(jnp.asarray(1.0), (2, 3))
    new = tc.apply_updates(weak, jnp.ones((2, 3)))
    assert new.weak_type
    assert new.tolist() == [[2.0] * 3] * 2
    assert not tc.apply_updates(jnp.ones(2), jnp.ones(2)).weak_type  # strong stays strong


# ---------------------------------------------------------------------------------------
# Over generated classes: statics, nested classes, None fields, ints, bools, Python numbers.


@hypothesis.given(instances())
def test_grad_over_generated_classes(inst: Instance) -> None:
    params, _ = tc.partition(inst.obj)  # the trainable leaves
    trainable = jax.tree.leaves(params)

    def total(obj: Any) -> jax.Array:
        leaves = jax.tree.leaves(tc.partition(obj)[0])
        return sum((jnp.sum(jnp.real(x * jnp.conj(x))).astype(jnp.float32) for x in leaves), jnp.float32(0))

    if not trainable:
        with pytest.raises(TypeError, match=r"has nothing to differentiate"):
            tc.grad(total)(inst.obj)
        return
    grads = tc.grad(total)(inst.obj)
    assert jax.tree.structure(grads) == jax.tree.structure(params)
    # With a filter too: the gradient has the structure optax's state is built on.
    if any(tc.is_inexact_array(x) for x in trainable):
        narrowed = tc.grad(total, filter=tc.is_inexact_array)(inst.obj)
        assert jax.tree.structure(narrowed) == jax.tree.structure(tc.partition(inst.obj, filter=tc.is_inexact_array)[0])
    for g, x in zip(jax.tree.leaves(grads), trainable, strict=True):
        # d/dx sum(|x|^2) = 2x (JAX's convention for complex: the conjugate, 2 conj(x)).
        expected = 2 * (jnp.conj(x) if jnp.iscomplexobj(x) else x)
        if isinstance(x, float | complex):  # a Python number: a scalar array, as jax.grad gives
            assert g.shape == ()
            assert complex(g) == pytest.approx(complex(expected))
        else:
            assert g.dtype == x.dtype
            assert jnp.array_equal(g, expected.astype(x.dtype))
