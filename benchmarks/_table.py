"""`Table`: what a section returns, one per measurement, printed as text and written
into RESULTS.md as Markdown.

`stats_table()` builds the usual one from an interleaved run (`_timing.interleaved`):
for each contender the median time per call and its interquartile range over the
rounds, then the median per-round ratio to the baseline and that ratio's IQR.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from benchmarks._timing import Stats

UNITS = {"us": 1e6, "ms": 1e3}


@dataclasses.dataclass(frozen=True)
class Table:
    """A titled grid of strings; the first column names the contender."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""
    """One line under the title: sizes, what the baseline is, what was skipped."""

    def text(self) -> str:
        grid = [self.header, *self.rows]
        widths = [max(len(row[i]) for row in grid) for i in range(len(self.header))]
        lines = [f"== {self.title}"] + ([self.note] if self.note else [])
        for row in grid:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        return "\n".join(lines)

    def markdown(self) -> str:
        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

        lines = [f"### {self.title}", ""] + ([self.note, ""] if self.note else [])
        lines += [line(self.header), "|" + "---|" * len(self.header)]
        lines += [line(row) for row in self.rows]
        return "\n".join(lines)


def figure(value: float) -> str:
    """Three decimals below 1000, whole numbers above."""
    return f"{value:.3f}" if value < 1000 else f"{value:.0f}"


def stats_table(
    title: str,
    stats: Mapping[str, Stats],
    *,
    base: str,
    rounds: int,
    unit: str = "us",
    note: str = "",
    notes: Mapping[str, str] | None = None,
    extra: tuple[str, Mapping[str, str]] | None = None,
) -> Table:
    """The table of one interleaved run: rows in the order of `stats` (the baseline
    first, by convention), times in `unit` ("us" or "ms"), "x `base`" the median
    per-round ratio to the baseline.

    `notes` adds a note per contender; `extra` is one more column, `(heading, cells by
    contender)`, placed before the notes (the trace counts of the jitted methods).
    """
    notes = notes or {}
    scale = UNITS[unit]
    header = ["contender", f"median {unit}", f"IQR {unit}", f"x {base}", "ratio IQR"]
    header += [extra[0]] if extra is not None else []
    rows = []
    for name, s in stats.items():
        (lo, hi), (rlo, rhi) = s.iqr, s.ratio_iqr
        row = [name, figure(s.median * scale), f"{figure(lo * scale)}-{figure(hi * scale)}"]
        row += [f"{s.ratio:.2f}", f"{rlo:.2f}-{rhi:.2f}"]
        row += [extra[1].get(name, "")] if extra is not None else []
        rows.append((*row, notes.get(name, "")))
    return Table(f"{title} [{rounds} rounds]", (*header, "note"), tuple(rows), note)
