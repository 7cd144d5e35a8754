"""The per-call measurements: each is one statement (or, for compile times, one
compile; see `_name(contender)` below), the same for every contender, timed in one
interleaved run with the raw tuple as the per-round baseline. The sections `pytree`,
`jit`, `python` and `scan_carry` run them on the 8-field class, `nested_tree` some of
them on the 100-node tree (contenders.py).

Jit calls are timed without blocking on each call (what dispatch costs the caller),
but each batch blocks on its last output, so no contender leaves queued work running
into the next one's batch. Every contender is treated the same way. Each jitted
function is compiled and run twice before timing.

The scan is `lax.scan(step, obj, length=1000)` with the same body for every contender,
`jax.tree.map(lambda a: a * 0.5 + 1.0, carry)`, so every contender compiles to the same
XLA program up to the parameter names and any difference is the container: tracing and
flattening at compile time, flatten in and unflatten out per call. Compile time is
`jax.jit(scan_fn).lower(obj).compile()` after `jax.clear_caches()` (else JAX hands back
its cached executable); the first compile of each contender is a warm-up.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from benchmarks import _timing, contenders, peers
from benchmarks._table import Table, stats_table
from benchmarks._timing import Bench
from benchmarks.contenders import Contender

Setup = tuple[str, dict[str, Any], Callable[[Any], Any] | None]
"""`(statement, namespace, sync)` for `_timing.compile_loop`."""

LIST_LENGTH = 1000
STEPS = 1000
READ_BASE = "register_dataclass"
"""A field read is compared with a frozen dataclass's (the first row of its table)."""
JIT_BATCH = 8.0
"""A jit call costs far more than a pytree operation (RESULTS.md, "jit dispatch"): its
batches are 8 times longer, so the one block at the end of a batch is amortised over
enough calls."""


@dataclasses.dataclass(frozen=True)
class Measurement:
    title: str
    batch_scale: float = 1.0
    """The share of the mode's batch length (0: one call a batch, for compile times)."""
    rounds_scale: float = 1.0
    """The share of the mode's rounds (at least `min_rounds`): fewer for statements
    that take milliseconds."""
    min_rounds: int = 11
    base: str = "tuple"
    """What the first row, the ratio baseline, is (the table's "x ..." column)."""


def measure(
    m: Measurement,
    benches: Mapping[str, Bench | Setup],
    *,
    quick: bool,
    notes: Mapping[str, str] | None = None,
    extra: tuple[str, Mapping[str, str]] | None = None,
) -> Table:
    """Times `benches` interleaved, the first one the baseline: the table of `m`."""
    print(f"  {m.title} ...", file=sys.stderr, flush=True)
    mode_rounds, batch_s = _timing.mode(quick)
    rounds = max(m.min_rounds, round(mode_rounds * m.rounds_scale))
    ready = {k: b if callable(b) else _timing.compile_loop(*b) for k, b in benches.items()}
    stats = _timing.interleaved(
        ready, baseline=next(iter(ready)), rounds=rounds, batch_s=batch_s * m.batch_scale
    )
    return stats_table(m.title, stats, base=m.base, rounds=rounds, notes=notes, extra=extra)


# --- what each measurement times, given a contender --------------------------------


def _flatten(c: Contender) -> Setup:
    return "tree_flatten(obj)", {"tree_flatten": jax.tree.flatten, "obj": c.instance()}, None


def _unflatten(c: Contender) -> Setup:
    leaves, treedef = jax.tree.flatten(c.instance())
    return "treedef.unflatten(leaves)", {"treedef": treedef, "leaves": leaves}, None


def _flatten_with_path(c: Contender) -> Setup:
    ns = {"flatten_with_path": jax.tree_util.tree_flatten_with_path, "obj": c.instance()}
    return "flatten_with_path(obj)", ns, None


def _tree_map(c: Contender) -> Setup:
    ns = {"tree_map": jax.tree.map, "ident": lambda x: x, "obj": c.instance()}
    return "tree_map(ident, obj)", ns, None


def _tree_map_list(c: Contender) -> Setup:
    objs = [c.instance() for _ in range(LIST_LENGTH)]  # distinct instances, shared arrays
    ns = {"tree_map": jax.tree.map, "ident": lambda x: x, "objs": objs}
    return "tree_map(ident, objs)", ns, None


def _jitted(fun: Callable[[Any], Any], c: Contender) -> Setup:
    obj = c.instance()
    f = jax.jit(fun)  # one jit object per contender: separate caches
    for _ in range(2):
        jax.block_until_ready(f(obj))
    return "f(obj)", {"f": f, "obj": obj}, jax.block_until_ready


def _dispatch(c: Contender) -> Setup:
    return _jitted(lambda obj: jax.tree.leaves(obj)[0], c)


def _round_trip(c: Contender) -> Setup:
    return _jitted(lambda obj: obj, c)


def _construct(c: Contender) -> Setup:
    return "new(**kw)", {"new": c.new, "kw": c.kwargs}, None


def _replace(c: Contender) -> Setup:
    ns = {**contenders.REPLACE_NAMESPACE, "obj": c.instance(), "x": jnp.ones((4,), jnp.float32)}
    return c.replace, ns, None


def _read(c: Contender) -> Setup:
    # Each contender's statement is compiled into its own timing loop: its own call site, so
    # CPython specialises the read for that one class (a shared site would de-specialise all).
    stmt = {"tuple": "obj[0]", "dict": "obj['a0']"}.get(c.name, "obj.a0")
    return stmt, {"obj": c.instance()}, None


def _scan_step(carry: Any, _: Any) -> tuple[Any, None]:
    return jax.tree.map(lambda a: a * 0.5 + 1.0, carry), None


def scan_fn(obj: Any) -> Any:
    """`STEPS` steps of an affine update of every leaf, carrying `obj`."""
    return jax.lax.scan(_scan_step, obj, length=STEPS)[0]


def _scan_compile(c: Contender) -> Bench:
    obj = c.instance()

    def bench(n: int) -> float:
        total = 0.0
        for _ in range(n):
            jax.clear_caches()
            start = time.perf_counter()
            jax.jit(scan_fn).lower(obj).compile()
            total += time.perf_counter() - start
        return total / n

    return bench


def _scan_run(c: Contender) -> Setup:
    return _jitted(scan_fn, c)


MEASUREMENTS: dict[str, tuple[Measurement, Callable[[Contender], Bench | Setup]]] = {
    "flatten": (Measurement("flatten"), _flatten),
    "unflatten": (Measurement("unflatten"), _unflatten),
    "flatten_with_path": (Measurement("flatten_with_path"), _flatten_with_path),
    "tree_map": (Measurement("jax.tree.map(lambda x: x, obj)"), _tree_map),
    "tree_map_list": (
        Measurement(
            f"jax.tree.map(lambda x: x, objs), a list of {LIST_LENGTH} instances",
            rounds_scale=0.05,
        ),
        _tree_map_list,
    ),
    "dispatch": (Measurement("jit dispatch (returns one leaf)", batch_scale=JIT_BATCH), _dispatch),
    "round_trip": (
        Measurement("jit round trip (returns the instance)", batch_scale=JIT_BATCH),
        _round_trip,
    ),
    "construct": (Measurement("construction (10 keyword args)"), _construct),
    "replace": (Measurement("replace one dynamic field"), _replace),
    "read": (
        Measurement("field read: obj.a0 (each class read from its own call site)", base=READ_BASE),
        _read,
    ),
    "scan_compile": (
        Measurement(
            f"lax.scan carry: compile ({STEPS} steps; trace + lower + XLA compile)",
            batch_scale=0.0,  # one compile a batch
            rounds_scale=0.02,
            min_rounds=5,
        ),
        _scan_compile,
    ),
    "scan_run": (
        Measurement(
            f"lax.scan carry: steady call ({STEPS} steps, compiled)",
            batch_scale=JIT_BATCH,
            rounds_scale=0.2,
        ),
        _scan_run,
    ),
}


def _run(keys: Sequence[str], quick: bool, *, nested: bool = False) -> list[Table]:
    cases = contenders.trees() if nested else contenders.contenders()
    found, skipped = ([], []) if nested else peers.peers()
    tables = []
    for key in keys:
        m, setup = MEASUREMENTS[key]
        if m.base != "tuple":  # its baseline row first
            cases = sorted(cases, key=lambda c: c.name != m.base)
        if nested:
            m = dataclasses.replace(m, title=f"100 nodes: {m.title}")
        benches = {c.name: setup(c) for c in cases + found}
        table = measure(m, benches, quick=quick, notes={c.name: c.note for c in cases + found})
        if skipped:
            table = dataclasses.replace(table, note="Peers skipped: " + "; ".join(skipped))
        tables.append(table)
    return tables


def pytree(quick: bool) -> list[Table]:
    """flatten, unflatten, key paths and tree.map of the 8-field class, every contender."""
    return _run(("flatten", "unflatten", "flatten_with_path", "tree_map", "tree_map_list"), quick)


def jit(quick: bool) -> list[Table]:
    """What the container adds to a jit call: dispatch and the round trip."""
    return _run(("dispatch", "round_trip"), quick)


def python(quick: bool) -> list[Table]:
    """The Python-level costs: construction, replace and a field read."""
    return _run(("construct", "replace", "read"), quick)


def scan_carry(quick: bool) -> list[Table]:
    """The instance as a 1000-step lax.scan carry: compile time and the steady call."""
    return _run(("scan_compile", "scan_run"), quick)


def nested_tree(quick: bool) -> list[Table]:
    """The 100-node tree against nested tuples: pytree operations, jit and scan."""
    keys = ("flatten", "unflatten", "tree_map", "dispatch", "round_trip")
    return _run((*keys, "scan_compile", "scan_run"), quick, nested=True)
