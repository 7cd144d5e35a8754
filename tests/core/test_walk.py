"""`treeclass._core.walk`: the one walk over treeclass fields inside any pytree, and the
helpers every walk shares (`is_array`, `array_name`, `path_str`), and `_layout.layout_of`."""

import collections
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from strategies import Instance, instances

import treeclass as tc
from treeclass._core.layout import instance_layout, layout_of
from treeclass._core.walk import array_name, children, is_array, path_str, walk


@tc.treeclass
class Layer:
    w: jax.Array
    act: tc.Static[str] = "relu"


@tc.treeclass
class Model:
    layers: tuple[Layer, ...]
    extra: object = None


class Pair(NamedTuple):
    a: object
    b: object


def _shown(tree):
    return [(jax.tree_util.keystr(v.path), v.field, v.kind) for v in walk(tree)]


def test_walk_visits_nodes_leaves_and_statics_with_their_field():
    model = Model((Layer(jnp.ones(2)), Layer(jnp.ones(3), act="tanh")))
    assert _shown(model) == [
        ("", "", "node"),
        (".layers", "Model.layers", "node"),
        (".layers[0]", "Model.layers", "node"),
        (".layers[0].w", "Layer.w", "leaf"),
        (".layers[0].act", "Layer.act", "static"),
        (".layers[1]", "Model.layers", "node"),
        (".layers[1].w", "Layer.w", "leaf"),
        (".layers[1].act", "Layer.act", "static"),
        (".extra", "Model.extra", "node"),  # None: a node with no children
    ]
    statics = [v.value for v in walk(model) if v.kind == "static"]
    assert statics == ["relu", "tanh"]


def test_walk_opens_namedtuples_and_every_registered_container():
    tree = collections.OrderedDict(
        z=Pair(Layer(jnp.ones(1)), [jnp.zeros(1)]), a=jax.tree_util.Partial(print, jnp.ones(1))
    )
    assert [(p, f, k) for p, f, k in _shown(tree) if k != "node"] == [
        ("['z'].a.w", "Layer.w", "leaf"),
        ("['z'].a.act", "Layer.act", "static"),
        ("['z'].b[0]", "", "leaf"),
        ("['a'][<flat index 0>][0]", "", "leaf"),  # Partial: a node registered without keys
    ]


def test_walk_leaves_are_jax_leaves_in_flatten_order():
    tree = {"b": Model((Layer(jnp.ones(1)),), extra=[1.0, None]), "a": (np.ones(2), "s")}
    walked = [v for v in walk(tree) if v.kind == "leaf"]
    with_path, _ = jax.tree_util.tree_flatten_with_path(tree)
    assert [v.path for v in walked] == [p for p, _ in with_path]
    assert all(v.value is x for v, (_, x) in zip(walked, with_path, strict=True))


@given(instances())
def test_walk_agrees_with_jax_flatten_on_generated_classes(inst: Instance) -> None:
    walked = [v for v in walk(inst.obj) if v.kind == "leaf"]
    with_path, _ = jax.tree_util.tree_flatten_with_path(inst.obj)
    assert [v.path for v in walked] == [p for p, _ in with_path]
    assert all(v.value is x for v, (_, x) in zip(walked, with_path, strict=True))
    statics = {v.name for v in walk(inst.obj) if v.kind == "static" and v.owner is type(inst.obj)}
    assert statics == {f.name for f in tc.fields(inst.obj) if f.metadata["static"]}


def test_walk_prefixes_the_given_path_and_stops_when_the_caller_does():
    prefix = (jax.tree_util.GetAttrKey("self"),)
    first = next(v for v in walk(Layer(jnp.ones(1)), prefix) if v.kind == "leaf")
    assert jax.tree_util.keystr(first.path) == ".self.w"


def test_a_treeclass_class_in_a_field_is_a_leaf_not_a_node():
    tree = [Layer]
    assert _shown(tree) == [("", "", "node"), ("[0]", "", "leaf")]


def test_layout_of_classes_and_instances_only_decorated_ones():
    class Undecorated(Layer):  # not registered with JAX: not a treeclass
        pass

    layer = Layer(jnp.ones(1))
    assert layout_of(Layer) is layout_of(layer) is not None
    assert layout_of(Layer).static == ("act",)
    assert layout_of(Undecorated) is None
    assert layout_of(3) is None
    assert layout_of(int) is None
    assert instance_layout(layer) is layout_of(Layer)
    assert instance_layout(Layer) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (jnp.ones(2), True),
        (np.ones(2), True),
        (np.float32(1.0), True),  # a numpy scalar is a 0-d array: shape (), dtype f32
        (1.0, False),  # a Python number has no dtype until JAX picks one
        (jax.ShapeDtypeStruct((2,), jnp.float32), False),  # shape and dtype, no values
        ([1.0], False),
        (None, False),
    ],
)
def test_is_array(value, expected):
    assert is_array(value) is expected


def test_is_array_is_true_for_tracers():
    seen = []
    jax.jit(lambda x: seen.append(is_array(x)))(jnp.ones(1))
    assert seen == [True]


@pytest.mark.parametrize(
    ("dtype", "shape", "weak", "expected"),
    [
        (jnp.float32, (100, 3), False, "f32[100,3]"),
        (jnp.bfloat16, (), False, "bf16[]"),
        (jnp.uint8, (0,), False, "u8[0]"),
        (jnp.float32, (), True, "f32[]{weak}"),
        (jax.random.key(0).dtype, (2,), False, "key<fry>[2]"),
    ],
)
def test_array_name(dtype, shape, weak, expected):
    assert array_name(dtype, shape, weak) == expected


def test_children_is_one_level():
    inner = [jnp.ones(1)]
    assert children({"b": inner, "a": 1}) == [
        (jax.tree_util.DictKey("a"), 1),
        (jax.tree_util.DictKey("b"), inner),
    ]
    assert children(jnp.ones(1)) is None
    assert children(None) == []
    assert children(()) == []


def test_path_str_is_the_one_path_format() -> None:
    from jax.tree_util import DictKey, GetAttrKey, SequenceKey

    path = (GetAttrKey("layers"), SequenceKey(1), DictKey("w"), DictKey(2))
    assert path_str("MLP", path) == "MLP.layers[1]['w'][2]"
    assert path_str("x", ()) == "x"
    layer = {"layers": [0, {"w": [1, 2, 3]}]}
    assert [path_str("MLP", p) for p, _ in jax.tree_util.tree_flatten_with_path(layer)[0]][-1] == (
        "MLP['layers'][1]['w'][2]"
    )
