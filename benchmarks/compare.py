"""The examples against the tools their users pick: the PLN fit against pyPLNmodels,
the LIF population against brainpy. Each peer is optional (`pip install '.[compare]'`);
one that is missing is left out with a printed note.

- PLN, time to the optimum, per dtype: examples/pln_profiled.py's fit (one compiled
  call, stopped by its tolerance) against `pyPLNmodels.Pln.fit()` (400 Rprop
  iterations, its default), on the oaks data when pyPLNmodels is there to load them
  (else simulated data of oaks' size, ours only). Each dtype runs in a child process
  (float64 needs `jax_enable_x64`, process-wide), twice with one fresh persistent
  compilation cache (`jax_compilation_cache_dir`): the second process shows what the
  cache does to the end-to-end time. Reported: the compiled call (median of 3), the
  first call (trace + compile + run), each process's wall time, iterations, final
  ELBO and its distance to the float64 optimum.
- LIF, 10,000 neurons x 10,000 steps (dt 0.1 ms): examples/neuron_models.py's LIF in
  one jitted `lax.scan` against brainpy's `bm.for_loop` under `bm.jit` and its
  `DSRunner`, steps per second, checking the total spike counts agree.

    python -m benchmarks.compare            # full size
    python -m benchmarks.compare --quick    # 2,000 x 2,000 LIF; PLN unchanged
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from benchmarks._table import Table

ROOT = Path(__file__).resolve().parent.parent
OAKS_OPTIMUM = -31456.36  # float64, pyPLNmodels' optimum on oaks (examples/pln_profiled.py)
TOL, MAX_ITER = 5e-7, 5000


def _has(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _example(name: str) -> Any:
    sys.path.insert(0, str(ROOT / "examples"))  # examples/ is not a package
    try:
        return __import__(name)
    finally:
        sys.path.pop(0)


def _pln_data() -> Any:
    pln = _example("pln")
    if _has("pyPLNmodels"):
        with warnings.catch_warnings():  # its pkg_resources import and open CSV files
            warnings.simplefilter("ignore")
            return pln.load_oaks_data()
    return pln.simulate(116, 114, 1)


# --- PLN ---------------------------------------------------------------------------------


def pln_worker(dtype: str) -> None:
    """In a child process: fit, print one JSON line."""
    import jax

    if dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    data = _pln_data()
    pp = _example("pln_profiled")
    model = pp.ProfiledPLN.from_data(data.Y, data.O, data.X, jnp.dtype(dtype))
    t0 = time.perf_counter()
    fitted = jax.block_until_ready(model.fit(MAX_ITER, TOL))
    first = time.perf_counter() - t0
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        jax.block_until_ready(model.fit(MAX_ITER, TOL))
        runs.append(time.perf_counter() - t0)
    out = {"first_s": first, "run_s": statistics.median(runs),
           "iterations": int(fitted.iteration), "elbo": float(fitted.elbo), "label": data.label}
    print(json.dumps(out))


def _child(dtype: str, cache: str) -> dict[str, Any]:
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": cache,
           "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
           "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
    t0 = time.perf_counter()
    result = subprocess.run(  # noqa: S603 - this module, run with this interpreter
        [sys.executable, "-m", "benchmarks.compare", "--pln-worker", dtype],
        capture_output=True, text=True, cwd=ROOT, env=env, check=True, timeout=1200,
    )
    out: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - t0
    return out


def _pypln(dtype: str) -> dict[str, Any]:
    """pyPLNmodels' own fit on oaks, its defaults (400 Rprop iterations, lr 0.01): the
    median of 3 fits."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pyPLNmodels import Pln, load_oaks

        oaks = load_oaks()
        torch.set_default_dtype(torch.float64 if dtype == "float64" else torch.float32)
        times = []
        for _ in range(3):  # a new model each time, construction untimed; the median
            pln = Pln(oaks["endog"], offsets=oaks["offsets"])
            if dtype == "float64":  # it casts its data to float32; cast them back
                for name in ("_endog", "_exog", "_offsets"):
                    setattr(pln, name, getattr(pln, name).double())
            t0 = time.perf_counter()
            pln.fit(verbose=False)
            times.append(time.perf_counter() - t0)
        torch.set_default_dtype(torch.float32)
    return {"run_s": statistics.median(times),
            "iterations": len(pln._elbo_criterion_monitor.elbo_list), "elbo": float(pln.elbo)}


def pln_tables() -> list[Table]:
    rows, notes = [], []
    peer = _has("pyPLNmodels") and _has("torch")
    if not peer:
        notes.append("pyPLNmodels not installed (pip install '.[compare]'): ours only, "
                     "on simulated data of oaks' size")
    for dtype in ("float32", "float64"):
        with tempfile.TemporaryDirectory() as cache:
            cold, warm = _child(dtype, cache), _child(dtype, cache)
        gap = f"{cold['elbo'] - OAKS_OPTIMUM:+.3f}" if peer else "-"
        theirs = _pypln(dtype) if peer else None
        ratio = f"{theirs['run_s'] / cold['run_s']:.1f}" if theirs else "-"
        rows.append((f"treeclass {dtype}", f"{cold['run_s']:.3f}", ratio, str(cold["iterations"]),
                     f"{cold['elbo']:.2f}", gap, f"{cold['first_s']:.2f}",
                     f"{cold['process_s']:.1f} / {warm['process_s']:.1f}",
                     f"{warm['first_s']:.2f}"))
        if theirs:
            rows.append((f"pyPLNmodels {dtype}", f"{theirs['run_s']:.3f}", "1.0",
                         str(theirs["iterations"]), f"{theirs['elbo']:.2f}",
                         f"{theirs['elbo'] - OAKS_OPTIMUM:+.3f}", "-", "-", "-"))
    header = ("fit", "time to optimum s", "speed-up", "iterations", "final ELBO", "- optimum",
              "first call s", "process s cold / warm cache", "first call s, warm cache")
    note = f"data: {cold['label']}; " + "; ".join(notes) if notes else f"data: {cold['label']}"
    return [Table("PLN fit to the optimum vs pyPLNmodels", header, tuple(rows), note)]


# --- LIF ---------------------------------------------------------------------------------


def lif_tables(quick: bool) -> list[Table]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    n = steps = 2_000 if quick else 10_000
    nm = _example("neuron_models")
    currents = np.linspace(15.0, 40.0, n, dtype=np.float32)  # from below rheobase up

    @jax.jit
    def ours(model: Any, current: jax.Array) -> jax.Array:
        ts = jnp.arange(steps, dtype=jnp.float32) * model.dt

        def body(m: Any, t: jax.Array) -> tuple[Any, jax.Array]:
            m = m.step(t, current)
            return m, m.spike.sum()

        return jax.lax.scan(body, model, ts)[1].sum()

    model, current = nm.LIF.create(n), jnp.asarray(currents)
    contenders = {"treeclass lax.scan": lambda: ours(model, current)}
    rounds = 7
    note = f"{n} neurons x {steps} steps; {rounds} interleaved rounds after a compile"
    if _has("brainpy"):
        contenders.update(_brainpy_contenders(n, steps, currents))
    else:
        note += "; brainpy not installed (pip install '.[compare]'): ours only"
    counts = {name: int(run()) for name, run in contenders.items()}  # compile, from rest
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for r in range(rounds):  # one run of each per round, who goes first rotating
        names = list(contenders)
        for name in names[r % len(names):] + names[: r % len(names)]:
            t0 = time.perf_counter()
            jax.block_until_ready(contenders[name]())
            times[name].append(time.perf_counter() - t0)
    base = times["treeclass lax.scan"]
    rows = []
    for name, ts in times.items():
        ratio = statistics.median(t / b for t, b in zip(ts, base, strict=True))
        rows.append((name, f"{statistics.median(ts):.3f}",
                     f"{steps / statistics.median(ts):,.0f}", str(counts[name]), f"{ratio:.2f}"))
    agree = len(set(counts.values())) == 1
    note += f"; spike counts {'agree' if agree else 'DIFFER'}"
    header = ("simulation", "median s", "steps/s", "spikes", "x treeclass (per round)")
    return [Table("LIF population vs brainpy", header, tuple(rows), note)]


def _brainpy_contenders(n: int, steps: int, currents: Any) -> dict[str, Any]:
    import brainpy as bp
    import brainpy.math as bm
    import jax
    import numpy as np

    bm.set_dt(0.1)

    class Driven(bp.DynamicalSystem):
        """A brainpy Lif population under a constant current per neuron."""

        def __init__(self) -> None:
            super().__init__()
            self.lif = bp.dyn.Lif(n)
            self.current = bm.asarray(currents)

        def update(self) -> Any:
            return self.lif(self.current)

    def for_loop() -> Any:
        net = Driven()

        @bm.jit
        def run() -> Any:
            return bm.for_loop(lambda i: (net.step_run(i), net.lif.spike.sum())[1],
                               np.arange(steps)).sum()

        return run

    def runner() -> Any:
        net = Driven()
        r = bp.DSRunner(net, monitors={"n": lambda: net.lif.spike.sum()}, progress_bar=False)

        def run() -> Any:
            net.reset()
            r.run(steps * 0.1)
            return jax.numpy.sum(r.mon["n"])

        return run

    # brainpy promotes implicitly; each run starts from its own fresh state (V = 0).
    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        loop, dsr = for_loop(), runner()
    return {"brainpy bm.jit(for_loop)": lambda: _fresh(loop),
            "brainpy DSRunner.run": lambda: _fresh(dsr)}


def _fresh(run: Any) -> Any:
    import jax

    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        return run()


def run(quick: bool = False) -> list[Table]:
    return [*pln_tables(), *lif_tables(quick)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 x 2,000 LIF")
    parser.add_argument("--only", choices=("pln", "lif"), help="one of the two")
    parser.add_argument("--pln-worker", choices=("float32", "float64"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.pln_worker:
        pln_worker(args.pln_worker)
        return
    tables = pln_tables() if args.only in (None, "pln") else []
    tables += lif_tables(args.quick) if args.only in (None, "lif") else []
    for table in tables:
        print(f"\n{table.text()}")


if __name__ == "__main__":
    main()
