"""Turns results into the terminal table and `RESULTS.md`, with the machine they came from.

Times are medians over rounds (µs per call) with the interquartile range of the rounds;
"x tuple" (or "x <baseline>") is the median over rounds of (contender / first row)
measured in the same round, with its own interquartile range. Targets apply to
treeclass rows only; `targets.py` evaluates them, `prose.py` writes the paragraphs.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import textwrap
from collections.abc import Sequence
from importlib import metadata

from benchmarks.core import Result, Row
from benchmarks.targets import Check


def wrap(paragraphs: Sequence[str]) -> str:
    """Each paragraph (any whitespace) re-flowed to 88 columns, blank lines between."""
    return "\n\n".join(textwrap.fill(" ".join(p.split()), width=88) for p in paragraphs)


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as `uptime` prints them."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def machine() -> dict[str, str]:
    """Facts about the machine and the software, for the report header."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }
    for dist in (
        "treeclass",
        "jax",
        "jaxlib",
        "numpy",
        "equinox",
        "flax",
        "chex",
        "jax_dataclasses",
        "optax",
    ):
        try:
            info[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            info[dist] = "not installed"
    return info


def verdict(result: Result, row: Row) -> str:
    m = result.measurement
    if row.group != "treeclass":
        return ""
    if m.target is not None:
        return "PASS" if row.stats.ratio <= m.target else "MISS"
    if m.target_us is not None:
        return "PASS" if row.stats.median * 1e6 < m.target_us else "MISS"
    return ""


def _target(result: Result, row: Row) -> str:
    m = result.measurement
    if row.group != "treeclass":
        return ""
    if m.target is not None:
        return f"<= {m.target:.2f}"
    if m.target_us is not None:
        return f"< {m.target_us:.2f} us"
    return ""


def _header(result: Result) -> list[str]:
    head = ["contender", "median us", "IQR us", f"x {result.measurement.base}", "ratio IQR"]
    if any(row.traces is not None for row in result.rows):
        head.append("traces")
    return [*head, "target", "", "note"]


def _cells(result: Result, row: Row, checks: Sequence[Check] = ()) -> list[str]:
    s = row.stats
    lo, hi = s.iqr
    rlo, rhi = s.ratio_iqr
    cells = [
        row.name,
        f"{s.median * 1e6:.3f}",
        f"{lo * 1e6:.3f}-{hi * 1e6:.3f}",
        f"{s.ratio:.2f}",
        f"{rlo:.2f}-{rhi:.2f}",
    ]
    if any(r.traces is not None for r in result.rows):
        cells.append("" if row.traces is None else str(row.traces))
    notes = [row.note] + [
        c.short() for c in checks if c.table == result.measurement.key and c.row == row.name
    ]
    return [*cells, _target(result, row), verdict(result, row), "; ".join(n for n in notes if n)]


def _title(result: Result) -> str:
    return f"{result.measurement.title} [{result.rounds} rounds]"


def text_table(results: Sequence[Result], checks: Sequence[Check] = ()) -> str:
    out = []
    for result in results:
        rows = [_header(result)] + [_cells(result, row, checks) for row in result.rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        out.append(f"\n== {_title(result)}")
        for r in rows:
            out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(out)


def markdown_table(results: Sequence[Result], checks: Sequence[Check] = ()) -> str:
    out = []
    for result in results:
        header = _header(result)
        out.append(f"\n### {_title(result)}\n")
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---|" * len(header))
        for row in result.rows:
            cells = [c.replace("|", "\\|") for c in _cells(result, row, checks)]
            if "MISS" in cells:
                cells[cells.index("MISS")] = "**MISS**"
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)
