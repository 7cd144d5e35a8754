"""The PLN fit (examples/pln.py) four ways: compile and run time of the treeclass model
against the PLN tutorial's containers (NamedTuple, dicts, a hand-written pytree class).

Every version compiles the same math into one `lax.scan` call, so this measures what
the container costs where it matters to a user: compile time (trace + lower + XLA
compile, `jax.clear_caches()` before each) and the steady-state time of one compiled
call (`block_until_ready`). The versions run interleaved, round-robin with a rotating
first, and every ratio is to the NamedTuple version *in the same round*; we report the
median and quartiles of those per-round ratios. Target: treeclass / NamedTuple run time
within 1.05 (`TARGET`).

    python -m benchmarks.pln            # n=1000, p=20, d=2, 1000 iterations (~2 min)
    python -m benchmarks.pln --quick    # smaller and fewer rounds (~1 min)
    python -m benchmarks.pln --large    # the data rows repeated 100x, fewer iterations

`run(quick, large)` returns one dict per version (the rows printed).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

TARGET = 1.05  # treeclass run time / NamedTuple run time, same round
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "pln.py"

# (n, p, d, iterations, compile rounds, run rounds); --large repeats the rows 100x.
SIZES = {
    (False, False): (1000, 20, 2, 1000, 5, 15),
    (True, False): (500, 20, 2, 200, 2, 9),
    (False, True): (1000, 20, 2, 100, 3, 7),
    (True, True): (200, 20, 2, 50, 1, 5),
}


def _example() -> ModuleType:
    """examples/ is not a package: load examples/pln.py by path, once."""
    if "pln" in sys.modules:
        return sys.modules["pln"]
    spec = importlib.util.spec_from_file_location("pln", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pln"] = module  # before running it: treeclass resolves annotations there
    spec.loader.exec_module(module)
    return module


def _quartiles(xs: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def run(quick: bool = False, large: bool = False) -> list[dict[str, Any]]:
    """Times the four versions; returns one row per version.

    Each row: `version`, the sizes (`n`, `p`, `d`, `steps`), `first_loss`, `last_loss`,
    `compile_s` and `run_s` (medians) with their quartiles (`*_iqr`), `run_ratio` and
    `compile_ratio` (medians of the per-round ratios to the NamedTuple version) with
    quartiles, and for treeclass `target` and `met`.
    """
    pln = _example()
    n, p, d, steps, compile_rounds, run_rounds = SIZES[(quick, large)]
    data = pln.simulate(n, p, d, seed=0)
    if large:
        data = pln.repeat(data, 100)
    results = pln.compare(data, steps, compile_rounds=compile_rounds, run_rounds=run_rounds)
    base = next(r for r in results if r.name == pln.BASELINE)
    rows = []
    for r in results:
        run_ratios = [a / b for a, b in zip(r.run_s, base.run_s, strict=True)]
        compile_ratios = [a / b for a, b in zip(r.compile_s, base.compile_s, strict=True)]
        row: dict[str, Any] = {
            "benchmark": "pln",
            "version": r.name,
            "n": int(data.Y.shape[0]),
            "p": p,
            "d": d,
            "steps": steps,
            "first_loss": float(r.losses[0]),
            "last_loss": float(r.losses[-1]),
            "compile_s": statistics.median(r.compile_s),
            "compile_s_iqr": _quartiles(r.compile_s),
            "run_s": statistics.median(r.run_s),
            "run_s_iqr": _quartiles(r.run_s),
            "run_ratio": statistics.median(run_ratios),
            "run_ratio_iqr": _quartiles(run_ratios),
            "compile_ratio": statistics.median(compile_ratios),
            "compile_ratio_iqr": _quartiles(compile_ratios),
            "compile_rounds": compile_rounds,
            "run_rounds": run_rounds,
        }
        if r.name == "treeclass":
            row["target"] = TARGET
            row["met"] = row["run_ratio"] <= TARGET
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a fixed-width text table."""
    first = rows[0]
    lines = [
        f"PLN fit, n={first['n']} p={first['p']} d={first['d']}, {first['steps']} iterations; "
        f"{first['compile_rounds']} compile rounds, {first['run_rounds']} run rounds; "
        "ratios: per-round median [quartiles] vs namedtuple",
        f"{'version':<13} {'first loss':>12} {'last loss':>12} {'compile s':>10} "
        f"{'compile ratio':>20} {'run s':>9} {'run ratio':>20}",
    ]
    for r in rows:
        cq, rq = r["compile_ratio_iqr"], r["run_ratio_iqr"]
        lines.append(
            f"{r['version']:<13} {r['first_loss']:>12.2f} {r['last_loss']:>12.2f} "
            f"{r['compile_s']:>10.3f} {r['compile_ratio']:>6.3f} [{cq[0]:.2f}, {cq[1]:.2f}] "
            f"{r['run_s']:>9.4f} {r['run_ratio']:>6.3f} [{rq[0]:.2f}, {rq[1]:.2f}]"
        )
    tree = next(r for r in rows if r["version"] == "treeclass")
    verdict = "met" if tree["met"] else "MISSED"
    lines.append(
        f"target: treeclass run time within {TARGET}x of namedtuple: {verdict} "
        f"({tree['run_ratio']:.3f})"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.pln",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="smaller data, fewer rounds")
    parser.add_argument("--large", action="store_true", help="the data rows repeated 100x")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print(table(run(quick=args.quick, large=args.large)))
    print(f"total runtime: {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
