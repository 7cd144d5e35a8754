"""Pytree registration: children, treedef, key paths, and unflatten running no user
code. A golden corpus pins the treedef strings (as jax's tree_util_test does)."""

import copy
import pickle
import sys
import types
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from forms import FORMS
from hypothesis import given
from hypothesis import strategies as st

import treeclass as tc

CALLS: list[str] = []


def counted(x):
    CALLS.append("converter")
    return x


@tc.treeclass
class Hooked:
    x: jax.Array = tc.field(converter=counted)
    n: int = tc.static(2)

    def __post_init__(self):
        CALLS.append("post_init")


@tc.treeclass
class Empty:
    pass


@tc.treeclass
class OnlyStatic:
    n: int = tc.static(1)


@tc.treeclass
class Nested:
    inner: Hooked
    items: tuple
    label: str = tc.static("n")


CORPUS = [
    (Empty(), "PyTreeDef(CustomNode(Empty[()], []))"),
    (OnlyStatic(), "PyTreeDef(CustomNode(OnlyStatic[(1,)], []))"),
    (Hooked(jnp.zeros(1)), "PyTreeDef(CustomNode(Hooked[(2,)], [*]))"),
    (
        Nested(Hooked(jnp.ones(1)), (1, 2)),
        "PyTreeDef(CustomNode(Nested[('n',)], [CustomNode(Hooked[(2,)], [*]), (*, *)]))",
    ),
]


@pytest.fixture(autouse=True)
def _clear_calls():
    CALLS.clear()


def test_children_are_dynamic_fields_in_order():
    nested = Nested(Hooked(jnp.ones(1)), (jnp.zeros(2), None))
    leaves = jax.tree.leaves(nested)
    assert [leaf.shape for leaf in leaves] == [(1,), (2,)]


@pytest.mark.parametrize(("obj", "expected"), CORPUS)
def test_golden_treedefs(obj, expected):
    leaves, treedef = jax.tree.flatten(obj)
    assert str(treedef) == expected
    assert tc.tree_equal(treedef.unflatten(leaves), obj)


def test_key_paths_name_fields():
    nested = Nested(Hooked(jnp.ones(1)), (jnp.zeros(2),))
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(nested)[0]]
    assert paths == [".inner.x", ".items[0]"]
    key = jax.tree_util.tree_flatten_with_path(nested)[0][0][0][0]
    assert key == jax.tree_util.GetAttrKey("inner")


def test_round_trip_preserves_everything():
    h = Hooked(jnp.arange(3, dtype=jnp.int8), n=5)
    leaves, treedef = jax.tree.flatten(h)
    back = treedef.unflatten(leaves)
    assert type(back) is Hooked
    assert back.x is h.x
    assert back.n == 5


def test_unflatten_runs_no_user_code():
    h = Hooked(jnp.ones(2))
    assert CALLS == ["converter", "post_init"]
    CALLS.clear()
    jax.jit(lambda h: h)(h)
    jax.vmap(lambda h: h)(h)
    jax.grad(lambda h: h.x.sum())(h)
    jax.lax.scan(lambda c, _: (c, None), h, length=2)
    jax.eval_shape(lambda h: h, h)
    jax.tree.map(lambda _: None, h)
    jax.tree.map(lambda _: object(), h)
    assert CALLS == []


def test_unflatten_with_non_array_leaves():
    h = Hooked(jnp.ones(2))
    CALLS.clear()
    out = jax.tree.map(lambda _: None, h)
    assert out.x is None
    assert out.n == 2
    assert jax.tree.structure(out, is_leaf=lambda x: x is None) == jax.tree.structure(h)


# --- tc.prefix: axis prefixes built without user code --------------------------------


@tc.treeclass
class Checked:
    w: jax.Array = tc.field(converter=jnp.asarray)
    b: jax.Array = tc.field(converter=jnp.asarray)
    act: str = tc.static("identity")

    def __post_init__(self):
        if self.w.shape[-1:] != self.b.shape[-1:]:
            msg = "w and b disagree"
            raise ValueError(msg)


def test_replace_cannot_build_an_axis_prefix_for_a_checked_class():
    # The case prefix() exists for: converters and __post_init__ run on axis numbers.
    ensemble = Checked(jnp.ones((4, 3)), jnp.zeros((4, 3)))
    with pytest.raises((ValueError, TypeError)):
        ensemble.replace(w=0, b=None)


def test_prefix_builds_vmap_axes_and_runs_no_user_code():
    ensemble = Checked(jnp.arange(12.0).reshape(4, 3), jnp.arange(3.0), act="relu")
    axes = tc.prefix(ensemble, w=0)  # map over w's first axis, share b
    assert type(axes) is Checked
    assert (axes.w, axes.b, axes.act) == (0, None, "relu")
    out = jax.vmap(lambda m, x: m.w @ x + m.b, in_axes=(axes, None))(ensemble, jnp.ones(3))
    # Small integers in float32: sums of at most 3 of them are exact.
    assert out.tolist() == [[3.0 + 9.0 * i + j for j in range(3)] for i in range(4)]
    ensemble = Checked(jnp.ones((4, 3)), jnp.zeros((4, 3)))
    out_axes = tc.prefix(ensemble, 0)
    mapped = jax.vmap(lambda m: m, in_axes=(out_axes,), out_axes=out_axes)(ensemble)
    assert mapped == ensemble


def test_prefix_fill_and_flatten_cache():
    c = Checked(jnp.ones(3), jnp.ones(3))
    p = tc.prefix(c, 1, b=None)
    assert (p.w, p.b) == (1, None)
    assert jax.tree.leaves(p) == [1]
    assert jax.tree.structure(tc.prefix(c, 0)) == jax.tree.structure(c)


def test_prefix_unknown_or_static_name_rejected():
    c = Checked(jnp.ones(3), jnp.ones(3))
    with pytest.raises(TypeError, match=r"treeclass\.prefix\(\) of Checked got an unexpected dynamic field 'ww'\. Did you mean 'w'\?\nValid dynamic fields: w, b\."):
        tc.prefix(c, ww=0)
    with pytest.raises(TypeError, match=r"unexpected dynamic field 'act'"):
        tc.prefix(c, act="tanh")


def test_prefix_takes_a_treeclass_instance():
    with pytest.raises(TypeError, match=r"treeclass\.prefix\(\) takes a treeclass instance; got tuple"):
        tc.prefix((1, 2))


# --- round trips of Python scalars, and pickles by name -------------------------------


@given(
    form=st.sampled_from(FORMS),
    value=st.one_of(st.floats(-1e3, 1e3, allow_nan=False, width=32), st.integers(-1000, 1000), st.booleans()),
)
def test_a_python_scalar_leaf_round_trips_through_jit_and_device_put(form, value):
    @form.decorate
    class Scalar(*form.bases):
        s: Any
        a: jax.Array

    m = Scalar(value, jnp.arange(3.0))
    back = jax.jit(lambda m: m)(m)
    assert back.s.shape == ()  # a 0-d array now, as docs/guarantees.md says
    assert back == m
    assert m == back
    assert jax.device_put(m) == m
    assert back != m.replace(s=value + 1)  # by value, not just by kind


def test_python_scalar_and_0d_array_compare_by_the_dtype_jax_gives_the_scalar():
    assert tc.tree_equal(1.5, jnp.asarray(1.5))
    assert tc.tree_equal(jnp.asarray(3), 3)
    assert tc.tree_equal(True, jnp.asarray(True))
    assert not tc.tree_equal(1.0, jnp.asarray(1.0, jnp.float16))  # not the dtype of 1.0
    assert not tc.tree_equal(1, jnp.asarray(1.0))  # an int is not a float32
    assert not tc.tree_equal(1.0, jnp.ones(1))  # 0-d only
    assert not tc.tree_equal(2**40, jnp.asarray(1))  # no int32 holds it: unequal, no error
    assert tc.tree_equal(1.0, 1)  # two Python scalars: == as before


_REORDERED_SOURCE = """\
import jax
import treeclass as tc
{header}
{fields}
"""


@given(
    form=st.sampled_from(FORMS),
    order=st.permutations(["a", "b", "c", "d"]),
    static=st.sets(st.sampled_from(["a", "b", "c", "d"]), max_size=2),
)
def test_pickle_stores_fields_by_name_so_a_reordered_class_flattens_each_value_into_its_field(form, order, static):
    values = {"a": 1.0, "b": 2.0, "c": 3, "d": 4}

    def define(names):
        fields = "\n".join(f"    {n}: {'tc.Static[Any]' if n in static else 'Any'}" for n in names)
        source = "from typing import Any\n" + _REORDERED_SOURCE.format(header=form.class_source("Moved"), fields=fields)
        exec(source, module.__dict__)

    module = types.ModuleType("moved_fields")
    sys.modules["moved_fields"] = module
    try:
        define(["a", "b", "c", "d"])
        data = pickle.dumps(module.Moved(**values))
        define(order)  # the class changed between the pickle and the load
        loaded = pickle.loads(data)
    finally:
        del sys.modules["moved_fields"]
    assert loaded == module.Moved(**values)
    doubled = jax.tree.map(lambda x: x * 2, loaded)
    assert {n: getattr(doubled, n) for n in values} == {n: v if n in static else v * 2 for n, v in values.items()}
    for clone in (copy.copy(loaded), copy.deepcopy(loaded)):
        assert jax.tree.leaves(clone) == jax.tree.leaves(loaded)
        assert "__tc_flat__" not in clone.__getstate__()
