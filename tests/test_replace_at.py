"""tc.replace_at: nested update along the path(s) that `where` reads.

Pinned here: the result equals the hand-written chain of `replace()` calls (by hand and
over hypothesis-generated classes), everything off the path is shared, treeclasses on
the path are rebuilt through `replace()` (converters, checks, `__post_init__`), static
fields can be selected, and every misuse of `where` raises an error naming the path.
The two ways of reading `where` (the compiled constant path and the recording stand-in)
must agree, and a path that depends on a closure variable is never cached.
"""

from __future__ import annotations

import collections
from typing import Any, NamedTuple

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from strategies import Instance, dynamic_values, instances, static_values

import treeclass as tc


@tc.treeclass
class Linear:
    w: jax.Array
    b: jax.Array
    act: str = tc.static("relu")


@tc.treeclass
class MLP:
    layers: tuple[Linear, ...]
    extra: dict[str, Any]


class Pair(NamedTuple):
    left: Any
    right: Any


def mlp() -> MLP:
    return MLP(
        (Linear(jnp.ones((2, 3)), jnp.zeros(3)), Linear(jnp.ones((3, 1)), jnp.zeros(1))),
        {"scale": jnp.ones(()), "pair": Pair(jnp.ones(1), [jnp.zeros(1), jnp.ones(2)])},
    )


# ---------------------------------------------------------------------------------------
# What it builds.


def test_equals_the_hand_written_replace_chain_and_shares_the_rest() -> None:
    m = mlp()
    new_w = jnp.zeros((3, 1))
    got = tc.replace_at(m, lambda m: m.layers[1].w, new_w)
    by_hand = m.replace(layers=(m.layers[0], m.layers[1].replace(w=new_w)))  # type: ignore[attr-defined]
    assert got == by_hand
    assert got.layers[1].w is new_w
    assert got.layers[0] is m.layers[0]  # off the path: shared
    assert got.layers[1].b is m.layers[1].b
    assert got.extra is m.extra
    assert m.layers[1].w.shape == (3, 1)  # unchanged
    assert float(m.layers[1].w[0, 0]) == 1.0


def test_fn_receives_the_old_node() -> None:
    m = mlp()
    got = tc.replace_at(m, lambda m: m.layers[0].b, fn=lambda b: b + 2.0)
    assert got.layers[0].b.tolist() == [2.0, 2.0, 2.0]


def test_static_field_is_selectable_and_changes_the_treedef() -> None:
    m = mlp()
    got = tc.replace_at(m, lambda m: m.layers[0].act, "tanh")
    assert got.layers[0].act == "tanh"
    assert jax.tree.structure(got) != jax.tree.structure(m)


def test_several_nodes_at_once() -> None:
    m = mlp()
    b = jnp.full(1, 5.0)
    got = tc.replace_at(m, lambda m: (m.layers[0].act, m.layers[1].b), ("tanh", b))
    assert (got.layers[0].act, got.layers[1].b) == ("tanh", b)
    assert got.layers[0].w is m.layers[0].w
    got = tc.replace_at(m, lambda m: [m.layers[0].b, m.layers[1].b], fn=lambda x: x + 1)
    assert got.layers[0].b.tolist() == [1.0] * 3
    assert got.layers[1].b.tolist() == [1.0]


def test_containers_on_the_path_are_copied_with_one_entry_changed() -> None:
    m = mlp()
    got = tc.replace_at(m, lambda m: m.extra["pair"].right[1], jnp.zeros(2))
    pair = got.extra["pair"]
    assert type(pair) is Pair
    assert type(pair.right) is list
    assert pair.left is m.extra["pair"].left
    assert pair.right[0] is m.extra["pair"].right[0]
    assert pair.right[1].tolist() == [0.0, 0.0]
    assert list(got.extra) == ["scale", "pair"]  # dict order kept
    assert m.extra["pair"].right[1].tolist() == [1.0, 1.0]  # the original list untouched


def test_namedtuple_by_name_and_by_index_is_one_node() -> None:
    m = mlp()
    got = tc.replace_at(m, lambda m: (m.extra["pair"][0], m.extra["pair"].right), (1, 2))
    assert got.extra["pair"] == Pair(1, 2)
    with pytest.raises(ValueError, match=r"selects MLP.extra\['pair'\].left twice"):
        tc.replace_at(m, lambda m: (m.extra["pair"][0], m.extra["pair"].left), (1, 2))


def test_negative_index_and_root_tuple() -> None:
    pair = (jnp.ones(1), (jnp.ones(2), jnp.ones(3)))
    got = tc.replace_at(pair, lambda t: t[-1][-1], None)
    assert got[1][1] is None
    assert got[0] is pair[0]


def test_selecting_the_object_itself_returns_the_value() -> None:
    m = mlp()
    assert tc.replace_at(m, lambda m: m, 3) == 3


@tc.treeclass
class Checked:
    lo: jax.Array
    hi: jax.Array
    scale: float = tc.field(static=True, default=1.0)
    v: jax.Array = tc.field(default=0.0, converter=jnp.asarray)

    def __post_init__(self) -> None:
        if self.lo.shape != self.hi.shape:
            msg = f"Checked: lo {self.lo.shape} and hi {self.hi.shape} differ"
            raise ValueError(msg)


@tc.treeclass
class Holder:
    inner: Checked


def test_replace_semantics_converters_checks_and_post_init_run() -> None:
    h = Holder(Checked(jnp.zeros(2), jnp.ones(2)))
    got = tc.replace_at(h, lambda h: h.inner.v, [1.0, 2.0])  # the converter runs
    assert isinstance(got.inner.v, jax.Array)
    assert got.inner.v.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match=r"lo \(3,\) and hi \(2,\) differ"):
        tc.replace_at(h, lambda h: h.inner.lo, jnp.zeros(3))  # __post_init__ runs
    with pytest.raises(TypeError, match=r"Checked.scale is a static field but holds a jax.Array"):
        tc.replace_at(h, lambda h: h.inner.scale, jnp.ones(2))  # the static check runs
    # Two fields checked together: one replace() with both changes.
    got = tc.replace_at(h, lambda h: (h.inner.lo, h.inner.hi), (jnp.zeros(3), jnp.ones(3)))
    assert got.inner.lo.shape == (3,)


def test_a_closure_variable_is_read_on_every_call() -> None:
    m = mlp()
    for i in range(2):
        m = tc.replace_at(m, lambda m: m.layers[i].act, f"act{i}")  # noqa: B023 - the point
    assert [layer.act for layer in m.layers] == ["act0", "act1"]
    for i in range(2):
        m = tc.replace_at(m, lambda m, i=i: m.layers[i].act, f"again{i}")
    assert [layer.act for layer in m.layers] == ["again0", "again1"]
    name = "b"
    assert tc.replace_at(m, lambda m: getattr(m.layers[0], name), None).layers[0].b is None


def test_one_where_on_nodes_of_other_types() -> None:
    def where(t: Any) -> Any:
        return t[0][1]

    assert tc.replace_at(((1, 2),), where, 9) == ((1, 9),)
    assert tc.replace_at(([1, 2],), where, 9) == ([1, 9],)  # a list stays a list
    assert tc.replace_at(((1, 2, 3),), where, 9) == ((1, 9, 3),)  # another length
    with pytest.raises(IndexError, match=r"tuple\[0\]\[1\]: index out of range"):
        tc.replace_at(((1,),), where, 9)
    assert tc.replace_at(((1, 2),), where, 7) == ((1, 7),)


def test_dict_keys_of_any_hashable_type() -> None:
    key = ("a", 1)
    got = tc.replace_at({key: [0, 1], 2.5: 0}, lambda d: (d[key][1], d[2.5]), (5, 6))
    assert got == {key: [0, 5], 2.5: 6}
    with pytest.raises(KeyError, match=r"^\"dict\[\('a', 2\)\]: no such key; the keys are: \('a', 1\), 2.5"):
        tc.replace_at(got, lambda d: d[("a", 2)], 0)


def test_subclasses_of_containers_keep_their_type() -> None:
    class Row(tuple[int, ...]):
        pass

    got = tc.replace_at({"r": Row((1, 2))}, lambda d: d["r"][0], 5)
    assert type(got["r"]) is Row
    assert got["r"] == (5, 2)


def test_jax_dict_nodes_keep_their_type_order_and_factory() -> None:
    ordered = collections.OrderedDict([("b", 1.0), ("a", 2.0)])
    got = tc.replace_at(ordered, lambda d: d["a"], 3.0)
    assert type(got) is collections.OrderedDict
    assert list(got.items()) == [("b", 1.0), ("a", 3.0)]
    assert jax.tree.structure(got) == jax.tree.structure(ordered)

    counts = collections.defaultdict(list, {"x": 1.0})
    got_counts = tc.replace_at(counts, lambda d: d["x"], 2.0)
    assert type(got_counts) is collections.defaultdict
    assert got_counts.default_factory is list  # part of the treedef: jit would retrace without it
    assert jax.tree.structure(got_counts) == jax.tree.structure(counts)
    assert counts == {"x": 1.0}  # the input is not changed


# ---------------------------------------------------------------------------------------
# Errors name the path.


@pytest.mark.parametrize(
    ("where", "error", "match"),
    [
        (lambda m: m.layers[5], IndexError, r"^MLP.layers\[5\]: index out of range \(MLP.layers has 2"),
        (lambda m: m.layers[1].weight, AttributeError,
         r"^MLP.layers\[1\].weight: no such field, did you mean 'w'\? Linear's fields: w, b, act"),
        (lambda m: m.layer, AttributeError, r"^MLP.layer: no such field, did you mean 'layers'\?"),
        (lambda m: m.extra["bias"], KeyError, r"MLP.extra\['bias'\]: no such key; the keys are: 'scale', 'pair'"),
        (lambda m: m.extra["pair"].middle, AttributeError, r"MLP.extra\['pair'\].middle: no such field"),
        (lambda m: m.layers["0"], TypeError, r"MLP.layers\['0'\]: MLP.layers is a tuple; index it with an int"),
        (lambda m: m["layers"], TypeError, r"MLP\['layers'\]: MLP is a treeclass \(MLP\); read its fields"),
        (lambda m: m.layers[0].w.T, TypeError,
         r"MLP.layers\[0\].w.T: MLP.layers\[0\].w holds a jax.Array of shape \(2, 3\), and `where` read an "
         r"attribute of it.*pass fn=lambda x: x.at\[...\].set"),
        (lambda m: m.layers[0].w[0], TypeError, r"MLP.layers\[0\].w\[0\]: .* and `where` indexed it"),
        (lambda m: m.layers[0].act.upper, TypeError, r"MLP.layers\[0\].act.upper: .* holds a str"),
    ],
)
def test_a_read_with_no_node_names_the_path(where: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        tc.replace_at(mlp(), where, 0)


@pytest.mark.parametrize(
    ("where", "match"),
    [
        (lambda m: m.layers[0](), r"^MLP.layers\[0\]: `where` called it"),
        (lambda m: m.layers[0].w + 1, r"^MLP.layers\[0\].w: `where` computed with it \(\+\)"),
        (lambda m: 2 * m.layers[0].w, r"^MLP.layers\[0\].w: `where` computed with it \(\*\)"),
        (lambda m: -m.layers[0].w, r"computed with it \(__neg__\)"),
        (lambda m: m.layers[0].w > 0, r"^MLP.layers\[0\].w: `where` compared it \(>\)"),
        (lambda m: m.layers == (), r"^MLP.layers: `where` compared it \(==\)"),
        (lambda m: m.layers[0].w if m.layers else None, r"^MLP.layers: `where` took its truth value"),
        (lambda m: len(m.layers), r"^MLP.layers: `where` took its len\(\)"),
        (lambda m: [*m.layers], r"^MLP.layers: `where` iterated over it"),
        (lambda m: m.extra[m.layers], r"^MLP.layers: `where` used it as an index"),
        (lambda m: {m.layers: 1}, r"^MLP.layers: `where` hashed it"),
        (lambda m: np.asarray(m.layers[0].w), r"^MLP.layers\[0\].w: `where` passed it to a NumPy function"),
        (lambda m: np.sum(m.layers[0].w), r"^MLP.layers\[0\].w.sum: `where` called it"),
        (lambda m: m.layers[0:1], r"MLP.layers\[0:1\]: `where` sliced MLP.layers.*lambda m: \(m.layers\[0\], ...\)"),
        (lambda m: 3, r"`where` returned an int; it must return a node read from its argument"),
        (lambda m: (m.layers, 3), r"`where` returned a tuple holding an int"),
    ],
)
def test_anything_but_a_read_names_the_node(where: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        tc.replace_at(mlp(), where, 0)


def test_every_refusal_shows_the_fn_fix() -> None:
    with pytest.raises(TypeError, match=r"(?s)may only read fields and entries.*fn=lambda w: w \* 2"):
        tc.replace_at(mlp(), lambda m: m.layers[0].w * 2, 0)


def test_value_must_match_the_nodes_selected() -> None:
    with pytest.raises(
        ValueError,
        match=r"selects 2 nodes \(MLP.layers\[0\].b, MLP.layers\[1\].b\), so value must be a tuple of 2 new "
        r"values; got a list of length 3",
    ):
        tc.replace_at(mlp(), lambda m: (m.layers[0].b, m.layers[1].b), [1, 2, 3])
    with pytest.raises(ValueError, match=r"selects MLP.layers\[0\] twice, or both MLP.layers\[0\] and a node"):
        tc.replace_at(mlp(), lambda m: (m.layers[0], m.layers[0].b), (1, 2))
    with pytest.raises(ValueError, match="selects the object itself among other nodes"):
        tc.replace_at(mlp(), lambda m: (m, m.layers), (1, 2))


def test_value_or_fn_not_both() -> None:
    with pytest.raises(TypeError, match="takes either a value or fn=, not both and not neither"):
        tc.replace_at(mlp(), lambda m: m.layers, 1, fn=lambda x: x)
    with pytest.raises(TypeError, match="takes either a value or fn=, not both and not neither"):
        tc.replace_at(mlp(), lambda m: m.layers)  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue]


# ---------------------------------------------------------------------------------------
# Over generated classes: replace_at is the hand-written chain.


def _reference(node: Any, steps: list[tuple[Any, bool]], new: Any) -> Any:
    """The replace chain a user would write, for `steps`."""
    if not steps:
        return new
    (key, item), rest = steps[0], steps[1:]
    if not item:
        return node.replace(**{key: _reference(getattr(node, key), rest, new)})
    items = list(node)
    items[key] = _reference(node[key], rest, new)
    return tuple(items)


@st.composite
def paths_into(draw: st.DrawFn, obj: Any) -> tuple[list[tuple[Any, bool]], bool]:
    """A path from `obj` to one of its nodes through fields and tuple entries, and
    whether the node is a static field's value."""
    steps: list[tuple[Any, bool]] = []
    node, static = obj, False
    while not static and draw(st.booleans()):
        if tc.is_treeclass(node) and tc.fields(node):
            f = draw(st.sampled_from(tc.fields(node)))
            steps.append((f.name, False))
            node, static = getattr(node, f.name), f.metadata["static"]
        elif type(node) is tuple and node:
            i = draw(st.integers(0, len(node) - 1))  # pyright: ignore[reportUnknownArgumentType]
            steps.append((i, True))
            node = node[i]  # pyright: ignore[reportUnknownVariableType]
        else:
            break
    return steps, static


@hypothesis.given(st.data(), instances())
def test_replace_at_is_the_replace_chain_over_generated_classes(data: st.DataObject, inst: Instance) -> None:
    steps, static = data.draw(paths_into(inst.obj), "path")
    hypothesis.assume(steps)
    new = data.draw(static_values if static else dynamic_values, "new value")
    source = "lambda m: m" + "".join(f"[{k!r}]" if item else f".{k}" for k, item in steps)
    where = eval(source)
    expected = _reference(inst.obj, steps, new)
    def via_closure(m: Any) -> Any:
        node = m
        for key, item in steps:
            node = node[key] if item else getattr(node, key)
        return node

    for where_fn in (where, via_closure):
        got = tc.replace_at(inst.obj, where_fn, new)
        assert jax.tree.structure(got) == jax.tree.structure(expected)
        assert all(a is b for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True))
        assert type(got) is type(inst.obj)
