"""Pytree registration: children, treedef, key paths, and unflatten running no user
code. A golden corpus pins the treedef strings (as jax's tree_util_test does)."""

import jax
import jax.numpy as jnp
import pytest

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
