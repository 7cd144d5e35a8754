"""tc.stack and tc.unstack (docs/recipes.md): instances of one structure stacked along a new
leading axis and split back, over generated classes in both forms; `jax.lax.scan` over a
stack (scan-over-layers) and `jax.vmap(init)` (an ensemble) give what the lists give."""

from __future__ import annotations

from typing import Any

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from forms import FORMS, Form
from hypothesis import strategies as st
from strategies import Instance, instances

import treeclass as tc


def _shifted(leaf: Any, i: int) -> Any:
    """`leaf` with its values moved by `i`: same type, shape and dtype, other values, so
    that the order of a stack shows."""
    if isinstance(leaf, bool | np.bool_) or getattr(leaf, "dtype", None) == jnp.bool_:
        return leaf ^ bool(i % 2) if isinstance(leaf, bool) else jnp.logical_xor(leaf, i % 2 == 1)
    if isinstance(leaf, int | float | complex):
        return type(leaf)(leaf + i)
    return (leaf + i).astype(leaf.dtype)


def _copies(obj: Any, n: int) -> list[Any]:
    return [jax.tree.map(lambda leaf, i=i: _shifted(leaf, i), obj) for i in range(n)]


def _assert_same(got: Any, expected: Any) -> None:
    """`got` has `expected`'s structure (classes, statics) and its leaves' values, each
    as an array of the dtype JAX gives it."""
    assert jax.tree.structure(got) == jax.tree.structure(expected)
    for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
        assert g.shape == np.shape(e)
        assert g.dtype == jnp.asarray(e).dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(jnp.asarray(e)))


@hypothesis.given(instances(), st.integers(1, 4))
def test_stack_unstack_roundtrip(instance: Instance, n: int) -> None:
    members = _copies(instance.obj, n)
    stacked = tc.stack(members)
    assert type(stacked) is instance.gen.cls
    assert jax.tree.structure(stacked) == jax.tree.structure(instance.obj)
    for leaf, first in zip(jax.tree.leaves(stacked), jax.tree.leaves(instance.obj), strict=True):
        assert leaf.shape == (n, *np.shape(first))
    if not jax.tree.leaves(stacked):
        with pytest.raises(ValueError, match="has no array leaves, so the number of instances"):
            tc.unstack(stacked)
        return
    unstacked = tc.unstack(stacked)
    assert len(unstacked) == n
    for got, expected in zip(unstacked, members, strict=True):
        _assert_same(got, expected)
    assert tc.tree_equal(tc.stack(unstacked), stacked)


@hypothesis.given(instances(), st.integers(1, 3))
def test_scan_over_a_stack_gives_each_member(instance: Instance, n: int) -> None:
    # What scan-over-layers relies on: the scan body gets one member, of the class.
    members = _copies(instance.obj, n)
    hypothesis.assume(jax.tree.leaves(members[0]))
    stacked = tc.stack(members)

    def body(count: jax.Array, member: Any) -> tuple[jax.Array, Any]:
        assert type(member) is instance.gen.cls
        return count + 1, member

    count, ys = jax.lax.scan(body, jnp.int32(0), stacked)
    assert int(count) == n
    for got, expected in zip(tc.unstack(ys), members, strict=True):
        _assert_same(got, expected)


def _block_class(form: Form) -> Any:
    @form.decorate
    class Block(*form.bases):
        w: jax.Array
        b: jax.Array
        act: tc.Static[str] = "tanh"

        def __call__(self, x: jax.Array) -> jax.Array:
            return getattr(jnp, self.act)(x @ self.w + self.b)

    def init(key: jax.Array, width: int = 4) -> Any:
        kw, kb = jax.random.split(key)
        return Block(jax.random.normal(kw, (width, width)) / width, jax.random.normal(kb, (width,)))

    return Block, init


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
@hypothesis.given(n=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_vmap_init_is_stack_of_inits(form: Form, n: int, seed: int) -> None:
    Block, init = _block_class(form)
    keys = jax.random.split(jax.random.key(seed), n)
    vmapped = jax.vmap(init)(keys)
    listed = tc.stack([init(k) for k in keys])
    assert type(vmapped) is type(listed) is Block
    assert jax.tree.structure(vmapped) == jax.tree.structure(listed)
    for a, b in zip(jax.tree.leaves(vmapped), jax.tree.leaves(listed), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
@hypothesis.given(n=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_scan_over_layers_is_the_layers_in_turn(form: Form, n: int, seed: int) -> None:
    _Block, init = _block_class(form)
    layers = [init(k) for k in jax.random.split(jax.random.key(seed), n)]
    x = jnp.linspace(-1.0, 1.0, 4)
    expected = x
    for layer in layers:
        expected = layer(expected)
    scanned, _ = jax.lax.scan(lambda h, layer: (layer(h), None), x, tc.stack(layers))
    np.testing.assert_allclose(scanned, expected, rtol=1e-5, atol=1e-6)


def test_stack_of_any_pytree_of_treeclasses(form: Form) -> None:
    # A tuple of layers, a dict around nested instances: the containers are kept.
    @form.decorate
    class Inner(*form.bases):
        w: jax.Array

    @form.decorate
    class Outer(*form.bases):
        inner: Inner
        scale: float

    trees = [
        {"layers": (Outer(Inner(jnp.full(2, i)), float(i)), Inner(jnp.ones(3)))} for i in range(3)
    ]
    stacked = tc.stack(trees)
    assert stacked["layers"][0].inner.w.shape == (3, 2)
    assert stacked["layers"][0].scale.shape == (3,)
    back = tc.unstack(stacked)
    assert type(back[2]["layers"][0].inner) is Inner
    assert float(back[2]["layers"][0].scale) == 2.0


def test_stack_keeps_statics_and_unflattens_without_user_code(form: Form) -> None:
    calls: list[str] = []

    @form.decorate
    class Layer(*form.bases):
        w: jax.Array
        name: tc.Static[str] = "dense"

        def __post_init__(self) -> None:
            calls.append("post_init")

    members = [Layer(jnp.zeros(2)) for _ in range(3)]
    calls.clear()
    stacked = tc.stack(members)
    back = tc.unstack(stacked)
    assert calls == []
    assert stacked.name == back[1].name == "dense"


def test_stack_of_keys_and_numpy_leaves() -> None:
    # Typed PRNG keys stack as keys; numpy leaves stay numpy, float64 kept.
    @tc.treeclass
    class Sampler:
        key: jax.Array
        table: np.ndarray

    members = [Sampler(jax.random.key(i), np.full(2, i, np.float64)) for i in range(3)]
    stacked = tc.stack(members)
    assert jax.dtypes.issubdtype(stacked.key.dtype, jax.dtypes.prng_key)
    assert stacked.key.shape == (3,)
    assert type(stacked.table) is np.ndarray
    assert stacked.table.dtype == np.float64
    back = tc.unstack(stacked)[2]
    np.testing.assert_array_equal(
        jax.random.key_data(back.key), jax.random.key_data(members[2].key)
    )
    np.testing.assert_array_equal(back.table, members[2].table)


# --- errors --------------------------------------------------------------------------


@tc.treeclass
class Dense:
    w: jax.Array
    layers: tuple[Any, ...] = ()
    act: tc.Static[str] = "relu"


@tc.treeclass
class Model:
    blocks: tuple[Dense, ...]


def test_stack_of_nothing_rejected() -> None:
    with pytest.raises(ValueError, match=r"tc.stack\(\) needs at least one instance to stack"):
        tc.stack([])


def test_stack_differing_static_rejected() -> None:
    a = Model((Dense(jnp.zeros(2)), Dense(jnp.zeros(2))))
    b = Model((Dense(jnp.zeros(2)), Dense(jnp.zeros(2), act="gelu")))
    match = (
        r"instances\[0\] and instances\[2\] differ in the static field Dense.act "
        r"\(at Model.blocks\[1\].act\): 'relu' and 'gelu'\.\n"
        r"(?s:.*)`tc.replace_at\(instances\[2\], lambda x: x.blocks\[1\].act, 'relu'\)`"
    )
    with pytest.raises(ValueError, match=match):
        tc.stack([a, a, b])


def test_stack_differing_shape_rejected() -> None:
    match = (
        r"instances\[0\] and instances\[1\] differ in the shape of Dense.w "
        r"\(at Model.blocks\[0\].w\): f32\[2\] and f32\[3\]"
    )
    with pytest.raises(ValueError, match=match):
        tc.stack([Model((Dense(jnp.zeros(2)),)), Model((Dense(jnp.zeros(3)),))])


def test_stack_differing_dtype_rejected() -> None:
    match = r"differ in the dtype of Dense.layers \(at Dense.layers\[0\]\): f32\[\] and i32\[\]"
    with pytest.raises(ValueError, match=match):
        tc.stack([Dense(jnp.zeros(2), (jnp.float32(1),)), Dense(jnp.zeros(2), (jnp.int32(1),))])


def test_stack_python_number_and_array_rejected() -> None:
    match = r"differ in the dtype of Dense.layers \(at Dense.layers\[0\]\): float and f32\[\]"
    with pytest.raises(ValueError, match=match):
        tc.stack([Dense(jnp.zeros(2), (1.0,)), Dense(jnp.zeros(2), (jnp.float32(1),))])


def test_stack_differing_structure_rejected() -> None:
    match = (
        r"instances\[0\] and instances\[1\] differ in structure at Dense.layers: "
        r"\(1.0,\) and \(1.0, 2.0\)\.\nOnly instances of one structure"
    )
    with pytest.raises(ValueError, match=match):
        tc.stack([Dense(jnp.zeros(2), (1.0,)), Dense(jnp.zeros(2), (1.0, 2.0))])
    match = r"differ in structure at Model.blocks\[0\]: Dense\(w=f32\[2\], .*\) and \(\)"
    with pytest.raises(ValueError, match=match):
        tc.stack([Model((Dense(jnp.zeros(2)),)), Model(((),))])


def test_stack_non_array_leaf_rejected() -> None:
    match = (
        r"Dense.layers \(at Dense.layers\[0\]\) holds a str, which cannot be stacked.*"
        r"Declare the field static \(`tc.Static\[...\]`\)"
    )
    with pytest.raises(TypeError, match=match):
        tc.stack([Dense(jnp.zeros(2), ("x",))])


def test_unstack_scalar_leaf_rejected() -> None:
    match = (
        r"tc.unstack\(\): Dense.layers \(at Dense.layers\[0\]\) is a 0-d array \(f32\[\]\), "
        r"with no leading axis to unstack along"
    )
    with pytest.raises(ValueError, match=match):
        tc.unstack(Dense(jnp.zeros((3, 2)), (jnp.float32(1),)))
    with pytest.raises(
        ValueError, match=r"Dense.layers \(at Dense.layers\[0\]\) is a float, with no leading"
    ):
        tc.unstack(Dense(jnp.zeros((3, 2)), (1.0,)))


def test_unstack_differing_leading_axes_rejected() -> None:
    match = (
        r"tc.unstack\(\): Dense.w \(at Model.blocks\[1\].w\) has a leading axis of 4, "
        r"but Dense.w \(at Model.blocks\[0\].w\) has 3: every leaf of a stack has the same "
        r"leading axis"
    )
    with pytest.raises(ValueError, match=match):
        tc.unstack(Model((Dense(jnp.zeros((3, 2))), Dense(jnp.zeros((4, 2))))))


def test_unstack_without_leaves_rejected() -> None:
    with pytest.raises(ValueError, match=r"tc.unstack\(\): Model has no array leaves"):
        tc.unstack(Model(()))
