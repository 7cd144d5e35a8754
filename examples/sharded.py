"""Data parallel on N devices: the PLN fit split over samples, a LIF population split
over neurons, each checked against the same run on one device.

The models are the ones in `pln.py` and `neuron_models.py`, unchanged: their array
fields name a logical axis (`tc.field(axes=("samples", None))`, `axes=("neurons",)`),
so sharding them is one line,

    model = jax.device_put(model, tc.shardings(model, mesh))

and the jitted methods (`PLN.fit`, a `lax.scan` over `LIF.step`) run on the sharded
instance as they are: XLA splits the per-sample (per-neuron) work and inserts the
reductions across devices (`M.T @ M` in the closed-form Sigma, the ELBO's sums).

On a machine with one CPU this script asks XLA for N host devices
(`--xla_force_host_platform_device_count`), which must happen before jax is imported:
that is why the imports of jax come after the argument parsing. On a machine with N
accelerators, pass `--devices N` and the real devices are used.

    python examples/sharded.py                # 8 host devices
    python examples/sharded.py --quick        # smaller, for the tests
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent


def _load(name: str) -> ModuleType:
    """Imports a sibling example module by path (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=8, help="mesh size (8)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for the tests")
    parser.add_argument("--steps", type=int, help="PLN iterations (300; 50 with --quick)")
    args = parser.parse_args(argv)
    if args.devices < 1:
        parser.error("--devices must be positive")
    steps = args.steps or (50 if args.quick else 300)

    flag = f"--xla_force_host_platform_device_count={args.devices}"
    if "jax" not in sys.modules and flag not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()

    import jax
    import jax.numpy as jnp
    import numpy as np

    import treeclass as tc

    if jax.device_count() < args.devices:
        print(f"only {jax.device_count()} devices; asked for {args.devices}", file=sys.stderr)
        return 2
    pln = _load("pln")
    neurons = _load("neuron_models")
    print(f"devices: {args.devices} x {jax.devices()[0].platform}")

    # --- PLN: samples split across devices --------------------------------------------
    n, p, d = (400, 5, 2) if args.quick else (2000, 20, 2)
    data = pln.simulate(n=n, p=p, d=d, seed=0)
    model = pln.PLN.from_data(data.Y, data.O, data.X)
    # Auto axes: XLA decides how the code between the sharded inputs and outputs is
    # split (jax's default, Explicit, would ask the model code to say, e.g. at M.T @ M).
    auto = (jax.sharding.AxisType.Auto,)
    mesh = jax.make_mesh((args.devices,), ("samples",), axis_types=auto)
    sharded = jax.device_put(model, tc.shardings(model, mesh))
    print(f"PLN: n={n}, p={p}, d={d}; Y {sharded.Y.sharding.spec}, "
          f"M {sharded.params.M.sharding.spec}, Sigma {sharded.Sigma.sharding.spec}; "
          f"per-device Y shard {sharded.Y.addressable_shards[0].data.shape}")

    start = time.perf_counter()
    _, losses_one = model.fit(steps)
    losses_one = np.asarray(losses_one)
    one_s = time.perf_counter() - start
    start = time.perf_counter()
    fitted, losses_many = sharded.fit(steps)
    losses_many = np.asarray(losses_many)
    many_s = time.perf_counter() - start
    # Not bit for bit: on 8 devices each sum over samples adds 8 partial sums, in
    # another order than one device does, so the last float32 bits differ. The
    # tutorial's optimizer (RAdam with a constant step, clipped) stops descending after
    # ~200 iterations and jitters, which lets such differences grow; so the whole
    # trajectory is compared at a relative 1e-3, and the first 100 iterations, still
    # descending, at 1e-5.
    scale = np.max(np.abs(losses_one))
    rel = float(np.max(np.abs(losses_many - losses_one)) / scale)
    early = float(np.max(np.abs(losses_many[:100] - losses_one[:100])) / scale)
    print(f"  loss {losses_one[0]:.2f} -> {losses_one[-1]:.2f} on 1 device; "
          f"{losses_many[0]:.2f} -> {losses_many[-1]:.2f} on {args.devices}")
    print(f"  max |loss difference| / max |loss|: {rel:.1e} over {steps} iterations "
          f"(tolerance 1e-3), {early:.1e} over the first 100 (tolerance 1e-5)")
    print(f"  compile + run: {one_s:.2f} s on 1 device, {many_s:.2f} s on {args.devices}")
    print(f"  fitted M stays split: {fitted.params.M.sharding.spec}")
    pln_ok = rel < 1e-3 and early < 1e-5

    # --- LIF: a population split across devices ---------------------------------------
    size, length = (4096, 200) if args.quick else (80_000, 2000)
    population = neurons.LIF.create(size)
    mesh = jax.make_mesh((args.devices,), ("neurons",), axis_types=auto)
    split = jax.device_put(population, tc.shardings(population, mesh))
    currents = jnp.full((length,), 25.0, dtype=jnp.float32)
    _, trace_one = neurons.simulate(population, currents)
    final_many, trace_many = neurons.simulate(split, currents)
    same = bool(jnp.array_equal(trace_one.spike, trace_many.spike))
    print(f"LIF: {size} neurons x {length} steps; V {split.V.sharding.spec}, "
          f"per-device shard {split.V.addressable_shards[0].data.shape}")
    print(f"  spikes: {int(trace_one.spike.sum())} on 1 device, "
          f"{int(trace_many.spike.sum())} on {args.devices}; identical: {same}")
    print(f"  final V stays split: {final_many.V.sharding.spec}")

    ok = pln_ok and same
    print("result: the sharded runs match the single-device runs" if ok else "result: MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
