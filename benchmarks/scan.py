"""A `lax.scan` whose carry is the instance: what the container costs to compile, and
per call once compiled.

    def scan_fn(obj):                       # jitted; the same body for every contender
        step = lambda c, _: (jax.tree.map(lambda a: a * 0.5 + 1.0, c), None)
        return lax.scan(step, obj, length=1000)[0]

Compile time is `jax.jit(scan_fn).lower(obj).compile()` (trace, lower to StableHLO,
XLA compile) after `jax.clear_caches()`, else JAX would hand back its cached
executable; the first compile of each contender is a warm-up and is not counted. The
steady call is the compiled function called on the instance, as the dispatch
measurements time it. Every contender compiles to the same XLA program up to the
parameter names, so any difference is the container: tracing and flattening at
compile time, flatten in and unflatten out per call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax

STEPS = 1000


def _step(carry: Any, _: Any) -> tuple[Any, None]:
    return jax.tree.map(lambda a: a * 0.5 + 1.0, carry), None


def scan_fn(obj: Any) -> Any:
    """`STEPS` steps of an affine update of every leaf, carrying `obj`."""
    return jax.lax.scan(_step, obj, length=STEPS)[0]


def compile_bench(obj: Any) -> Callable[[int], float]:
    """`bench(n)`: seconds per compile of `scan_fn` for `obj`, caches cleared before each."""

    def bench(n: int) -> float:
        total = 0.0
        for _ in range(n):
            jax.clear_caches()
            start = time.perf_counter()
            jax.jit(scan_fn).lower(obj).compile()
            total += time.perf_counter() - start
        return total / n

    return bench
