"""Invariants over hypothesis-generated treeclass definitions and instances.

Every test draws whole classes from `tests/strategies.py` (fields of each kind and
spelling, defaults, kw_only, init=False fields, converters, `__post_init__`, nesting and
inheritance), so a property holds for the combinations, not for one hand-picked class.
User code in the generated classes counts its calls in `strategies.CALLS`.
"""

import collections
import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from strategies import (
    CALLS,
    DERIVED_ARRAY,
    DERIVED_STATIC,
    Construction,
    FieldSpec,
    Generated,
    Instance,
    constructions,
    instances,
    static_values,
    values_for,
)

import treeclass as tc


@contextlib.contextmanager
def counted_calls() -> Iterator[collections.Counter[str]]:
    """Yields a Counter that, after the block, holds the user-code calls made in it."""
    delta: collections.Counter[str] = collections.Counter()
    before = CALLS.copy()
    yield delta
    delta.update(CALLS)
    delta.subtract(before)


def assert_same(a: Any, b: Any, where: str = "obj") -> None:
    """`b` is `a` field by field: the same class, arrays of the same dtype, weak type,
    shape and values, and static or Python values of the same type and repr (so `1`,
    `1.0` and `True`, or `0.0` and `-0.0`, differ)."""
    if tc.is_treeclass(a):
        assert type(b) is type(a), where
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, jax.Array):
        assert isinstance(b, jax.Array), where
        assert (b.dtype, b.shape, b.weak_type) == (a.dtype, a.shape, a.weak_type), where
        assert np.array_equal(np.asarray(a), np.asarray(b)), where
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), where
        assert (b.dtype, b.shape) == (a.dtype, a.shape), where
        assert np.array_equal(a, b), where
    elif isinstance(a, tuple):
        assert type(b) is tuple, where
        assert len(b) == len(a), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert type(b) is type(a), (where, a, b)
        assert b == a, (where, a, b)
        assert repr(b) == repr(a), (where, a, b)


def assert_stored(f: FieldSpec, given: Any, stored: Any) -> None:
    """Field `f` stores what its converter returned for `given`: `given` itself, or
    for a list, a tuple of the same items."""
    if f.converter and type(given) is list:
        assert type(stored) is tuple, f.name
        assert len(stored) == len(given), f.name
        assert all(x is y for x, y in zip(stored, given, strict=True)), f.name
    else:
        assert stored is given, f.name


def assert_same_statics(a: Any, b: Any, where: str = "obj") -> None:
    """The static values of `b` are those of `a` (same type and repr), at every level;
    dynamic leaves are not compared."""
    if tc.is_treeclass(a):
        assert type(b) is type(a), where
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if f.metadata["static"]:
                assert_same(x, y, f"{where}.{f.name}")
            else:
                assert_same_statics(x, y, f"{where}.{f.name}")
    elif isinstance(a, tuple):
        assert type(b) is tuple, where
        assert len(b) == len(a), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_statics(x, y, f"{where}[{i}]")


def attribute_leaves(gen: Generated, obj: Any) -> list[tuple[str, Any]]:
    """`(keystr, leaf)` for each leaf of `obj`, found by reading its attributes as the
    class description says (not by flattening): the dynamic fields in declaration
    order, parents' first, `.name` per treeclass level, `[i]` per tuple item."""

    def walk(value: Any, nested: Generated | None) -> list[tuple[str, Any]]:
        if value is None:
            return []
        if nested is not None and isinstance(value, nested.cls):
            return attribute_leaves(nested, value)
        if isinstance(value, tuple):
            return [(f"[{i}]{p}", x) for i, v in enumerate(value) for p, x in walk(v, None)]
        return [("", value)]

    return [
        (f".{f.name}{p}", x)
        for f in gen.fields
        if not f.static
        for p, x in walk(getattr(obj, f.name), f.nested)
    ]


def assert_flatten_matches_attributes(gen: Generated, obj: Any) -> None:
    """JAX's flatten (a cache filled at construction) yields the attribute values."""
    flat = jax.tree.leaves(obj)
    expected = [x for _, x in attribute_leaves(gen, obj)]
    assert len(flat) == len(expected)
    assert all(x is y for x, y in zip(flat, expected, strict=True))


# ---------------------------------------------------------------------------------------
# Declaration.


@given(instances())
def test_every_spelling_declares_the_described_fields(inst: Instance) -> None:
    gen = inst.gen
    declared = [(f.name, f.metadata["static"], f.init) for f in tc.fields(gen.cls)]
    assert declared == [(f.name, f.static, f.init) for f in gen.fields]
    assert "tag" not in {f.name for f in tc.fields(gen.cls)}  # the ClassVar, if any
    assert tc.is_treeclass(gen.cls)
    assert tc.is_treeclass(inst.obj)


@given(instances())
def test_key_paths_are_field_name_chains(inst: Instance) -> None:
    with_path, _ = jax.tree_util.tree_flatten_with_path(inst.obj)
    expected = attribute_leaves(inst.gen, inst.obj)
    assert [jax.tree_util.keystr(path) for path, _ in with_path] == [p for p, _ in expected]
    assert all(x is y for (_, x), (_, y) in zip(with_path, expected, strict=True))
    assert all(
        isinstance(key, jax.tree_util.GetAttrKey) for path, _ in with_path for key in path[:1]
    )


# ---------------------------------------------------------------------------------------
# Round trips.


@given(instances())
def test_flatten_unflatten_roundtrip_loses_nothing(inst: Instance) -> None:
    obj = inst.obj
    leaves, treedef = jax.tree.flatten(obj)
    with counted_calls() as calls:
        rebuilt = jax.tree.unflatten(treedef, leaves)
    assert calls == collections.Counter()
    assert tc.tree_equal(rebuilt, obj) is True
    assert rebuilt == obj
    assert hash(rebuilt) == hash(obj)
    assert_same(obj, rebuilt)
    assert_flatten_matches_attributes(inst.gen, rebuilt)
    assert jax.tree.structure(rebuilt) == treedef
    assert all(x is y for x, y in zip(jax.tree.leaves(rebuilt), leaves, strict=True))
    for f in inst.gen.fields:  # no copies: leaves and statics come back as themselves
        value = getattr(obj, f.name)
        if f.static or not (isinstance(value, tuple) or tc.is_treeclass(value)):
            assert getattr(rebuilt, f.name) is value, f.name


@given(instances())
def test_jit_identity_keeps_dtypes_weak_types_and_statics(inst: Instance) -> None:
    obj = inst.obj
    leaves, treedef = jax.tree.flatten(obj)
    # The oracle: what jit gives for the same leaves in a plain tuple (a Python scalar
    # becomes a weak-typed array, a jax.Array keeps its dtype and weak type).
    out, plain = jax.jit(lambda m, t: (m, t))(obj, tuple(leaves))
    assert jax.tree.structure(out) == treedef
    assert_flatten_matches_attributes(inst.gen, out)
    for x, (path, y), expected in zip(leaves, attribute_leaves(inst.gen, out), plain, strict=True):
        assert_same(expected, y, path)
        if isinstance(x, jax.Array):
            assert (y.dtype, y.weak_type) == (x.dtype, x.weak_type), path
    assert_same_statics(obj, out)


def test_jit_cache_hit_keeps_the_first_equal_static() -> None:
    """A documented limitation (docs/faq.md): static values key JAX's caches by `==`
    and hash, as `static_argnums` do, so `1`, `True` and `1.0` share a compile, and a
    cache hit rebuilds the output with the static value first seen. Keying on the type
    too would cost every dispatch a Python-level comparison; this test pins the
    behaviour so a change in JAX is noticed."""

    @tc.treeclass
    class A:
        x: jax.Array
        s: tc.Static[object] = 0

    identity = jax.jit(lambda m: m)
    identity(A(jnp.ones(2), 1))
    out = identity(A(jnp.ones(2), True))
    assert out.s == True  # noqa: E712 - equal, as == promises
    assert type(out.s) is int  # but the type first seen


# ---------------------------------------------------------------------------------------
# replace().


@given(st.data())
def test_replace_changes_exactly_the_named_fields(data: st.DataObject) -> None:
    inst = data.draw(instances(), "instance")
    obj, gen = inst.obj, inst.gen
    names = [f.name for f in gen.fields if f.init]
    chosen = data.draw(st.lists(st.sampled_from(names), unique=True), "chosen") if names else []
    changes = {name: data.draw(values_for(gen.field(name)), name) for name in chosen}
    before = {f.name: getattr(obj, f.name) for f in gen.fields}

    with counted_calls() as calls:
        new = obj.replace(**changes)
    converters = sum(1 for name in changes if gen.field(name).converter)
    assert calls == collections.Counter(post_init=gen.post_init_calls, convert=converters)

    assert type(new) is type(obj)
    assert_flatten_matches_attributes(gen, new)
    for f in gen.fields:
        if f.name in changes:
            assert_stored(f, changes[f.name], getattr(new, f.name))
        else:
            assert getattr(new, f.name) is before[f.name], f.name
        assert getattr(obj, f.name) is before[f.name], f.name  # the original is untouched
    assert_same(tc.replace(obj, **changes), new)


@given(st.data())
def test_replace_of_a_static_field_changes_the_treedef(data: st.DataObject) -> None:
    inst = data.draw(instances(), "instance")
    statics = [f.name for f in inst.gen.fields if f.static and f.init]
    assume(statics)
    name = data.draw(st.sampled_from(statics), "name")
    value = data.draw(static_values, "value")
    new = inst.obj.replace(**{name: value})
    changed = value != getattr(inst.obj, name)
    assert (jax.tree.structure(new) != jax.tree.structure(inst.obj)) == changed
    assert all(x is y for x, y in zip(jax.tree.leaves(new), jax.tree.leaves(inst.obj), strict=True))


# ---------------------------------------------------------------------------------------
# User code: construction and replace run it, JAX's rebuilds never do.


@given(constructions())
def test_construction_runs_init_post_init_and_converters_once_each(c: Construction) -> None:
    with counted_calls() as calls:
        obj = c.build()
    assert calls == c.expected_calls
    assert_flatten_matches_attributes(c.gen, obj)
    for f in c.gen.fields:
        value = getattr(obj, f.name)
        if f.name in c.passed:
            assert_stored(f, c.passed[f.name], value)
        elif f.derived:  # set by __post_init__
            assert value is (DERIVED_STATIC if f.static else DERIVED_ARRAY), f.name
        elif f.static or f.default == "value":
            assert_same(f.default_value, value, f.name)


def _float_ones(obj: Any) -> Any:
    return jax.tree.map(lambda x: jnp.ones(jnp.shape(x), jnp.float32), obj)


def _check_jit(obj: Any) -> None:
    out = jax.jit(lambda m: jax.tree.map(lambda x: x, m))(obj)
    assert type(out) is type(obj)


def _check_vmap(obj: Any) -> None:
    batched = jax.tree.map(lambda x: jnp.stack([x, x]), obj)
    # The extra mapped argument lets vmap run on an instance with no leaves.
    out = jax.vmap(lambda m, _: m)(batched, jnp.arange(2))
    assert type(out) is type(obj)
    assert tc.tree_equal(out, batched) is True


def _check_grad(obj: Any) -> None:
    ones = _float_ones(obj)

    def loss(m: Any) -> jax.Array:
        return sum((jnp.sum(x) for x in jax.tree.leaves(m)), start=jnp.zeros((), jnp.float32))

    grads = jax.grad(loss)(ones)
    assert type(grads) is type(obj)
    assert tc.tree_equal(grads, ones) is True


def _check_scan(obj: Any) -> None:
    carry, stacked = jax.lax.scan(lambda c, _: (c, c), obj, length=2)
    assert type(carry) is type(obj)
    assert type(stacked) is type(obj)
    assert jax.tree.structure(carry) == jax.tree.structure(obj)


def _check_eval_shape(obj: Any) -> None:
    out = jax.eval_shape(lambda m: m, obj)
    assert type(out) is type(obj)
    assert all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(out))


def _check_tree_map_none(obj: Any) -> None:
    out = jax.tree.map(lambda _: None, obj)
    assert type(out) is type(obj)
    assert jax.tree.leaves(out) == []


def _check_tree_map_object(obj: Any) -> None:
    out = jax.tree.map(lambda _: object(), obj)
    assert type(out) is type(obj)
    assert all(type(x) is object for x in jax.tree.leaves(out))
    assert len(jax.tree.leaves(out)) == len(jax.tree.leaves(obj))


def _check_prefix_vmap(obj: Any) -> None:
    # tc.prefix builds vmap's in_axes/out_axes through the unflatten path: every
    # dynamic field the fill, the statics obj's own.
    axes = tc.prefix(obj, 0)
    assert type(axes) is type(obj)
    dynamic = [f.name for f in tc.fields(obj) if not f.metadata["static"]]
    assert all(getattr(axes, name) == 0 for name in dynamic)
    assert jax.tree.structure(axes, is_leaf=lambda x: x is not axes) == jax.tree.structure(
        obj, is_leaf=lambda x: x is not obj
    )
    batched = jax.tree.map(lambda x: jnp.stack([x, x]), obj)
    out = jax.vmap(lambda m, _: m, in_axes=(axes, 0), out_axes=axes)(batched, jnp.arange(2))
    assert tc.tree_equal(out, batched) is True


REBUILDS: dict[str, Callable[[Any], None]] = {
    "jit": _check_jit,
    "vmap": _check_vmap,
    "prefix_vmap": _check_prefix_vmap,
    "grad": _check_grad,
    "scan": _check_scan,
    "eval_shape": _check_eval_shape,
    "tree_map_none": _check_tree_map_none,
    "tree_map_object": _check_tree_map_object,
}


@pytest.mark.parametrize("rebuild", REBUILDS.values(), ids=REBUILDS.keys())
@given(instances())
def test_jax_rebuilds_instances_without_running_user_code(
    rebuild: Callable[[Any], None], inst: Instance
) -> None:
    with counted_calls() as calls:
        rebuild(inst.obj)
    assert calls == collections.Counter()
