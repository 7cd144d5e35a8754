"""The array-summarising repr: golden strings, and no device sync."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treeclass as tc


@tc.treeclass
class Neuron:
    v: jax.Array
    w: jax.Array
    tau: float = tc.static(20.0)


@tc.treeclass
class Net:
    layers: list
    scale: jax.Array
    name: str = tc.static("a network with a long name that will not fit on one line")


@tc.treeclass
class Hidden:
    x: jax.Array
    secret: jax.Array = tc.field(repr=False)


@pytest.mark.parametrize(
    ("dtype", "short"),
    [
        (jnp.float32, "f32"),
        (jnp.bfloat16, "bf16"),
        (jnp.float16, "f16"),
        (jnp.int8, "i8"),
        (jnp.uint32, "u32"),
        (jnp.bool_, "bool"),
        (jnp.complex64, "c64"),
    ],
)
def test_dtype_summaries(dtype, short):
    n = Neuron(jnp.zeros((100, 3), dtype), jnp.zeros((), dtype))
    assert repr(n) == f"Neuron(v={short}[100,3], w={short}[], tau=20.0)"


def test_numpy_and_python_values():
    n = Neuron(np.zeros(2, np.float64), 1.5)  # type: ignore[arg-type]
    assert repr(n) == "Neuron(v=f64[2](numpy), w=1.5, tau=20.0)"


def test_nested_classes_indent_when_long():
    net = Net([Neuron(jnp.zeros(3), jnp.zeros(3)), None], jnp.ones(()))
    assert repr(net) == (
        "Net(\n"
        "  layers=[Neuron(v=f32[3], w=f32[3], tau=20.0), None],\n"
        "  scale=f32[],\n"
        "  name='a network with a long name that will not fit on one line',\n"
        ")"
    )


def test_repr_false_field_hidden():
    assert repr(Hidden(jnp.zeros(1), jnp.zeros(1))) == "Hidden(x=f32[1])"


def test_tracer_repr():
    seen = []
    jax.jit(lambda n: seen.append(repr(n)))(Neuron(jnp.zeros(2), jnp.zeros(2)))
    assert seen == ["Neuron(v=f32[2](traced), w=f32[2](traced), tau=20.0)"]


def test_repr_never_reads_values(monkeypatch):
    # Reading values would block on the device; repr only looks at shape and dtype.
    n = Neuron(jnp.zeros(2), jnp.zeros(2))

    def forbidden(*args, **kwargs):
        msg = "repr read array values"
        raise AssertionError(msg)

    monkeypatch.setattr(type(n.v), "__array__", forbidden)
    monkeypatch.setattr(type(n.v), "_value", property(forbidden))
    assert repr(n) == "Neuron(v=f32[2], w=f32[2], tau=20.0)"


def test_self_referencing_container():
    loop: list = []
    loop.append(loop)
    assert repr(Neuron(loop, jnp.zeros(1))) == "Neuron(v=[...], w=f32[1], tau=20.0)"  # type: ignore[arg-type]


def test_typed_prng_key():
    @tc.treeclass
    class Noisy:
        key: jax.Array

    n = Noisy(jax.random.key(0))
    assert repr(n) == "Noisy(key=key<fry>[])"
    out = tc.jit(lambda n: n.replace(key=jax.random.split(n.key)[0]))(n)
    assert repr(out) == "Noisy(key=key<fry>[])"


def test_object_whose_repr_shows_the_instance_again():
    # The second recursion guard: `box`'s own __repr__ calls repr(owner), which starts
    # a new tree_repr that the first guard (one set per call) cannot see.
    class Box:
        owner: object = None

        def __repr__(self):
            return f"Box({self.owner!r})"

    box = Box()
    n = Neuron(box, jnp.zeros(1))  # type: ignore[arg-type]
    box.owner = n
    assert repr(n) == "Neuron(v=Box(...), w=f32[1], tau=20.0)"


class Pair(NamedTuple):
    a: object
    b: object


def test_namedtuple_arrays_are_summarised():
    # A NamedTuple showed its arrays' values (its own repr), unlike list/tuple/dict.
    n = Neuron(Pair(jnp.zeros(2), np.zeros(3, np.float32)), jnp.zeros(1))  # type: ignore[arg-type]
    assert repr(n) == "Neuron(v=Pair(a=f32[2], b=f32[3](numpy)), w=f32[1], tau=20.0)"


def test_numpy_scalar_is_a_zero_d_array():
    n = Neuron(np.float32(1.5), np.int8(3))  # type: ignore[arg-type]
    assert repr(n) == "Neuron(v=f32[](numpy), w=i8[](numpy), tau=20.0)"


def test_repr_inside_post_init_shows_unset_fields_unquoted():
    seen: list[str] = []

    @tc.treeclass
    class Derived:
        a: float
        b: float = tc.field(init=False)

        def __post_init__(self) -> None:
            seen.append(repr(self))
            object.__setattr__(self, "b", self.a * 2)

    assert repr(Derived(1.0)) == "Derived(a=1.0, b=2.0)"
    # Not "b='<unset>'", which a field holding that string would show.
    assert seen == ["Derived(a=1.0, b=<unset>)"]
