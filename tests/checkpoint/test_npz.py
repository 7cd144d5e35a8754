"""`save` / `load` on `.npz` (treeclass/_checkpoint/npz.py): exact round trips for every dtype
(bit for bit, NaN and -0.0 included), weak types, leaf kinds (jax, numpy, Python
scalars) and typed PRNG keys; every mismatch a `CheckpointError` naming the field path;
what `save` refuses, before writing anything. The bytes: a damaged, truncated or
hostile file is a `CheckpointError` naming the file, never another exception and never
wrong values; loading never unpickles; `save` is atomic.
"""

import enum
import json
import os
import pathlib
import pickle
import zipfile
import zlib
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from checkpoints import (
    Dense,
    Keyed,
    Model,
    assert_identical,
    damaged,
    keyed,
    manifest_of,
    mismatch,
    model,
    path,
    rewrite,
    same_bits,
    same_keys,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import instances

import treeclass as tc
from treeclass._checkpoint import npz

__all__ = ["path"]  # the fixture, imported for pytest


# ---------------------------------------------------------------------------------------
# save / load round trips.

DTYPES = [
    jnp.float32,
    jnp.float16,
    jnp.bfloat16,
    jnp.int8,
    jnp.int16,
    jnp.int32,
    jnp.uint8,
    jnp.uint16,
    jnp.uint32,
    jnp.bool_,
    jnp.complex64,
    jnp.float8_e4m3fn,
    jnp.float8_e5m2,
    jnp.int4,
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (0,), (2, 3)], ids=str)
def test_round_trip_is_exact_for_every_dtype(
    path: pathlib.Path, dtype: Any, shape: tuple[int, ...]
):
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 256, size=(*shape, np.dtype(dtype).itemsize), dtype=np.uint8)
    if np.dtype(dtype) == np.bool_:
        values = jnp.asarray(bits[..., 0] % 2 == 1)
    elif np.dtype(dtype).kind in "fcV" or np.dtype(dtype).isbuiltin == 2:
        # Random bit patterns: NaN payloads, infinities, -0.0 and subnormals included.
        values = jnp.asarray(bits.view(np.dtype(dtype)).reshape(shape))
    else:
        values = jnp.asarray(bits.view(np.dtype(dtype)).reshape(shape))

    @tc.treeclass
    class Holder:
        x: jax.Array

    tc.save(path, Holder(values))
    restored = tc.load(path, Holder(jnp.zeros(shape, dtype)))
    assert isinstance(restored.x, jax.Array)
    assert restored.x.dtype == values.dtype
    assert same_bits(restored.x, values)


def test_round_trip_nested_model(path: pathlib.Path):
    m = model(scale=0.5)
    tc.save(path, m)
    restored = tc.load(path, model(scale=0.5))
    assert_identical(restored, m)
    assert restored.extras["pair"][1] is None
    assert restored.optional is None


def test_round_trip_containers_in_fields(path: pathlib.Path):
    class Pair(NamedTuple):
        left: jax.Array
        right: Any

    @tc.treeclass
    class Bag:
        items: Any
        by_name: dict[str, Any]
        empty: list[Any]
        nothing: None = None

    bag = Bag(
        (jnp.zeros(1), [jnp.ones(2), None, Dense(jnp.ones((1, 1)), jnp.zeros(1), act="tanh")]),
        {"a": Pair(jnp.arange(2), {"deep": jnp.float32(3)}), "b": ()},
        [],
    )
    tc.save(path, bag)
    template = jax.tree.map(jnp.zeros_like, bag)
    restored = tc.load(path, template)
    assert_identical(restored, bag)
    assert isinstance(restored.by_name["a"], Pair)
    assert restored.items[1][2].act == "tanh"


def test_leaf_kinds_follow_the_template(path: pathlib.Path):
    @tc.treeclass
    class Mixed:
        arr: jax.Array
        host: np.ndarray
        host_scalar: np.float32
        f: float
        i: int
        b: bool
        c: complex

    m = Mixed(jnp.ones(2), np.arange(3, dtype=np.int64), np.float32(1.5), 0.1, 2**40, True, 1 + 2j)
    tc.save(path, m)
    restored = tc.load(path, m)
    assert_identical(restored, m)
    assert type(restored.host) is np.ndarray
    assert restored.host.dtype == np.int64
    assert restored.host.flags.writeable
    assert type(restored.f) is float
    assert restored.f == 0.1
    assert type(restored.i) is int
    assert restored.i == 2**40


def test_weak_type_follows_the_template(path: pathlib.Path):
    @tc.treeclass
    class W:
        x: jax.Array

    weak = W(jnp.asarray(2.5))
    assert weak.x.weak_type
    tc.save(path, weak)
    assert tc.load(path, weak).x.weak_type
    assert not tc.load(path, W(jnp.float32(0))).x.weak_type
    weak_vector = W(jnp.broadcast_to(jnp.asarray(1.0), (3,)))
    tc.save(path, weak_vector)
    restored = tc.load(path, weak_vector)
    assert restored.x.weak_type
    assert restored.x.tolist() == [1.0, 1.0, 1.0]


def test_load_into_eval_shape_template(path: pathlib.Path):
    @tc.treeclass
    class Opt:
        w: jax.Array
        lr: float
        count: int

    o = Opt(jnp.arange(3.0, dtype=jnp.bfloat16), 0.25, 3)
    tc.save(path, o)
    abstract = jax.eval_shape(lambda: o)
    restored = tc.load(path, abstract)
    assert restored.w.dtype == jnp.bfloat16
    assert restored.w.tolist() == [0.0, 1.0, 2.0]
    # Python scalars become what JAX makes of them: weakly typed float32 / int32.
    assert restored.lr.dtype == jnp.float32
    assert restored.lr.weak_type
    assert float(restored.lr) == 0.25
    assert restored.count.dtype == jnp.int32
    assert int(restored.count) == 3


@given(
    st.one_of(
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, width=64),
        st.complex_numbers(allow_nan=False),
    )
)
@settings(max_examples=60)
def test_load_into_eval_shape_template_never_wraps_or_overflows(
    tmp_path_factory: Any, value: int | float | complex
):
    """A Python number loads into what jax.eval_shape makes of it (int32, float32,
    complex64) exactly as JAX converts it, or is refused naming the field: never
    wrapped around, never turned into inf."""

    @tc.treeclass
    class Opt:
        x: Any

    path = tmp_path_factory.mktemp("fit") / "o.npz"
    tc.save(path, Opt(value))
    template = jax.eval_shape(lambda: Opt(type(value)(1)))
    dtype = template.x.dtype
    with np.errstate(over="ignore"):
        converted = np.asarray(value).astype(dtype)
    parts = np.real([converted, value]), np.imag([converted, value])
    fit = all(np.isfinite(c) or np.isinf(v) for c, v in parts)
    if (converted == value) if dtype == jnp.int32 else fit:
        restored = tc.load(path, template).x
        assert restored.dtype == dtype
        assert restored == jnp.asarray(value, dtype)
        return
    kind = type(value).__name__
    shown = rf"the {kind} .* in the file does not fit {dtype}, the template's dtype\n"
    with pytest.raises(
        tc.CheckpointError, match=rf"^Opt\.x: {shown}\(it would (wrap around|become inf)\)"
    ):
        tc.load(path, template)


def test_load_keeps_the_template_placement(path: pathlib.Path):
    device = jax.devices()[0]
    m = jax.device_put(model(), device)
    tc.save(path, m)
    restored = tc.load(path, m)
    assert all(x.committed for x in jax.tree.leaves(restored))
    assert all(not x.committed for x in jax.tree.leaves(tc.load(path, model())))


def test_works_under_jit(path: pathlib.Path):
    m = model()
    tc.save(path, m)
    loaded = jax.jit(lambda t: tc.load(path, t))(model(width=3))  # a traced template
    assert tc.tree_equal(loaded, m)
    bumped = jax.jit(
        lambda t: tc.from_state_dict(t, jax.tree.map(lambda x: x + 1, tc.to_state_dict(t)))
    )(m)
    assert tc.tree_equal(bumped, jax.tree.map(lambda x: x + 1, m))


def test_file_is_an_ordinary_npz(path: pathlib.Path):
    m = model()
    tc.save(path, m)
    with np.load(path, allow_pickle=False) as npz:
        assert set(npz.files) == {
            "layers.0.w",
            "layers.0.b",
            "layers.1.w",
            "layers.1.b",
            "head.w",
            "head.b",
            "extras.pair.0",
            "extras.step",
            "__treeclass__",
        }
        assert npz["extras.pair.0"].dtype == np.uint16  # bfloat16 as raw bits
        np.testing.assert_array_equal(npz["head.w"], np.asarray(m.head.w))
        manifest = json.loads(str(npz["__treeclass__"]))
    assert manifest["format"] == "treeclass.npz"
    assert manifest["version"] == 1
    pair = manifest["tree"]["children"]["extras"]["children"]["pair"]["children"]["0"]
    with zipfile.ZipFile(path) as zf:  # the CRC-32 of the member's bytes, as stored
        assert pair.pop("crc32") == zlib.crc32(zf.read("extras.pair.0.npy"))
    assert pair == {"leaf": "extras.pair.0", "dtype": "bfloat16", "shape": [2], "weak_type": False}
    assert manifest["tree"]["static"] == {"scale": 1.0}


def test_path_is_used_exactly(tmp_path: pathlib.Path):
    tc.save(tmp_path / "no_suffix", model())  # numpy.savez would append .npz
    tc.save(str(tmp_path / "as_str.ckpt"), model())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["as_str.ckpt", "no_suffix"]
    assert tc.tree_equal(tc.load(str(tmp_path / "no_suffix"), model()), model())


def test_file_mode_follows_umask(path: pathlib.Path):
    umask = os.umask(0o022)
    try:
        tc.save(path, model())
    finally:
        os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0o600


@settings(max_examples=25)
@given(instances())
def test_round_trip_generated_classes(tmp_path_factory: Any, inst: Any) -> None:
    path = tmp_path_factory.mktemp("gen") / "x.npz"
    tc.save(path, inst.obj)
    assert_identical(tc.load(path, inst.obj), inst.obj)
    restored = tc.from_state_dict(inst.obj, tc.to_state_dict(inst.obj))
    for a, b in zip(jax.tree.leaves(inst.obj), jax.tree.leaves(restored), strict=True):
        assert a is b


# ---------------------------------------------------------------------------------------
# Mismatches.


def test_load_shape_mismatch_names_the_field(path: pathlib.Path):
    tc.save(path, model(width=3))
    mismatch(
        path,
        model(width=4),
        r"^Model\.layers\[0\]\.w: shape \(3, 3\) in the file, \(4, 4\) in the template",
    )


def test_load_dtype_mismatch_names_the_field(path: pathlib.Path):
    tc.save(path, Dense(jnp.zeros((1, 114)), jnp.zeros(2)))
    mismatch(
        path,
        Dense(jnp.zeros((1, 114), jnp.bfloat16), jnp.zeros(2)),
        r"^Dense\.w: dtype float32 in the file, bfloat16 in the template",
    )
    mismatch(
        path,
        Dense(jnp.zeros((2, 114)), jnp.zeros(2)),
        r"^Dense\.w: shape \(1, 114\) in the file, \(2, 114\) in the template",
    )


def test_load_structure_mismatch_names_the_field(path: pathlib.Path):
    tc.save(path, model(depth=2))
    mismatch(
        path, model(depth=3), r"^Model\.layers: structure differs \(missing from the file: '2'\)"
    )
    mismatch(
        path,
        model(depth=1),
        r"^Model\.layers: structure differs \(in the file but not the template: '1'\)",
    )
    mismatch(
        path,
        model(optional=jnp.zeros(1)),
        r"^Model\.optional: a jax.Array in the template, None in the file",
    )
    m = model()
    mismatch(
        path,
        m.replace(head=jnp.zeros(1)),
        r"^Model\.head: a jax.Array in the template, a Dense in the file",
    )
    mismatch(
        path,
        m.replace(extras={**m.extras, "step": {"x": jnp.zeros(1)}}),
        r"^Model\.extras\['step'\]: a dict in the template, an array in the file",
    )


def test_load_static_mismatch_names_the_field(path: pathlib.Path):
    tc.save(path, model(scale=1.0))
    mismatch(
        path,
        model(scale=2.0),
        r"^Model\.scale: static value 1\.0 in the file, 2\.0 in the template",
    )
    m = model()
    tanh_head = m.replace(head=m.head.replace(act="tanh"))
    mismatch(
        path,
        tanh_head,
        r"^Model\.head\.act: static value 'relu' in the file, 'tanh' in the template",
    )
    # Encodings are compared, so equal-but-differently-typed statics differ: 1 is not 1.0.
    mismatch(
        path, model(scale=1), r"^Model\.scale: static value 1\.0 in the file, 1 in the template"
    )


def test_load_static_field_names_mismatch(path: pathlib.Path):
    @tc.treeclass
    class A:
        x: jax.Array
        k: int = tc.static(1)

    @tc.treeclass
    class B:
        x: jax.Array
        n: int = tc.static(1)

    tc.save(path, A(jnp.zeros(1)))
    mismatch(
        path, B(jnp.zeros(1)), r"^B: static fields \['k'\] in the file, \['n'\] in the template"
    )


class Color(enum.Enum):
    RED = 1
    BLUE = 2


def module_level_activation(x: Any) -> Any:
    return x


class Opaque:
    """No __eq__ or __repr__: its repr holds a memory address."""

    def __hash__(self) -> int:
        return 0


@pytest.mark.parametrize(
    ("saved", "other", "shown"),
    [
        (
            jax.nn.relu,
            jax.nn.gelu,
            r"jax\._src\.nn\.functions\.relu in the file, jax\._src\.nn\.functions\.gelu",
        ),
        (
            module_level_activation,
            jnp.tanh,
            r"test_npz\.module_level_activation in the file",
        ),
        (np.dtype("float32"), np.dtype("int8"), r"dtype\('float32'\) in the file, dtype\('int8'\)"),
        (jnp.float32, jnp.bfloat16, r"jax\.numpy\.float32 in the file, jax\.numpy\.bfloat16"),
        (Color.RED, Color.BLUE, r"test_npz\.Color\.RED in the file, test_npz\.Color\.BLUE"),
        (
            frozenset({"a", "b", "c"}),
            frozenset({"a"}),
            r"frozenset\(\{'a', 'b', 'c'\}\) in the file, frozenset\(\{'a'\}\)",
        ),
        ((1, ("x", None)), (1,), r"\(1, \('x', None\)\) in the file, \(1,\) in the template"),
        (float("nan"), float("inf"), r"nan in the file, inf in the template"),
        (1 + 2j, 2j, r"\(1\+2j\) in the file, 2j in the template"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_statics_that_are_not_json_are_compared_by_description(
    path: pathlib.Path, saved: Any, other: Any, shown: str
):
    @tc.treeclass
    class S:
        x: jax.Array
        s: Any = tc.static(None)

    tc.save(path, S(jnp.zeros(1), s=saved))
    restored = tc.load(path, S(jnp.ones(1), s=saved))
    assert restored.s is saved  # statics come from the template, never from the file
    assert float(restored.x[0]) == 0.0
    mismatch(path, S(jnp.zeros(1), s=other), rf"^S\.s: static value {shown}")


def test_static_description_drops_memory_addresses(path: pathlib.Path):
    @tc.treeclass
    class S:
        x: jax.Array
        s: Any = tc.static(None)

    with pytest.warns(tc.RecompileWarning):
        saved = S(jnp.zeros(1), s=Opaque())
    tc.save(path, saved)
    manifest = json.loads(str(np.load(path)["__treeclass__"]))
    assert " at 0x" not in manifest["tree"]["static"]["s"]["repr"]
    with pytest.warns(tc.RecompileWarning):
        template = S(jnp.zeros(1), s=Opaque())  # another object, as in another process
    assert tc.load(path, template).s is template.s


# ---------------------------------------------------------------------------------------
# What save refuses.


@tc.treeclass
class Named:
    x: jax.Array
    label: Any = None


@pytest.mark.parametrize(
    ("label", "message"),
    [
        ("abc", r"^Named\.label holds a str \('abc'\), which a checkpoint cannot store\."),
        (
            np.array(["a"]),
            r"^Named\.label holds an array of dtype <U1, which a checkpoint cannot store",
        ),
        (np.array([object()]), r"^Named\.label holds an array of dtype object"),
        (object(), r"^Named\.label holds a object \(<object object"),
        (2**70, r"^Named\.label holds the int 1180591620717411303424, which does not fit in int64"),
        (
            jax.ShapeDtypeStruct((2,), jnp.float32),
            r"^Named\.label is a jax\.ShapeDtypeStruct, which has no values",
        ),
    ],
    ids=["str", "unicode-array", "object-array", "object", "big-int", "shape-dtype-struct"],
)
def test_save_rejects_unstorable_leaves_and_writes_nothing(
    path: pathlib.Path, label: Any, message: str
):
    with pytest.raises(TypeError, match=message) as info:
        tc.save(path, Named(jnp.zeros(1), label))
    if "cannot store" in message:
        assert "label: " in str(info.value)
        assert "label: tc.Static[" in str(info.value)
    assert list(path.parent.iterdir()) == []


def test_save_inside_jit_rejected(path: pathlib.Path):
    @jax.jit
    def inside(n: Named) -> Named:
        tc.save(path, n)
        return n

    with pytest.raises(
        TypeError, match=r"^Named\.x is a tracer: treeclass\.save\(\) cannot run inside jax\.jit"
    ):
        inside(Named(jnp.zeros(1)))
    assert list(path.parent.iterdir()) == []


def test_save_rejects_names_that_collide(path: pathlib.Path):
    with pytest.raises(
        ValueError, match=r"^dict\['a\.b'\]: two leaves .* would be stored as a\.b\.npy"
    ):
        tc.save(path, {"a": {"b": jnp.zeros(1)}, "a.b": jnp.ones(1)})
    with pytest.raises(ValueError, match=r"stored as __treeclass__\.npy"):
        tc.save(path, {"__treeclass__": jnp.zeros(1)})


def test_save_and_load_reject_bad_arguments(path: pathlib.Path):
    with pytest.raises(
        TypeError,
        match=r"^treeclass\.save\(\) takes a file path \(str or os\.PathLike\) as `path`; got int",
    ):
        tc.save(3, model())  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    with pytest.raises(
        TypeError, match=r"^treeclass\.load\(\) takes a file path .* got NoneType None"
    ):
        tc.load(None, model())  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    with pytest.raises(
        TypeError,
        match=r"^treeclass\.save\(\) takes a treeclass instance .* as `obj`; got ArrayImpl",
    ):
        tc.save(path, jnp.zeros(2))
    tc.save(path, model())
    with pytest.raises(
        TypeError, match=r"^treeclass\.load\(\) takes .* as `template`; got the class Model"
    ):
        tc.load(path, Model)
    with pytest.raises(FileNotFoundError):
        tc.load(path.with_name("missing.npz"), model())


def test_load_template_with_unstorable_leaf_rejected(path: pathlib.Path):
    tc.save(path, Named(jnp.zeros(1), 1.0))
    with pytest.raises(
        TypeError, match=r"^Named\.label holds a str \('x'\), which a checkpoint cannot store"
    ):
        tc.load(path, Named(jnp.zeros(1), "x"))


# ---------------------------------------------------------------------------------------
# Typed PRNG keys: implementation and key data round-trip; a raw or other-impl key is a
# mismatch at its field path. (Before the fix, save and from_state_dict raised numpy's
# "Cannot interpret 'key<fry>' as a data type".)


@pytest.mark.parametrize("impl", [None, "rbg", "unsafe_rbg"])
@pytest.mark.parametrize("n", [None, 3], ids=["scalar", "split"])
def test_typed_keys_round_trip_in_files(path: pathlib.Path, impl: str | None, n: int | None):
    k = keyed(7, impl, n)
    tc.save(path, k)
    restored = tc.load(path, keyed(0, impl, n))
    assert same_keys(restored.key, k.key)
    assert jax.random.key_impl(restored.key) == jax.random.key_impl(k.key)
    # The restored key draws the same numbers: implementation and data both came back.
    draw = jax.random.normal(restored.key if n is None else restored.key[1], (3,))
    expected = jax.random.normal(k.key if n is None else k.key[1], (3,))
    assert same_bits(draw, expected)
    abstract = tc.load(path, jax.eval_shape(lambda: keyed(0, impl, n)))
    assert same_keys(abstract.key, k.key)
    traced = jax.jit(lambda t: tc.load(path, t))(keyed(0, impl, n))
    assert same_keys(traced.key, k.key)


def test_typed_key_in_the_manifest(path: pathlib.Path):
    tc.save(path, keyed(1, "rbg"))
    entry = manifest_of(path)["tree"]["children"]["key"]
    assert type(entry.pop("crc32")) is int
    assert entry == {
        "leaf": "key",
        "dtype": "key<rbg>",
        "shape": [],
        "weak_type": False,
    }
    with np.load(path, allow_pickle=False) as npz:  # the key data, as numpy can read it
        assert npz["key"].dtype == np.uint32
        assert same_bits(npz["key"], jax.random.key_data(jax.random.key(1, impl="rbg")))


def test_typed_key_mismatches_name_the_field(path: pathlib.Path):
    tc.save(path, keyed(0))
    mismatch(path, keyed(0, "rbg"), r"^Keyed\.key: dtype key<fry> in the file, key<rbg>")
    mismatch(path, keyed(0, n=2), r"^Keyed\.key: shape \(\) in the file, \(2,\) in the template")
    raw = Keyed(jax.random.PRNGKey(0), jnp.arange(2.0))
    mismatch(
        path,
        raw,
        r"(?s)^Keyed\.key: a typed PRNG key \(key<fry>\) in the file, a uint32 array in "
        r"the template.*jax\.random\.wrap_key_data\(raw\) makes a typed key",
    )
    tc.save(path, raw)
    mismatch(path, keyed(0), r"^Keyed\.key: a uint32 array in the file, a typed PRNG key")


# ---------------------------------------------------------------------------------------
# Arrays spread over several processes are orbax's job. One process cannot make such an
# array; tests/sharding/test_multiprocess.py meets the refusal with real ones. Here a jax.Array
# that says what a multi-process one says drives the same check.


class SpreadArray(jax.Array):
    """A stand-in for a multi-process array: a `jax.Array` whose shards are not all
    addressable from this process."""

    shape = (4, 2)
    dtype = np.dtype(np.float32)
    weak_type = False
    is_fully_addressable = False

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        msg = "save must refuse before reading any values"
        raise AssertionError(msg)


def test_save_refuses_arrays_spread_over_processes(path: pathlib.Path):
    m = model()
    spread = m.replace(layers=[m.layers[0], m.layers[1].replace(w=SpreadArray())])
    with pytest.raises(
        tc.CheckpointError,
        match=r"(?s)^Model\.layers\[1\]\.w is a jax\.Array spread over several processes "
        r"\(not fully addressable from this one\).*"
        r"with ocp\.StandardCheckpointer\(\) as checkpointer:.*"
        r"checkpointer\.save\(path, obj\).*tc\.shardings\(obj, mesh\).*"
        r"checkpointer\.restore\(path, target\)",
    ):
        tc.save(path, spread)
    assert list(path.parent.iterdir()) == []  # refused before anything was written
    tc.save(path, m)  # the same model, every array addressable: saved


@settings(max_examples=20)
@given(
    impl=st.sampled_from(["threefry2x32", "rbg", "unsafe_rbg"]),
    shape=st.lists(st.integers(0, 3), max_size=2).map(tuple),
    seeds=st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1)),
)
def test_typed_keys_round_trip_and_compare_by_data(
    tmp_path_factory: Any, impl: str, shape: tuple[int, ...], seeds: tuple[int, int]
):
    """Any implementation and batch shape: the file gives the same keys back, and two
    instances are equal exactly when their key data are."""

    def make(seed: int) -> Keyed:
        key = jax.random.key(seed, impl=impl)
        return Keyed(jax.random.split(key, shape) if shape else key, jnp.arange(2.0))

    a, b = make(seeds[0]), make(seeds[1])
    path = tmp_path_factory.mktemp("keys") / "k.npz"
    tc.save(path, a)
    restored = tc.load(path, b)
    assert same_keys(restored.key, a.key)
    assert restored == a
    data_equal = same_bits(jax.random.key_data(a.key), jax.random.key_data(b.key))
    assert (a == b) is data_equal


# ---------------------------------------------------------------------------------------
# Damaged files.


def test_truncated_file_rejected(path: pathlib.Path):
    tc.save(path, model())
    data = path.read_bytes()
    for size in (0, 1, 10, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:size])
        damaged(path, r"it is not a \.npz \(zip\) file \(BadZipFile")


def test_flipped_data_byte_fails_the_crc(path: pathlib.Path):
    m = model()
    tc.save(path, m)
    data = bytearray(path.read_bytes())
    at = bytes(data).index(np.asarray(m.head.w).tobytes())  # the head.w member's payload
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    damaged(path, r"Model\.head\.w: reading head\.w\.npy failed \(BadZipFile: Bad CRC-32")


def test_not_a_checkpoint_rejected(path: pathlib.Path):
    path.write_bytes(b"not a zip file at all")
    damaged(path, r"it is not a \.npz \(zip\) file")
    np.save(path.with_suffix(".npy"), np.zeros(3))
    path.with_suffix(".npy").rename(path)
    damaged(path, r"it is not a \.npz")
    np.savez(path, **{"layers.0.w": np.zeros((3, 3))})  # a plain npz: no manifest
    damaged(path, r"the manifest: the file has no member '__treeclass__\.npy'")


def test_tampered_manifest_rejected(path: pathlib.Path):
    tc.save(path, model())
    good = manifest_of(path)
    rewrite(path, {"__treeclass__": np.asarray("{not json")})
    damaged(path, r"__treeclass__\.npy is not valid JSON")
    rewrite(path, {"__treeclass__": np.asarray("[" * 100_000 + "]" * 100_000)})
    damaged(path, r"__treeclass__\.npy is not valid JSON \(RecursionError")
    rewrite(path, {"__treeclass__": np.zeros(3)})
    damaged(path, r"__treeclass__\.npy is not a treeclass manifest")
    rewrite(path, {"__treeclass__": {**good, "format": "other"}})
    damaged(path, r"__treeclass__\.npy is not a treeclass manifest")
    rewrite(path, {"__treeclass__": {**good, "tree": None}})
    damaged(path, r"__treeclass__\.npy has no tree")
    broken = json.loads(json.dumps(good))
    broken["tree"]["children"]["head"]["children"]["w"]["shape"] = "three"
    rewrite(path, {"__treeclass__": broken})
    damaged(path, r"its manifest is malformed at Model\.head\.w")
    deep: Any = 1
    for _ in range(900):  # JSON's parser takes it; a recursive display would not
        deep = [deep]
    for static in ({}, {"a": 1, "b": 2}, {"repr": 3}, {"frozenset": 3}, deep):  # shown
        broken = json.loads(json.dumps(good))
        broken["tree"]["static"]["scale"] = static
        rewrite(path, {"__treeclass__": broken})
        mismatch(path, model(), r"^Model\.scale: static value .* in the file, 1\.0 in the template")
    rewrite(path, {"__treeclass__": {**good, "version": 2}})
    with pytest.raises(
        tc.CheckpointError,
        match=r"checkpoint format version 2; this treeclass reads version 1\. Load it with the",
    ):
        tc.load(path, model())


def test_member_that_disagrees_with_the_manifest_rejected(path: pathlib.Path):
    tc.save(path, model())
    rewrite(path, {"head.w": np.zeros((3, 2), np.float32)})
    damaged(path, r"Model\.head\.w: head\.w\.npy holds float32 \(3, 2\), not float32 \(3, 1\)")
    rewrite(path, {"head.w": np.zeros((3, 1), np.int32)})
    damaged(path, r"Model\.head\.w: head\.w\.npy holds int32 \(3, 1\), not float32 \(3, 1\)")


@given(st.data())
@settings(max_examples=30)
def test_any_corruption_is_an_error_or_harmless(tmp_path_factory: Any, data: st.DataObject):
    """Flipping or truncating bytes anywhere gives a `CheckpointError`, or (a byte the
    reader never checks, such as a local header's copy of the CRC) the original back:
    never another exception, never wrong values."""
    path = tmp_path_factory.mktemp("corrupt") / "m.npz"
    m = model()
    tc.save(path, m)
    raw = bytearray(path.read_bytes())
    if data.draw(st.booleans(), label="truncate"):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1), label="size")]
    else:
        for _ in range(data.draw(st.integers(1, 3), label="flips")):
            at = data.draw(st.integers(0, len(raw) - 1), label="at")
            raw[at] ^= data.draw(st.integers(1, 255), label="mask")
    path.write_bytes(bytes(raw))
    try:
        restored = tc.load(path, model())
    except tc.CheckpointError:
        return
    assert_identical(restored, m)


# ---------------------------------------------------------------------------------------
# Atomic save.


def test_failed_save_keeps_the_old_file(path: pathlib.Path, monkeypatch: pytest.MonkeyPatch):
    tc.save(path, model(scale=1.0))
    before = path.read_bytes()
    written: list[str] = []
    real = npz.write_member

    def fail_on_third(zf: zipfile.ZipFile, name: str, array: np.ndarray) -> int:
        if len(written) == 2:
            msg = "disk full"
            raise OSError(msg)
        written.append(name)
        return real(zf, name, array)

    monkeypatch.setattr(npz, "write_member", fail_on_third)
    with pytest.raises(OSError, match="disk full"):
        tc.save(path, model(scale=2.0))
    assert path.read_bytes() == before  # the old checkpoint, intact
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left
    assert tc.load(path, model(scale=1.0)).scale == 1.0


def test_interrupted_first_save_leaves_no_file(path: pathlib.Path, monkeypatch: pytest.MonkeyPatch):
    def interrupt(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(npz, "write_member", interrupt)
    with pytest.raises(KeyboardInterrupt):
        tc.save(path, model())
    assert list(path.parent.iterdir()) == []


def test_save_replaces_by_rename(path: pathlib.Path, monkeypatch: pytest.MonkeyPatch):
    renames: list[tuple[str, str]] = []
    real = os.replace

    def spy(src: str, dst: str) -> None:
        renames.append((src, dst))
        assert os.path.getsize(src) > 0  # complete before it becomes visible
        real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    tc.save(path, model())
    ((src, dst),) = renames
    assert os.path.dirname(src) == str(path.parent)  # same directory: rename is atomic
    assert dst == str(path)


# ---------------------------------------------------------------------------------------
# Loading never executes anything from the file.


class Payload:
    """Unpickling this creates the directory `marker`: code that runs on load."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (self.marker,))


def test_pickled_member_is_never_unpickled(path: pathlib.Path, tmp_path: pathlib.Path):
    marker = tmp_path / "pwned"
    evil = np.array([Payload(str(marker))], dtype=object)
    tc.save(path, model())
    # The control: this file does run code when something unpickles it.
    control = tmp_path / "control.npz"
    np.savez(control, x=np.array([Payload(str(tmp_path / "control-ran"))], dtype=object))
    np.load(control, allow_pickle=True)["x"]
    assert (tmp_path / "control-ran").exists()

    rewrite(path, {"head.w": evil})
    damaged(path, r"Model\.head\.w: head\.w\.npy holds pickled Python objects, never loaded")
    rewrite(path, {"__treeclass__": evil})
    damaged(path, r"the manifest: __treeclass__\.npy holds pickled Python objects")
    path.write_bytes(pickle.dumps(Payload(str(marker))))
    damaged(path, r"it is not a \.npz")
    assert not marker.exists()
