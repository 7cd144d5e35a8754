"""The example benchmarks as a section: the PLN fit in its four container versions
(`pln.py`) and the LIF population against plain arrays (`neurons.py`), each through its
module's `run()`, one table each.

Both time whole compiled programs (milliseconds to seconds), interleaved round by
round, so they answer a different question from the per-call tables: does the
container cost anything where a model spends its time? Each module keeps its own
command line (`python -m benchmarks.pln`, `python -m benchmarks.neurons`).
"""

from __future__ import annotations

import sys

from benchmarks import neurons, pln
from benchmarks._table import Table


def _iqr(pair: tuple[float, float], digits: int = 2) -> str:
    return f"{pair[0]:.{digits}f}-{pair[1]:.{digits}f}"


def pln_table(quick: bool) -> Table:
    rows = pln.run(quick=quick)
    first = rows[0]
    return Table(
        f"PLN fit, n={first['n']} p={first['p']} d={first['d']}, {first['steps']} iterations "
        f"[{first['compile_rounds']} compile rounds, {first['run_rounds']} run rounds]",
        ("version", "last loss", "compile s", "x namedtuple", "ratio IQR", "run s",
         "x namedtuple", "ratio IQR"),
        tuple(
            (
                r["version"],
                f"{r['last_loss']:.2f}",
                f"{r['compile_s']:.3f}",
                f"{r['compile_ratio']:.3f}",
                _iqr(r["compile_ratio_iqr"]),
                f"{r['run_s']:.4f}",
                f"{r['run_ratio']:.3f}",
                _iqr(r["run_ratio_iqr"]),
            )
            for r in rows
        ),
    )


def neurons_table(quick: bool) -> Table:
    (r,) = neurons.run(quick=quick)
    return Table(
        f"LIF population in lax.scan, {r['neurons']} neurons x {r['steps']} steps "
        f"[{r['rounds']} rounds]",
        ("version", "median s", "IQR s", "x plain", "ratio IQR", "steps/s"),
        (
            ("plain arrays", f"{r['plain_s']:.4f}", _iqr(r["plain_s_iqr"], 4), "1.000", "",
             f"{r['steps_per_s']['plain']:.0f}"),
            ("treeclass", f"{r['treeclass_s']:.4f}", _iqr(r["treeclass_s_iqr"], 4),
             f"{r['ratio']:.3f}", _iqr(r["ratio_iqr"], 3),
             f"{r['steps_per_s']['treeclass']:.0f}"),
        ),
        note=f"{r['spikes']} spikes in both versions (checked equal before timing)",
    )


def run(quick: bool) -> list[Table]:
    """The PLN fit and the LIF population, in their quick modes under `--quick`."""
    print("  PLN fit, four containers ...", file=sys.stderr, flush=True)
    tables = [pln_table(quick)]
    print("  LIF population vs plain arrays ...", file=sys.stderr, flush=True)
    return [*tables, neurons_table(quick)]
