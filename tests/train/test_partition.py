"""tc.partition, tc.combine and tc.is_inexact_array: two trees of the model's structure,
`None` where the other holds the leaf, and back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from strategies import Instance, instances

import treeclass as tc


@tc.treeclass
class Model:
    w: jax.Array
    mask: jax.Array
    key: jax.Array
    step: jax.Array
    layers: tuple[Any, ...] = ()
    act: str = tc.static("relu")


def model() -> Model:
    return Model(
        jnp.ones(3),
        jnp.array([True, False]),
        jax.random.key(0),
        jnp.array(0, jnp.int32),
        (jnp.zeros(2, jnp.bfloat16), 1.5, None, jnp.ones(2, jnp.complex64)),
    )


@pytest.mark.parametrize(
    ("leaf", "expected"),
    [
        (jnp.ones(2), True),
        (jnp.ones(2, jnp.float16), True),
        (jnp.ones(2, jnp.bfloat16), True),
        (jnp.ones(2, jnp.complex64), True),
        (np.ones(2), True),
        (np.float32(1.0), True),
        (jnp.asarray(1.0), True),  # weakly typed: still an array
        (jnp.arange(2), False),
        (jnp.array([True]), False),
        (jax.random.key(0), False),
        (jax.random.PRNGKey(0), False),  # raw uint32 key data
        (1.0, False),  # a Python number has no dtype
        ("w", False),
        (None, False),
    ],
)
def test_is_inexact_array(leaf: Any, expected: bool) -> None:
    assert tc.is_inexact_array(leaf) is expected


def test_is_inexact_array_under_tracing() -> None:
    seen = []
    jax.jit(lambda x, i: seen.append((tc.is_inexact_array(x), tc.is_inexact_array(i))))(
        jnp.ones(2), jnp.arange(2)
    )
    assert seen == [(True, False)]


def test_partition_splits_trainable_leaves_from_the_rest_keeping_structure() -> None:
    m = model()
    params, rest = tc.partition(m)
    assert type(params) is Model
    assert type(rest) is Model
    assert params.w is m.w
    assert rest.w is None
    assert params.mask is None
    assert rest.mask is m.mask
    assert params.key is None
    assert rest.key is m.key
    assert params.step is None
    assert rest.step is m.step
    assert params.layers[0] is m.layers[0]
    assert rest.layers[0] is None
    assert params.layers[1] == 1.5  # a Python float: trainable, as jax.grad differentiates it
    assert rest.layers[1] is None
    assert params.layers[3] is m.layers[3]  # complex
    assert params.act == rest.act == "relu"  # statics in both
    assert len(jax.tree.leaves(params)) + len(jax.tree.leaves(rest)) == len(jax.tree.leaves(m))


def test_combine_puts_them_back() -> None:
    m = model()
    assert tc.combine(*tc.partition(m)) == m
    params, rest = tc.partition(m)
    assert tc.combine(rest, params) == m  # disjoint halves: order does not matter


def test_combine_first_non_none_wins() -> None:
    assert tc.combine((1, None, None), (2, 3, None), (4, 5, 6)) == (1, 3, 6)


def test_filter_with_only_trainable_false_is_equinox_s_partition() -> None:
    m = model()
    ints, _ = tc.partition(m, filter=lambda x: isinstance(x, jax.Array) and x.dtype == jnp.int32, only_trainable=False)
    assert ints.step is m.step
    assert ints.w is None
    # The default keeps the trainable leaves only: no int is one.
    assert jax.tree.leaves(tc.partition(m, filter=lambda x: getattr(x, "dtype", None) == jnp.int32)[0]) == []
    # A selector narrows it to the subtrees it reads, the int mask included.
    layers, _ = tc.partition(m, lambda m: (m.layers, m.mask), only_trainable=False)
    assert layers.layers == m.layers
    assert layers.mask is m.mask
    assert layers.w is None


def test_partition_works_under_jit_and_as_scan_carry() -> None:
    m = model()

    @jax.jit
    def f(m: Model) -> Model:
        params, rest = tc.partition(m)
        params = jax.tree.map(lambda x: x * 2, params)
        return tc.combine(params, rest)

    out = f(m)
    assert out.w.tolist() == [2.0, 2.0, 2.0]
    assert out.step is not m.step
    assert int(out.step) == 0


def test_combine_needs_a_tree() -> None:
    with pytest.raises(TypeError, match=r"combine\(\) takes at least one tree"):
        tc.combine()


def test_combine_of_different_structures_is_jax_s_error() -> None:
    # JAX's own ValueError (documented), whose wording JAX changes between releases:
    # jax.tree.map's, passed on as raised.
    with pytest.raises(ValueError) as info:  # noqa: PT011 - any wording JAX picks
        tc.combine((1, None), (1, 2, 3))
    raised_in = Path(str(info.traceback[-1].path))
    assert Path(tc.__file__).parent not in raised_in.parents  # JAX raised it


@hypothesis.given(
    instances(),
    st.sampled_from([None, tc.is_inexact_array, lambda x: isinstance(x, int)]),
    st.booleans(),
)
def test_combine_of_partition_is_the_tree(inst: Instance, filter_: Any, only_trainable: bool) -> None:
    # Over generated classes (statics, nested classes, None fields, Python scalars).
    params, rest = tc.partition(inst.obj, filter=filter_, only_trainable=only_trainable)
    back = tc.combine(params, rest)
    assert jax.tree.structure(back) == jax.tree.structure(inst.obj)
    assert all(a is b for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(inst.obj), strict=True))
    # `None` counted as a leaf on both sides: the selected half holds exactly the
    # leaves the rule picks (the trainable ones, unless only_trainable=False), in place.
    def with_none(t: Any) -> list[Any]:
        return jax.tree.leaves(t, is_leaf=lambda x: x is None)

    trainable = with_none(tc.partition(inst.obj)[0])
    expected = [
        x if x is not None and (t is not None or not only_trainable) and (filter_ is None or filter_(x)) else None
        for x, t in zip(with_none(inst.obj), trainable, strict=True)
    ]
    assert all(a is b for a, b in zip(with_none(params), expected, strict=True))


# ---------------------------------------------------------------------------------------
# One array object at two paths: tc.partition unties it, and says so.


@tc.treeclass
class Tied:
    embed: jax.Array
    out: jax.Array
    count: jax.Array
    step: jax.Array


def test_an_array_held_at_two_paths_is_reported_with_both_paths() -> None:
    # Regression: a layer passed to two fields gave two leaves, two gradients and, after one
    # update, two different weights, without a word.
    w = jnp.ones((4, 2))
    match = (
        r"(?s)^Tied\.embed and Tied\.out hold one array object \(f32\[4,2\]\)\. tc\.partition "
        r"splits it.*no longer tied.*\"Shared weights\" in\s+docs/with-other-libraries\.md"
    )
    with pytest.warns(tc.SharedArrayWarning, match=match):
        tc.partition(Tied(w, w, jnp.array(0), jnp.array(1)))


def test_integer_arrays_and_field_defaults_shared_are_not_reported() -> None:
    @tc.treeclass
    class Layer:
        w: jax.Array
        b: jax.Array = tc.field(default=jnp.zeros(2))  # every instance shares it, by design

    n = jnp.array(0)  # never updated, so never untied
    tc.partition(Tied(jnp.ones(2), jnp.ones(2), n, n))
    tc.partition((Layer(jnp.ones(2)), Layer(jnp.ones(2))))
    w = jnp.ones(2)
    with pytest.warns(tc.SharedArrayWarning, match=r"^tuple\[0\]\.w and tuple\[1\]\.w hold one array"):
        tc.partition((Layer(w), Layer(w)))
