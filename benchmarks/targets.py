"""Every target of issue 5 as a `Check` (a value, the limit, PASS or MISS), taken from
one run's results.

- ratio targets on the treeclass rows of a measurement (`Measurement.target`, the
  median per-round ratio to the baseline) and absolute ones (`Measurement.target_us`);
- treeclass ahead of every peer library on dispatch, round trip, construction and
  replace: the median over rounds of treeclass / peer, measured in the same round,
  below 1;
- a `@tc.jit` method call against `jax.jit(f)(obj)` on the same function (issue 3),
  per-round ratio, and the trace count for 1000 instances (exactly 1);
- the example benchmarks: the PLN fit against the NamedTuple version and the LIF
  population against plain arrays (their modules' own targets).

`Check.key` names the breakdown that explains a miss (`breakdown.EXPLAINERS`).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence
from typing import Any

from benchmarks import _timing
from benchmarks.core import Result

AHEAD_OF_PEERS = ("dispatch", "round_trip", "construct", "replace")
TC_JIT_TARGET = 1.10  # a @tc.jit method call / jax.jit(f)(obj), same function, same round
TC_JIT_ROW, JAX_JIT_ROW = "treeclass: @tc.jit method", "treeclass: jax.jit(f)(obj)"
TRACE_INSTANCES = 1000

_OPS = {"<=": operator.le, "<": operator.lt, "==": operator.eq}


@dataclasses.dataclass(frozen=True)
class Check:
    key: str
    """The breakdown that explains a miss: a measurement key, or `ahead_<key>`,
    `tc_jit_call`, `traces`, `pln`, `neurons`."""
    label: str
    value: float
    op: str
    """"<=", "<" or "==", between `value` and `limit`."""
    limit: float
    unit: str
    """What `value` is: "x tuple", " µs", " traces", ..."""
    spread: tuple[float, float] | None = None
    """The interquartile range of `value` over rounds, where it has one."""
    row: str = ""
    """The treeclass row (or the peer, for `ahead_*`) the check is about."""
    table: str = ""
    """The measurement whose table shows this check beside `row`, where it is not
    that measurement's own target (the `@tc.jit` call against `jax.jit(f)(obj)`)."""

    def short(self) -> str:
        """The check in a few words, for a table's note column."""
        against = self.label.split(" / ")[-1].split(",")[0]
        return f"{self.verdict}: {self.value:.3f}x {against} (target {self.op} {self.limit:.2f})"

    @property
    def passed(self) -> bool:
        return bool(_OPS[self.op](self.value, self.limit))

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else "MISS"

    def text(self) -> str:
        # Three decimals: "1.05x (target <= 1.05)" would hide whether 1.053 missed.
        value = f"{self.value:.0f}" if self.op == "==" else f"{self.value:.3f}"
        limit = f"{self.limit:.0f}" if self.op == "==" else f"{self.limit:.2f}"
        if self.unit == " µs":
            limit += self.unit
        spread = f", IQR {self.spread[0]:.2f}-{self.spread[1]:.2f}" if self.spread else ""
        return f"{self.label}: {value}{self.unit}{spread} (target {self.op} {limit})"


def _measurement_checks(results: Sequence[Result]) -> list[Check]:
    checks = []
    for r in results:
        m = r.measurement
        for row in r.rows:
            if row.group != "treeclass":
                continue
            if m.target is not None:
                checks.append(
                    Check(
                        m.key,
                        f"{row.name}, {m.title}",
                        row.stats.ratio,
                        "<=",
                        m.target,
                        f"x {m.base}",
                        row.stats.ratio_iqr,
                        row.name,
                    )
                )
            if m.target_us is not None:
                lo, hi = row.stats.iqr
                checks.append(
                    Check(
                        m.key,
                        f"{row.name}, {m.title}",
                        row.stats.median * 1e6,
                        "<",
                        m.target_us,
                        " µs",
                        (lo * 1e6, hi * 1e6),
                        row.name,
                    )
                )
    return checks


def ahead_checks(results: Sequence[Result]) -> list[Check]:
    """treeclass / peer, per round, for each peer on each of `AHEAD_OF_PEERS`."""
    checks = []
    for r in results:
        if r.measurement.key not in AHEAD_OF_PEERS:
            continue
        tc = r.row("treeclass")
        if tc is None:
            continue
        for peer in (row for row in r.rows if row.group == "peer"):
            ratio, spread = _timing.ratio_of(tc.stats, peer.stats)
            checks.append(
                Check(
                    f"ahead_{r.measurement.key}",
                    f"treeclass / {peer.name}, {r.measurement.title}",
                    ratio,
                    "<",
                    1.0,
                    "x",
                    spread,
                    peer.name,
                )
            )
    return checks


def _method_checks(results: Sequence[Result], traces: int | None) -> list[Check]:
    checks = []
    r = next((r for r in results if r.measurement.key == "jit_methods"), None)
    tc_row, jax_row = (r.row(TC_JIT_ROW), r.row(JAX_JIT_ROW)) if r else (None, None)
    if tc_row is not None and jax_row is not None:
        ratio, spread = _timing.ratio_of(tc_row.stats, jax_row.stats)
        checks.append(
            Check(
                "tc_jit_call",
                "treeclass, @tc.jit method call / jax.jit(f)(obj), same function",
                ratio,
                "<=",
                TC_JIT_TARGET,
                "x",
                spread,
                TC_JIT_ROW,
                table="jit_methods",
            )
        )
    if traces is not None:
        checks.append(
            Check(
                "traces",
                f"treeclass, traces of a @tc.jit method for {TRACE_INSTANCES} instances",
                traces,
                "==",
                1,
                " trace(s)",
            )
        )
    return checks


def _example_checks(examples: dict[str, list[dict[str, Any]]]) -> list[Check]:
    checks = []
    for row in examples.get("pln", []):
        if row["version"] == "treeclass":
            checks.append(
                Check(
                    "pln",
                    f"treeclass, PLN fit run time ({row['steps']} iterations, n={row['n']})",
                    row["run_ratio"],
                    "<=",
                    row["target"],
                    "x namedtuple",
                    row["run_ratio_iqr"],
                    "treeclass",
                )
            )
    for row in examples.get("neurons", []):
        checks.append(
            Check(
                "neurons",
                f"treeclass, LIF population ({row['neurons']} neurons x {row['steps']} steps)",
                row["ratio"],
                "<=",
                row["target"],
                "x plain arrays",
                row["ratio_iqr"],
                "treeclass",
            )
        )
    return checks


def checks(
    results: Sequence[Result],
    *,
    traces: int | None = None,
    examples: dict[str, list[dict[str, Any]]] | None = None,
) -> list[Check]:
    """Every check this run can make, targets first, then the peer comparisons."""
    return [
        *_measurement_checks(results),
        *_method_checks(results, traces),
        *_example_checks(examples or {}),
        *ahead_checks(results),
    ]
