"""The array-summarising repr: golden strings, and no device sync."""

import array
import dataclasses
import functools
import re
import types
from collections import Counter, OrderedDict, UserList, defaultdict, deque
from collections.abc import Mapping, Sequence
from typing import NamedTuple
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

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


# ---------------------------------------------------------------------------------------
# Every container summarises its arrays, keeping the form of its own repr. An
# OrderedDict or a defaultdict of arrays printed every array in full (reading device
# values), since only list, tuple, dict and NamedTuple were looked into.


class Row(Sequence):
    """A Sequence of another library: no repr of its own."""

    def __init__(self, *items: object) -> None:
        self.items = items

    def __getitem__(self, i):  # type: ignore[override]
        return self.items[i]

    def __len__(self) -> int:
        return len(self.items)


class Table(Mapping):
    """A Mapping of another library."""

    def __init__(self, **items: object) -> None:
        self.items_ = items

    def __getitem__(self, key):
        return self.items_[key]

    def __iter__(self):
        return iter(self.items_)

    def __len__(self) -> int:
        return len(self.items_)


@tc.treeclass
class Shown:
    v: object


_A = jnp.zeros(3)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (OrderedDict(a=_A, b=1), "OrderedDict({'a': f32[3], 'b': 1})"),
        (OrderedDict(), "OrderedDict({})"),
        (defaultdict(list, a=_A), "defaultdict(<class 'list'>, {'a': f32[3]})"),
        (defaultdict(None), "defaultdict(None, {})"),
        (deque([_A, np.ones(2)]), "deque([f32[3], f64[2](numpy)])"),
        (deque([_A], maxlen=4), "deque([f32[3]], maxlen=4)"),
        (Counter(a=2), "Counter({'a': 2})"),
        (types.MappingProxyType({"a": _A}), "mappingproxy({'a': f32[3]})"),
        (Row(_A, "x"), "Row([f32[3], 'x'])"),
        (Table(w=_A), "Table({'w': f32[3]})"),
        (UserList([_A]), "UserList([f32[3]])"),
        ({np.int8(3): _A}, "{i8[](numpy): f32[3]}"),
        (OrderedDict(a=defaultdict(list, b=deque([(_A,)]))), "OrderedDict({'a': defaultdict(<class 'list'>, {'b': deque([(f32[3],)])})})"),
    ],
    ids=["OrderedDict", "OrderedDict-empty", "defaultdict", "defaultdict-no-factory", "deque", "deque-maxlen", "Counter", "mappingproxy", "Sequence", "Mapping", "UserList", "numpy-scalar-key", "nested"],
)
def test_every_container_summarises_its_arrays(value, shown):
    assert repr(Shown(value)) == f"Shown(v={shown})"


@pytest.mark.parametrize("value", ["text", b"bytes", range(10**12), array.array("d", [1.5])], ids=["str", "bytes", "range", "array.array"])
def test_text_ranges_and_typed_number_arrays_keep_their_own_repr(value):
    # Sequences too, but holding no arrays; a range may be vast, and is not iterated.
    assert repr(Neuron(value, jnp.zeros(1))) == f"Neuron(v={value!r}, w=f32[1], tau=20.0)"  # type: ignore[arg-type]


def test_a_long_ordered_dict_indents_like_a_dict():
    layers = OrderedDict((f"layer{i}", jnp.zeros((100, 3))) for i in range(4))
    assert repr(Neuron(layers, jnp.zeros(1))) == (  # type: ignore[arg-type]
        "Neuron(\n"
        "  v=OrderedDict({\n"
        "    'layer0': f32[100,3],\n"
        "    'layer1': f32[100,3],\n"
        "    'layer2': f32[100,3],\n"
        "    'layer3': f32[100,3],\n"
        "  }),\n"
        "  w=f32[1],\n"
        "  tau=20.0,\n"
        ")"
    )


# Other libraries' dataclass nodes (flax.struct, chex, jax.tree_util.register_dataclass)
# print with the `__repr__` that dataclasses wrote, which showed every array in full,
# reading its values from the device: `FS(w=Array([1., 1., 1.], dtype=float32))`.


@dataclasses.dataclass(frozen=True)
class Plain:
    v: object


@functools.partial(jax.tree_util.register_dataclass, data_fields=["v"], meta_fields=[])
@dataclasses.dataclass(frozen=True)
class Registered:
    v: object


@dataclasses.dataclass
class OwnRepr:
    v: object

    def __repr__(self) -> str:
        return "OwnRepr(...)"


@dataclasses.dataclass
class Secret:
    v: object
    secret: object = dataclasses.field(default=None, repr=False)


def test_a_dataclass_node_summarises_its_arrays():
    assert repr(Shown(Registered(_A))) == "Shown(v=Registered(v=f32[3]))"
    assert repr(Shown(Plain((_A, Registered(np.ones(2)))))) == "Shown(v=Plain(v=(f32[3], Registered(v=f64[2](numpy)))))"
    assert repr(Shown(Secret(_A, secret=_A))) == "Shown(v=Secret(v=f32[3]))"  # repr=False hidden
    assert repr(Shown(OwnRepr(_A))) == "Shown(v=OwnRepr(...))"  # its own __repr__ is kept


def test_flax_struct_and_chex_nodes_summarise_their_arrays():
    flax_struct = pytest.importorskip("flax.struct")
    chex = pytest.importorskip("chex")

    @flax_struct.dataclass
    class Params:
        w: jax.Array

    @chex.dataclass
    class State:
        w: jax.Array

    assert repr(Shown(Params(_A))) == "Shown(v=Params(w=f32[3]))"
    assert repr(Shown(State(w=_A))) == "Shown(v=State(w=f32[3]))"


# Generated nests of every container with arrays: the repr shows each array as its
# summary and no value. The arrays hold 987654.25, which no summary or key contains.

_VALUE = 987654.25
_SHAPES = [(2,), (3, 4), (5,)]


def _array(shape: tuple[int, ...], numpy: bool) -> object:
    return np.full(shape, _VALUE, np.float32) if numpy else jnp.full(shape, _VALUE, jnp.float32)


def _summary(shape: tuple[int, ...], numpy: bool) -> str:
    return f"f32[{','.join(map(str, shape))}]" + ("(numpy)" if numpy else "")


_CONTAINERS = {
    "list": list,
    "tuple": tuple,
    "namedtuple": lambda items: Pair(items[0] if items else None, tuple(items[1:])),
    "dict": lambda items: {f"k{i}": v for i, v in enumerate(items)},
    "OrderedDict": lambda items: OrderedDict((f"k{i}", v) for i, v in enumerate(items)),
    "defaultdict": lambda items: defaultdict(list, {f"k{i}": v for i, v in enumerate(items)}),
    "deque": deque,
    "Sequence": lambda items: Row(*items),
    "Mapping": lambda items: Table(**{f"k{i}": v for i, v in enumerate(items)}),
    "treeclass": lambda items: Neuron(tuple(items), jnp.zeros(())),
    "dataclass": lambda items: Plain(tuple(items)),
    "register_dataclass": lambda items: Registered(tuple(items)),
}


@st.composite
def nests(draw: st.DrawFn, depth: int = 0) -> tuple[object, list[str]]:
    """`(value, summaries of its arrays)`: containers of every kind, nested, with arrays."""
    if depth >= 3 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            shape, numpy = draw(st.sampled_from(_SHAPES)), draw(st.booleans())
            return _array(shape, numpy), [_summary(shape, numpy)]
        return draw(st.sampled_from([None, "s", 1])), []
    items = [draw(nests(depth + 1)) for _ in range(draw(st.integers(0, 3)))]
    kind = draw(st.sampled_from(sorted(_CONTAINERS)))
    summaries = [s for _, ss in items for s in ss] + (["f32[]"] if kind == "treeclass" else [])
    return _CONTAINERS[kind]([v for v, _ in items]), summaries


@given(nest=nests())
def test_generated_nests_show_every_array_as_its_summary_and_no_value(nest):
    value, summaries = nest

    def forbidden(*args, **kwargs):
        msg = "repr read array values"
        raise AssertionError(msg)

    array_type = type(jnp.zeros(1))
    with mock.patch.object(array_type, "__array__", forbidden), mock.patch.object(array_type, "_value", property(forbidden)):
        shown = repr(Neuron(value, jnp.zeros(1)))  # type: ignore[arg-type]
    assert "987654" not in shown, shown
    assert "9.87" not in shown, shown  # nor in scientific notation
    for summary in set(summaries):
        # Each summary is followed by a separator, never by more shape: f32[2] is not f32[2,3].
        assert len(re.findall(re.escape(summary) + r"(?![(\w])", shown)) == summaries.count(summary), shown
