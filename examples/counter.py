"""The JAX tutorial's `Counter` (a method under `jax.jit(static_argnums=(0,))`) beside a
treeclass `Counter` with a `@tc.jit` method.

The tutorial's code, as it appears there:

    class Counter:
        count = 0

        @functools.partial(jax.jit, static_argnums=(0,))
        def inc(self):
            self.count += 1

`self` is a static argument: JAX hashes it (by identity) and keys its compile cache on
it. What follows, measured by this script:

- the count is lost: `self.count += 1` is a Python side effect, so it runs while JAX
  traces, once; later calls replay the compiled (empty) computation and count nothing
  (the tutorial prints 0, 1, 1);
- every instance compiles again: a new `self` is a new cache key, so N counters cost N
  traces and N compiles;
- the compile cache holds each `self` it has seen, so no counter is ever freed.

The treeclass `Counter` keeps `count` in a dynamic field and `inc` returns a new
instance (`self.replace(count=self.count + 1)`). `self` is traced: every call counts,
all instances of the same structure share one compile, and the counter steps inside
`lax.scan` like any other carry. Assigning to `self.count` inside a `@tc.jit` method
raises `FrozenInstanceError` instead of being silently lost.

    python examples/counter.py             # 200 counters of each kind
    python examples/counter.py --quick     # 20, used by the tests
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import sys
import time
import weakref
from typing import TypedDict

import jax
import jax.numpy as jnp

import treeclass as tc

# --- the tutorial's version ------------------------------------------------------------

tutorial_traces = 0  # incremented while JAX traces `inc`: counts compiles


class TutorialCounter:
    """The tutorial's `Counter`, unchanged but for a trace counter."""

    count = 0

    @functools.partial(jax.jit, static_argnums=(0,))
    def inc(self) -> None:
        global tutorial_traces  # side effects run at trace time only
        tutorial_traces += 1
        self.count += 1


# --- the treeclass version -------------------------------------------------------------


class Counter(tc.TreeClass):
    """A counter whose count is a dynamic field: traced, never baked in."""

    count: jax.Array = tc.field(default_factory=lambda: jnp.zeros((), jnp.int32))

    @tc.jit
    def inc(self) -> Counter:
        return self.replace(count=self.count + 1)


class MutatingCounter(tc.TreeClass):
    """The tutorial's mistake made on a treeclass: it raises instead of losing counts."""

    count: jax.Array

    @tc.jit
    def inc(self) -> None:
        self.count += 1  # type: ignore[misc]  # the mistake shown: checkers flag it too


@jax.jit
def count_in_scan(counter: Counter, steps_like: jax.Array) -> tuple[Counter, jax.Array]:
    """Steps `counter` once per entry of `steps_like` in a `lax.scan`; returns the final
    counter and the count before each step."""

    def body(c: Counter, _: jax.Array) -> tuple[Counter, jax.Array]:
        return c.inc(), c.count

    return jax.lax.scan(body, counter, steps_like)


# --- the measurements ------------------------------------------------------------------


class TutorialResults(TypedDict):
    seen: list[int]  # counter 0's count after 0, 1, 2, 3 calls
    counts: list[int]  # every counter's final count
    compiles: int
    seconds: float
    kept_alive: bool  # whether the jit cache still holds a dropped counter


class TreeclassResults(TypedDict):
    seen: list[int]
    counts: list[int]
    compiles: int
    seconds: float
    scan_final: int
    scan_history: jax.Array  # the count before each scan step


def tutorial_results(instances: int, calls: int = 3) -> TutorialResults:
    """`instances` tutorial counters, each called `calls` times: the first one's count
    after each call, every final count, compiles, seconds, and whether the jit cache
    let go of a dropped counter."""
    global tutorial_traces
    tutorial_traces = 0
    counters = [TutorialCounter() for _ in range(instances)]
    seen = [counters[0].count]
    start = time.perf_counter()
    for i, c in enumerate(counters):
        for _ in range(calls):
            c.inc()
            if i == 0:
                seen.append(c.count)
    jax.effects_barrier()
    seconds = time.perf_counter() - start
    counts = [c.count for c in counters]

    probe = weakref.ref(counters[0])
    del counters, c
    gc.collect()
    return {"seen": seen, "counts": counts, "compiles": tutorial_traces, "seconds": seconds,
            "kept_alive": probe() is not None}


def treeclass_results(instances: int, calls: int = 3, scan_steps: int = 100) -> TreeclassResults:
    """The same with the treeclass `Counter` (counter `i` starting at `i`), from an
    empty compile cache; plus a counter stepped in `lax.scan`."""
    Counter.inc.clear_cache()
    traces_before = Counter.inc.trace_log.count
    counters = [Counter(count=jnp.asarray(i, jnp.int32)) for i in range(instances)]
    seen = [int(counters[0].count)]
    start = time.perf_counter()
    for i in range(instances):
        for _ in range(calls):
            counters[i] = counters[i].inc()
            if i == 0:
                seen.append(int(counters[0].count))
    jax.block_until_ready(counters)
    seconds = time.perf_counter() - start
    counts = [int(c.count) for c in counters]
    compiles = Counter.inc.trace_log.count - traces_before

    final, history = count_in_scan(Counter(), jnp.zeros(scan_steps))
    return {"seen": seen, "counts": counts, "compiles": compiles, "seconds": seconds,
            "scan_final": int(final.count), "scan_history": history}


def mutation_error() -> str:
    """The first line of the error a mutating `@tc.jit` method raises."""
    try:
        MutatingCounter(count=jnp.zeros((), jnp.int32)).inc()
    except dataclasses.FrozenInstanceError as error:
        return f"{type(error).__name__}: {str(error).splitlines()[0]}"
    msg = "MutatingCounter.inc did not raise"
    raise AssertionError(msg)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="The tutorial's jax.jit(static_argnums=(0,)) Counter vs a treeclass Counter."
    )
    parser.add_argument("--instances", type=int, default=None, help="counters of each kind (200)")
    parser.add_argument("--quick", action="store_true", help="a small run for tests: 20 counters")
    args = parser.parse_args(argv)
    if args.instances is None:
        args.instances = 20 if args.quick else 200
    if args.instances < 1:
        parser.error("--instances must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    n = args.instances
    tut = tutorial_results(n)
    ours = treeclass_results(n)

    print(f"tutorial:  counter 0 after 0..3 calls: {tut['seen']} (the increments are lost)")
    print(f"tutorial:  {n} counters x 3 calls: {tut['compiles']} compiles, "
          f"{tut['seconds']:.2f} s; final counts all 1: {set(tut['counts']) == {1}}")
    print(f"tutorial:  a dropped counter stays alive in the jit cache: {tut['kept_alive']}")
    print(f"treeclass: counter 0 after 0..3 calls: {ours['seen']}")
    print(f"treeclass: {n} counters x 3 calls: {ours['compiles']} compile, "
          f"{ours['seconds']:.2f} s; final counts i + 3: "
          f"{ours['counts'] == [i + 3 for i in range(n)]}")
    history = ours["scan_history"]
    print(f"scan:      {history.shape[0]} steps in lax.scan: final count {ours['scan_final']}, "
          f"history {history[:3].tolist()} ... {history[-1]}")
    print(f"mutation:  {mutation_error()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
