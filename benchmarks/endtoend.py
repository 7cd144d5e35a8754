"""The example benchmarks, run from `python -m benchmarks`: the PLN fit in its four
container versions (`pln.py`) and the LIF population against plain arrays
(`neurons.py`), each through its module's `run()` and `table()`.

Both time whole compiled programs (milliseconds to seconds), interleaved round by
round, so they answer a different question from the per-call tables: does the
container cost anything where a model spends its time? Each module keeps its own
command line (`python -m benchmarks.pln`, `python -m benchmarks.neurons`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import neurons, pln

NAMES = ("pln", "neurons")


@dataclasses.dataclass(frozen=True)
class Example:
    name: str
    rows: list[dict[str, Any]]
    table: str
    """The module's own text table."""
    seconds: float


def run(
    *,
    quick: bool,
    large: bool,
    only: Sequence[str] = NAMES,
    progress: Callable[[str], None] = print,
) -> list[Example]:
    """Runs the example benchmarks named in `only`, in quick or large mode."""
    jobs: dict[str, tuple[str, Callable[[], list[dict[str, Any]]], Callable[..., str]]] = {
        "pln": (
            f"PLN fit, four containers{' (large)' if large else ''}",
            lambda: pln.run(quick=quick, large=large),
            pln.table,
        ),
        "neurons": (
            "LIF population vs plain arrays",
            lambda: neurons.run(quick=quick),
            neurons.table,
        ),
    }
    out = []
    for name in NAMES:
        if name not in only:
            continue
        title, run_it, table = jobs[name]
        progress(f"  {title} ...")
        start = time.perf_counter()
        rows = run_it()
        out.append(Example(name, rows, table(rows), time.perf_counter() - start))
    return out
