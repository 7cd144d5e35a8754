"""Turns results into the terminal table and `RESULTS.md`, with the machine they came from.

Times are medians over rounds (µs per call) with the interquartile range of the rounds;
"x tuple" is the median over rounds of (contender / tuple) measured in the same round,
with its own interquartile range. Targets apply to treeclass rows only.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import textwrap
from collections.abc import Sequence
from importlib import metadata

from benchmarks.core import JIT_BATCH_SCALE, Result, Row

# What the contenders hold and how the baselines are built, stated once for the report.
METHOD_NOTES = """\
- **Class under test**: 8 dynamic fields holding float32 arrays of shape (4,) and 2
  static fields (`n: int`, `name: str`).
- **Baseline (x tuple = 1.00)**: a raw tuple of the 8 arrays. A tuple's treedef has no
  place for statics (an `int` child would be a leaf, a `str` child makes jit fail), so
  the tuple, NamedTuple, dict and chex contenders carry the 8 arrays only and the
  statics live outside them. Construction of the tuple is a Python function
  `make_tuple(a0, ..., a7, n, name)` called with the same 10 keyword arguments as the
  classes, returning the 8-tuple; its replace is a function `replace_tuple(t, a3)`
  building a new tuple with element 3 changed. NamedTuple and dict are built from the 8
  array keywords only.
- **Statements are inlined** into a compiled timing loop (as `timeit` does): no wrapper
  call is added to what is measured.
- **Interleaved rounds**: each round times one batch of every contender back to back
  (who goes first rotates); ratios are taken within a round, so machine drift cancels.
  "x tuple" is the median of the per-round ratios. The garbage collector is off while
  timing and collects every 64 rounds.
- **jit**: every jitted function is compiled and run twice before timing. Calls are not
  blocked one by one (dispatch is what the caller pays), but each batch blocks on its
  last output so no contender leaves work running into another's batch. Same treatment
  for every contender. JAX's CPU async dispatch is left on (the default): on 2 cores the
  XLA worker thread competes with the caller, so per-call times are bimodal (see the
  IQR) while per-round ratios stay stable.
- **100 nodes**: a root holding a tuple of 99 layers with two (4,) arrays each (198
  leaves), against the same structure as nested tuples.
"""


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
    ):
        try:
            info[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            info[dist] = "not installed"
    return info


def verdict(result: Result, row: Row) -> str:
    target = result.measurement.target
    if target is None or row.group != "treeclass":
        return ""
    return "PASS" if row.stats.ratio <= target else "MISS"


def misses(results: Sequence[Result]) -> list[tuple[Result, Row]]:
    return [(r, row) for r in results for row in r.rows if verdict(r, row) == "MISS"]


def _cells(result: Result, row: Row) -> list[str]:
    s = row.stats
    lo, hi = s.iqr
    rlo, rhi = s.ratio_iqr
    target = result.measurement.target
    show_target = target is not None and row.group == "treeclass"
    return [
        row.name,
        f"{s.median * 1e6:.3f}",
        f"{lo * 1e6:.3f}-{hi * 1e6:.3f}",
        f"{s.ratio:.2f}",
        f"{rlo:.2f}-{rhi:.2f}",
        f"<= {target:.2f}" if show_target else "",
        verdict(result, row),
        row.note,
    ]


_HEADER = ["contender", "median us", "IQR us", "x tuple", "ratio IQR", "target", "", "note"]


def text_table(results: Sequence[Result]) -> str:
    out = []
    for result in results:
        rows = [_HEADER] + [_cells(result, row) for row in result.rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADER))]
        out.append(f"\n== {result.measurement.title}")
        for r in rows:
            out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(out)


def markdown_table(results: Sequence[Result]) -> str:
    out = []
    for result in results:
        out.append(f"\n### {result.measurement.title}\n")
        out.append("| " + " | ".join(_HEADER) + " |")
        out.append("|" + "---|" * len(_HEADER))
        for row in result.rows:
            cells = _cells(result, row)
            if cells[6] == "MISS":
                cells[6] = "**MISS**"
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def targets_summary(results: Sequence[Result]) -> str:
    lines = []
    for result in results:
        for row in result.rows:
            v = verdict(result, row)
            if v:
                t = result.measurement.target
                lines.append(
                    f"- {v}: {row.name}, {result.measurement.title}: "
                    f"{row.stats.ratio:.2f} x tuple (target <= {t:.2f})"
                )
    return "\n".join(lines)


def _row(result: Result | None, name: str) -> Row | None:
    if result is None:
        return None
    return next((r for r in result.rows if r.name == name), None)


def wrap(paragraphs: Sequence[str]) -> str:
    """Each paragraph (any whitespace) re-flowed to 88 columns, blank lines between."""
    return "\n\n".join(textwrap.fill(" ".join(p.split()), width=88) for p in paragraphs)


def meaning(results: Sequence[Result]) -> str:
    """The "what this means" paragraphs, with this run's numbers filled in."""
    by_key = {r.measurement.key: r for r in results}

    def ratio(key: str, name: str) -> str:
        row = _row(by_key.get(key), name)
        return f"{row.stats.ratio:.2f}x" if row else "n/a"

    def us(key: str, name: str) -> str:
        row = _row(by_key.get(key), name)
        return f"{row.stats.median * 1e6:.2f} µs" if row else "n/a"

    tc, post, a, b = (
        "treeclass",
        "treeclass + __post_init__",
        "(a) C++ dataclass node",
        "(b) Python callbacks",
    )
    return wrap(
        [
            f"""Inside `jit` a treeclass instance costs about what a raw tuple costs: for 8 fields,
        dispatch is {ratio("dispatch", tc)} and the round trip {ratio("round_trip", tc)} of
        the tuple's. For a 100-node tree, dispatch is {ratio("nested_dispatch", tc)} and the
        round trip {ratio("nested_round_trip", tc)}: each class node costs JAX more than a
        tuple node to flatten (a callback instead of an in-place walk) and, on the way
        out, a Python call to rebuild (see Misses). With leaves this cheap, those per-node
        costs are a visible share of the call.""",
            f"""Flatten reads the tuple cached at construction ({ratio("flatten", tc)} of the
        tuple; the rejected C++ dataclass node (a) {ratio("flatten", a)}, Python callbacks
        without the cache (b) {ratio("flatten", b)}). Unflatten runs no user code and costs
        {ratio("unflatten", tc)}, against {ratio("unflatten", a)} for design (a), which
        rebuilds through `cls(**kw)` and so would run `__post_init__` on tracers.""",
            f"""The price is paid outside `jit`, per Python-level object built: construction
        {us("construct", tc)} ({ratio("construct", tc)}; {us("construct", b)} for the same
        generated `__init__` without static checks and cache, {us("construct", "tuple")} for
        the tuple function), {ratio("construct", post)} with a `__post_init__` hook, and
        `replace` {ratio("replace", tc)} of rebuilding a tuple. These are a few hundred
        nanoseconds per object: they matter in Python loops that build many small
        instances, not in compiled code. Every peer library measured here costs more than
        treeclass on unflatten, construction and `replace`.""",
        ]
    )


def results_markdown(
    results: Sequence[Result],
    info: dict[str, str],
    *,
    mode: str,
    rounds: int,
    batch_s: float,
    runtime_s: float,
    skipped: Sequence[str],
    misses_md: str,
    loop_ns: float,
) -> str:
    machine_lines = "\n".join(f"- **{k}**: {v}" for k, v in info.items())
    skipped_md = "\n".join(f"- {s}" for s in skipped) or "- none"
    command = "python -m benchmarks" + (" --quick" if mode == "quick" else "")
    header = wrap(
        [
            f"""Generated by `{command}` ({mode} mode: {rounds} interleaved rounds, batches of
        ~{batch_s * 1e3:.1f} ms, {JIT_BATCH_SCALE:.0f}x longer for jit calls; the whole run
        took {runtime_s:.0f} s; the timing loop itself costs {loop_ns:.0f} ns per call,
        included in every number). Only ratios measured in the same run mean anything:
        absolute times on this shared machine drift between runs."""
        ]
    )
    return f"""\
# treeclass benchmarks

{header}

## Machine

{machine_lines}

Peers skipped:
{skipped_md}

## Method

{METHOD_NOTES}
## Targets

{targets_summary(results)}

## What this means

{meaning(results)}

## Misses

{misses_md}

## Results

Median µs per call, interquartile range over rounds, and the median per-round ratio to
the raw tuple (with its IQR).
{markdown_table(results)}
"""
