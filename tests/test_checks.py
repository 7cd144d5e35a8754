"""Construction-time checks on static fields: errors name `Class.field`, what was found
and the fix; they run at construction and replace, never when JAX rebuilds."""

import enum
import functools
import re
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import treeclass as tc


@tc.treeclass
class Model:
    w: jax.Array
    act: object = tc.static(None)


def relu(x):
    return jnp.maximum(x, 0)


class Color(enum.Enum):
    RED = 1


class NoEq:
    pass


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (jnp.ones(3), r"a jax\.Array \(shape \(3,\), dtype float32\)"),
        (np.ones((2, 2)), r"a numpy\.ndarray \(shape \(2, 2\), dtype float64\)"),
        (jnp.float32(1.0), r"a jax\.Array \(shape \(\), dtype float32\)"),
    ],
)
def test_static_array_rejected(value, kind):
    with pytest.raises(TypeError, match=rf"Model\.act is a static field but holds {kind}") as info:
        Model(jnp.zeros(1), act=value)
    assert "act: jax.Array" in str(info.value)  # the fix: make it dynamic


def test_static_tracer_rejected():
    def build(x):
        return Model(x, act=x)

    with pytest.raises(TypeError, match=r"Model\.act is a static field but holds a JAX tracer"):
        jax.jit(build)(jnp.ones(2))


def test_static_array_inside_tuple_rejected():
    with pytest.raises(TypeError, match=r"Model\.act is a static field but holds a jax\.Array"):
        Model(jnp.zeros(1), act=(1, jnp.ones(2)))


@pytest.mark.parametrize(
    ("value", "typename"),
    [([1, 2], "list"), ({"a": 1}, "dict"), ({1}, "set")],
)
def test_static_unhashable_rejected(value, typename):
    with pytest.raises(TypeError, match=rf"Model\.act is a static field but holds an unhashable {typename}") as info:
        Model(jnp.zeros(1), act=value)
    assert "a tuple instead of a list" in str(info.value)


def test_static_default_checked_at_class_definition():
    with pytest.raises(TypeError, match=r"Bad\.table is a static field but holds an unhashable list"):

        @tc.treeclass
        class Bad:
            table: tuple = tc.static(default=[1, 2])  # type: ignore[assignment]


def test_static_checked_on_replace():
    m = Model(jnp.zeros(1))
    with pytest.raises(TypeError, match=r"Model\.act is a static field but holds a numpy\.ndarray"):
        m.replace(act=np.zeros(2))
    assert m.act is None  # the original is unchanged


def test_static_from_default_factory_checked():
    @tc.treeclass
    class Factory:
        table: list = tc.static(default_factory=list)

    with pytest.raises(TypeError, match=r"Factory\.table is a static field but holds an unhashable list"):
        Factory()


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (lambda x: x, r"the function <lambda>"),
        (functools.partial(relu), r"a functools\.partial of 'relu'"),
        (NoEq(), r"a NoEq instance \(its class has no __eq__\)"),
    ],
)
def test_identity_compared_static_warns(value, what):
    with pytest.warns(tc.RecompileWarning, match=rf"Model\.act is a static field holding {what}"):
        Model(jnp.zeros(1), act=value)


@pytest.mark.parametrize("value", [relu, jnp.tanh, Color.RED, int, "relu", 3, (1, "a"), None, jnp.float32])
def test_value_compared_static_accepted_silently(value):
    assert Model(jnp.zeros(1), act=value).act is value


def test_checks_do_not_run_when_jax_rebuilds(monkeypatch):
    # The generated functions of a class share one namespace; the spy goes where they
    # look the check up (patching treeclass._core.checks would change nothing they call).
    calls = []
    namespace = Model.__init__.__globals__
    monkeypatch.setitem(namespace, "_tc_check", lambda *a: calls.append(a[1:]))
    m = Model(jnp.zeros(1), act=(1, 2))
    m = m.replace(act=(3, 4))
    assert calls == [("act", (1, 2)), ("act", (3, 4))]  # the spy sees the checks
    jax.jit(lambda m: m)(m)
    jax.tree.map(lambda x: None, m)
    leaves, treedef = jax.tree.flatten(m)
    treedef.unflatten(leaves)
    assert calls == [("act", (1, 2)), ("act", (3, 4))]  # and none when JAX rebuilds


def test_dynamic_fields_accept_anything():
    # Dynamic fields are pytree children: None, nested containers and arrays all fit.
    m = Model(w=[jnp.ones(1), {"b": None}])  # type: ignore[arg-type]
    assert len(jax.tree.leaves(m)) == 1


# ---------------------------------------------------------------------------------------
# The deep check: an array anywhere inside a static value, at any depth. A model
# keeping layers and functions in one static tuple (equinox's MNIST example) had every
# weight silently baked into the compiled code as a constant.


@tc.treeclass
class Linear:
    w: jax.Array
    act: object = tc.static(None)

    def __call__(self, x):
        return x @ self.w


@tc.treeclass
class CNN:
    layers: tuple = tc.static(())  # the mistake under test: layers in a static field

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Pair(NamedTuple):
    a: object
    b: object


@tc.treeclass
class Outer:
    inner: object


@pytest.mark.parametrize(
    ("value", "path", "kind"),
    [
        ((Linear(jnp.ones((2, 2))), relu), r"CNN\.layers\[0\]\.w", r"a jax\.Array"),
        ([np.ones(2)], r"CNN\.layers\[0\]", r"a numpy\.ndarray"),
        ((1, Pair(2, (3, np.ones(2)))), r"CNN\.layers\[1\]\.b\[1\]", r"a numpy\.ndarray"),
        (frozenset({Linear(jnp.ones(2))}), r"CNN\.layers\.w", r"a jax\.Array"),
        ({"head": Linear(jnp.ones(2))}, r"CNN\.layers\['head'\]\.w", r"a jax\.Array"),
        ((Outer(Outer((jnp.ones(1),))),), r"CNN\.layers\[0\]\.inner\.inner\[0\]", r"a jax\.Array"),
    ],
    ids=["treeclass-in-tuple", "list", "namedtuple", "frozenset", "dict", "nested-treeclass"],
)
def test_static_array_deep_inside_rejected_naming_the_path(value, path, kind):
    match = rf"^CNN\.layers is a static field but holds {kind} at {path} \(shape"
    with pytest.raises(TypeError, match=match) as info:
        CNN(value)
    message = str(info.value)
    assert "Make the\nfield dynamic" in message
    assert "jax.tree_util.Partial(jax.nn.relu)" in message  # a function among the layers


def test_static_array_inside_an_equinox_module_rejected():
    eqx = pytest.importorskip("equinox")
    with pytest.raises(TypeError, match=r"^CNN\.layers is a static field but holds a jax\.Array at CNN\.layers\[0\]\.weight"):
        CNN((eqx.nn.Linear(2, 2, key=jax.random.key(0)),))


def test_static_array_deep_inside_checked_on_replace_and_default():
    with pytest.raises(TypeError, match=r"CNN\.layers\[0\]\.w"):
        CNN().replace(layers=(Linear(jnp.ones(2)),))
    with pytest.raises(TypeError, match=r"^Bad\.layers is a static field but holds a jax\.Array at Bad\.layers\[0\]\.w"):

        @tc.treeclass
        class Bad:
            layers: tuple = tc.static((Linear(jnp.ones(2)),))


def test_static_tracer_deep_inside_rejected():
    with pytest.raises(TypeError, match=r"holds a JAX tracer at CNN\.layers\[0\]\.w"):
        jax.jit(lambda w: CNN((Linear(w),)))(jnp.ones(2))


def test_static_without_arrays_deep_inside_accepted():
    m = CNN((Linear(1.0, act="relu"), Pair(1, ("a", None)), frozenset({2}), relu))
    assert jax.tree.leaves(m) == []


def test_the_advice_for_a_function_among_layers_works_under_jit_and_grad():
    # What the message above advises: the field dynamic, the function wrapped in
    # jax.tree_util.Partial (the function in the treedef, no leaves).
    @tc.treeclass
    class Model:
        layers: tuple

        def __call__(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    model = Model((Linear(jnp.eye(2)), jax.tree_util.Partial(jax.nn.relu), Linear(2 * jnp.eye(2))))
    assert len(jax.tree.leaves(model)) == 2  # the weights; relu is in the treedef
    x = jnp.array([1.0, -1.0])

    def loss(m, x):
        return jnp.sum(m(x))

    assert jax.jit(loss)(model, x) == 2.0
    grads = jax.grad(loss)(model, x)
    assert grads.layers[0].w.tolist() == [[2.0, 0.0], [-2.0, 0.0]]
    assert grads.layers[2].w.tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert tc.grad(loss)(model, x) == grads
    # A new model of the same structure compiles nothing new: relu is one object.
    assert jax.tree.structure(model) == jax.tree.structure(Model((Linear(jnp.ones((2, 2))), jax.tree_util.Partial(jax.nn.relu), Linear(jnp.ones((2, 2))))))


@tc.treeclass
class Box:
    item: object
    tag: str = tc.static("box")


_PLAIN = st.one_of(st.integers(-3, 3), st.sampled_from(["a", None, 1.5]))
_ARRAYS = st.sampled_from([np.ones(2), jnp.zeros(()), jnp.ones((1, 2))])


def _containers(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.one_of(
        st.lists(children, max_size=3).map(tuple),
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(["p", "q"]), children, max_size=2),
        st.tuples(children, children).map(lambda ab: Pair(*ab)),
        children.map(Box),
    )


@given(value=st.recursive(st.one_of(_PLAIN, _ARRAYS), _containers, max_leaves=6))
def test_generated_static_values_refused_iff_an_array_is_inside(value):
    paths = [jax.tree_util.keystr(p) for p, leaf in jax.tree_util.tree_flatten_with_path(value)[0] if isinstance(leaf, jax.Array | np.ndarray)]
    if not paths:
        try:
            hash(value)
        except TypeError:  # a list or dict: refused, but not for an array
            with pytest.raises(TypeError, match=r"^CNN\.layers is a static field but holds an unhashable"):
                CNN(value)
        else:
            assert jax.tree.leaves(CNN(value)) == []
        return
    with pytest.raises(TypeError, match=r"^CNN\.layers is a static field but holds a") as info:
        CNN(value)
    found = re.match(r"CNN\.layers is a static field but holds an? [\w.]+(?: [\w.]+)?(?: at CNN\.layers(\S*))? \(", str(info.value))
    assert found is not None, str(info.value)
    assert (found.group(1) or "") in paths
