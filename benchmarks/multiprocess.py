"""The cost of the process boundary: one PLN data-parallel iteration (examples/pln.py,
samples split over 8 host devices) in 1 process x 8 devices, 2 x 4 and 4 x 2.

The same compiled fit runs in each layout; what changes is where the reductions over
samples go: within one process (shared memory), or across processes (gloo over TCP on
loopback, as examples/sharded.py --processes sets up). A figure, not a prediction: on
a real cluster the processes are on other hosts, with another network.

Each layout starts its own processes (examples/sharded.py's launcher), compiles
`PLN.fit(steps)` once, then times `rounds` calls on process 0 (every process makes the
same calls: they run the program together), each divided by `steps`. The layouts run
one after the other, not interleaved: compare them within one run only, and read the
spread (IQR) next to the median.
"""

from __future__ import annotations

import io
import os
import statistics
import sys
from pathlib import Path

from benchmarks import _timing
from benchmarks._examples import example
from benchmarks._table import Table

ROOT = Path(__file__).resolve().parent.parent
LAYOUTS = ((1, 8), (2, 4), (4, 2))  # (processes, devices per process)
SIZES = {False: (2000, 20, 50, 11), True: (400, 5, 20, 5)}  # n, p, steps, rounds
LIMIT_S = 600


def worker(count: int, rank: int, coordinator: str, *sizes: int) -> None:
    """One process of a layout (`sizes`: n, p, steps, rounds); process 0 prints `FIRST`
    and `TIMES`, the seconds of the first call and of each timed one."""
    sharded = example("sharded")
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils

    n, p, steps, rounds = sizes
    if count > 1:
        sharded.join(coordinator, count, rank, timeout=LIMIT_S)
    pln = example("pln")
    data = pln.simulate(n=n, p=p, d=2, seed=0)
    rows = slice(rank * n // count, (rank + 1) * n // count)
    local = pln.PLN.from_data(data.Y[rows], data.O[rows], data.X[rows])
    parts = multihost_utils.process_allgather(np.float32(pln.log_stirling_sum(data.Y[rows])))
    local = local.replace(n=n, log_y_factorial=jnp.asarray(np.sum(parts), jnp.float32))
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    axis_types = (jax.sharding.AxisType.Auto,)
    mesh = jax.make_mesh((len(devices),), ("samples",), devices=devices, axis_types=axis_types)
    model = sharded.from_process_local(local, mesh, "samples")
    fit = _timing.program(model.fit, steps)
    times = [fit(1) for _ in range(rounds + 1)]  # one call each; the first compiles
    if rank == 0:
        print("FIRST", times[0])
        print("TIMES", *times[1:])


def measure(processes: int, per_process: int, quick: bool) -> tuple[float, list[float]]:
    """Runs one layout in fresh processes: the first call's seconds (compile included)
    and the seconds per iteration of each timed call."""
    sharded = example("sharded")  # its launcher and worker helpers; imports no jax
    n, p, steps, rounds = SIZES[quick]
    coordinator = f"{sharded.LOOPBACK}:{sharded.free_port()}"

    def command(rank: int) -> list[str]:
        call = f"worker({processes}, {rank}, {coordinator!r}, {n}, {p}, {steps}, {rounds})"
        return [sys.executable, "-c", f"from benchmarks.multiprocess import worker; {call}"]

    commands = [command(rank) for rank in range(processes)]
    env = sharded.worker_env(per_process)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    out = io.StringIO()
    code = sharded.run_processes(commands, env=env, timeout=LIMIT_S, out=out)
    lines = out.getvalue().splitlines()
    if code != 0:
        raise RuntimeError(f"{processes} x {per_process} failed:\n" + "\n".join(lines))
    found = {}
    for line in lines:  # "[process 0] TIMES 0.1 0.1 ..."
        words = line.split()
        if line.startswith("[process 0] ") and words[2] in ("FIRST", "TIMES"):
            found[words[2]] = [float(w) for w in words[3:]]
    return found["FIRST"][0], [t / steps for t in found["TIMES"]]


def run(quick: bool) -> list[Table]:
    """The section: one table, a row per layout."""
    print("  PLN data-parallel iteration, three layouts ...", file=sys.stderr, flush=True)
    n, p, steps, rounds = SIZES[quick]
    results = {layout: measure(*layout, quick) for layout in LAYOUTS}
    base = statistics.median(results[LAYOUTS[0]][1])
    rows = []
    for (processes, per_process), (first, times) in results.items():
        median, (lo, hi) = statistics.median(times), _timing.quartiles(times)
        iqr = f"{lo * 1e6:.0f}-{hi * 1e6:.0f}"
        ratio = f"{median / base:.2f}"
        rows.append(
            (f"{processes} x {per_process}", f"{median * 1e6:.0f}", iqr, ratio, f"{first:.1f}")
        )
    return [
        Table(
            f"PLN data-parallel iteration, processes x devices [{rounds} rounds of {steps} steps]",
            ("layout", "median us/step", "IQR us", "x 1 x 8", "first call s"),
            tuple(rows),
            note=f"n={n}, p={p}, d=2, samples split over 8 host devices; layouts run one after "
            "the other in fresh processes (not interleaved); gloo over loopback between processes",
        )
    ]
