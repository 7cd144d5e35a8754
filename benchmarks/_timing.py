"""Interleaved timing, and the statistics we report.

A short statement such as `obj.replace(a3=x)` is compiled into its own loop, the way
`timeit` does it, so no wrapper function call is added to what is measured:

    def _bench(_n):
        _t0 = _perf_counter()
        for _ in _repeat(None, _n):
            _r = obj.replace(a3=x)
        _sync(_r)                      # only for jit calls: waits for the last result
        return (_perf_counter() - _t0) / _n

Why a compiled loop rather than `fn()` in a loop: a lambda adds a Python frame to every
contender, as costly as the cheapest statements measured here (RESULTS.md, "method
access"), which pulls every ratio towards 1.
Whole compiled programs (milliseconds and up) are timed by `program()`, where a frame
is noise.

Why interleave: on a shared machine the speed drifts between seconds. Each round times
one batch of every contender back to back (rotating who goes first), so the ratio to
the baseline *in the same round* cancels the drift; we report the median of those
per-round ratios and the quartiles of the per-call times.

The garbage collector is off while timing (as in `timeit`) and collects every 64
rounds, between batches, so a collection triggered by one contender's allocations is
not charged to whichever contender happens to be running. (The statements create no
reference cycles; reference counting frees everything they allocate.)
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

Bench = Callable[[int], float]
"""`bench(n)`: runs what it times `n` times; seconds per call."""

QUICK = (61, 0.0003)
"""`(rounds, seconds per batch)` of `--quick`."""
FULL = (1001, 0.0005)
"""`(rounds, seconds per batch)` of a full run. Short batches keep most samples clear
of the scheduler's time slices on a shared machine; many rounds and the median do the
rest."""


def mode(quick: bool) -> tuple[int, float]:
    """`QUICK` or `FULL`: the rounds and batch length a section uses."""
    return QUICK if quick else FULL


_TEMPLATE = """\
def _bench(_n):
    _t0 = _perf_counter()
    for _ in _repeat(None, _n):
        _r = {stmt}
{sync}    return (_perf_counter() - _t0) / _n
"""


def compile_loop(
    stmt: str, namespace: Mapping[str, Any], sync: Callable[[Any], Any] | None = None
) -> Bench:
    """The bench that runs `stmt` in `namespace`.

    `sync`, if given, is called once on the last result inside the timed region (used
    to wait for the last jit output, so work queued by the batch is not left running
    into the next contender's batch).
    """
    ns = dict(namespace)
    ns.update(_perf_counter=time.perf_counter, _repeat=itertools.repeat, _sync=sync)
    source = _TEMPLATE.format(stmt=stmt, sync="    _sync(_r)\n" if sync is not None else "")
    exec(compile(source, f"<bench {stmt}>", "exec"), ns)  # noqa: S102 - our own template
    return ns["_bench"]  # type: ignore[no-any-return]


def program(fn: Callable[..., Any], *args: Any) -> Bench:
    """The bench that calls `fn(*args)` (a compiled program) and blocks on the last
    result."""

    def bench(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            out = fn(*args)
        jax.block_until_ready(out)
        return (time.perf_counter() - start) / n

    return bench


def calibrate(bench: Bench, batch_s: float) -> int:
    """The number of calls that takes about `batch_s` seconds (at least 1).

    Doubles the batch until it takes a quarter of the target, then scales to the target
    from the fastest of three batches of that size (the least disturbed estimate).
    """
    n = 1
    while True:
        per_call = min(bench(n) for _ in range(3))
        if per_call * n >= batch_s / 4 or n >= 1 << 22:
            return max(1, round(batch_s / per_call))
        n *= 2


def loop_overhead() -> float:
    """Seconds per iteration of the timing loop itself (statement `None`)."""
    bench = compile_loop("None", {})
    return min(bench(100_000) for _ in range(5))


@dataclasses.dataclass(frozen=True)
class Stats:
    """Per-call seconds for one contender, and its per-round ratio to the baseline."""

    samples: tuple[float, ...]
    ratios: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def iqr(self) -> tuple[float, float]:
        return quartiles(self.samples)

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def ratio_iqr(self) -> tuple[float, float]:
        return quartiles(self.ratios)


def quartiles(xs: Sequence[float]) -> tuple[float, float]:
    """The first and third quartiles (both `xs[0]` for one sample)."""
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def summarise(samples: Mapping[str, Sequence[float]], baseline: str) -> dict[str, Stats]:
    """Each contender's samples with its ratio to `baseline`, round by round (sample
    `i` of every contender was taken in round `i`)."""
    base = samples[baseline]
    return {
        name: Stats(tuple(s), tuple(x / b for x, b in zip(s, base, strict=True)))
        for name, s in samples.items()
    }


def interleaved(
    benches: Mapping[str, Bench], *, baseline: str, rounds: int, batch_s: float
) -> dict[str, Stats]:
    """Times every bench for `rounds` rounds, one batch of about `batch_s` seconds each
    per round (`batch_s=0`: one call), round-robin; ratios are to `baseline`."""
    names = list(benches)
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        sizes = {name: calibrate(benches[name], batch_s) for name in names}
        samples: dict[str, list[float]] = {name: [] for name in names}
        for r in range(rounds):
            k = r % len(names)
            for name in names[k:] + names[:k]:  # rotate who goes first
                samples[name].append(benches[name](sizes[name]))
            if r % 64 == 63:
                gc.collect()
    finally:
        if gc_was_enabled:
            gc.enable()
    return summarise(samples, baseline)
