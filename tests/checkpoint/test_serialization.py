"""State dicts: `to_state_dict` / `from_state_dict` (treeclass/_checkpoint/state_dict.py).

Leaves pass through as they are (typed PRNG keys included); every mismatch gets a
`CheckpointError` naming the field path. Interop with orbax runs where it is installed
(flax.serialization: tests/checkpoint/test_flax_serialization.py).
"""

import collections
import dataclasses
import functools
import pathlib
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from checkpoints import Keyed, Model, assert_identical, keyed, model
from hypothesis import given, settings
from hypothesis import strategies as st

import treeclass as tc

# ---------------------------------------------------------------------------------------
# State dicts.


def test_state_dict_is_nested_dicts_keyed_by_field_names():
    m = model()
    state = tc.to_state_dict(m)
    assert list(state) == ["layers", "head", "extras", "optional"]  # dynamic fields only
    assert list(state["layers"]) == ["0", "1"]  # lists as {"0": ...}, as in flax
    assert list(state["layers"]["0"]) == ["w", "b"]  # "act" is static: not here
    assert list(state["extras"]) == ["pair", "step"]  # dict keys, sorted as JAX sorts them
    assert list(state["extras"]["pair"]) == ["0", "1"]  # tuples too
    assert state["extras"]["pair"]["1"] is None  # None stays None
    assert state["optional"] is None
    assert state["head"]["w"] is m.head.w  # the leaves themselves, not copies


def test_state_dict_keys_follow_jax_key_paths_for_other_nodes():
    class Pair(NamedTuple):
        left: jax.Array
        right: jax.Array

    state = tc.to_state_dict({"p": Pair(jnp.zeros(1), jnp.ones(1)), "q": {3: [jnp.zeros(2)]}})
    assert list(state["p"]) == ["left", "right"]
    assert list(state["q"]) == ["3"]  # str(key), as in flax
    assert list(state["q"]["3"]) == ["0"]


def test_state_dict_round_trip_shares_leaves():
    m = model()
    restored = tc.from_state_dict(model(), tc.to_state_dict(m))
    assert tc.tree_equal(restored, m)
    for a, b in zip(jax.tree.leaves(m), jax.tree.leaves(restored), strict=True):
        assert a is b


def test_from_state_dict_takes_statics_from_the_template():
    m = model(scale=2.0)
    restored = tc.from_state_dict(model(scale=2.0), tc.to_state_dict(m))
    assert restored.scale == 2.0
    assert restored.layers[0].act == "relu"


def test_from_state_dict_runs_no_user_code():
    calls: collections.Counter[str] = collections.Counter()

    def convert(x: Any) -> Any:
        calls["convert"] += 1
        return x

    @tc.treeclass
    class Checked:
        x: jax.Array = tc.field(converter=convert)

        def __post_init__(self) -> None:
            calls["post_init"] += 1

    template = Checked(jnp.zeros(2))
    calls.clear()
    restored = tc.from_state_dict(template, {"x": jnp.ones(2)})
    assert float(restored.x.sum()) == 2.0
    assert not calls


def test_from_state_dict_accepts_lists_for_sequences():
    # orbax restores without a target give sequences as lists.
    m = model()
    state = tc.to_state_dict(m)
    state["layers"] = [state["layers"]["0"], state["layers"]["1"]]
    assert tc.tree_equal(tc.from_state_dict(model(), state), m)


def test_from_state_dict_python_scalar_fills_eval_shape_leaf():
    @tc.treeclass
    class Opt:
        lr: float
        w: jax.Array

    o = Opt(0.5, jnp.ones(2))
    restored = tc.from_state_dict(jax.eval_shape(lambda: o), tc.to_state_dict(o))
    assert restored.lr == 0.5


SCALAR_KINDS: dict[str, list[Any]] = {
    "bool": [True, np.bool_(False), jnp.asarray(True)],
    "int": [3, np.int64(3), jnp.asarray(3, jnp.int32), np.asarray(3, np.uint8)],
    "float": [0.25, np.float32(0.25), jnp.asarray(0.25), np.asarray(0.25, np.float16)],
    "complex": [1j, np.complex64(1j), jnp.asarray(1j)],
}
OTHER_LEAVES = [
    "abc",
    jnp.arange(5.0),
    np.zeros((1,)),
    jnp.zeros((2, 2), jnp.int32),
    b"x",
    object(),
]


@pytest.mark.parametrize("kind", list(SCALAR_KINDS))
@pytest.mark.parametrize("saved_kind", [*SCALAR_KINDS, "other"])
def test_from_state_dict_checks_python_scalar_leaves(kind: str, saved_kind: str):
    """A Python number in the template takes a number of its kind (a 0-d array of it
    too, as stores give back), restored as the template's kind, a Python number, as load
    restores it; anything else names the field."""

    @tc.treeclass
    class Opt:
        lr: Any
        w: jax.Array

    template = Opt(SCALAR_KINDS[kind][0], jnp.ones(2))
    for saved in SCALAR_KINDS.get(saved_kind, OTHER_LEAVES):
        state = {"lr": saved, "w": jnp.zeros(2)}
        if saved_kind == kind:
            restored = tc.from_state_dict(template, state).lr
            assert type(restored) is type(template.lr)
            assert restored == saved
            continue
        with pytest.raises(tc.CheckpointError, match=rf"^Opt\.lr: an? {kind} in the template, "):
            tc.from_state_dict(template, state)


@pytest.mark.parametrize(
    ("value", "dtype", "shown"),
    [
        (
            2**31 + 5,
            jnp.int32,
            r"the int 2147483653 in the state dict does not fit int32, the template's dtype\n\(it would wrap around\)",
        ),
        (-(2**31) - 1, jnp.int32, r"the int -2147483649 .* does not fit int32"),
        (2**70, jnp.int32, r"the int 1180591620717411303424 .* does not fit int32"),
        (
            1e300,
            jnp.float32,
            r"the float 1e\+300 in the state dict does not fit float32, the template's dtype\n\(it would become inf\)",
        ),
        (complex(0, -1e39), jnp.complex64, r"the complex -1e\+39j .* does not fit complex64"),
    ],
)
def test_from_state_dict_refuses_numbers_that_do_not_fit(value: Any, dtype: Any, shown: str):
    @tc.treeclass
    class Opt:
        x: Any

    template = Opt(jax.ShapeDtypeStruct((), dtype))  # what jax.eval_shape makes of a number
    with pytest.raises(tc.CheckpointError, match=rf"^Opt\.x: {shown}") as info:
        tc.from_state_dict(template, {"x": value})
    assert "not into jax.eval_shape(lambda: Model(...))" in str(info.value)
    edge = {jnp.int32: 2**31 - 1, jnp.float32: 3.4e38, jnp.complex64: 1e38j}[dtype]
    assert tc.from_state_dict(template, {"x": edge}).x == edge  # the largest that fit
    if dtype == jnp.float32:  # inf was inf: nothing overflows
        assert tc.from_state_dict(template, {"x": float("inf")}).x == float("inf")


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (
            {"x": jnp.zeros(3)},
            r"^Neuron\.x: shape \(3,\) in the state dict, \(2,\) in the template",
        ),
        (
            {"x": jnp.zeros(2, jnp.int32)},
            r"^Neuron\.x: dtype int32 in the state dict, float32 in the template",
        ),
        ({}, r"^Neuron: structure differs \(missing from the state dict: 'x'\)"),
        (
            {"x": jnp.zeros(2), "y": 1},
            r"^Neuron: structure differs \(in the state dict but not the template: 'y'\)",
        ),
        ({"x": {"a": 1}}, r"^Neuron\.x: a jax.Array in the template, a dict in the state dict"),
        ({"x": None}, r"^Neuron\.x: a jax.Array in the template, None in the state dict"),
        ({"x": "abc"}, r"^Neuron\.x: a jax.Array in the template, a str in the state dict"),
    ],
)
def test_from_state_dict_mismatch_names_the_field(state: dict[str, Any], message: str):
    @tc.treeclass
    class Neuron:
        x: jax.Array

    with pytest.raises(tc.CheckpointError, match=message) as info:
        tc.from_state_dict(Neuron(jnp.zeros(2)), state)
    assert "The template must be built like the object that was saved" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_from_state_dict_nested_mismatch_path():
    state = tc.to_state_dict(model())
    state["layers"]["1"]["w"] = jnp.zeros((1, 3))
    with pytest.raises(
        tc.CheckpointError,
        match=r"^Model\.layers\[1\]\.w: shape \(1, 3\) in the state dict, \(3, 3\)",
    ):
        tc.from_state_dict(model(), state)
    del state["layers"]["1"]
    with pytest.raises(
        tc.CheckpointError,
        match=r"^Model\.layers: structure differs \(missing from the state dict: '1'\)",
    ):
        tc.from_state_dict(model(), state)


def test_state_dict_functions_reject_non_containers():
    for bad in (jnp.zeros(2), None, 3.0, "x"):
        with pytest.raises(
            TypeError,
            match=r"treeclass\.to_state_dict\(\) takes a treeclass instance .* as `obj`; got",
        ):
            tc.to_state_dict(bad)
        with pytest.raises(
            TypeError, match=r"treeclass\.from_state_dict\(\) takes .* as `template`"
        ):
            tc.from_state_dict(bad, {})
    with pytest.raises(TypeError, match=r"got the class Model; pass an instance, Model\(\.\.\.\)"):
        tc.to_state_dict(Model)
    with pytest.raises(
        TypeError, match=r"from_state_dict\(\) takes the state as a dict, .* got int 3"
    ):
        tc.from_state_dict(model(), 3)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def test_keys_with_the_same_string_form_rejected():
    @functools.total_ordering
    @dataclasses.dataclass(frozen=True)
    class Key:
        n: int

        def __str__(self) -> str:
            return "k"

        def __lt__(self, other: "Key") -> bool:
            return self.n < other.n

    with pytest.raises(
        ValueError, match=r"^dict: the keys of this dict have the same string form \('k'\)"
    ):
        tc.to_state_dict({Key(1): jnp.zeros(1), Key(2): jnp.ones(1)})


def test_typed_keys_round_trip_in_state_dicts():
    k = keyed(3, "rbg")
    state = tc.to_state_dict(k)
    assert state["key"] is k.key  # the typed key itself
    restored = tc.from_state_dict(keyed(0, "rbg"), state)
    assert restored.key is k.key


def test_typed_key_mismatches_in_state_dicts_name_the_field():
    raw = Keyed(jax.random.PRNGKey(0), jnp.arange(2.0))
    with pytest.raises(
        tc.CheckpointError,
        match=r"^Keyed\.key: a uint32 array in the state dict, a typed PRNG key \(key<fry>\) "
        r"in the template",
    ):
        tc.from_state_dict(keyed(0), tc.to_state_dict(raw))
    with pytest.raises(
        tc.CheckpointError, match=r"^Keyed\.key: dtype key<rbg> in the state dict, key<fry>"
    ):
        tc.from_state_dict(keyed(0), tc.to_state_dict(keyed(0, "rbg")))


# ---------------------------------------------------------------------------------------
# Interop.


def test_orbax_standard_checkpointer_round_trip(tmp_path: pathlib.Path):
    ocp = pytest.importorskip("orbax.checkpoint")
    m = model()
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(tmp_path / "orbax", m)
        checkpointer.wait_until_finished()
        restored = checkpointer.restore(tmp_path / "orbax", jax.eval_shape(lambda: m))
        raw = checkpointer.restore(tmp_path / "orbax")  # no target: nested dicts and lists
    assert type(restored) is Model
    assert_identical(restored, m)
    assert tc.tree_equal(tc.from_state_dict(model(), raw), m)


def test_orbax_round_trips_typed_keys_into_state_dicts(tmp_path: pathlib.Path):
    ocp = pytest.importorskip("orbax.checkpoint")
    k = keyed(5, "rbg", n=2)
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(tmp_path / "orbax", k)
        checkpointer.wait_until_finished()
        raw = checkpointer.restore(tmp_path / "orbax")  # typed keys stay typed
    restored = tc.from_state_dict(keyed(0, "rbg", n=2), raw)
    assert restored == k
    with pytest.raises(tc.CheckpointError, match=r"^Keyed\.key: dtype key<rbg> in the state dict"):
        tc.from_state_dict(keyed(0, n=2), raw)


def test_many_unexpected_keys_are_found_in_one_pass_over_the_template():
    # A state dict (or a hostile file's manifest) with n keys the template lacks: the
    # template's keys were made into a set once per such key (n x template), which a
    # file of 10 MB made minutes long.
    from treeclass._checkpoint.state_dict import differences

    class Counted(list[str]):
        walks = 0

        def __iter__(self):
            Counted.walks += 1
            return super().__iter__()

    expected = Counted(str(i) for i in range(3))
    given = dict.fromkeys([*expected, *(f"x{i}" for i in range(100))])
    Counted.walks = 0
    assert differences(expected, given, "file") is not None
    assert Counted.walks <= 2
    state = {str(i): 0.0 for i in range(3)} | {f"x{i}": 0.0 for i in range(100)}
    with pytest.raises(tc.CheckpointError, match=r"^dict: structure differs \(in the state dict"):
        tc.from_state_dict({str(i): 0.0 for i in range(3)}, state)


# ---------------------------------------------------------------------------------------
# from_state_dict and load: one restore.

_DTYPES = ["bool", "int8", "uint8", "int32", "uint32", "float16", "bfloat16", "float32", "complex64"]


@st.composite
def _leaves(draw: st.DrawFn) -> Any:
    """A leaf: a Python number, a 0-d or small array (jax weak or strong, numpy) of some
    dtype, a typed or raw PRNG key."""
    number = draw(st.sampled_from([0, 1, -3, 2**40, 0.5, -1e300, True, False, 1j]))
    kind = draw(st.sampled_from(["python", "weak", "jax", "numpy", "numpy scalar", "key"]))
    shape = draw(st.sampled_from([(), (), (2,)]))
    if kind == "python":
        return number
    if kind == "key":
        impl = draw(st.sampled_from(["threefry2x32", "rbg"]))
        key = jax.random.key(draw(st.integers(0, 3)), impl=impl)
        return draw(st.sampled_from([key, jax.random.key_data(key)]))
    if kind == "weak":  # what JAX makes of a Python number: weakly typed
        weak = jnp.asarray(number if abs(number) < 2**31 else 7)  # fits int32 and float32
        return jnp.broadcast_to(weak, shape)
    dtype = jnp.dtype(draw(st.sampled_from(_DTYPES)))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a cast that overflows: any value will do
        array = np.full(shape, number).astype(dtype)
    if kind == "jax":
        return jnp.asarray(array)
    return array if kind == "numpy" or shape else array[()]


@tc.treeclass
class _Box:
    x: Any


def _outcome(restore: Callable[[], Any]) -> Any:
    """What a restore gives: the leaf's kind, dtype, weak type and bits, or a refusal
    naming the field."""
    try:
        x = restore().x
    except tc.CheckpointError as error:
        return "refused", str(error).split(": ")[0]
    if type(x) in (bool, int, float, complex):
        return type(x), repr(x)
    if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        return "key", str(x.dtype), x.shape, np.asarray(jax.random.key_data(x)).tobytes()
    kind = "jax" if isinstance(x, jax.Array) else type(x).__name__
    return kind, str(x.dtype), x.shape, bool(getattr(x, "weak_type", False)), np.asarray(x).tobytes()


@given(saved=_leaves(), template=_leaves(), abstract=st.booleans())
@settings(max_examples=30)
def test_from_state_dict_and_load_restore_alike(
    tmp_path_factory: Any, saved: Any, template: Any, abstract: bool
) -> None:
    """Regression: a Python number restored into a 0-d array came back
    from from_state_dict as a Python number (weak, no dtype, a second compile), and from
    load as the template's array; a weak template got a strong array, a jax one numpy's."""
    box = _Box(template)
    fits = type(template) is not int or abs(template) < 2**31  # what eval_shape takes
    if abstract and fits and not isinstance(template, np.ndarray | np.generic):
        box = jax.eval_shape(lambda: box)
    path = tmp_path_factory.mktemp("restore") / "box.npz"
    try:
        tc.save(path, _Box(saved))
    except TypeError:  # a Python int past int64: save refuses it, naming the field
        return
    state = tc.to_state_dict(_Box(saved))
    assert _outcome(lambda: tc.from_state_dict(box, state)) == _outcome(lambda: tc.load(path, box))


def test_a_python_number_restored_into_a_strong_scalar_is_the_templates_array(tmp_path: pathlib.Path):
    # Regression: from_state_dict gave the Python float back (weak,
    # no dtype, a second compile) where load gave the template's array.
    template = _Box(jnp.float32(0.0))
    path = tmp_path / "box.npz"
    tc.save(path, _Box(0.25))
    for restored in (tc.from_state_dict(template, {"x": 0.25}), tc.load(path, template)):
        assert isinstance(restored.x, jax.Array)
        assert (restored.x.dtype, restored.x.weak_type, float(restored.x)) == (jnp.float32, False, 0.25)
    with pytest.raises(tc.CheckpointError, match=r"^_Box\.x: dtype python float in the state dict, float16 in the template"):
        tc.from_state_dict(_Box(jnp.float16(0.0)), {"x": 0.25})
