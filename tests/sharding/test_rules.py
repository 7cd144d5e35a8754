"""The logical axis rules of `treeclass._sharding.shardings`, as given (a mapping or flax-style
pairs), normalised, and the `PartitionSpec` they give one array (`AxisMap.spec`).
tests/sharding/test_sharding.py pins the same through `tc.partition_specs()` on whole trees."""

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

from treeclass._sharding.shardings import AxisMap, rule_table


def test_rule_table_normalises_mappings_and_pairs():
    assert rule_table(None) is None
    assert rule_table({"batch": "data", "embed": None}) == {"batch": "data", "embed": None}
    # As in flax, the first pair naming a logical axis wins.
    assert rule_table([("batch", "data"), ("batch", None)]) == {"batch": "data"}
    # A list of mesh axes becomes a tuple, and an empty one means replicated.
    assert rule_table([("batch", ["data", "model"]), ("embed", ())]) == {
        "batch": ("data", "model"),
        "embed": None,
    }


@pytest.mark.parametrize(
    "rules",
    [
        "batch",
        3,
        {"batch": 1},
        {1: "data"},
        [("batch",)],
        [("batch", "data", "x")],
        [("batch", 2)],
        [("batch", ("data", 1))],
        ["ab"],
    ],
    ids=repr,
)
def test_malformed_rules_rejected(rules):
    with pytest.raises(
        TypeError,
        match=r"rules= takes a mapping \{logical_name: mesh_axis\} or a sequence of "
        r"\(logical_name, mesh_axis\) pairs.*"
        r"e\.g\. rules=\[\('batch', 'data'\), \('embed', None\)\]\. Got ",
    ):
        rule_table(rules)  # pyright: ignore[reportArgumentType]


def test_spec_of_one_array_and_of_an_abstract_one():
    axis_map = AxisMap({"batch": "data"}, strict=False, sizes={"data": 4})
    assert axis_map.spec(jnp.ones((8, 3)), ("batch", "feature"), "M.x", "M.x") == P("data", None)
    abstract = jax.ShapeDtypeStruct((8,), jnp.float32)
    assert axis_map.spec(abstract, ("batch",), "M.x", "M.x") == P("data")
    assert axis_map.spec(1.0, (), "M.lr", "M.lr") == P()  # a Python scalar: shape ()


def test_spec_errors_say_where():
    axis_map = AxisMap({"batch": "data"}, strict=True, sizes={"data": 4})
    with pytest.raises(
        ValueError, match=r"^M\.x: the logical axis 'btach' is not mapped .* Did you mean 'batch'\?"
    ):
        axis_map.spec(jnp.ones(8), ("btach",), "M.x", "M.x")
    with pytest.raises(
        ValueError,
        match=r"^M\.x: dimension 0 \('batch'\) has size 6, which mesh axis 'data' of size 4 does not divide",
    ):
        axis_map.spec(jnp.ones(6), ("batch",), "M.x", "M.x")
    with pytest.raises(
        TypeError,
        match=r"^M\.x: field\(axes=\('batch',\)\) names array dimensions, but this leaf is a str",
    ):
        axis_map.spec("s", ("batch",), "M.x", "M.x")
