"""`treeclass.shardings()` and `treeclass.partition_specs()`: field axes mapped through
rules to specs, and every error naming `Class.field`.

These run on one device: the specs need no devices, and an `AbstractMesh` of any shape
checks mesh axes and divisibility. What needs real devices (placement, jit, shard_map,
a data-parallel step) runs on 8 host CPU devices in a subprocess: see
`sharding_8_devices.py` and `test_on_8_host_devices` at the end.
"""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given
from jax.sharding import AbstractMesh, NamedSharding
from jax.sharding import PartitionSpec as P
from strategies import CALLS, Instance, instances

import treeclass as tc


@tc.treeclass
class Layer:
    w: jax.Array = tc.field(axes=("embed", "mlp"))
    b: jax.Array = tc.field(axes=("mlp",))


@tc.treeclass
class Model:
    x: jax.Array = tc.field(axes=("batch", None))
    layers: list[Layer] = tc.field(default_factory=list)
    extra: Any = None
    lr: float = 0.1
    name: str = tc.static("m")


RULES = {"batch": "data", "embed": None, "mlp": "model"}
MESH = AbstractMesh((4, 2), ("data", "model"))


def model() -> Model:
    return Model(jnp.ones((8, 3)), [Layer(jnp.ones((4, 6)), jnp.ones(6)) for _ in range(2)])


# --- specs -------------------------------------------------------------------------


def test_specs_follow_field_axes_and_rules():
    specs = tc.partition_specs(model(), RULES)
    assert specs.x == P("data", None)
    assert specs.layers[0].w == P(None, "model")
    assert specs.layers[1].b == P("model")
    assert specs.lr == P()  # a Python scalar leaf: replicated
    assert specs.name == "m"  # statics are kept
    assert specs.extra is None  # and so are None fields


def test_result_has_the_objects_treedef():
    m = model()
    assert jax.tree.structure(tc.partition_specs(m, RULES)) == jax.tree.structure(m)
    assert jax.tree.structure(tc.shardings(m, MESH, RULES)) == jax.tree.structure(m)


def test_shardings_are_named_shardings_on_the_mesh():
    sh = tc.shardings(model(), MESH, RULES)
    assert all(isinstance(s, NamedSharding) and s.mesh == MESH for s in jax.tree.leaves(sh))
    assert sh.x.spec == P("data", None)
    assert sh.layers[0].w.spec == P(None, "model")
    assert sh.lr.spec == P()


def test_unmapped_name_is_replicated():
    # flax's convention: a logical name the rules do not mention is replicated.
    specs = tc.partition_specs(model(), {"batch": "data"})
    assert specs.layers[0].w == P(None, None)
    assert specs.x == P("data", None)


def test_rule_to_none_replicates():
    assert tc.partition_specs(model(), {"batch": None}).x == P(None, None)


def test_no_rules_maps_names_to_same_named_mesh_axes():
    mesh = AbstractMesh((4,), ("batch",))
    sh = tc.shardings(model(), mesh)
    assert sh.x.spec == P("batch", None)
    assert sh.layers[0].w.spec == P(None, None)  # no "embed"/"mlp" mesh axes


def test_no_rules_no_mesh_takes_names_as_mesh_axes():
    specs = tc.partition_specs(model())
    assert specs.x == P("batch", None)
    assert specs.layers[0].w == P("embed", "mlp")


def test_rules_as_pairs_first_match_wins():
    rules = [("batch", "data"), ("mlp", "model"), ("batch", None)]
    assert tc.partition_specs(model(), rules).x == P("data", None)


def test_rule_to_several_mesh_axes():
    specs = tc.partition_specs(model(), {"batch": ("data", "model")}, mesh=MESH)
    assert specs.x == P(("data", "model"), None)


def test_fewer_axes_than_dimensions_leaves_the_rest_unsplit():
    @tc.treeclass
    class A:
        x: jax.Array = tc.field(axes=("batch",))

    assert tc.partition_specs(A(jnp.ones((4, 3, 2))), RULES).x == P("data")


def test_field_without_axes_replicates_its_whole_subtree():
    @tc.treeclass
    class A:
        params: dict[str, Any]

    specs = tc.partition_specs(A({"a": jnp.ones((4, 2)), "b": [jnp.ones(3), 1.0]}), RULES)
    assert jax.tree.leaves(specs) == [P(), P(), P()]


def test_field_axes_apply_to_each_array_of_a_subtree():
    @tc.treeclass
    class Stack:
        ws: list[jax.Array] = tc.field(axes=("embed", "mlp"))

    specs = tc.partition_specs(Stack([jnp.ones((4, 2)), jnp.ones((4, 4))]), RULES)
    assert specs.ws == [P(None, "model"), P(None, "model")]


def test_nested_treeclass_uses_its_own_axes():
    @tc.treeclass
    class Outer:
        inner: Layer
        by_name: dict[str, Layer]

    layer = Layer(jnp.ones((4, 2)), jnp.ones(2))
    specs = tc.partition_specs(Outer(layer, {"a": layer}), RULES)
    assert specs.inner.b == P("model")
    assert specs.by_name["a"].w == P(None, "model")


def test_plain_pytree_holding_treeclasses():
    m = model()
    specs = tc.partition_specs({"model": m, "step": jnp.zeros(())}, RULES)
    assert specs["model"].x == P("data", None)
    assert specs["step"] == P()


def test_shape_dtype_structs_need_no_arrays():
    abstract = jax.eval_shape(model)
    sh = tc.shardings(abstract, MESH, RULES)
    assert sh.x.spec == P("data", None)


def test_field_axes_on_none_value_is_allowed():
    @tc.treeclass
    class A:
        x: Any = tc.field(axes=("batch",), default=None)

    assert tc.partition_specs(A(), RULES).x is None


def test_strict_passes_when_every_name_is_mapped():
    specs = tc.partition_specs(model(), RULES, strict=True, mesh=MESH)
    assert specs.x == P("data", None)


def test_specs_work_under_jit():
    # Shapes are all the walk reads, so a traced instance gives the same specs.
    seen = []

    @jax.jit
    def f(m):
        seen.append(tc.partition_specs(m, RULES, mesh=MESH))
        return m

    f(model())
    assert seen[0].x == P("data", None)


def test_one_device_device_put_and_jit():
    mesh = jax.make_mesh((1,), ("data",))
    m = model()
    sh = tc.shardings(m, mesh, {"batch": "data"})
    placed = jax.device_put(m, sh)
    assert placed.x.sharding == sh.x
    out = jax.jit(lambda m: m.replace(x=m.x + 1), in_shardings=(sh,), out_shardings=sh)(placed)
    assert out.x.sharding == sh.x
    assert out.name == "m"


@given(instances())
def test_shardings_fit_every_generated_class(inst: Instance):
    # Classes of every shape (None fields, tuples, nesting, init=False fields, statics):
    # the result has the object's treedef, runs no user code, and device_put takes it.
    mesh = jax.make_mesh((1,), ("data",))
    before = CALLS.copy()
    sh = tc.shardings(inst.obj, mesh)
    after = CALLS.copy()
    assert after == before
    assert jax.tree.structure(sh) == jax.tree.structure(inst.obj)
    assert all(s.spec == P() for s in jax.tree.leaves(sh))  # generated fields have no axes
    placed = jax.device_put(inst.obj, sh)
    assert jax.tree.structure(placed) == jax.tree.structure(inst.obj)


# --- errors ------------------------------------------------------------------------


def test_axes_on_static_field_rejected():
    with pytest.raises(TypeError, match=r"^A\.n is static and declared axes=\.\.\.\. axes= names the axes"):

        @tc.treeclass
        class A:
            n: int = tc.field(static=True, default=1, axes=("batch",))


def test_more_axes_than_dimensions_rejected():
    @tc.treeclass
    class A:
        x: jax.Array = tc.field(axes=("batch", "embed"))

    with pytest.raises(
        ValueError,
        match=r"A\.x: field\(axes=\('batch', 'embed'\)\) names 2 dimensions, but the "
        r"value has shape \(3,\) \(1 dimensions\)\. .* field\(axes=\('batch',\)\)",
    ):
        tc.partition_specs(A(jnp.ones(3)))


def test_error_names_the_path_inside_a_subtree():
    @tc.treeclass
    class Outer:
        layers: list[Layer]

    bad = Layer(jnp.ones(4), jnp.ones(2))  # w should be 2-D
    with pytest.raises(ValueError, match=r"Outer\.layers\[1\]\.w: field\(axes="):
        tc.partition_specs(Outer([Layer(jnp.ones((4, 2)), jnp.ones(2)), bad]))


def test_axes_on_python_scalar_rejected():
    @tc.treeclass
    class A:
        x: float = tc.field(axes=("batch",))

    with pytest.raises(ValueError, match=r"A\.x: .*has shape \(\) \(0 dimensions\)"):
        tc.partition_specs(A(1.0))


def test_axes_on_non_array_leaf_rejected():
    @tc.treeclass
    class A:
        x: Any = tc.field(axes=("batch",))

    with pytest.raises(
        TypeError,
        match=r"A\.x\['k'\]: field\(axes=\('batch',\)\) names array dimensions, but "
        r"this leaf is a str \('s'\)\. Drop axes= from A\.x",
    ):
        tc.partition_specs(A({"k": "s"}))


def test_axes_on_field_holding_a_treeclass_rejected():
    @tc.treeclass
    class Outer:
        inner: Layer = tc.field(axes=("batch",))

    with pytest.raises(
        TypeError,
        match=r"Outer\.inner: field\(axes=\('batch',\)\) holds a Layer, a "
        r"treeclass whose own fields declare their axes\. Drop axes= from Outer\.inner",
    ):
        tc.partition_specs(Outer(Layer(jnp.ones((2, 2)), jnp.ones(2))))


def test_rule_to_missing_mesh_axis_rejected():
    with pytest.raises(
        ValueError,
        match=r"Model\.x: the rules map the logical axis 'batch' to mesh axis "
        r"'dp', which the mesh does not have; its axes are \['data', 'model'\]",
    ):
        tc.shardings(model(), MESH, {"batch": "dp"})


def test_rule_to_missing_mesh_axis_in_a_tuple_rejected():
    with pytest.raises(ValueError, match=r"mesh axis 'dp', which the mesh does not have"):
        tc.partition_specs(model(), {"batch": ("data", "dp")}, mesh=MESH)


def test_indivisible_dimension_rejected():
    m = Model(jnp.ones((6, 3)))
    with pytest.raises(
        ValueError,
        match=r"Model\.x: dimension 0 \('batch'\) has size 6, which mesh axis "
        r"'data' of size 4 does not divide\. Pad the dimension to a multiple of 4",
    ):
        tc.shardings(m, MESH, RULES)


def test_indivisible_by_product_of_mesh_axes_rejected():
    m = Model(jnp.ones((4, 3)))  # 4 is divisible by data (4), not by data x model (8)
    with pytest.raises(ValueError, match=r"mesh axis \('data', 'model'\) of size 8 does not"):
        tc.shardings(m, MESH, {"batch": ("data", "model")})


def test_mesh_axis_used_twice_rejected():
    with pytest.raises(
        ValueError,
        match=r"Model\.layers\[0\]\.w: field\(axes=\('embed', 'mlp'\)\) maps mesh "
        r"axis 'model' to two dimensions \(through 'embed' and 'mlp'\)",
    ):
        tc.partition_specs(model(), {"embed": "model", "mlp": "model"})


def test_same_logical_name_twice_rejected_when_mapped():
    @tc.treeclass
    class A:
        x: jax.Array = tc.field(axes=("embed", "embed"))

    with pytest.raises(ValueError, match=r"maps mesh axis 'model' to two dimensions"):
        tc.partition_specs(A(jnp.ones((2, 2))), {"embed": "model"})
    assert tc.partition_specs(A(jnp.ones((2, 2))), {"embed": None}).x == P(None, None)


def test_strict_rejects_unmapped_name_with_a_suggestion():
    @tc.treeclass
    class A:
        x: jax.Array = tc.field(axes=("btach",))

    with pytest.raises(
        ValueError,
        match=r"A\.x: the logical axis 'btach' is not mapped by the rules, and "
        r"strict=True refuses to replicate it silently\. Did you mean 'batch'\? .*"
        r"\('btach', None\) to replicate it\. The rules map \['batch', 'embed', 'mlp'\]",
    ):
        tc.partition_specs(A(jnp.ones(4)), RULES, strict=True)


def test_strict_without_rules_rejects_names_the_mesh_lacks():
    with pytest.raises(
        ValueError,
        match=r"Model\.layers\[0\]\.w: the logical axis 'embed' is not a mesh axis \(rules=None maps each "
        r"name to the mesh axis of that name\).* The mesh axes are \['batch'\]",
    ):
        tc.shardings(model(), AbstractMesh((4,), ("batch",)), strict=True)


def test_malformed_rules_rejected():
    # Every malformed shape of rules: tests/sharding/test_rules.py.
    with pytest.raises(TypeError, match=r"rules= takes a mapping .*Got 'batch'\."):
        tc.partition_specs(model(), "batch")  # pyright: ignore[reportArgumentType]


def test_mesh_argument_checked():
    with pytest.raises(
        TypeError,
        match=r"takes a jax\.sharding\.Mesh as its second argument; got \{'batch': 'data'\}\. "
        r"Build one with jax\.make_mesh",
    ):
        tc.shardings(model(), {"batch": "data"})  # pyright: ignore[reportArgumentType]


# --- on 8 devices --------------------------------------------------------------------


def test_on_8_host_devices():
    """Runs `sharding_8_devices.py` under pytest in a child process whose JAX sees 8 CPU
    devices: XLA reads the flag once, when jax is first imported, and this process
    imported it long ago."""
    here = Path(__file__).parent
    env = {
        **os.environ,
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8",
        "JAX_PLATFORMS": "cpu",
    }
    result = subprocess.run(  # our own test file, run with this interpreter
        [
            sys.executable,
            "-m",
            "pytest",
            str(here / "sharding_8_devices.py"),
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=here.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"8-device tests failed:\n{result.stdout}\n{result.stderr}"
    assert " passed" in result.stdout, result.stdout
    assert "skipped" not in result.stdout, result.stdout
