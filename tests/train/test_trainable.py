"""Trainable parameters and model state (docs/training.md): `tc.field(trainable=False)`, the
trainable-leaf rule behind `tc.partition`, `tc.grad`, `tc.value_and_grad` and
`tc.apply_updates`, `where=` selectors, and the errors that keep gradients from
vanishing in silence. The flag is a property of the field, so it survives everything an
instance goes through: jit, vmap, scan, ==, replace, replace_at, checkpoints, sharding.
"""

from __future__ import annotations

import pathlib
from typing import Any

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from strategies import Generated, Instance, instances

import treeclass as tc


class Stats(tc.TreeClass):
    mean: jax.Array
    var: jax.Array


class BatchNorm(tc.TreeClass):
    scale: jax.Array
    bias: jax.Array
    stats: Stats = tc.field(trainable=False)
    momentum: tc.Static[float] = 0.9


class Net(tc.TreeClass):
    encoder: BatchNorm
    head: jax.Array
    rate: float
    step: jax.Array
    history: tuple[jax.Array, ...] = tc.field(trainable=False, default=())


def bn(n: int = 3) -> BatchNorm:
    return BatchNorm(jnp.ones(n), jnp.zeros(n), Stats(jnp.zeros(n), jnp.ones(n)))


def net() -> Net:
    return Net(bn(), jnp.full(3, 2.0), 0.5, jnp.array(0), (jnp.ones(2),))


def loss(m: Net) -> jax.Array:
    # Every float leaf takes part, state included: only the rule keeps state out.
    enc = m.encoder
    x = (jnp.ones(3) - enc.stats.mean) / enc.stats.var * enc.scale + enc.bias
    return jnp.sum(x * m.head) * m.rate + jnp.sum(m.history[0])


# ---------------------------------------------------------------------------------------
# Declaring it.


def test_fields_report_the_flag() -> None:
    flags = {f.name: (f.metadata["static"], f.metadata["trainable"]) for f in tc.fields(BatchNorm)}
    assert flags == {
        "scale": (False, True),
        "bias": (False, True),
        "stats": (False, False),
        "momentum": (True, False),  # a static field holds no leaves: never trainable
    }


def test_the_flag_is_inherited() -> None:
    class Sub(BatchNorm):
        extra: jax.Array = tc.field(default_factory=lambda: jnp.zeros(1))

    assert [f.metadata["trainable"] for f in tc.fields(Sub)] == [True, True, False, False, True]
    grads = tc.grad(lambda m: jnp.sum(m.stats.mean) + jnp.sum(m.extra))(Sub(*jax.tree.leaves(bn())[:2], bn().stats))
    assert grads.stats.mean is None
    assert grads.extra is not None


@pytest.mark.parametrize(
    "declaration",
    [
        "x: int = tc.field(static=True, trainable=False, default=1)",
        "x: tc.Static[int] = tc.field(trainable=False, default=1)",
    ],
)
def test_trainable_false_on_a_static_field_is_refused_naming_it(declaration: str) -> None:
    with pytest.raises(TypeError, match=r"(?s)^Model\.x is static and declared trainable=False\..*x: \.\.\. = tc\.field\(trainable=False\)"):
        exec(f"class Model(tc.TreeClass):\n    {declaration}", {"tc": tc})


# ---------------------------------------------------------------------------------------
# The rule.


def test_partition_keeps_state_and_non_floats_out_of_the_parameters() -> None:
    m = net()
    params, rest = tc.partition(m)
    assert params.encoder.scale is m.encoder.scale
    assert params.encoder.bias is m.encoder.bias
    assert params.encoder.stats.mean is None  # under a trainable=False field
    assert rest.encoder.stats.var is m.encoder.stats.var
    assert params.history == (None,)  # a container under one
    assert params.rate == 0.5  # a Python float in a dynamic field: a parameter
    assert params.step is None  # an int array: never a parameter
    assert tc.combine(params, rest) == m


def test_grad_is_none_at_state_and_matches_jax_grad_elsewhere() -> None:
    m = net()
    grads = tc.grad(loss)(m)
    assert grads.encoder.stats.mean is None
    assert grads.encoder.stats.var is None
    assert grads.history == (None,)
    assert grads.step is None
    # The parameters' gradients are jax.grad's, Python float included (a scalar array).
    def by_hand(scale: jax.Array, bias: jax.Array, head: jax.Array, rate: float) -> jax.Array:
        return loss(m.replace(encoder=m.encoder.replace(scale=scale, bias=bias), head=head, rate=rate))

    expected = jax.grad(by_hand, argnums=(0, 1, 2, 3))(m.encoder.scale, m.encoder.bias, m.head, m.rate)
    got = (grads.encoder.scale, grads.encoder.bias, grads.head, grads.rate)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape
        assert g.dtype == e.dtype
        assert jnp.array_equal(g, e)


def test_python_float_gradient_is_jax_grads() -> None:
    class Decay(tc.TreeClass):
        rate: float
        n: int

    def f(d: Decay) -> jax.Array:
        return jnp.asarray(d.rate) ** d.n

    grads = tc.grad(f)(Decay(0.5, 3))
    assert grads.n is None
    assert float(grads.rate) == float(jax.grad(lambda r: jnp.asarray(r) ** 3)(0.5)) == 0.75


def test_nothing_to_differentiate_names_the_class() -> None:
    class Counter(tc.TreeClass):
        n: int
        mask: jax.Array

    with pytest.raises(TypeError, match=r"(?s)^Counter has nothing to differentiate.*Counter\.n \(int, not floating-point\), Counter\.mask \(bool\[2\], not floating-point\)"):
        tc.grad(lambda c: jnp.sum(c.mask) * c.n)(Counter(3, jnp.ones(2, bool)))
    frozen = Net(bn(), jnp.ones(3), 0.5, jnp.array(0))
    with pytest.raises(TypeError, match=r"^Net, narrowed by `where`/`filter`, has nothing to differentiate"):
        tc.value_and_grad(loss, filter=lambda x: jnp.result_type(x) == jnp.bfloat16)(frozen)


def test_apply_updates_refuses_an_update_at_state_naming_the_path() -> None:
    m = net()
    grads = tc.grad(loss)(m)
    assert tc.apply_updates(m, grads).encoder.stats.mean is m.encoder.stats.mean  # None there: fine
    bad = grads.replace(encoder=grads.encoder.replace(stats=Stats(jnp.ones(3), None)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"(?s)^Net\.encoder\.stats\.mean: an update for a leaf that is not trainable \(f32\[3\], under trainable=False\)\..*tc\.partition\(model\)"):
        tc.apply_updates(m, bad)
    with pytest.raises(ValueError, match=r"^Net\.step: an update for a leaf that is not trainable \(i32\[\], not floating-point\)"):
        tc.apply_updates(m, grads.replace(step=jnp.array(1)))


def test_an_optimizer_never_touches_state() -> None:
    # adamw's weight decay would move every leaf it sees; it sees only the parameters.
    m = net()
    optimizer = optax.adamw(0.1, weight_decay=0.5)
    state = optimizer.init(tc.partition(m)[0])
    for _ in range(3):
        grads = tc.grad(loss)(m)
        with jax.numpy_dtype_promotion("standard"):  # optax under the suite's strict promotion
            updates, state = optimizer.update(grads, state, tc.partition(m)[0])
        m = tc.apply_updates(m, updates)
    assert m.encoder.stats == net().encoder.stats
    assert m.history[0] is not None
    assert jnp.array_equal(m.history[0], net().history[0])
    assert not jnp.array_equal(m.head, net().head)


# ---------------------------------------------------------------------------------------
# where= (a selector) and filter= (a leaf predicate): one rule for partition and grad.


def test_a_selector_freezes_everything_else() -> None:
    m = net()
    grads = tc.grad(loss, where=lambda n: n.head)(m)
    assert grads.head is not None
    assert grads.encoder.scale is None
    assert grads.rate is None
    both = tc.grad(loss, where=lambda n: (n.encoder, n.rate))(m)
    assert both.head is None
    assert both.encoder.scale is not None
    assert both.encoder.stats.mean is None  # still state, selected or not
    assert both.rate is not None


def test_partition_with_a_selector_a_filter_and_only_trainable_false() -> None:
    m = net()
    head, rest = tc.partition(m, lambda n: n.encoder)
    assert head.encoder.scale is m.encoder.scale
    assert head.encoder.stats.mean is None
    assert head.head is None
    assert tc.combine(head, rest) == m
    # only_trainable=False: equinox's eqx.partition(tree, predicate), state included.
    ints, _ = tc.partition(m, filter=lambda x: jnp.issubdtype(jnp.result_type(x), jnp.integer), only_trainable=False)
    assert ints.step is m.step
    assert ints.head is None
    everything, nothing = tc.partition(m, only_trainable=False)
    assert everything == m
    assert jax.tree.leaves(nothing) == []
    stats, _ = tc.partition(m, lambda n: n.encoder.stats, only_trainable=False)
    assert stats.encoder.stats == m.encoder.stats
    assert stats.encoder.scale is None


def test_filter_never_selects_state() -> None:
    # Regression: the equinox recipe `tc.partition(net, tc.is_inexact_array)`
    # selected BatchNorm statistics and the history, and adamw decayed them.
    m = net()
    floats, _ = tc.partition(m, filter=tc.is_inexact_array)
    assert floats.encoder.stats.mean is None
    assert floats.history == (None,)
    assert floats.encoder.scale is m.encoder.scale
    assert floats.rate is None  # a Python float is no array: the filter says no
    assert tc.partition(m, filter=tc.is_inexact_array, only_trainable=False)[0].encoder.stats == m.encoder.stats


def test_partition_and_grad_agree_so_optax_takes_both() -> None:
    # Regression: the optimizer's state built on one and the gradients of the
    # other had different structures (a pytree-structure error), or state was decayed.
    m = net()
    optimizer = optax.adamw(0.1, weight_decay=0.5)
    for where, filter_ in [(None, None), (None, tc.is_inexact_array), (lambda n: n.encoder, None)]:
        params = tc.partition(m, where, filter=filter_)[0]
        grads = tc.grad(loss, where=where, filter=filter_)(m)
        assert jax.tree.structure(grads) == jax.tree.structure(params)
        state = optimizer.init(params)
        with jax.numpy_dtype_promotion("standard"):  # optax under the suite's strict promotion
            updates, state = optimizer.update(grads, state, params)
        new = tc.apply_updates(m, updates)
        assert new.encoder.stats == m.encoder.stats
        assert not jnp.array_equal(new.encoder.scale, m.encoder.scale)


def test_a_filter_on_grad_narrows_the_trainable_leaves() -> None:
    m = net()
    grads = tc.grad(loss, filter=lambda x: getattr(x, "ndim", 0) == 1)(m)
    assert grads.rate is None  # a scalar: not selected
    assert grads.head is not None
    assert grads.encoder.stats.mean is None  # never state, whatever the filter says
    narrowed = tc.grad(loss, where=lambda n: n.encoder, filter=lambda x: x.ndim == 1)(m)
    assert narrowed.head is None
    assert narrowed.encoder.bias is not None


_FILTER = r"(?s)^Net: `where` {did}, as a predicate on leaves does\..*pass a predicate on leaves as filter=:.*tc\.partition\(model, filter=tc\.is_inexact_array\)"


@pytest.mark.parametrize(
    ("where", "did"),
    [
        (tc.is_inexact_array, "returned False"),
        (lambda x: hasattr(x, "shape"), "returned True"),
        (lambda x: isinstance(x, jax.Array) and x.ndim == 2, "returned False"),
        (lambda x: x.ndim == 2, r"reads \.ndim, which only leaves have"),
        (lambda x: x.dtype == jnp.float32, r"reads \.dtype, which only leaves have"),
        (lambda x: x.size > 1, r"reads \.size, which only leaves have"),
        (lambda n: n.head.shape, r"reads \.shape, which only leaves have"),
    ],
)
def test_a_predicate_passed_as_where_points_to_filter(where: Any, did: str) -> None:
    # Regression: a predicate was told from a selector by running it, and
    # partition (which took non-trainable state) and grad (which did not) disagreed.
    match = _FILTER.format(did=did)
    with pytest.raises(TypeError, match=match):
        tc.partition(net(), where)
    with pytest.raises(TypeError, match=match):
        tc.grad(loss, where=where)(net())
    with pytest.raises(TypeError, match=match):
        tc.value_and_grad(loss, where=where)(net())


def test_a_field_named_dtype_is_no_leaf_attribute() -> None:
    class Cast(tc.TreeClass):
        w: jax.Array
        dtype: jax.Array

    c = Cast(jnp.ones(2), jnp.zeros(1))
    assert tc.partition(c, lambda c: c.dtype)[0].w is None  # a selector of that field
    # Cast has a field `dtype`: the predicate reads it and compares (replace_at's error),
    # and the note still points to filter=.
    with pytest.raises(TypeError, match=r"^Cast\.dtype: `where` did more than read it") as info:
        tc.partition(c, lambda x: x.dtype == jnp.float32)
    assert any("filter=" in note for note in getattr(info.value, "__notes__", ()))


class Sized(tc.TreeClass):
    w: jax.Array
    size: tc.Static[int] = 2


class Shaped(tc.TreeClass):
    enc: Sized
    head: Sized
    shape: jax.Array


@pytest.mark.parametrize(
    ("where", "match"),
    [
        (lambda m: (m.shape, m.haed), r"^Shaped\.haed: no such field, did you mean 'head'\?"),
        (lambda m: (m.enc.size, m.head.v), r"^Shaped\.head\.v: no such field"),
        (lambda m: (m.head, m.enc.size + 1), r"^Shaped\.enc\.size: `where` did more than read it"),
    ],
)
def test_a_field_named_like_a_leaf_attribute_never_hides_the_selector_error(where: Any, match: str) -> None:
    # Regression: every `.shape`/`.size` read in `where`'s paths or code was taken for a
    # predicate's ("reads .shape, which only leaves have"), even where the tree has a
    # field of that name, so a typo beside it lost replace_at's error naming the path.
    m = Shaped(Sized(jnp.ones(2)), Sized(jnp.ones(3)), jnp.ones(4))
    with pytest.raises((AttributeError, TypeError), match=match):
        tc.partition(m, where)
    with pytest.raises((AttributeError, TypeError), match=match):
        tc.grad(lambda m: m.head.w.sum(), where=where)(m)


@pytest.mark.parametrize(
    ("where", "match"),
    [
        (lambda n: n.history[0:], r"^Net\.history: `where` did more than read it"),  # a slice: select entries as a tuple
        (lambda n: n.head * 2, r"^Net\.head\b"),
        (lambda n: n.encoder(), r"^Net\.encoder\b"),
    ],
)
def test_a_where_that_slices_computes_or_calls_names_the_path(where: Any, match: str) -> None:
    # Regression: `where=lambda n: n.layers[1:]` fell back to "a predicate" and
    # failed in the predicate with AttributeError: 'ArrayImpl' object has no attribute.
    for call in (lambda: tc.grad(loss, where=where)(net()), lambda: tc.partition(net(), where)):
        with pytest.raises(TypeError, match=match) as info:
            call()
        assert "filter=" in " ".join(getattr(info.value, "__notes__", []))


@pytest.mark.parametrize(
    ("where", "error", "match"),
    [
        (lambda n: n.encoder.stats, ValueError,
         r"(?s)^`where` selects Net\.encoder\.stats, which holds no trainable leaf: Net\.encoder\.stats\.mean \(f32\[3\], under trainable=False\)"),
        (lambda n: n.encoder.momentum, ValueError, r"selects Net\.encoder\.momentum, which holds no trainable leaf: no leaves at all"),
        (lambda n: (n.step, n.history), ValueError, r"selects Net\.step, Net\.history, which hold no trainable leaf"),
        (lambda n: n.encoder.weights, AttributeError, r"^Net\.encoder\.weights: no such field"),
        (lambda n: n.history[3], IndexError, r"^Net\.history\[3\]: index out of range"),
        # Regression: an empty tuple read "`where` selects , which hold no trainable leaf".
        (lambda n: (), ValueError, r"^`where` selects nothing \(an empty tuple\), which hold no trainable leaf: none\.\n"),
    ],
)
def test_a_selector_that_selects_nothing_trainable_is_refused(where: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        tc.grad(loss, where=where)(net())
    with pytest.raises(error, match=match):
        tc.partition(net(), where)


# ---------------------------------------------------------------------------------------
# The flag survives everything an instance goes through.


def _mask(m: Any) -> list[bool]:
    """For each leaf of `m`, whether `tc.partition` takes it as a parameter."""
    params, _ = tc.partition(m)
    return [x is not None for x in jax.tree.structure(m).flatten_up_to(params)]


def test_the_flag_survives_transforms_and_rebuilds(tmp_path: pathlib.Path) -> None:
    m = net()
    expected = _mask(m)

    @tc.jit
    def step(n: Net) -> Net:
        return n.replace(step=n.step + 1)

    def carry(n: Net, _: Any) -> tuple[Net, None]:
        return step(n), None

    batched = jax.tree.map(lambda x: jnp.stack([x, x]), m)
    axes = tc.prefix(m, 0)
    tc.save(tmp_path / "net.npz", m)
    survivors = {
        "jit": step(m),
        "vmap": jax.vmap(lambda n: n, in_axes=(axes,), out_axes=axes)(batched),
        "scan": jax.lax.scan(carry, m, None, length=2)[0],
        "replace": m.replace(head=jnp.zeros(3)),
        "replace_at": tc.replace_at(m, lambda n: n.encoder.stats.mean, jnp.ones(3)),
        "state dict": tc.from_state_dict(m, tc.to_state_dict(m)),
        "load": tc.load(tmp_path / "net.npz", m),
        "device_put": jax.device_put(m, tc.shardings(m, jax.make_mesh((1,), ("data",)))),
    }
    ocp = pytest.importorskip("orbax.checkpoint")
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(tmp_path / "orbax", m)
        checkpointer.wait_until_finished()
        survivors["orbax"] = checkpointer.restore(tmp_path / "orbax", jax.eval_shape(lambda: m))
    for name, got in survivors.items():
        assert _mask(got) == expected, name
        assert tc.grad(loss)(jax.tree.map(lambda x: x[0], got) if name == "vmap" else got).encoder.stats.mean is None
    assert survivors["replace"] != m  # == compares state too: it is data
    assert m.replace(encoder=m.encoder.replace(stats=Stats(jnp.ones(3), jnp.ones(3)))) != m


# ---------------------------------------------------------------------------------------
# Over generated classes: the rule is the fields' flags and the leaves' types.


def _reference_trainable(gen: Generated, obj: Any, frozen: bool = False) -> list[bool]:
    """Which leaves are trainable, read from the class description alone: a float leaf
    (array or Python number) under no field declared trainable=False."""
    flags: list[bool] = []
    for f in gen.fields:
        if f.static:
            continue
        value = getattr(obj, f.name)
        below = frozen or not f.trainable
        if f.nested is not None and value is not None:
            flags += _reference_trainable(f.nested, value, below)
            continue
        for leaf in jax.tree.leaves(value):
            inexact = isinstance(leaf, float | complex) and not isinstance(leaf, bool)
            inexact = inexact or (hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.inexact))
            flags.append(inexact and not below)
    return flags


@hypothesis.given(instances())
def test_the_rule_over_generated_classes(inst: Instance) -> None:
    expected = _reference_trainable(inst.gen, inst.obj)
    params, rest = tc.partition(inst.obj)
    leaves = jax.tree.leaves(inst.obj)
    assert _mask(inst.obj) == expected
    assert tc.combine(params, rest) == inst.obj
    if not any(expected):
        return
    grads = tc.grad(lambda o: sum(jnp.sum(jnp.abs(x)).astype(jnp.float32) for x in jax.tree.leaves(tc.partition(o)[0])))(inst.obj)
    assert [g is not None for g in jax.tree.structure(inst.obj).flatten_up_to(grads)] == expected
    # Updates land on the parameters only; every other leaf is the same object.
    updated = tc.apply_updates(inst.obj, grads)
    for before, after, trained in zip(leaves, jax.tree.leaves(updated), expected, strict=True):
        assert (after is before) != trained or np.size(before) == 0


def test_a_selector_is_told_from_a_predicate_by_what_it_reads_not_its_code() -> None:
    # Regression: `where.__code__.co_names` was read for leaf-only names; a selector that
    # calls a node, with `.shape` read elsewhere in its code, was told to pass filter=.
    def where(n: Any) -> Any:
        return n.head(jnp.ones(2).shape)

    for call in (lambda: tc.partition(net(), where), lambda: tc.grad(loss, where=where)(net())):
        with pytest.raises(TypeError, match=r"^Net\.head: `where` did more than read it") as info:
            call()
        assert "fn=" not in str(info.value)  # partition and grad take no fn=
        assert "filter=" in " ".join(getattr(info.value, "__notes__", []))
