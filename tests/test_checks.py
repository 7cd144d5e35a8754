"""Construction-time checks on static fields: errors name `Class.field`, what was found
and the fix; they run at construction and replace, never when JAX rebuilds."""

import enum
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

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
