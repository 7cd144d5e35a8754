"""One worker process of tests/sharding/test_multiprocess.py (not collected: no `test_` prefix).

    python tests/sharding/multiprocess_worker.py SCENARIO RANK COUNT COORDINATOR FOLDER

Scenarios:

- `checkpoint`: joins the others (the example's `join`, 2 host devices each), builds a
  treeclass sharded across the processes from process-local rows, saves it with orbax
  from every process, restores it onto `tc.shardings`, and checks it equals the
  original; checks that every TCP socket this process opened is on the loopback
  interface; then reports what `tc.save` does with it (it must refuse).
- `crash`: joins, then process 1 raises while the others wait in a collective that
  needs it: the launcher must stop them.
- `hang`: prints `ready` and sleeps (no jax): the launcher's time limit must stop it.

Each check prints `ok: ...` or raises, so a failure is a non-zero exit code with the
traceback in the output the launcher relays.
"""

import importlib.util
import os
import sys
import time
import warnings
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def example() -> ModuleType:
    """examples/sharded.py (its launcher and worker helpers); imports no jax."""
    spec = importlib.util.spec_from_file_location("sharded", ROOT / "examples" / "sharded.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sharded"] = module
    spec.loader.exec_module(module)
    return module


def sockets_of_this_process() -> list[str]:
    """Local addresses (hex `ADDR:PORT`, as in /proc/net/tcp*) of the TCP sockets this
    process holds: its socket inodes (/proc/self/fd) looked up in /proc/self/net/tcp*."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed in between
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = []
    for table in ("tcp", "tcp6"):
        with open(f"/proc/self/net/{table}") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    found.append(fields[1])
    return found


# /proc/net/tcp writes addresses in host byte order: 127.0.0.1 is 0100007F; tcp6
# writes ::1 and ::ffff:127.0.0.1 as below.
LOOPBACK_HEX = (
    "0100007F",
    "00000000000000000000000001000000",
    "0000000000000000FFFF00000100007F",
)


def checkpoint(rank: int, count: int, coordinator: str, folder: Path) -> None:
    # jax 0.7.0's own multihost_utils.sync_global_devices (which orbax calls) uses a
    # jax API that 0.7.0 deprecated; this process runs with -W error. Only that one.
    warnings.filterwarnings(
        "ignore", "jax.interpreters.xla.canonicalize_dtype", DeprecationWarning
    )
    sharded = example()
    sharded.host_devices(2)
    import jax
    import jax.numpy as jnp
    import numpy as np
    import orbax.checkpoint as ocp

    import treeclass as tc

    sharded.join(coordinator, count, rank, timeout=120)

    @tc.treeclass
    class Layer:
        w: jax.Array = tc.field(axes=("rows", None))
        b: jax.Array

    @tc.treeclass
    class Model:
        x: jax.Array = tc.field(axes=("rows", None))
        layers: list[Layer]
        key: jax.Array
        name: str = tc.static("m")

    rows = np.arange(4 * 3, dtype=np.float32).reshape(4, 3) + 100 * rank  # this process's
    local = Model(
        x=rows,
        layers=[Layer(rows * 2, np.ones(3, np.float32)), Layer(rows - 1, np.zeros(3, np.float32))],
        key=np.asarray(jax.random.key_data(jax.random.key(7))),
    )
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    mesh = jax.make_mesh((len(devices),), ("rows",), devices=devices)
    model = sharded.from_process_local(local, mesh, "rows")
    assert model.x.shape == (4 * count, 3)
    assert not model.x.is_fully_addressable
    print(f"ok: global x {model.x.shape} from {count} processes, {model.x.sharding.spec}")

    path = folder.resolve() / "model"
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(path, model)
        checkpointer.wait_until_finished()
        shardings = tc.shardings(model, mesh)
        target = jax.tree.map(
            lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), model, shardings
        )
        restored = checkpointer.restore(path, target)
        # The keys orbax stored: field names, as tc.to_state_dict has them.
        stored = checkpointer.metadata(path)
    assert type(restored) is Model
    assert restored.name == "m"
    for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(shardings), strict=True):
        assert got.sharding == want, (got.sharding, want)
    assert bool(jax.jit(tc.tree_equal)(restored, model))
    # A check that can fail: the restored values differ from a model that differs.
    assert not bool(jax.jit(tc.tree_equal)(restored, model.replace(x=model.x + 1)))
    assert jnp.sum(restored.x) == jnp.sum(model.x)
    tree = getattr(stored, "item_metadata", stored)
    tree = getattr(tree, "tree", tree)
    keys = {jax.tree_util.keystr(path, simple=True, separator=".")
            for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]}
    assert {"x", "layers.0.w", "layers.1.b", "key"} <= keys, keys
    print(f"ok: orbax round trip from {count} processes; keys {sorted(keys)}")

    found = sockets_of_this_process()
    assert found, "no TCP socket found: the check would pass vacuously"
    outside = [a for a in found if a.rsplit(":", 1)[0] not in LOOPBACK_HEX]
    assert not outside, f"sockets off the loopback interface: {outside}"
    print(f"ok: all {len(found)} TCP sockets of process {rank} are on loopback")

    # tc.save refuses what this process cannot read whole, naming the field and the
    # orbax call. Reported, not raised: the test of the refusal reads this line.
    try:
        tc.save(folder / f"refused-{rank}.npz", model)
    except tc.CheckpointError as error:
        print(f"ok: tc.save refused: {error}".replace("\n", " "))
    except Exception as error:  # noqa: BLE001 - whatever it is, the test shows it
        print(f"not refused: tc.save raised {type(error).__name__}: {error}".replace("\n", " "))
    else:
        print("not refused: tc.save wrote a file from arrays that span processes")


def crash(rank: int, count: int, coordinator: str) -> None:
    sharded = example()
    sharded.host_devices(1)
    import jax
    import jax.numpy as jnp
    import numpy as np

    sharded.join(coordinator, count, rank, timeout=120)
    print("ready", flush=True)
    if rank == 1:
        msg = "worker 1 fails on purpose"
        raise RuntimeError(msg)
    mesh = jax.make_mesh((jax.device_count(),), ("i",))
    ones = jax.make_array_from_process_local_data(
        jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("i")), np.ones(1)
    )
    while True:  # each sum needs process 1, which is gone: this blocks, or fails
        jax.block_until_ready(jax.jit(jnp.sum)(ones))


def hang() -> None:
    print("ready", flush=True)
    time.sleep(3600)


def main() -> None:
    scenario, rank, count, coordinator, folder = sys.argv[1:6]
    if scenario == "checkpoint":
        checkpoint(int(rank), int(count), coordinator, Path(folder))
    elif scenario == "crash":
        crash(int(rank), int(count), coordinator)
    elif scenario == "hang":
        hang()
    else:
        msg = f"unknown scenario {scenario!r}"
        raise SystemExit(msg)


if __name__ == "__main__":
    main()
