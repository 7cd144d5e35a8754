"""The examples against the tools their users pick: the PLN fit against pyPLNmodels,
the LIF population against brainpy. Each peer is optional (`pip install '.[compare]'`);
one that is missing is left out, with a note in its table.

- PLN, time to the optimum per dtype (`--quick`: float32 only): examples/pln_profiled.py's
  fit (one compiled call, stopped by its tolerance) against `pyPLNmodels.Pln.fit()`
  (its default 400 Rprop iterations), on the oaks data when pyPLNmodels can load them.
  Each dtype runs in a child process (float64 needs `jax_enable_x64`, process-wide),
  twice with one fresh persistent compilation cache: the second shows what the cache
  does to the end-to-end time.
- LIF: `example_models.lif_table(quick, "brainpy")`, against brainpy's `bm.for_loop`
  under `bm.jit` and its `DSRunner`.
"""

from __future__ import annotations

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

from benchmarks import _timing, example_models
from benchmarks._examples import example
from benchmarks._table import Table

ROOT = Path(__file__).resolve().parent.parent
OAKS_OPTIMUM = -31456.36  # float64, pyPLNmodels' optimum on oaks (examples/pln_profiled.py)
TOL, MAX_ITER = 5e-7, 5000


def _has(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _pln_data() -> Any:
    pln = example("pln")
    if _has("pyPLNmodels"):
        with warnings.catch_warnings():  # its pkg_resources import and open CSV files
            warnings.simplefilter("ignore")
            return pln.load_oaks_data()
    return pln.simulate(116, 114, 1)


def pln_worker(dtype: str) -> None:
    """In a child process: fit, print one JSON line."""
    import jax

    if dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    data = _pln_data()
    model = example("pln_profiled").ProfiledPLN.from_data(data.Y, data.O, data.X, jnp.dtype(dtype))
    fit = _timing.program(model.fit, MAX_ITER, TOL)
    times = [fit(1) for _ in range(4)]  # one call each; the first compiles
    fitted = model.fit(MAX_ITER, TOL)
    out = {"first_s": times[0], "run_s": statistics.median(times[1:]), "label": data.label}
    print(json.dumps({**out, "iterations": int(fitted.iteration), "elbo": float(fitted.elbo)}))


def _child(dtype: str, cache: str) -> dict[str, Any]:
    """Runs `pln_worker(dtype)` in a fresh process with the compilation cache `cache`."""
    env = {
        **os.environ,
        "JAX_COMPILATION_CACHE_DIR": cache,
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }
    code = f"from benchmarks.compare import pln_worker; pln_worker({dtype!r})"
    t0 = time.perf_counter()
    result = subprocess.run(  # noqa: S603 - this interpreter, our own code
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=True,
        timeout=1200,
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
    iterations = len(pln._elbo_criterion_monitor.elbo_list)
    return {"run_s": statistics.median(times), "iterations": iterations, "elbo": float(pln.elbo)}


def _row(
    name: str, fit: dict[str, Any], speed_up: str, on_oaks: bool, *cache: str
) -> tuple[str, ...]:
    """One fit's cells; `cache`: the cells of the cold and warm processes (ours only)."""
    gap = f"{fit['elbo'] - OAKS_OPTIMUM:+.3f}" if on_oaks else "-"
    cells = (f"{fit['run_s']:.3f}", speed_up, str(fit["iterations"]), f"{fit['elbo']:.2f}", gap)
    return (name, *cells, *(cache or ("-", "-", "-")))


def pln_table(quick: bool) -> Table:
    print("  PLN fit vs pyPLNmodels ...", file=sys.stderr, flush=True)
    peer = _has("pyPLNmodels") and _has("torch")
    rows = []
    for dtype in ("float32",) if quick else ("float32", "float64"):
        with tempfile.TemporaryDirectory() as cache:
            cold, warm = _child(dtype, cache), _child(dtype, cache)
        processes = f"{cold['process_s']:.1f} / {warm['process_s']:.1f}"
        cells = (f"{cold['first_s']:.2f}", processes, f"{warm['first_s']:.2f}")
        theirs = _pypln(dtype) if peer else None
        speed_up = f"{theirs['run_s'] / cold['run_s']:.1f}" if theirs else "-"
        rows.append(_row(f"treeclass {dtype}", cold, speed_up, peer, *cells))
        if theirs:
            rows.append(_row(f"pyPLNmodels {dtype}", theirs, "1.0", True))
    header = ("fit", "time to optimum s", "speed-up", "iterations", "final ELBO", "- optimum")
    header += ("first call s", "process s cold / warm cache", "first call s, warm cache")
    note = f"data: {cold['label']}"
    if not peer:
        note += "; pyPLNmodels not installed (pip install '.[compare]'): ours only"
    return Table("PLN fit to the optimum vs pyPLNmodels", header, tuple(rows), note)


def run(quick: bool) -> list[Table]:
    """The section: PLN vs pyPLNmodels, LIF vs brainpy (ours only where a peer is missing)."""
    return [pln_table(quick), example_models.lif_table(quick, "brainpy")]
