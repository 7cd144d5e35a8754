"""Retraces are visible: what changed (old -> new), a guard and a warning."""

import jax
import jax.numpy as jnp
import pytest

import treeclass as tc


@tc.treeclass
class Neuron:
    v: jax.Array
    tau: float = tc.static(20.0)


def test_max_traces_guard_names_the_changed_static():
    @tc.jit(max_traces=1)
    def step(n):
        return n.v / n.tau

    step(Neuron(jnp.zeros(3)))
    step(Neuron(jnp.ones(3)))  # same structure: no retrace
    with pytest.raises(tc.RetraceError, match=r"step traced 2 times") as info:
        step(Neuron(jnp.zeros(3), tau=10.0))
    assert "n.tau (static Neuron.tau): 20.0 -> 10.0" in str(info.value)
    assert "(max_traces=1)" in str(info.value)


def test_explain_warns_with_shape_change():
    @tc.jit(explain=True)
    def total(n):
        return n.v.sum()

    total(Neuron(jnp.zeros(3)))
    with pytest.warns(tc.RetraceWarning, match=r"n\.v: f32\[3\] -> f32\[4\]"):
        total(Neuron(jnp.zeros(4)))


def test_dtype_and_weak_type_changes_are_named():
    @tc.jit(explain=True)
    def f(x):
        return x

    f(jnp.zeros(2, jnp.float32))
    with pytest.warns(tc.RetraceWarning, match=r"x: f32\[2\] -> i32\[2\]"):
        f(jnp.zeros(2, jnp.int32))
    with pytest.warns(tc.RetraceWarning, match=r"x: f32\[2\] -> f32\[\]\{weak\}|-> f32\[\]\{weak\}"):
        f(1.0)


def test_structure_change_is_named():
    @tc.jit(explain=True)
    def f(xs):
        return xs

    f([jnp.zeros(1)])
    with pytest.warns(tc.RetraceWarning, match=r"xs\[1\]: <absent> -> f32\[1\]"):
        f([jnp.zeros(1), jnp.zeros(1)])


def test_reasons_are_kept():
    @tc.jit
    def f(n):
        return n.v

    f(Neuron(jnp.zeros(1)))
    f(Neuron(jnp.zeros(1), tau=1.0))
    assert f.trace_log.count == 2
    assert f.trace_log.reasons == [
        "test_reasons_are_kept.<locals>.f traced 2 times; what changed since the closest earlier trace:\n"
        "  n.tau (static Neuron.tau): 20.0 -> 1.0"
    ]
