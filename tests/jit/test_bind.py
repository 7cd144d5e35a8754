"""`tc.bind`: a bound method as a pytree (self a child, the function static)."""

import jax
import jax.numpy as jnp
import pytest

import treeclass as tc


@tc.treeclass
class Leaky:
    v: jax.Array
    decay: float = tc.static(0.5)

    def step(self, x, i):
        new = x * self.decay + self.v * i
        return new, new


def test_bound_method_is_a_pytree():
    b = tc.bind(Leaky(jnp.ones(2)).step)
    leaves, treedef = jax.tree.flatten(b)
    assert len(leaves) == 1
    rebuilt = treedef.unflatten(leaves)
    assert isinstance(rebuilt, tc.BoundMethod)
    assert rebuilt.__func__ is Leaky.step
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(b)[0]]
    assert paths == [".__self__.v"]


def test_passed_into_jit_as_scan_body_one_compile():
    traces = []

    @jax.jit
    def run(step, x0, inputs):
        traces.append(1)
        return jax.lax.scan(step, x0, inputs)

    inputs = jnp.arange(3.0)
    out_a, _ = run(tc.bind(Leaky(jnp.ones(2)).step), jnp.zeros(2), inputs)
    out_b, _ = run(tc.bind(Leaky(jnp.ones(2) * 2).step), jnp.zeros(2), inputs)
    assert len(traces) == 1
    assert not jnp.allclose(out_a, out_b)  # each instance's values, not a baked constant
    expected = jnp.zeros(2)
    for i in range(3):
        expected = expected * 0.5 + 2.0 * i
    assert jnp.allclose(out_b, expected)


def test_static_change_recompiles():
    traces = []

    @jax.jit
    def call(step, x):
        traces.append(1)
        return step(x, 1.0)[0]

    call(tc.bind(Leaky(jnp.ones(1)).step), jnp.ones(1))
    call(tc.bind(Leaky(jnp.ones(1), decay=0.1).step), jnp.ones(1))
    assert len(traces) == 2


def test_bind_rejects_non_methods():
    with pytest.raises(TypeError, match=r"tc\.bind\(\) takes a bound method such as obj\.method"):
        tc.bind(lambda x: x)


def test_bound_method_is_immutable():
    b = tc.bind(Leaky(jnp.ones(1)).step)
    with pytest.raises(AttributeError, match=r"cannot assign to BoundMethod\.__self__"):
        b.__self__ = 1  # type: ignore[misc]
