"""The cost of the process boundary: one PLN data-parallel iteration (examples/pln.py,
samples split over 8 host devices) in 1 process x 8 devices, 2 x 4 and 4 x 2.

The same compiled fit runs in each layout; what changes is where the reductions over
samples go: within one process (shared memory), or across processes (gloo over TCP on
loopback, as examples/sharded.py --processes sets up). A figure, not a target: on a
real cluster the processes are on other hosts, with another network.

Each layout starts its own processes (examples/sharded.py's launcher), compiles
`PLN.fit(steps)` once, then times `rounds` calls on process 0 (every process makes the
same calls: they run the program together), each divided by `steps`. The layouts run
one after the other, not interleaved: compare them within one run only, and read the
spread (IQR) next to the median.

    python -m benchmarks.multiprocess            # n=2000, p=20; 11 rounds of 50 steps (~3 min)
    python -m benchmarks.multiprocess --quick    # n=400, p=5; 5 rounds of 20 steps (~1 min)
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

from benchmarks._table import Table

ROOT = Path(__file__).resolve().parent.parent
LAYOUTS = ((1, 8), (2, 4), (4, 2))  # (processes, devices per process)
SIZES = {False: (2000, 20, 50, 11), True: (400, 5, 20, 5)}  # n, p, steps, rounds
EXAMPLE = ROOT / "examples" / "sharded.py"
LIMIT_S = 600


def _sharded() -> ModuleType:
    """examples/sharded.py (its launcher and worker helpers); imports no jax."""
    if "sharded" in sys.modules:
        return sys.modules["sharded"]
    spec = importlib.util.spec_from_file_location("sharded", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sharded"] = module
    spec.loader.exec_module(module)
    return module


def worker(count: int, rank: int, coordinator: str, n: int, p: int, steps: int,
           rounds: int) -> None:
    """One process of a layout; process 0 prints `TIMES` and the seconds per call."""
    sharded = _sharded()
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils

    if count > 1:
        sharded.join(coordinator, count, rank, timeout=LIMIT_S)
    pln = sharded.sibling("pln")
    data = pln.simulate(n=n, p=p, d=2, seed=0)
    rows = slice(rank * n // count, (rank + 1) * n // count)
    local = pln.PLN.from_data(data.Y[rows], data.O[rows], data.X[rows])
    parts = multihost_utils.process_allgather(np.float32(pln.log_stirling_sum(data.Y[rows])))
    local = local.replace(n=n, log_y_factorial=jnp.asarray(np.sum(parts), jnp.float32))
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    mesh = jax.make_mesh((len(devices),), ("samples",), devices=devices,
                         axis_types=(jax.sharding.AxisType.Auto,))
    model = sharded.from_process_local(local, mesh, "samples")
    start = time.perf_counter()
    jax.block_until_ready(model.fit(steps))  # compile, and the first run
    first = time.perf_counter() - start
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        jax.block_until_ready(model.fit(steps))
        times.append(time.perf_counter() - start)
    if rank == 0:
        print("FIRST", first)
        print("TIMES", *times)


def measure(processes: int, per_process: int, quick: bool) -> tuple[float, list[float]]:
    """Runs one layout in fresh processes: the first call's seconds (compile included)
    and the seconds per iteration of each timed call."""
    sharded = _sharded()
    n, p, steps, rounds = SIZES[quick]
    coordinator = f"{sharded.LOOPBACK}:{sharded.free_port()}"
    commands = [[sys.executable, "-m", "benchmarks.multiprocess", "--worker", str(processes),
                 str(i), coordinator, str(n), str(p), str(steps), str(rounds)]
                for i in range(processes)]
    env = sharded.worker_env(per_process)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    out = io.StringIO()
    code = sharded.run_processes(commands, env=env, timeout=LIMIT_S, out=out)
    lines = out.getvalue().splitlines()
    if code != 0:
        raise RuntimeError(f"{processes} x {per_process} failed:\n" + "\n".join(lines))
    found = {line.split()[2]: line.split()[3:] for line in lines
             if line.startswith("[process 0] ") and line.split()[2] in ("FIRST", "TIMES")}
    return float(found["FIRST"][0]), [float(t) / steps for t in found["TIMES"]]


def run(quick: bool) -> list[Table]:
    """The section for `python -m benchmarks`: one table, a row per layout."""
    n, p, steps, rounds = SIZES[quick]
    results = {layout: measure(*layout, quick) for layout in LAYOUTS}
    base = statistics.median(results[LAYOUTS[0]][1])
    rows = []
    for (processes, per_process), (first, times) in results.items():
        median = statistics.median(times)
        lo, hi = _quartiles(times)
        rows.append((f"{processes} x {per_process}", f"{median * 1e6:.0f}",
                     f"{lo * 1e6:.0f}-{hi * 1e6:.0f}", f"{median / base:.2f}", f"{first:.1f}"))
    return [Table(
        f"PLN data-parallel iteration, processes x devices [{rounds} rounds of {steps} steps]",
        ("layout", "median us/step", "IQR us", "x 1 x 8", "first call s"),
        tuple(rows),
        note=f"n={n}, p={p}, d=2, samples split over 8 host devices; layouts run one after "
        "the other in fresh processes (not interleaved); gloo over loopback between processes",
    )]


def _quartiles(xs: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.multiprocess", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="n=400, p=5; 5 rounds of 20 steps")
    parser.add_argument("--worker", nargs=7, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        count, rank, coordinator, n, p, steps, rounds = args.worker
        worker(int(count), int(rank), coordinator, int(n), int(p), int(steps), int(rounds))
        return
    for table in run(args.quick):
        print(table.text())


if __name__ == "__main__":
    main()
