"""`tc.summary()`: one row per leaf and static field, by path, with kind, dtype, shape,
count, bytes (and sharding when placed), then the totals of parameters and state."""

from __future__ import annotations

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from strategies import Instance, instances

import treeclass as tc


class Stats(tc.TreeClass):
    mean: jax.Array
    var: jax.Array


class Block(tc.TreeClass):
    w: jax.Array = tc.field(axes=("in", "out"))
    stats: Stats = tc.field(trainable=False)
    act: tc.Static[str] = "relu"


class Model(tc.TreeClass):
    blocks: tuple[Block, ...]
    head: dict[str, jax.Array]
    key: jax.Array
    step: jax.Array
    rate: float
    frozen: jax.Array = tc.field(trainable=False, default=None)


def model() -> Model:
    block = Block(jnp.ones((2, 3)), Stats(jnp.zeros(3), jnp.ones(3)))
    head = {"w": jnp.ones((3, 1), jnp.bfloat16)}
    return Model((block, block), head, jax.random.key(0), jnp.array(0), 0.1)


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_one_row_per_leaf_and_static_field_with_kind_dtype_shape_count_bytes() -> None:
    table = rows(tc.summary(model()))
    assert table[0] == ["path", "kind", "dtype", "shape", "count", "bytes"]
    body = {row[0]: row[1:] for row in table[1:-1]}
    assert body["Model.blocks[0].w"] == ["trainable", "f32", "[2,3]", "6", "24", "B"]
    assert body["Model.blocks[1].stats.var"] == ["non-trainable", "f32", "[3]", "3", "12", "B"]
    assert body["Model.blocks[0].act"] == ["static", "'relu'"]
    assert body["Model.head['w']"] == ["trainable", "bf16", "[3,1]", "3", "6", "B"]
    assert body["Model.key"] == ["non-trainable", "key<fry>", "[]", "1", "8", "B"]
    assert body["Model.step"] == ["non-trainable", "i32", "[]", "1", "4", "B"]
    assert body["Model.rate"] == ["trainable", "float", "[]", "1", "4", "B"]
    assert list(body)[:3] == ["Model.blocks[0].w", "Model.blocks[0].stats.mean", "Model.blocks[0].stats.var"]
    assert "Model.frozen" not in body  # None: no leaf


def test_totals_of_parameters_and_state() -> None:
    last = tc.summary(model()).splitlines()[-1]
    # Parameters: 2 x w (6 f32) + head (3 bf16) + rate (1, as f32): 58 B;
    # state: 2 x stats (6 f32), key (8 B of key data), step (i32): 60 B.
    assert last == "trainable: 16 parameters, 58 B; non-trainable: 14 elements, 60 B"


def test_it_is_a_string_shown_as_a_table() -> None:
    text = tc.summary(model())
    assert isinstance(text, str)
    assert repr(text) == str(text)  # a REPL shows the table, not a quoted string
    assert text._repr_html_().startswith("<pre>path")  # type: ignore[attr-defined]
    assert "&#x27;relu&#x27;" in text._repr_html_()  # type: ignore[attr-defined]


def test_sharding_column_only_when_placed() -> None:
    m = model()
    assert "sharding" not in tc.summary(m).splitlines()[0]
    mesh = jax.make_mesh((1,), ("in",))
    placed = jax.device_put(m, tc.shardings(m, mesh))
    table = rows(tc.summary(placed))
    assert table[0][-1] == "sharding"
    body = {row[0]: row for row in table[1:-1]}
    assert body["Model.blocks[0].w"][-2:] == ["P('in',", "None)"]


def test_abstract_trees_and_containers() -> None:
    abstract = jax.eval_shape(model)
    assert tc.summary(abstract).splitlines()[-1] == tc.summary(model()).splitlines()[-1]
    assert rows(tc.summary({"a": jnp.ones(2)}))[1][0] == "dict['a']"


@pytest.mark.parametrize("size", [999, 1000, 123_456])
def test_bytes_in_decimal_units(size: int) -> None:
    text = tc.summary({"x": jnp.zeros(size, jnp.uint8)})
    expected = {999: "999 B", 1000: "1.0 kB", 123_456: "123.5 kB"}[size]
    assert text.splitlines()[1].endswith(expected)


# ---------------------------------------------------------------------------------------
# depth=: each subtree at depth k is one row of subtotals, as nnx.tabulate.


def test_depth_folds_each_subtree_into_one_row_with_its_subtotals() -> None:
    table = rows(tc.summary(model(), depth=1))
    assert table[0] == ["path", "kind", "dtype", "shape", "count", "bytes"]
    assert table[1:-1] == [
        ["Model.blocks", "mixed", "(12", "trainable)", "tuple", "24", "96", "B"],
        ["Model.head", "trainable", "dict", "3", "6", "B"],
        ["Model.key", "non-trainable", "key<fry>", "[]", "1", "8", "B"],  # a leaf at depth 1: as it is
        ["Model.step", "non-trainable", "i32", "[]", "1", "4", "B"],
        ["Model.rate", "trainable", "float", "[]", "1", "4", "B"],
    ]
    body = {row[0]: row[1:] for row in rows(tc.summary(model(), depth=3))[1:-1]}
    assert body["Model.blocks[0].stats"] == ["non-trainable", "Stats", "6", "24", "B"]
    assert body["Model.blocks[1].act"] == ["static", "'relu'"]
    assert rows(tc.summary(model(), depth=0))[1] == ["Model", "mixed", "(16", "trainable)", "Model", "30", "118", "B"]
    assert tc.summary(model(), depth=9) == tc.summary(model())  # deeper than the tree: every row


def test_depth_keeps_state_out_of_the_parameters() -> None:
    # An EMA of the weights in a trainable=False field is state (nnx counts it as
    # parameters when it is an nnx.Param): so its folded row says, and so do the totals.
    class Tracked(tc.TreeClass):
        block: Block
        ema: Block = tc.field(trainable=False)

    block = Block(jnp.ones((2, 3)), Stats(jnp.zeros(3), jnp.ones(3)))
    text = tc.summary(Tracked(block, block), depth=1)
    body = {row[0]: row[1:] for row in rows(text)[1:-1]}
    assert body["Tracked.block"] == ["mixed", "(6", "trainable)", "Block", "12", "48", "B"]
    assert body["Tracked.ema"] == ["non-trainable", "Block", "12", "48", "B"]
    assert text.splitlines()[-1] == "trainable: 6 parameters, 24 B; non-trainable: 18 elements, 72 B"


@pytest.mark.parametrize("depth", [-1, 1.5, "1", True])
def test_a_depth_that_is_not_an_int_is_refused(depth: object) -> None:
    with pytest.raises(ValueError, match=r"^summary\(depth=.*\): depth is None \(every row\) or an int >= 0, e\.g\. tc\.summary\(model, depth=1\)\.$"):
        tc.summary(model(), depth=depth)  # type: ignore[arg-type]


def _counted(text: str) -> tuple[int, int]:
    """(elements, trainable elements) summed over the rows of a table."""
    total = trainable = 0
    for line in text.splitlines()[1:-1]:
        cells = line.split()
        if cells[1] == "static":
            continue
        count = int(cells[-3].replace(",", ""))
        total += count
        if cells[1] == "trainable":
            trainable += count
        elif cells[1] == "mixed":
            trainable += int(cells[2].lstrip("(").replace(",", ""))
    return total, trainable


@hypothesis.given(instances(), st.integers(0, 4))
def test_totals_are_the_same_at_every_depth(inst: Instance, depth: int) -> None:
    # Over generated classes of both forms (nested classes, containers, statics, None,
    # Python numbers, trainable=False fields).
    full, folded = tc.summary(inst.obj), tc.summary(inst.obj, depth=depth)
    assert folded.splitlines()[-1] == full.splitlines()[-1]
    assert _counted(folded) == _counted(full)
    params = sum(np.size(x) for x in jax.tree.leaves(tc.partition(inst.obj)[0]))
    assert _counted(full) == (sum(np.size(x) for x in jax.tree.leaves(inst.obj)), params)
    assert len(folded.splitlines()) <= len(full.splitlines())
