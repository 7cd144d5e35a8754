"""`treeclass.shardings()` on 8 devices: placement, jit, shard_map, a data-parallel step.

Not collected by the main run (the name does not start with `test_`): JAX must see 8
devices, and XLA reads `--xla_force_host_platform_device_count` once, before jax is
imported. `test_sharding.py::test_on_8_host_devices` runs this file in a child process
with that flag set. To run it by hand:

    XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu \
        python -m pytest tests/sharding/sharding_8_devices.py
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import treeclass as tc

if jax.device_count() < 8:
    pytest.skip(
        "needs 8 devices: run through test_sharding.py::test_on_8_host_devices",
        allow_module_level=True,
    )


@tc.treeclass
class Layer:
    w: jax.Array = tc.field(axes=("embed", "mlp"))
    b: jax.Array = tc.field(axes=("mlp",))


@tc.treeclass
class Model:
    x: jax.Array = tc.field(axes=("batch", None))
    layers: list[Layer]
    scale: float = 2.0
    name: str = tc.static("m")

    def scaled(self, k: jax.Array) -> "Model":
        return self.replace(x=self.x * k, layers=[la.replace(w=la.w * k) for la in self.layers])

    @tc.jit
    def shifted(self) -> "Model":
        return self.replace(x=self.x + 1.0)


RULES = {"batch": "data", "mlp": "model"}


@pytest.fixture
def mesh():
    return jax.make_mesh((4, 2), ("data", "model"))


def model() -> Model:
    x = jnp.arange(16 * 3, dtype=jnp.float32).reshape(16, 3)
    layers = [Layer(jnp.ones((4, 8)) * i, jnp.arange(8, dtype=jnp.float32)) for i in range(2)]
    return Model(x, layers)


def shard_shapes(x: jax.Array) -> set[tuple[int, ...]]:
    return {s.data.shape for s in x.addressable_shards}


def test_device_put_places_each_field(mesh):
    m = model()
    placed = jax.device_put(m, tc.shardings(m, mesh, RULES))
    assert placed.x.sharding.spec == P("data", None)
    assert shard_shapes(placed.x) == {(4, 3)}  # 16 rows over data=4; columns whole
    assert placed.layers[1].w.sharding.spec == P(None, "model")
    assert shard_shapes(placed.layers[1].w) == {(4, 4)}  # 8 columns over model=2
    assert shard_shapes(placed.layers[0].b) == {(4,)}
    assert placed.scale.sharding.spec == P()  # the Python float: replicated
    assert len(placed.x.addressable_shards) == 8
    # Which shard went where: device (i, j) of the mesh holds rows 4i..4i+3 of x.
    for shard in placed.x.addressable_shards:
        np.testing.assert_array_equal(shard.data, m.x[shard.index])
    assert tc.tree_equal(jax.device_get(placed), jax.device_get(m.replace(scale=jnp.float32(2.0))))


def test_jit_in_and_out_shardings_on_a_method(mesh):
    m = model()
    sh = tc.shardings(m, mesh, RULES)
    replicated = NamedSharding(mesh, P())
    scaled = jax.jit(Model.scaled, in_shardings=(sh, replicated), out_shardings=sh)
    out = scaled(jax.device_put(m, sh), jnp.float32(3.0))
    assert out.x.sharding == sh.x
    assert out.layers[0].w.sharding == sh.layers[0].w
    np.testing.assert_allclose(out.x, m.x * 3)
    # Out shardings may differ from in shardings: gather x onto every device.
    gather = jax.jit(lambda m: m, out_shardings=tc.shardings(m, mesh, {}))
    assert gather(jax.device_put(m, sh)).x.sharding.spec == P(None, None)


def test_tc_jit_method_keeps_the_sharding(mesh):
    m = model()
    placed = jax.device_put(m, tc.shardings(m, mesh, RULES))
    out = placed.shifted()
    assert out.x.sharding.spec == P("data", None)
    assert shard_shapes(out.x) == {(4, 3)}


def test_shard_map_with_partition_specs(mesh):
    m = model()
    specs = tc.partition_specs(m, RULES, mesh=mesh)
    seen = []

    def local(m: Model) -> tuple[Model, jax.Array]:
        seen.append((m.x.shape, m.layers[0].w.shape))
        total = jax.lax.psum(jnp.sum(m.x), "data")
        return m.replace(x=m.x * 2), total

    f = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(specs,), out_specs=(specs, P())))
    out, total = f(jax.device_put(m, tc.shardings(m, mesh, RULES)))
    assert seen == [((4, 3), (4, 4))]  # each device sees its block
    assert out.x.sharding.spec == P("data", None)
    np.testing.assert_allclose(out.x, m.x * 2)
    np.testing.assert_allclose(total, jnp.sum(m.x))


# --- a data-parallel training step -----------------------------------------------------


@tc.treeclass
class Linear:
    w: jax.Array = tc.field(axes=("feature",))  # "feature" is unmapped: replicated
    b: jax.Array


@tc.treeclass
class Data:
    x: jax.Array = tc.field(axes=("batch", "feature"))
    y: jax.Array = tc.field(axes=("batch",))


def loss_fn(model: Linear, data: Data) -> jax.Array:
    return jnp.mean((data.x @ model.w + model.b - data.y) ** 2)


def sgd_step(model: Linear, data: Data) -> tuple[Linear, jax.Array]:
    loss, grads = jax.value_and_grad(loss_fn)(model, data)
    return jax.tree.map(lambda p, g: p - 0.1 * g, model, grads), loss


def problem() -> tuple[Linear, Data]:
    kx, kn = jax.random.split(jax.random.key(0))
    x = jax.random.normal(kx, (64, 4))
    y = x @ jnp.array([1.0, -2.0, 0.5, 3.0]) + 0.3 + 0.01 * jax.random.normal(kn, (64,))
    return Linear(jnp.zeros(4), jnp.zeros(())), Data(x, y)


def train(step, model: Linear, data: Data, n: int = 20) -> list[float]:
    losses = []
    for _ in range(n):
        model, loss = step(model, data)
        losses.append(float(loss))
    return losses


@pytest.mark.parametrize("axis_type", [AxisType.Explicit, AxisType.Auto], ids=str)
def test_data_parallel_step_matches_one_device(axis_type):
    mesh = jax.make_mesh((8,), ("data",), axis_types=(axis_type,))
    model, data = problem()
    rules = {"batch": "data"}
    msh, dsh = tc.shardings(model, mesh, rules), tc.shardings(data, mesh, rules)
    assert dsh.x.spec == P("data", None)
    assert msh.w.spec == P(None)

    step = jax.jit(sgd_step, in_shardings=(msh, dsh), out_shardings=(msh, NamedSharding(mesh, P())))
    sharded = train(step, jax.device_put(model, msh), jax.device_put(data, dsh))
    single = train(jax.jit(sgd_step), model, data)
    # The sharded mean sums per-device partials: another float32 order. Each run's
    # losses are within 1.4e-6 (relative) of float64 SGD (measured; the map contracts,
    # so rounding does not grow over 20 steps): two runs differ by < 3e-6, rtol 1e-5.
    np.testing.assert_allclose(sharded, single, rtol=1e-5)
    assert sharded[-1] < 0.1 * sharded[0]


def test_data_parallel_shard_map_step_matches_one_device():
    # The explicit form: each device computes the loss on its slice of the batch and
    # `pmean` averages the losses. The parameters enter replicated, so the gradient of
    # that average is the full-batch gradient, the same on every device.
    mesh = jax.make_mesh((8,), ("data",))
    model, data = problem()
    rules = {"batch": "data"}
    mspec, dspec = tc.partition_specs(model, rules), tc.partition_specs(data, rules)

    @jax.jit
    @functools.partial(jax.shard_map, mesh=mesh, in_specs=(mspec, dspec), out_specs=(mspec, P()))
    def step(model: Linear, data: Data) -> tuple[Linear, jax.Array]:
        mean_loss = lambda m: jax.lax.pmean(loss_fn(m, data), "data")  # noqa: E731
        loss, grads = jax.value_and_grad(mean_loss)(model)
        return jax.tree.map(lambda p, g: p - 0.1 * g, model, grads), loss

    placed = jax.device_put(data, tc.shardings(data, mesh, rules))
    sharded = train(step, jax.device_put(model, tc.shardings(model, mesh, rules)), placed)
    single = train(jax.jit(sgd_step), model, data)
    np.testing.assert_allclose(sharded, single, rtol=1e-5)  # as in the test above


def test_process_local_data_recipe(mesh):
    # The multi-host recipe in docs/sharding.md, in one process: each process passes
    # the rows it loaded (with one process, all of them) and shardings computed from
    # the global shapes.
    local = Data(np.arange(32.0, dtype=np.float32).reshape(8, 4), np.ones(8, np.float32))
    n = jax.process_count()
    global_batch = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct((n * a.shape[0], *a.shape[1:]), a.dtype), local
    )
    sh = tc.shardings(global_batch, mesh, {"batch": "data"})
    batch = jax.tree.map(jax.make_array_from_process_local_data, sh, local)
    assert batch.x.sharding == sh.x
    assert shard_shapes(batch.x) == {(2, 4)}
    assert tc.tree_equal(jax.device_get(batch), local)
