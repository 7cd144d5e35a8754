"""The examples against the tools their users pick: the PLN fit against pyPLNmodels,
the LIF population against brainpy. Each peer is optional (`pip install '.[compare]'`);
one that is missing is left out, with a note in its table.

- PLN, time to the optimum per dtype (`--quick`: float32 only): examples/pln_profiled.py's
  fit (one compiled call, stopped by its tolerance) against `pyPLNmodels.Pln.fit()`
  (its default 400 Rprop iterations), on the oaks data when pyPLNmodels can load them.
  Each dtype runs in a child process (float64 needs `jax_enable_x64`, process-wide), in
  which both sides are timed in interleaved rounds, as every other figure here: the
  medians, their spread and the per-round ratio.
- LIF: `example_models.lif_table(quick, "brainpy")`, against brainpy's `bm.for_loop`
  under `bm.jit` and its `DSRunner`.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
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


ROUNDS = {True: 3, False: 9}
"""Interleaved rounds of the PLN fits (`--quick`, full): each round times one fit of
each side, back to back, the side going first alternating."""


def _pypln_fit(dtype: str) -> tuple[Any, float]:
    """One pyPLNmodels fit on oaks with its defaults (400 Rprop iterations, lr 0.01): a
    new model each time, its construction untimed; the fitted model and the seconds."""
    import torch
    from pyPLNmodels import Pln, load_oaks

    torch.set_default_dtype(torch.float64 if dtype == "float64" else torch.float32)
    oaks = load_oaks()
    pln = Pln(oaks["endog"], offsets=oaks["offsets"])
    if dtype == "float64":  # it casts its data to float32; cast them back
        for name in ("_endog", "_exog", "_offsets"):
            setattr(pln, name, getattr(pln, name).double())
    t0 = time.perf_counter()
    pln.fit(verbose=False)
    return pln, time.perf_counter() - t0


def pln_worker(dtype: str, rounds: int) -> None:
    """In a child process (float64 needs `jax_enable_x64`, process-wide): our fit and
    pyPLNmodels' (when installed) in interleaved rounds; prints one JSON line with every
    round's seconds, so the parent reports medians, spread and per-round ratios."""
    import jax

    if dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    peer = _has("pyPLNmodels") and _has("torch")
    with warnings.catch_warnings():  # pyPLNmodels' pkg_resources import, open CSV files
        warnings.simplefilter("ignore")
        data = _pln_data()
        model = example("pln_profiled").ProfiledPLN.from_data(
            data.Y, data.O, data.X, jnp.dtype(dtype)
        )
        ours = _timing.program(model.fit, MAX_ITER, TOL)
        first_s = ours(1)  # the compile, and the first run
        sides: dict[str, Any] = {"treeclass": lambda: ours(1)}
        if peer:
            sides["pyPLNmodels"] = lambda: _pypln_fit(dtype)[1]
        samples: dict[str, list[float]] = {name: [] for name in sides}
        for r in range(rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name in order:
                samples[name].append(sides[name]())
        fitted = model.fit(MAX_ITER, TOL)
        out: dict[str, Any] = {"label": data.label, "first_s": first_s, "samples": samples}
        out["treeclass"] = {"iterations": int(fitted.iteration), "elbo": float(fitted.elbo)}
        if peer:
            pln, _ = _pypln_fit(dtype)
            iterations = len(pln._elbo_criterion_monitor.elbo_list)
            out["pyPLNmodels"] = {"iterations": iterations, "elbo": float(pln.elbo)}
    print(json.dumps(out))


def _child(dtype: str, rounds: int) -> dict[str, Any]:
    """Runs `pln_worker(dtype, rounds)` in a fresh process."""
    code = f"from benchmarks.compare import pln_worker; pln_worker({dtype!r}, {rounds})"
    result = subprocess.run(  # noqa: S603 - this interpreter, our own code
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        timeout=3600,
    )
    out: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return out


def pln_table(quick: bool) -> Table:
    print("  PLN fit vs pyPLNmodels ...", file=sys.stderr, flush=True)
    rounds = ROUNDS[quick]
    rows = []
    out: dict[str, Any] = {}
    for dtype in ("float32",) if quick else ("float32", "float64"):
        out = _child(dtype, rounds)
        stats = _timing.summarise(out["samples"], baseline="treeclass")
        for name, st in stats.items():
            low, high = st.iqr
            ratio_low, ratio_high = st.ratio_iqr
            fit = out[name]
            on_oaks = "pyPLNmodels" in stats
            gap = f"{fit['elbo'] - OAKS_OPTIMUM:+.3f}" if on_oaks else "-"
            first = f"{out['first_s']:.2f}" if name == "treeclass" else "-"
            rows.append(
                (
                    f"{name} {dtype}",
                    f"{st.median:.3f}",
                    f"{low:.3f}-{high:.3f}",
                    f"{st.ratio:.1f}",
                    f"{ratio_low:.1f}-{ratio_high:.1f}",
                    str(fit["iterations"]),
                    f"{fit['elbo']:.2f}",
                    gap,
                    first,
                )
            )
    header = ("fit", "median s", "IQR s", "x treeclass", "ratio IQR", "iterations")
    header += ("final ELBO", "- optimum", "first call s")
    note = f"data: {out['label']}; {rounds} interleaved rounds in one process per dtype"
    if "pyPLNmodels" not in out:
        note += "; pyPLNmodels not installed (pip install '.[compare]'): ours only"
    return Table(
        f"PLN fit to the optimum vs pyPLNmodels [{rounds} rounds]", header, tuple(rows), note
    )


def run(quick: bool) -> list[Table]:
    """The section: PLN vs pyPLNmodels, LIF vs brainpy (ours only where a peer is missing)."""
    return [pln_table(quick), example_models.lif_table(quick, "brainpy")]
