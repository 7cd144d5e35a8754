"""`fields()`, `is_treeclass()`, `tree_equal()`, `==` and hash."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treeclass as tc


@tc.treeclass
class P:
    x: jax.Array
    tag: str = tc.static("a")


def test_fields_of_class_and_instance():
    assert tc.fields(P) == tc.fields(P(jnp.zeros(1)))
    assert [f.metadata["static"] for f in tc.fields(P)] == [False, True]


def test_fields_rejects_non_treeclass():
    with pytest.raises(TypeError, match=r"treeclass\.fields\(\) takes a treeclass"):
        tc.fields(int)


def test_is_treeclass():
    assert tc.is_treeclass(P)
    assert tc.is_treeclass(P(jnp.zeros(1)))
    assert not tc.is_treeclass(object())
    assert not tc.is_treeclass(tuple)


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (P(jnp.ones(2)), P(jnp.ones(2)), True),
        (P(jnp.ones(2)), P(jnp.zeros(2)), False),
        (P(jnp.ones(2)), P(jnp.ones(3)), False),  # shape
        (P(jnp.ones(2)), P(jnp.ones(2, dtype=jnp.int32)), False),  # dtype
        (P(jnp.ones(2)), P(jnp.ones(2), tag="b"), False),  # static
        (P(jnp.ones(2)), P(np.ones(2, dtype=np.float32)), True),  # numpy vs jax, same values
        (P(jnp.array([jnp.nan])), P(jnp.array([jnp.nan])), False),  # NaN != NaN
        (P(1.0), P(1.0), True),  # type: ignore[arg-type]
        (P(None), P(None), True),  # type: ignore[arg-type]
        (P(jnp.ones(1)), P(1.0), False),  # type: ignore[arg-type]
    ],
)
def test_tree_equal(a, b, equal):
    result = tc.tree_equal(a, b)
    assert type(result) is bool
    assert result is equal
    assert (a == b) is equal


def test_tree_equal_on_plain_pytrees():
    assert tc.tree_equal({"a": jnp.ones(2)}, {"a": jnp.ones(2)}) is True
    assert tc.tree_equal({"a": jnp.ones(2)}, {"b": jnp.ones(2)}) is False


def test_tree_equal_traced_returns_traced_bool():
    @jax.jit
    def same(a, b):
        return tc.tree_equal(a, b)

    out = same(P(jnp.ones(2)), P(jnp.ones(2)))
    assert isinstance(out, jax.Array)
    assert out.dtype == jnp.bool_
    assert bool(out)
    assert not bool(same(P(jnp.ones(2)), P(jnp.zeros(2))))


def test_eq_never_raises_ambiguous_truth_value():
    a, b = P(jnp.ones(5)), P(jnp.ones(5))
    assert a == b
    assert (a != b) is False
    assert a != "something else"


def test_hash_by_type_and_statics():
    assert hash(P(jnp.ones(2))) == hash(P(jnp.zeros(2)))  # equal statics
    assert {P(jnp.ones(2)): 1}  # usable as a dict key
    assert hash(P(jnp.ones(2), tag="a")) != hash(P(jnp.ones(2), tag="b"))


def test_instance_as_static_argument_of_jit():
    calls = []

    @tc.treeclass
    class Config:
        width: int = tc.static(4)

    def f(x, config):
        calls.append(1)
        return x * config.width

    g = jax.jit(f, static_argnums=1)
    g(jnp.ones(1), Config())
    g(jnp.ones(1), Config())
    assert len(calls) == 1  # equal configs hit the cache


@tc.treeclass
class Keyed:
    key: jax.Array


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (jax.random.key(0), jax.random.key(0), True),
        (jax.random.key(0), jax.random.key(1), False),
        (jax.random.key(0), jax.random.key(0, impl="rbg"), False),  # implementation
        (jax.random.key(0), jax.random.PRNGKey(0), False),  # typed vs raw uint32
        (jax.random.split(jax.random.key(0)), jax.random.split(jax.random.key(0)), True),
        (jax.random.split(jax.random.key(0)), jax.random.key(0), False),  # shape
    ],
    ids=["same", "data", "impl", "raw", "split", "shape"],
)
def test_typed_keys_compare_by_impl_and_data(a, b, equal):
    # Before the fix: TypeError "PRNGKey dtype cannot be converted to a NumPy array".
    assert tc.tree_equal(Keyed(a), Keyed(b)) is equal
    assert (Keyed(a) == Keyed(b)) is equal
    assert (Keyed(a) != Keyed(b)) is not equal
    traced = jax.jit(tc.tree_equal)(Keyed(a), Keyed(b))  # compared under tracing
    assert bool(traced) is equal


def test_tree_equal_of_a_float_past_float32_and_an_int_array_is_false_without_a_warning():
    # Regression (hypothesis, on jax 0.7): numpy's cast of 3.4e38 to float32 warned, an
    # error under the suite's filterwarnings.
    assert tc.tree_equal(3.4028235677973366e38, jnp.array(1, jnp.int32)) is False
