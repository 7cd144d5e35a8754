"""The tools of the breakdowns: a "ladder" of statements timed in one interleaved run
(each rung usually adds one piece to the previous one), and the functions one call
enters, recorded with `sys.setprofile`.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

import jax

from benchmarks import _timing
from benchmarks.core import JIT_BATCH_SCALE
from benchmarks.report import wrap


def _entered(fn: Callable[[], Any]) -> list[tuple[bool, str]]:
    """What one call of `fn` enters, in order: (is a Python frame, name)."""
    seen: list[tuple[bool, str]] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            seen.append((True, frame.f_code.co_qualname))
        elif event == "c_call":
            seen.append((False, f"{getattr(arg, '__qualname__', repr(arg))}()"))

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return [s for s in seen[1:] if s[1] != "setprofile()"]  # seen[0] is fn itself


def python_calls(fn: Callable[[], Any], limit: int = 24) -> str:
    """The functions one call of `fn` enters, in order: Python frames by name, and
    C functions called from Python code as `name()`; the first `limit` of them, then a
    count of the rest; "no function" if none."""
    entered = _entered(fn)
    shown = " → ".join(f"`{name}`" for _, name in entered[:limit]) or "no function"
    if len(entered) > limit:
        frames = sum(is_frame for is_frame, _ in entered)
        shown += f" → ... ({len(entered)} calls in all, {frames} of them Python frames)"
    return shown


def python_frames(fn: Callable[[], Any]) -> int:
    """How many Python frames one call of `fn` opens (not counting `fn`'s own)."""
    return sum(is_frame for is_frame, _ in _entered(fn))


@dataclasses.dataclass(frozen=True)
class Rung:
    label: str
    stmt: str
    namespace: dict[str, Any]
    sync: Callable[[Any], Any] | None = None
    """Given for jit calls, which then also get `JIT_BATCH_SCALE` times longer batches."""


@dataclasses.dataclass(frozen=True)
class Ladder:
    """Interleaved timings of some rungs, by label."""

    labels: tuple[str, ...]
    stats: dict[str, _timing.Stats]

    def ns(self, label: str) -> float:
        return self.stats[label].median * 1e9

    def ratio(self, label: str) -> float:
        return self.stats[label].ratio

    def delta_ns(self, a: str, b: str) -> float:
        """Median over rounds of (a - b): what a adds to b, with drift cancelled."""
        pairs = zip(self.stats[a].samples, self.stats[b].samples, strict=True)
        return statistics.median(x - y for x, y in pairs) * 1e9

    def table(self, *, ratios: bool = True) -> str:
        if not ratios:
            rows = [f"| {k} | {self.ns(k):.0f} |" for k in self.labels]
            return "\n".join(["| piece | ns per call |", "|---|---|", *rows])
        rows = [f"| {k} | {self.ns(k):.0f} | {self.ratio(k):.2f} |" for k in self.labels]
        return "\n".join(["| piece | ns per call | x first row |", "|---|---|---|", *rows])


def ladder(rungs: Sequence[Rung], rounds: int, batch_s: float) -> Ladder:
    """Times the rungs interleaved, with the first one as the ratio baseline."""
    benches = {r.label: _timing.compile_loop(r.stmt, r.namespace, r.sync) for r in rungs}
    batches = {r.label: batch_s * (JIT_BATCH_SCALE if r.sync else 1.0) for r in rungs}
    stats = _timing.interleaved(benches, baseline=rungs[0].label, rounds=rounds, batch_s=batches)
    return Ladder(tuple(benches), stats)


def section(
    title: str, intro: str, ladder: Ladder, why: Sequence[str], *, ratios: bool = True
) -> str:
    head = wrap([f"**{title}.** {intro}"])
    return f"{head}\n\n{ladder.table(ratios=ratios)}\n\n{wrap(why)}"


def jit_ladder(
    cases: Sequence[tuple[str, Any]], fun: Callable[[Any], Any], rounds: int, batch_s: float
) -> Ladder:
    """For each case: the jit call, flattening the input, unflattening the output."""
    calls, flattens, unflattens = [], [], []
    for label, obj in cases:
        f = jax.jit(fun)
        for _ in range(2):
            jax.block_until_ready(f(obj))
        calls.append(
            Rung(f"{label}: jit call", "f(obj)", {"f": f, "obj": obj}, jax.block_until_ready)
        )
        flattens.append(
            Rung(
                f"{label}: tree_flatten",
                "flatten(obj)",
                {"flatten": jax.tree_util.tree_flatten, "obj": obj},
            )
        )
        leaves, treedef = jax.tree_util.tree_flatten(fun(obj))
        unflattens.append(
            Rung(
                f"{label}: unflatten of the output",
                "treedef.unflatten(leaves)",
                {"treedef": treedef, "leaves": leaves},
            )
        )
    return ladder([*calls, *flattens, *unflattens], rounds, batch_s)


def jit_why(ladder: Ladder, base: str, other: str) -> str:
    def delta(piece: str) -> float:
        return ladder.delta_ns(f"{other}: {piece}", f"{base}: {piece}")

    return f"""Per call, {other} minus {base} (median of per-round differences): jit call
    {delta("jit call"):+.0f} ns, of which flattening the input accounts for
    {delta("tree_flatten"):+.0f} ns and unflattening the output for
    {delta("unflatten of the output"):+.0f} ns; the remainder is JAX comparing the new
    treedef with the cached one (an `==` on each custom node's aux data) and noise,
    which for calls this long is of the same order."""
