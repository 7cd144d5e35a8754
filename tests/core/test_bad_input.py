"""Bad input across the whole public API; then threads, and leaks.

Every misuse gets a clear error of the right type, with a message that names what was
wrong, and leaves the objects it was given as they were: the same leaves (by identity)
with the same values (`tc.tree_equal` against a deep copy taken before). Hypothesis
draws the bad values. Then: classes decorated, methods compiled and checkpoints written
from 8 threads at once give correct results, and instances do not outlive their users.
"""

import concurrent.futures
import copy
import dataclasses
import functools
import gc
import pathlib
import re
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import treeclass as tc

THREADS = 8


@tc.treeclass
class Layer:
    w: jax.Array
    host: np.ndarray  # a mutable leaf: in-place damage would show
    scale: float = 1.0
    act: str = tc.static("relu")
    shape: tuple[int, ...] = tc.static((2,))

    @tc.jit
    def apply(self, x: jax.Array) -> jax.Array:
        return x * self.w * self.scale

    @tc.jit
    def grow(self) -> "Layer":
        return self.replace(w=self.w + 1.0)


def layer() -> Layer:
    return Layer(jnp.arange(2.0), np.arange(3, dtype=np.int32), 0.5)


class Unchanged:
    """Remembers an object's leaves, treedef and values; `check()` asserts they are
    still the same leaves (identity) with the same values and statics."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.leaves, self.treedef = jax.tree.flatten(obj)
        self.copy = copy.deepcopy(obj)
        self.fields = dict(vars(obj)) if tc.is_treeclass(obj) else None

    def check(self) -> None:
        leaves, treedef = jax.tree.flatten(self.obj)
        assert treedef == self.treedef
        assert all(a is b for a, b in zip(leaves, self.leaves, strict=True))
        assert tc.tree_equal(self.obj, self.copy) is True
        if self.fields is not None:  # every attribute, the flatten cache included
            now = vars(self.obj)
            assert now.keys() == self.fields.keys()
            assert all(now[k] is v for k, v in self.fields.items())


@pytest.fixture
def unchanged() -> Iterator[Callable[[Any], Unchanged]]:
    """`unchanged(obj)` snapshots `obj`; every snapshot is checked after the test."""
    made: list[Unchanged] = []

    def snap(obj: Any) -> Unchanged:
        made.append(Unchanged(obj))
        return made[-1]

    yield snap
    for u in made:
        u.check()


# Values that are not classes, functions, paths, ... : what an untyped caller passes.
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.binary(max_size=5),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.builds(object),
    st.sampled_from([np.zeros(2), jnp.ones(3), jnp.int32(1)]),
)

unhashable = st.one_of(
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.sets(st.integers(), max_size=3),
    st.builds(bytearray, st.binary(max_size=3)),
    st.lists(st.integers(), max_size=2).map(lambda x: (1, x)),  # a tuple holding a list
)

def _closure_over(captured: object) -> Callable[[], object]:
    return lambda: captured


arrays = st.one_of(
    st.sampled_from([(), (2,), (1, 3)]).map(np.zeros),
    st.sampled_from([(), (2,), (1, 3)]).map(jnp.zeros),
    st.sampled_from([(), (2,)]).map(lambda s: (1, jnp.zeros(s))),  # a tuple holding one
    # Callables holding one, which JAX sees as opaque leaves.
    st.sampled_from([(), (2,)]).map(lambda s: functools.partial(max, jnp.zeros(s))),
    st.sampled_from([(), (2,)]).map(lambda s: _closure_over(np.zeros(s))),
)


def _valid_axes(a: object) -> bool:
    return isinstance(a, tuple) and all(x is None or isinstance(x, str) for x in a)


bad_axes = st.one_of(
    junk.filter(lambda a: a is not None),
    st.lists(st.one_of(st.none(), st.text(max_size=3)), max_size=3),  # a list, not a tuple
    st.tuples(st.text(max_size=2), st.one_of(st.integers(), st.floats(), st.binary(max_size=2))),
    st.tuples(st.integers()),
).filter(lambda a: not _valid_axes(a))


# ---------------------------------------------------------------------------------------
# Wrong types in every argument.


@given(junk)
def test_treeclass_with_options_rejects_non_classes(value: Any):
    # The bare form on a non-class is pinned in test_treeclass.py.
    with pytest.raises(TypeError, match=r"^@treeclass decorates a class; got "):
        tc.treeclass(kw_only=True)(value)


@given(junk.filter(lambda c: not callable(c)))
def test_field_rejects_non_callable_converter(converter: Any):
    if converter is None:
        return  # None means "no converter"
    with pytest.raises(TypeError, match=r"^field\(converter=\.\.\.\) must be callable; got "):
        tc.field(converter=converter)


@given(bad_axes)
def test_field_rejects_malformed_axes(axes: Any):
    with pytest.raises(
        TypeError,
        match=r"^field\(axes=\.\.\.\) takes a tuple of logical axis names \(str\) or None",
    ):
        tc.field(axes=axes)


def test_static_refuses_unknown_keywords_as_python_does():
    # axes= and trainable= are refused at class creation, naming the field
    # (tests/core/test_static_annotations.py, the one rule of static fields).
    with pytest.raises(TypeError, match=r"static\(\) got an unexpected keyword argument 'axis'"):
        tc.static(axis=("batch",))  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue]


def test_field_rejects_non_mapping_metadata_clearly():
    with pytest.raises(TypeError, match=r"field\(metadata=\.\.\.\) takes a mapping \(a dict\) or None; got 42"):
        tc.field(metadata=42)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def test_field_rejects_non_callable_default_factory():
    with pytest.raises(TypeError, match=r"field\(default_factory=\.\.\.\) takes a zero-argument callable; got 42"):
        tc.field(default_factory=42)  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue, reportArgumentType]


@given(st.one_of(arrays, unhashable))
def test_static_default_array_or_unhashable_rejected_at_decoration(value: Any):
    with pytest.raises(
        TypeError,
        match=r"^Bad\.s is a static field but holds (a numpy\.ndarray|a jax\.Array|an unhashable)",
    ):

        @tc.treeclass
        class Bad:
            s: Any = tc.static(value)


@given(st.one_of(arrays, unhashable))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_static_value_array_or_unhashable_rejected(unchanged: Any, value: Any):
    original = layer()
    unchanged(original)
    kind = r"(a numpy\.ndarray|a jax\.Array|an unhashable \w+)"
    with pytest.raises(TypeError, match=rf"^Layer\.act is a static field but holds {kind}"):
        Layer(jnp.zeros(2), np.zeros(3), act=value)
    with pytest.raises(TypeError, match=rf"^Layer\.act is a static field but holds {kind}"):
        original.replace(act=value)
    with pytest.raises(TypeError, match=rf"^Layer\.shape is a static field but holds {kind}"):
        tc.replace(original, shape=value)


@given(
    st.text(min_size=1, max_size=12).filter(
        lambda n: n not in ("w", "host", "scale", "act", "shape")
    )
)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_replace_unknown_name_rejected(unchanged: Any, name: str):
    original = layer()
    unchanged(original)
    message = rf"^Layer\.replace\(\) got an unexpected field {re.escape(repr(name))}\."
    with pytest.raises(TypeError, match=message) as info:
        original.replace(**{name: 1})
    assert "Valid fields: w, host, scale, act, shape." in str(info.value)
    with pytest.raises(TypeError, match=message):
        tc.replace(original, **{name: 1})


@given(junk)
def test_functions_taking_instances_reject_junk(value: Any):
    with pytest.raises(
        TypeError, match=r"^treeclass\.replace\(\) takes a treeclass instance; got "
    ):
        tc.replace(value, w=1)
    with pytest.raises(
        TypeError, match=r"^treeclass\.fields\(\) takes a treeclass or an instance of one; got "
    ):
        tc.fields(value)
    assert tc.is_treeclass(value) is False
    if not callable(value) and value is not None:  # tc.jit(None) is the options form
        with pytest.raises(TypeError, match=r"^tc\.jit\(\) takes a function or method; got "):
            tc.jit(value)
    with pytest.raises(
        TypeError, match=r"^tc\.bind\(\) takes a bound method such as obj\.method; got "
    ):
        tc.bind(value)


@given(junk, junk)
def test_tree_equal_never_raises(a: Any, b: Any):
    assert tc.tree_equal(a, b) in (True, False)
    assert tc.tree_equal(layer(), a) is False


@given(junk)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_checkpoint_functions_reject_junk(unchanged: Any, tmp_path: pathlib.Path, value: Any):
    original = layer()
    unchanged(original)
    not_a_tree = r"takes a treeclass instance \(or a list, tuple or dict of them\) as `\w+`; got "
    if isinstance(value, list | dict) and value:
        return  # a non-empty list or dict is a container: a valid (if odd) tree
    if not (isinstance(value, list | dict)):
        with pytest.raises(TypeError, match=r"^treeclass\.to_state_dict\(\) " + not_a_tree):
            tc.to_state_dict(value)
        with pytest.raises(TypeError, match=r"^treeclass\.from_state_dict\(\) " + not_a_tree):
            tc.from_state_dict(value, {})
        with pytest.raises(TypeError, match=r"^treeclass\.save\(\) " + not_a_tree):
            tc.save(tmp_path / "x.npz", value)
    if not isinstance(value, dict):
        with pytest.raises(
            TypeError, match=r"^treeclass\.from_state_dict\(\) takes the state as a dict"
        ):
            tc.from_state_dict(original, value)
    if not isinstance(value, str | bytes):
        with pytest.raises(
            TypeError, match=r"^treeclass\.save\(\) takes a file path \(str or os\.PathLike\)"
        ):
            tc.save(value, original)
        with pytest.raises(
            TypeError, match=r"^treeclass\.load\(\) takes a file path \(str or os\.PathLike\)"
        ):
            tc.load(value, original)
    assert not any(tmp_path.iterdir())


# ---------------------------------------------------------------------------------------
# Mutation attempts.


@given(
    st.one_of(
        st.sampled_from(["w", "host", "scale", "act", "shape"]),
        st.from_regex(r"[a-z_]{1,8}", fullmatch=True),
    )
)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_assignment_and_deletion_rejected(unchanged: Any, name: str):
    original = layer()
    unchanged(original)
    with pytest.raises(
        dataclasses.FrozenInstanceError,
        match=rf"^cannot assign to Layer\.{name}: treeclass instances are immutable",
    ) as info:
        setattr(original, name, 1)
    assert f"self.replace({name}=...)" in str(info.value)  # the fix
    with pytest.raises(dataclasses.FrozenInstanceError, match=rf"^cannot delete Layer\.{name}: "):
        delattr(original, name)


# ---------------------------------------------------------------------------------------
# Corrupt checkpoints and bad state dicts.


@given(st.binary(max_size=300))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_load_random_bytes_rejected(unchanged: Any, tmp_path: pathlib.Path, data: bytes):
    path = tmp_path / "random.npz"
    path.write_bytes(data)
    template = layer()
    unchanged(template)
    with pytest.raises(
        tc.CheckpointError, match=rf"^{re.escape(str(path))}: cannot load this checkpoint: "
    ):
        tc.load(path, template)


state_junk = st.recursive(
    st.one_of(st.none(), st.integers(), st.text(max_size=3), st.floats()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["w", "host", "scale", "x", "0"]), inner, max_size=3),
    ),
    max_leaves=6,
)


@given(state_junk)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_from_state_dict_junk_rejected(unchanged: Any, state: Any):
    template = layer()
    unchanged(template)
    if isinstance(state, dict):
        with pytest.raises(tc.CheckpointError, match=r"^Layer(\.\w+)?: "):
            tc.from_state_dict(template, state)
    else:
        with pytest.raises(
            TypeError, match=r"^treeclass\.from_state_dict\(\) takes the state as a dict"
        ):
            tc.from_state_dict(template, state)


def test_failed_load_leaves_template_and_saved_object_unchanged(
    unchanged: Any, tmp_path: pathlib.Path
):
    saved = layer()
    unchanged(saved)
    path = tmp_path / "l.npz"
    tc.save(path, saved)
    wrong = Layer(jnp.zeros(3), np.zeros(3, np.int32), 0.5)
    unchanged(wrong)
    with pytest.raises(
        tc.CheckpointError, match=r"^Layer\.w: shape \(2,\) in the file, \(3,\) in the template"
    ):
        tc.load(path, wrong)
    restored = tc.load(path, layer())
    assert tc.tree_equal(restored, saved)
    assert restored.host is not saved.host  # a fresh array, not shared with anything


# ---------------------------------------------------------------------------------------
# Threads.


def run_in_threads(fn: Callable[[int], Any], n: int = THREADS) -> list[Any]:
    """Runs `fn(0) ... fn(n-1)` in n threads released together; returns the results."""
    barrier = threading.Barrier(n)

    def start(i: int) -> Any:
        barrier.wait()
        return fn(i)

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        return list(pool.map(start, range(n)))


def test_classes_decorated_from_many_threads():
    def define(i: int) -> tuple[float, int, str]:
        @tc.treeclass
        class Local:
            x: jax.Array
            k: int = tc.static(i)

            @tc.jit
            def f(self) -> jax.Array:
                return self.x * self.k

        obj = Local(jnp.full(3, 2.0))
        leaves, treedef = jax.tree.flatten(obj)
        assert treedef.unflatten(leaves).k == i
        return float(obj.f().sum()), Local.f.trace_log.count, repr(obj)

    results = run_in_threads(define)
    assert [r[0] for r in results] == [6.0 * i for i in range(THREADS)]
    assert all(r[1] == 1 for r in results)
    assert [r[2] for r in results] == [f"Local(x=f32[3], k={i})" for i in range(THREADS)]


def test_jit_method_called_from_many_threads_at_once():
    @tc.treeclass
    class Shared:
        x: jax.Array
        k: int = tc.static(1)

        @tc.jit
        def f(self, y: jax.Array) -> jax.Array:
            return (self.x + y) * self.k

    def call(i: int) -> tuple[list[float], list[float]]:
        same = Shared(jnp.full(2, float(i))).f(jnp.ones(2))  # one structure for all
        own = Shared(jnp.full(2, float(i)), k=i).f(jnp.ones(2))  # a compile per thread
        return same.tolist(), own.tolist()

    results = run_in_threads(call)
    for i, (same, own) in enumerate(results):
        assert same == [i + 1.0, i + 1.0]
        assert own == [(i + 1.0) * i] * 2
    # THREADS distinct signatures (k=0..7; k=1 is also the shared one). Concurrent first
    # calls with one signature may each trace; every later call hits the cache.
    assert THREADS <= Shared.f.trace_log.count <= 2 * THREADS
    before = Shared.f.trace_log.count
    run_in_threads(call)
    assert Shared.f.trace_log.count == before


def test_save_and_load_from_many_threads(tmp_path: pathlib.Path):
    shared = tmp_path / "shared.npz"
    versions = [Layer(jnp.full(2, float(i)), np.full(3, i, np.int32), 0.5) for i in range(THREADS)]
    tc.save(shared, versions[0])

    def work(i: int) -> Any:
        own = tmp_path / f"own{i}.npz"
        tc.save(own, versions[i])
        assert tc.tree_equal(tc.load(own, layer()), versions[i])
        if i % 2:
            tc.save(shared, versions[i])  # writers race on one path...
            return None
        return [tc.load(shared, layer()) for _ in range(5)]  # ...readers never see half

    for loaded in filter(None, run_in_threads(work)):
        for obj in loaded:
            assert any(tc.tree_equal(obj, v) for v in versions)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["shared.npz", *(f"own{i}.npz" for i in range(THREADS))]
    )  # no temporary files left behind


# ---------------------------------------------------------------------------------------
# Leaks.


def test_instances_created_and_dropped_are_freed(tmp_path: pathlib.Path):
    refs: list[weakref.ref[Any]] = []
    path = tmp_path / "leak.npz"
    for i in range(300):
        obj = Layer(jnp.full(2, float(i)), np.zeros(3, np.int32), 0.5)
        refs.append(weakref.ref(obj))
        refs.append(weakref.ref(obj.w))
        grown = obj.grow()  # through tc.jit
        refs.append(weakref.ref(grown))
        obj.apply(jnp.ones(2))
        tc.bind(obj.apply)(jnp.ones(2))
        tc.from_state_dict(obj, tc.to_state_dict(obj))
        copy.deepcopy(obj.replace(scale=1.5))
        hash(obj)
        assert obj == copy.copy(obj)  # tree_equal through ==
        if i % 50 == 0:
            tc.save(path, obj)
            refs.append(weakref.ref(tc.load(path, obj)))
    del obj, grown
    gc.collect()
    alive = [r for r in refs if r() is not None]
    assert not alive, f"{len(alive)} of {len(refs)} objects still alive"


def test_failed_calls_do_not_keep_objects_alive():
    refs: list[weakref.ref[Any]] = []
    for _ in range(50):
        obj = layer()
        refs.append(weakref.ref(obj))
        with pytest.raises(TypeError):
            obj.replace(nope=1)
        with pytest.raises(tc.CheckpointError):
            tc.from_state_dict(obj, {})
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.w = jnp.zeros(2)  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]
    del obj
    gc.collect()
    assert all(r() is None for r in refs)
