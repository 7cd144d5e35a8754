"""The speed targets treeclass is held to, checked against the tables of the same run.

Each target names a table (by the start of its title), the contender its ratio is taken
against and the limit. A run prints one more table, "Targets": for each target whose
table it measured, treeclass's ratio to that contender and whether it holds. Where the
contender is not the table's own baseline (the tuple), the ratio is the quotient of the
two rows' median ratios to the baseline, each a median over the same interleaved rounds.

The targets are the library's promise of speed (docs/how-it-works.md): a field read at a
frozen dataclass's speed, JAX's own operations on an instance about as fast as on the tuple
of its arrays, and what builds an instance in Python (unflatten, construction, replace)
near a NamedTuple's, the fastest immutable record with named fields among the contenders
(a class cannot be built as cheaply as a tuple: calling any class with keywords costs about
1.2x the tuple function before its `__init__` does anything; "Why some ratios are what they
are" in RESULTS.md).
They are measured, never asserted in tests (a shared machine's timings are too noisy for
a pass/fail test); the page reports what each run gave.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from benchmarks._table import Table


@dataclasses.dataclass(frozen=True)
class Target:
    table: str
    """The start of the table's title."""
    base: str
    """The contender the ratio is taken against."""
    limit: float
    what: str
    """The baseline in words, for the table."""


TARGETS = (
    Target("field read", "register_dataclass", 1.2, "a frozen dataclass's read"),
    Target("jit dispatch", "tuple", 1.05, "the tuple of the arrays"),
    Target("jit round trip", "tuple", 1.10, "the tuple of the arrays"),
    Target("lax.scan carry: steady call", "tuple", 1.10, "the tuple of the arrays"),
    Target("unflatten", "NamedTuple", 1.2, "a NamedTuple of the arrays"),
    Target("construction", "NamedTuple", 1.4, "a NamedTuple of the arrays"),
    Target("replace", "NamedTuple", 1.1, "NamedTuple._replace"),
)
SUBJECT = "treeclass"


def targets_table(tables: Sequence[Table]) -> Table | None:
    """The "Targets" table for the targets whose tables are in `tables`; None if none is."""
    rows = []
    for target in TARGETS:
        table = next((t for t in tables if t.title.startswith(target.table)), None)
        if table is None:
            continue
        column = next(i for i, h in enumerate(table.header) if h.startswith("x "))
        ratios = {row[0]: float(row[column]) for row in table.rows}
        ratio = ratios[SUBJECT] / ratios[target.base]
        holds = "yes" if ratio <= target.limit else "no"
        limit = f"<= {target.limit:.2f}"
        rows.append((target.table, target.what, limit, f"{ratio:.2f}", holds))
    if not rows:
        return None
    header = ("measurement", f"{SUBJECT} against", "target", "this run", "holds")
    note = "Ratios of the medians above (see benchmarks/_targets.py for how each is taken)."
    return Table("Targets", header, tuple(rows), note)
