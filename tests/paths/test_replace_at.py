"""tc.replace_at: nested update along the path(s) that `where` reads.

Pinned here: the result equals the hand-written chain of `replace()` calls (by hand and
over hypothesis-generated classes), everything off the path is shared, treeclasses on
the path are rebuilt through `replace()` (converters, checks, `__post_init__`), static
fields can be selected, every misuse of `where` raises an error naming the path (and
runs no code on the real leaves), a path that depends on a closure variable is never
cached, and the tree keeps its structure wherever the new value keeps it: containers
JAX flattens keep their type, those it takes for leaves are replaced whole, not entered.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import re
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
    with pytest.raises(
        ValueError,
        match=r"selects MLP.extra\['pair'\]\[0\] and MLP.extra\['pair'\].left: one holds",
    ):
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


def test_post_init_runs_on_a_rebuilt_class_that_writes_its_own_init(form: Any) -> None:
    # Regression: the init=False field `y` stayed stale (2.0).
    @form.decorate
    class Doubled(*form.bases):
        x: float
        y: float = tc.field(init=False)

        def __init__(self, x: float) -> None:
            object.__setattr__(self, "x", x)
            self.__post_init__()

        def __post_init__(self) -> None:
            object.__setattr__(self, "y", 2 * self.x)

    @form.decorate
    class Holder(*form.bases):
        inner: Any

    assert tc.replace_at(Doubled(1.0), lambda d: d.x, 5.0).y == 10.0
    assert tc.replace_at(Holder(Doubled(1.0)), lambda h: h.inner.x, 5.0).inner.y == 10.0


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
    with pytest.raises(
        KeyError, match=r"^\"dict\[\('a', 2\)\]: no such key; the keys are: \('a', 1\), 2.5"
    ):
        tc.replace_at(got, lambda d: d[("a", 2)], 0)


class Config(dict[str, Any]):
    """A dict subclass: a leaf to JAX."""


class Row(tuple[Any, ...]):
    """A tuple subclass (not a NamedTuple): a leaf to JAX."""


class Stack(list[Any]):
    """A list subclass: a leaf to JAX."""


class Custom:
    """A node JAX flattens through `register_pytree_node`, which replace_at does not
    reach into: it has no fields or entries that replace_at could rebuild it from."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


jax.tree_util.register_pytree_node(Custom, lambda c: ((c.a, c.b), None), lambda _, ab: Custom(*ab))


@pytest.mark.parametrize(
    ("container", "where", "match"),
    [
        (
            Config(lr=1.0),
            lambda d: d["lr"],
            r"^Config\['lr'\]: Config holds a Config, and `where` indexed it",
        ),
        (Row((1.0, 2.0)), lambda t: t[0], r"^Row\[0\]: Row holds a Row, and `where` indexed it"),
        (Stack([1.0]), lambda t: t[0], r"^Stack\[0\]: Stack holds a Stack, and `where` indexed it"),
        (
            Custom(1.0, 2.0),
            lambda c: c.a,
            r"^Custom.a: Custom holds a Custom, which JAX flattens without key paths",
        ),
    ],
)
def test_a_container_that_jax_does_not_flatten_is_replaced_whole_not_entered(
    container: Any, where: Any, match: str
) -> None:
    # Regression: a Config (a leaf to JAX) came back as a plain dict (a node
    # of two leaves), changing the tree's structure without a word.
    with pytest.raises(TypeError, match=match):
        tc.replace_at(container, where, 0.0)
    holder = {"c": container}
    with pytest.raises(
        TypeError,
        match=r"^dict\['c'\][.\[].*: dict\['c'\] holds .*(not their subclasses|without key paths).*fn=lambda old",
    ):
        tc.replace_at(holder, lambda h: where(h["c"]), 0.0)
    # Replaced whole, it keeps its place in the structure.
    got = tc.replace_at(holder, lambda h: h["c"], fn=lambda c: c)
    assert jax.tree.structure(got) == jax.tree.structure(holder)


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


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Registered:
    a: Any
    b: Any


@tc.treeclass
class DecoratedNode:
    a: Any
    b: Any


class BaseNode(tc.TreeClass):
    a: Any
    b: Any


# kind -> (a container of that kind holding (sibling, inner), the step from it to inner,
# whether replace_at reaches into it: only where JAX flattens it into its entries)
_CONTAINERS: dict[str, tuple[Any, str, bool]] = {
    "tuple": (lambda s, x: (s, x), "[1]", True),
    "list": (lambda s, x: [s, x], "[1]", True),
    "dict": (lambda s, x: {"s": s, "x": x}, "['x']", True),
    "OrderedDict": (lambda s, x: collections.OrderedDict(x=x, s=s), "['x']", True),
    "defaultdict": (lambda s, x: collections.defaultdict(list, s=s, x=x), "['x']", True),
    "NamedTuple, by name": (lambda s, x: Pair(s, x), ".right", True),
    "NamedTuple, by index": (lambda s, x: Pair(s, x), "[-1]", True),
    "@tc.treeclass": (lambda s, x: DecoratedNode(s, x), ".b", True),
    "tc.TreeClass": (lambda s, x: BaseNode(s, x), ".b", True),
    "dict subclass": (lambda s, x: Config(s=s, x=x), "['x']", False),
    "list subclass": (lambda s, x: Stack([s, x]), "[1]", False),
    "tuple subclass": (lambda s, x: Row((s, x)), "[1]", False),
    "register_pytree_node": (lambda s, x: Custom(s, x), ".b", False),
    # A node flattened with key paths: entered, rebuilt by unflatten (equinox,
    # flax.struct, chex in test_foreign_nodes.py). This generator would have found it.
    "register_dataclass": (lambda s, x: Registered(s, x), ".b", True),
}


def _negated(old: Any) -> Any:
    """`old` with the same structure and new array leaves."""
    return jax.tree.map(lambda x: -x if isinstance(x, jax.Array) else x, old)


@hypothesis.given(
    st.lists(st.sampled_from(list(_CONTAINERS)), min_size=1, max_size=4), st.integers(0, 4)
)
def test_the_structure_is_kept_when_the_new_value_keeps_it(kinds: list[str], depth: int) -> None:
    tree: Any = jnp.ones(2)
    for kind in reversed(kinds):  # kinds[0] is the root
        tree = _CONTAINERS[kind][0](jnp.zeros(1), tree)
    steps = kinds[: min(depth, len(kinds))]
    where = eval("lambda t: t" + "".join(_CONTAINERS[kind][1] for kind in steps))
    if all(_CONTAINERS[kind][2] for kind in steps):
        got = tc.replace_at(tree, where, fn=_negated)
        assert jax.tree.structure(got) == jax.tree.structure(tree)
        assert type(got) is type(tree)
        for a, b in zip(
            jax.tree.leaves(where(got)), jax.tree.leaves(_negated(where(tree))), strict=True
        ):
            assert bool(jnp.array_equal(a, b)) if isinstance(a, jax.Array) else a is b
    else:  # refused, naming the path from the root
        match = rf"^{type(tree).__name__}[.\[].*(not their subclasses, which JAX takes for leaves|without key paths)"
        with pytest.raises(TypeError, match=match):
            tc.replace_at(tree, where, fn=_negated)


# ---------------------------------------------------------------------------------------
# Errors name the path.


@pytest.mark.parametrize(
    ("where", "error", "match"),
    [
        (
            lambda m: m.layers[5],
            IndexError,
            r"^MLP.layers\[5\]: index out of range \(MLP.layers has 2",
        ),
        (
            lambda m: m.layers[1].weight,
            AttributeError,
            r"^MLP.layers\[1\].weight: no such field, did you mean 'w'\? Linear's fields: w, b, act",
        ),
        (lambda m: m.layer, AttributeError, r"^MLP.layer: no such field, did you mean 'layers'\?"),
        (
            lambda m: m.extra["bias"],
            KeyError,
            r"MLP.extra\['bias'\]: no such key; the keys are: 'scale', 'pair'",
        ),
        (
            lambda m: m.extra["pair"].middle,
            AttributeError,
            r"MLP.extra\['pair'\].middle: no such field",
        ),
        (
            lambda m: m.layers["0"],
            TypeError,
            r"MLP.layers\['0'\]: MLP.layers is a tuple; index it with an int",
        ),
        (
            lambda m: m["layers"],
            TypeError,
            r"MLP\['layers'\]: MLP is a treeclass \(MLP\); read its fields",
        ),
        (
            lambda m: m.layers[0].w.T,
            TypeError,
            r"MLP.layers\[0\].w.T: MLP.layers\[0\].w holds a jax.Array of shape \(2, 3\), and `where` read an "
            r"attribute of it.*pass fn=lambda x: x.at\[...\].set",
        ),
        (
            lambda m: m.layers[0].w[0],
            TypeError,
            r"MLP.layers\[0\].w\[0\]: .* and `where` indexed it",
        ),
        (lambda m: m.layers[0].act.upper, TypeError, r"MLP.layers\[0\].act.upper: .* holds a str"),
    ],
)
def test_a_read_with_no_node_names_the_path(where: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        tc.replace_at(mlp(), where, 0)


# Each `where` below does something to a read other than read further: the stand-in has
# no method for it, so Python raises TypeError, which replace_at words naming the read.
_NOT_READS = {
    "call": (lambda m: m.layers[0](), "MLP.layers[0]"),
    "method call": (lambda m: m.layers[0].w.sum(), "MLP.layers[0].w.sum"),
    "at[].set": (lambda m: m.layers[0].w.at[0].set(1.0), "MLP.layers[0].w.at[0].set"),
    "+": (lambda m: m.layers[0].w + 1, "MLP.layers[0].w"),
    "reflected *": (lambda m: 2 * m.layers[0].w, "MLP.layers[0].w"),
    "unary -": (lambda m: -m.layers[0].w, "MLP.layers[0].w"),
    ".T then +": (lambda m: m.layers[0].w.T + 1, "MLP.layers[0].w.T"),
    ">": (lambda m: m.layers[0].w > 0, "MLP.layers[0].w"),
    "==": (lambda m: m.layers == (), "MLP.layers"),
    "!=": (lambda m: m.layers != (), "MLP.layers"),
    "== a dtype": (lambda m: m.layers[0].w.dtype == jnp.float32, "MLP.layers[0].w.dtype"),
    "if": (lambda m: m.layers[0].w if m.layers else None, "MLP.layers"),
    "not": (lambda m: not m.layers, "MLP.layers"),
    "len": (lambda m: len(m.layers), "MLP.layers"),
    "index from len": (lambda m: m.layers[len(m.layers) - 1], "MLP.layers"),
    "iteration": (lambda m: [*m.layers], "MLP.layers"),
    "generator": (lambda m: tuple(layer.w for layer in m.layers), "MLP.layers"),
    "in": (lambda m: m.layers[0] in m.layers, "MLP.layers"),
    "slice": (lambda m: m.layers[1:], "MLP.layers"),
    "slice of the end": (lambda m: m.layers[-1:], "MLP.layers"),
    "a read as a key": (lambda m: m.extra[m.layers], "MLP.layers"),
    "a read as a list index": (lambda m: [0, 1][m.layers], "MLP.layers"),
    "hash": (lambda m: {m.layers: 1}, "MLP.layers"),
    "int()": (lambda m: int(m.layers[0].act), "MLP.layers[0].act"),
    "numpy": (lambda m: np.asarray(m.layers[0].w), "MLP.layers[0].w"),
    "numpy reduction": (lambda m: np.sum(m.layers[0].w), "MLP.layers[0].w.sum"),
    "jax.numpy": (lambda m: jnp.asarray(m.layers[0].w), "MLP.layers[0].w"),
    "the root": (lambda m: m + 1, "MLP"),
}


@pytest.mark.parametrize(("where", "path"), _NOT_READS.values(), ids=_NOT_READS.keys())
def test_anything_but_a_read_names_the_read_it_was_applied_to(where: Any, path: str) -> None:
    # The recorder defines only __getattr__ and __getitem__ (no __getattribute__, no
    # refusing dunders): each of these is Python's TypeError on the stand-in, reworded.
    # (NumPy and JAX may read attributes such as `.dtype` first, as their versions do.)
    with pytest.raises(
        TypeError, match=rf"^{re.escape(path)}(\.\w+)*: `where` did more than read it"
    ) as info:
        tc.replace_at(mlp(), where, 0)
    assert isinstance(info.value.__cause__, TypeError)  # Python's own, kept as the cause


@pytest.mark.parametrize(
    ("where", "path"),
    [
        (lambda m: m.__dict__["layers"], "MLP.__dict__"),
        (lambda m: m.layers[0].__wrapped__, "MLP.layers[0].__wrapped__"),
    ],
)
def test_a_special_attribute_read_names_its_path(where: Any, path: str) -> None:
    # Not a field: the stand-in has none of these, and says where `where` read it.
    with pytest.raises(AttributeError, match=rf"^{re.escape(path)}: `where` did more than read it"):
        tc.replace_at(mlp(), where, 0)


@pytest.mark.parametrize("where", ["layers", ("layers", 0), None])
def test_a_where_that_is_not_a_function_says_so(where: Any) -> None:
    # Not "did more than read it", which the TypeError of calling it would have given.
    with pytest.raises(
        TypeError, match=r"^`where` is (an? \w+|None).*, not a function; it must return a node"
    ):
        tc.replace_at(mlp(), where, 0)


@pytest.mark.parametrize(
    ("where", "match"),
    [
        (lambda m: 3, r"`where` returned an int; it must return a node read from its argument"),
        (lambda m: (m.layers, 3), r"`where` returned a tuple holding an int"),
        (lambda m: f"{m.layers}", r"`where` returned a str"),
        (lambda m: m.layers is None, r"`where` returned a bool"),
    ],
)
def test_where_must_return_reads(where: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        tc.replace_at(mlp(), where, 0)


def test_every_refusal_shows_the_fn_fix() -> None:
    with pytest.raises(
        TypeError, match=r"(?s)may only read fields and entries.*fn=lambda w: w \* 2"
    ):
        tc.replace_at(mlp(), lambda m: m.layers[0].w * 2, 0)


class Tripwire:
    """A leaf that notes every attribute read and operation on it."""

    touched: list[str] = []  # noqa: RUF012 - one log, read by the test

    def __getattribute__(self, name: str) -> Any:
        if name != "__class__":  # isinstance() reads it; that runs no code of the leaf's
            Tripwire.touched.append(name)
        return object.__getattribute__(self, name)

    def __add__(self, other: object) -> Any:
        Tripwire.touched.append("+")
        return self

    def __bool__(self) -> bool:
        Tripwire.touched.append("bool")
        return True


@pytest.mark.parametrize(
    "where",
    [
        lambda t: t[0],
        lambda t: t[0] + 1,
        lambda t: t[0].attr,
        lambda t: t[0] if t[0] else t[1],
        lambda t: t[0][0],
    ],
)
def test_where_never_runs_code_on_the_real_leaves(where: Any) -> None:
    Tripwire.touched.clear()
    tree = (Tripwire(), Tripwire())
    with contextlib.suppress(TypeError):
        tc.replace_at(tree, where, fn=lambda old: old)
    assert Tripwire.touched == []


def test_a_negative_index_is_the_same_node() -> None:
    m = mlp()
    assert tc.replace_at(m, lambda m: m.layers[-1].act, "tanh").layers[1].act == "tanh"
    with pytest.raises(
        ValueError, match=r"selects MLP.layers\[1\] and MLP.layers\[-1\]: one holds the other, or"
    ):
        tc.replace_at(m, lambda m: (m.layers[1], m.layers[-1]), (1, 2))


def test_value_must_match_the_nodes_selected() -> None:
    with pytest.raises(
        ValueError,
        match=r"selects 2 nodes \(MLP.layers\[0\].b, MLP.layers\[1\].b\), so value must be a tuple of 2 new "
        r"values; got a list of length 3",
    ):
        tc.replace_at(mlp(), lambda m: (m.layers[0].b, m.layers[1].b), [1, 2, 3])
    with pytest.raises(
        ValueError, match=r"selects MLP.layers\[0\] and MLP.layers\[0\].b: one holds the other"
    ):
        tc.replace_at(mlp(), lambda m: (m.layers[0], m.layers[0].b), (1, 2))
    with pytest.raises(ValueError, match=r"selects MLP and MLP.layers: one holds the other"):
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
def test_replace_at_is_the_replace_chain_over_generated_classes(
    data: st.DataObject, inst: Instance
) -> None:
    steps, static = data.draw(paths_into(inst.obj), "path")
    hypothesis.assume(steps)
    new = data.draw(static_values if static else dynamic_values, "new value")
    source = "lambda m: m" + "".join(f"[{k!r}]" if item else f".{k}" for k, item in steps)
    where = eval(source)
    overwritten = "is an init=False field that __post_init__ sets"
    try:
        expected = _reference(inst.obj, steps, new)
    except ValueError as chain_error:  # a derived field that __post_init__ sets again
        if overwritten not in str(chain_error):
            raise
        with pytest.raises(ValueError, match=overwritten):
            tc.replace_at(inst.obj, where, new)
        return

    def via_closure(m: Any) -> Any:
        node = m
        for key, item in steps:
            node = node[key] if item else getattr(node, key)
        return node

    for where_fn in (where, via_closure):
        got = tc.replace_at(inst.obj, where_fn, new)
        assert jax.tree.structure(got) == jax.tree.structure(expected)
        assert all(
            a is b for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True)
        )
        assert type(got) is type(inst.obj)


# ---------------------------------------------------------------------------------------
# The recorder's state is bounded.


def test_the_recorder_installs_a_bounded_number_of_names() -> None:
    # Regression: a property was installed on the stand-in's class for every attribute
    # name ever read, typos included: process-wide state growing without end.
    from treeclass._paths import record

    for i in range(record._PROPERTIES + 50):
        with pytest.raises(AttributeError, match=rf"^MLP\.typo_{i}: no such field"):
            tc.replace_at(mlp(), lambda m, i=i: getattr(m, f"typo_{i}"), 0.0)
    installed = [name for name, value in vars(record._Read).items() if isinstance(value, property)]
    assert len(installed) <= record._PROPERTIES
    # Past the bound, a read is still recorded, only without the shortcut.
    assert tc.replace_at(mlp(), lambda m: m.layers[1].w, jnp.zeros(1)).layers[1].w.tolist() == [0.0]


# ---------------------------------------------------------------------------------------
# tc.replace_all: one field replaced in every treeclass that has it.


@tc.treeclass
class Dropout:
    rate: float = tc.static(0.5)
    inference: bool = tc.static(False)


@tc.treeclass
class Norm:
    scale: jax.Array
    inference: bool = tc.static(False)

    def __post_init__(self) -> None:
        if not isinstance(self.inference, bool):
            msg = "Norm.inference must be a bool"
            raise TypeError(msg)


@tc.treeclass
class Block:
    norm: Norm
    drop: Dropout
    extra: Any = None


def blocks() -> dict[str, Any]:
    inner = Block(Norm(jnp.ones(2)), Dropout(), Pair(Dropout(), jnp.ones(1)))
    return {"blocks": [Block(Norm(jnp.ones(3)), Dropout()), inner], "head": (jnp.zeros(1),)}


def test_replace_all_switches_every_treeclass_that_has_the_field() -> None:
    # Regression: an inference-mode switch set three flags by path; missing one was silent.
    tree = blocks()
    got = tc.replace_all(tree, inference=True)
    flags = [d.inference for d in jax.tree.leaves(got, is_leaf=lambda x: isinstance(x, Dropout | Norm)) if isinstance(d, Dropout | Norm)]
    assert flags == [True] * 5
    assert type(got) is dict
    assert type(got["blocks"]) is list
    assert type(got["blocks"][1].extra) is Pair
    assert got["head"] is tree["head"]  # nothing to change: shared
    assert got["blocks"][0].norm.scale is tree["blocks"][0].norm.scale
    assert tree["blocks"][0].drop.inference is False  # the input is unchanged
    both = tc.replace_all(tree, inference=True, rate=0.0)
    assert both["blocks"][1].extra.left.rate == 0.0
    assert both["blocks"][1].norm.inference is True


def test_replace_all_runs_replaces_checks() -> None:
    with pytest.raises(TypeError, match=r"^Norm\.inference must be a bool"):
        tc.replace_all(blocks(), inference="yes")


def test_replace_all_names_a_field_no_treeclass_has() -> None:
    with pytest.raises(TypeError, match=r"^replace_all\(\): no treeclass in this dict has a field 'inferance', did you mean 'inference'\?"):
        tc.replace_all(blocks(), inferance=True)
    with pytest.raises(TypeError, match=r"(?s)no treeclass in this tuple has a field 'a', 'b'\..*treeclasses in this tree: none"):
        tc.replace_all((jnp.ones(1),), a=1, b=2)


def test_replace_all_reaches_into_other_libraries_nodes() -> None:
    @jax.tree_util.register_dataclass
    @dataclasses.dataclass(frozen=True)
    class Holder:
        block: Any

    got = tc.replace_all(Holder(Block(Norm(jnp.ones(2)), Dropout())), inference=True)
    assert type(got) is Holder
    assert got.block.drop.inference is True
