"""The per-call measurements: each is one statement (or, for compile times, one
compile), timed for every contender in one interleaved run, with the raw tuple as the
per-round baseline. The sections `pytree`, `jit`, `python`, `scan_carry` and
`nested_tree` each run a few of them and return one table per measurement.

| measurement        | statement (per call)                 | baseline (first row)            |
|--------------------|--------------------------------------|---------------------------------|
| flatten            | `tree_flatten(obj)`                  | same, on the tuple of 8 arrays  |
| unflatten          | `treedef.unflatten(leaves)`          | same                            |
| flatten_with_path  | `tree_flatten_with_path(obj)`        | same                            |
| jit dispatch       | `f(obj)`, f returns one leaf         | same                            |
| jit round trip     | `g(obj)`, g returns obj              | same                            |
| construction       | `new(**kw)`, 10 keyword arguments    | `make_tuple(**kw)`, a Python fn |
| replace            | change field `a3`                    | `replace_tuple(obj, x)`, a fn   |
| tree.map identity  | `jax.tree.map(ident, obj)`           | same                            |
| tree.map, 1000     | `jax.tree.map(ident, objs)`, a list  | same, a list of 1000 tuples     |
| scan compile       | lower + compile a 1000-step scan     | same, the tuple as the carry    |
| scan steady call   | `f(obj)`, f = the compiled scan      | same                            |
| jitted methods     | each library's idiom (methods.py)    | `jax.jit(f)(tuple)`             |
| method access      | `obj.method`, no call (methods.py)   | a plain class's plain method    |

The 100-node tree (nested.py) gets flatten, unflatten, tree.map, dispatch, round trip
and the scan, against the same structure as nested tuples.

Jit calls are timed without blocking on each call (what dispatch costs the caller),
but each batch blocks on its last output, so no contender leaves queued work running
into the next one's batch. Every contender is treated the same way. Each jitted
function is compiled and run twice before timing.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from benchmarks import _timing, contenders, nested, peers, scan
from benchmarks._table import Table, stats_table
from benchmarks.contenders import Contender
from benchmarks.nested import Tree

Setup = tuple[str, dict[str, Any], Callable[[Any], Any] | None]
Bench = Callable[[int], float]
"""A ready timing function (seconds per call for n calls), for what is not a statement."""

LIST_LENGTH = 1000


def first_leaf(obj: Any) -> Any:
    return jax.tree_util.tree_leaves(obj)[0]


def identity(obj: Any) -> Any:
    return obj


def _instance(c: Contender | Tree) -> Any:
    return c.tree if isinstance(c, Tree) else c.instance()


def _flatten(c: Contender | Tree) -> Setup:
    return (
        "tree_flatten(obj)",
        {"tree_flatten": jax.tree_util.tree_flatten, "obj": _instance(c)},
        None,
    )


def _unflatten(c: Contender | Tree) -> Setup:
    leaves, treedef = jax.tree_util.tree_flatten(_instance(c))
    return "treedef.unflatten(leaves)", {"treedef": treedef, "leaves": leaves}, None


def _flatten_with_path(c: Contender | Tree) -> Setup:
    ns = {"tree_flatten_with_path": jax.tree_util.tree_flatten_with_path, "obj": _instance(c)}
    return "tree_flatten_with_path(obj)", ns, None


def _jitted(fun: Callable[[Any], Any], c: Contender | Tree) -> Setup:
    obj = _instance(c)
    f = jax.jit(fun)  # one jit object per contender: separate caches
    for _ in range(2):
        jax.block_until_ready(f(obj))
    return "f(obj)", {"f": f, "obj": obj}, jax.block_until_ready


def _dispatch(c: Contender | Tree) -> Setup:
    return _jitted(first_leaf, c)


def _round_trip(c: Contender | Tree) -> Setup:
    return _jitted(identity, c)


def _construct(c: Contender | Tree) -> Setup:
    assert isinstance(c, Contender)
    return "new(**kw)", {"new": c.new, "kw": c.kwargs}, None


def _replace(c: Contender | Tree) -> Setup:
    assert isinstance(c, Contender)
    ns = {**c.namespace, "obj": c.instance(), "x": jnp.ones((4,), jnp.float32)}
    return c.replace, ns, None


def _tree_map(c: Contender | Tree) -> Setup:
    ns = {"tree_map": jax.tree.map, "ident": lambda x: x, "obj": _instance(c)}
    return "tree_map(ident, obj)", ns, None


def _tree_map_list(c: Contender | Tree) -> Setup:
    assert isinstance(c, Contender)
    objs = [c.instance() for _ in range(LIST_LENGTH)]  # distinct instances, shared arrays
    ns = {"tree_map": jax.tree.map, "ident": lambda x: x, "objs": objs}
    return "tree_map(ident, objs)", ns, None


def _scan_compile(c: Contender | Tree) -> Bench:
    return scan.compile_bench(_instance(c))


def _scan_run(c: Contender | Tree) -> Setup:
    return _jitted(scan.scan_fn, c)


@dataclasses.dataclass(frozen=True)
class Measurement:
    key: str
    title: str
    setup: Callable[[Any], Setup | Bench]
    nested: bool = False
    batch_scale: float = 1.0
    """Jit calls take 10-700 µs: their batches are longer, so the one block at the end
    of a batch is amortised over enough calls. 0 for compile times: one compile a batch."""
    rounds_scale: float = 1.0
    """The share of the mode's rounds this measurement runs (at least `min_rounds`):
    fewer for statements that take milliseconds."""
    min_rounds: int = 11
    base: str = "tuple"
    """What the first row, the ratio baseline, is (the table's "x ..." column)."""

    def rounds(self, mode_rounds: int) -> int:
        return max(self.min_rounds, round(mode_rounds * self.rounds_scale))


JIT_BATCH_SCALE = 8.0

_JIT = JIT_BATCH_SCALE
_COMPILE = {"batch_scale": 0.0, "rounds_scale": 0.02, "min_rounds": 5}  # one compile a batch
MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement("flatten", "flatten", _flatten),
    Measurement("unflatten", "unflatten", _unflatten),
    Measurement("flatten_with_path", "flatten_with_path", _flatten_with_path),
    Measurement("dispatch", "jit dispatch (returns one leaf)", _dispatch, batch_scale=_JIT),
    Measurement(
        "round_trip", "jit round trip (returns the instance)", _round_trip, batch_scale=_JIT
    ),
    Measurement("construct", "construction (10 keyword args)", _construct),
    Measurement("replace", "replace one dynamic field", _replace),
    Measurement("tree_map", "jax.tree.map(lambda x: x, obj)", _tree_map),
    Measurement(
        "tree_map_list",
        f"jax.tree.map(lambda x: x, objs), a list of {LIST_LENGTH} instances",
        _tree_map_list,
        rounds_scale=0.05,
    ),
    Measurement(
        "scan_compile",
        f"lax.scan carry: compile ({scan.STEPS} steps; trace + lower + XLA compile)",
        _scan_compile,
        **_COMPILE,
    ),
    Measurement(
        "scan_run",
        f"lax.scan carry: steady call ({scan.STEPS} steps, compiled)",
        _scan_run,
        batch_scale=_JIT,
        rounds_scale=0.2,
    ),
    Measurement("nested_flatten", "100 nodes: flatten", _flatten, nested=True),
    Measurement("nested_unflatten", "100 nodes: unflatten", _unflatten, nested=True),
    Measurement(
        "nested_tree_map", "100 nodes: jax.tree.map(lambda x: x, obj)", _tree_map, nested=True
    ),
    Measurement(
        "nested_dispatch", "100 nodes: jit dispatch", _dispatch, nested=True, batch_scale=_JIT
    ),
    Measurement(
        "nested_round_trip",
        "100 nodes: jit round trip",
        _round_trip,
        nested=True,
        batch_scale=_JIT,
    ),
    Measurement(
        "nested_scan_compile",
        "100 nodes: lax.scan carry: compile",
        _scan_compile,
        nested=True,
        **_COMPILE,
    ),
    Measurement(
        "nested_scan_run",
        "100 nodes: lax.scan carry: steady call",
        _scan_run,
        nested=True,
        batch_scale=_JIT,
        rounds_scale=0.1,
    ),
)


BY_KEY = {m.key: m for m in MEASUREMENTS}


def measure(
    m: Measurement,
    cases: Sequence[Any],
    *,
    quick: bool,
    extra: tuple[str, dict[str, str]] | None = None,
) -> Table:
    """Times `m` for every case, interleaved (`cases[0]` is the baseline): its table.

    A case is anything with a `name` that `m.setup` takes; its `note`, if it has one,
    goes in the table. `extra`: one more column (`_table.stats_table`)."""
    print(f"  {m.title} ...", file=sys.stderr, flush=True)
    mode_rounds, batch_s = _timing.mode(quick)
    benches = {}
    for c in cases:
        setup = m.setup(c)
        benches[c.name] = setup if callable(setup) else _timing.compile_loop(*setup)
    rounds = m.rounds(mode_rounds)
    stats = _timing.interleaved(
        benches, baseline=cases[0].name, rounds=rounds, batch_s=batch_s * m.batch_scale
    )
    notes = {c.name: getattr(c, "note", "") for c in cases}
    return stats_table(m.title, stats, base=m.base, rounds=rounds, notes=notes, extra=extra)


def _run(keys: Sequence[str], quick: bool) -> list[Table]:
    found, skipped = peers.peers()
    cases = contenders.contenders() + found
    tables = []
    for key in keys:
        m = BY_KEY[key]
        table = measure(m, nested.trees() if m.nested else cases, quick=quick)
        if skipped and not m.nested:
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
    """The Python-level costs: construction and replace."""
    return _run(("construct", "replace"), quick)


def scan_carry(quick: bool) -> list[Table]:
    """The instance as a 1000-step lax.scan carry: compile time and the steady call."""
    return _run(("scan_compile", "scan_run"), quick)


def nested_tree(quick: bool) -> list[Table]:
    """The 100-node tree against nested tuples: pytree operations, jit and scan."""
    return _run([m.key for m in MEASUREMENTS if m.nested], quick)
