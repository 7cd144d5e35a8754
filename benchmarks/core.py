"""The measurements: each is one statement, timed for every contender in one
interleaved run, with the raw tuple as the per-round baseline.

| measurement        | statement (per call)              | tuple baseline                   |
|--------------------|-----------------------------------|----------------------------------|
| flatten            | `tree_flatten(obj)`               | same, on the tuple of 8 arrays   |
| unflatten          | `treedef.unflatten(leaves)`       | same                             |
| flatten_with_path  | `tree_flatten_with_path(obj)`     | same                             |
| jit dispatch       | `f(obj)`, f returns one leaf      | same                             |
| jit round trip     | `g(obj)`, g returns obj           | same                             |
| construction       | `new(**kw)`, 10 keyword arguments | `make_tuple(**kw)`, a Python fn  |
| replace            | change field `a3`                 | `replace_tuple(obj, x)`, a fn    |
| tree.map identity  | `jax.tree.map(ident, obj)`        | same                             |

Jit calls are timed without blocking on each call (what dispatch costs the caller),
but each batch blocks on its last output, so no contender leaves queued work running
into the next one's batch. Every contender is treated the same way. Each jitted
function is compiled and run twice before timing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from benchmarks import _timing
from benchmarks.contenders import Contender
from benchmarks.nested import Tree

Setup = tuple[str, dict[str, Any], Callable[[Any], Any] | None]


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


@dataclasses.dataclass(frozen=True)
class Measurement:
    key: str
    title: str
    setup: Callable[[Contender | Tree], Setup]
    target: float | None = None
    """The largest acceptable treeclass/tuple ratio, where the issue sets one."""
    nested: bool = False
    batch_scale: float = 1.0
    """Jit calls take 10-700 µs: their batches are longer, so the one block at the end
    of a batch is amortised over enough calls."""


JIT_BATCH_SCALE = 8.0

MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement("flatten", "flatten", _flatten),
    Measurement("unflatten", "unflatten", _unflatten, target=2.0),
    Measurement("flatten_with_path", "flatten_with_path", _flatten_with_path),
    Measurement(
        "dispatch",
        "jit dispatch (returns one leaf)",
        _dispatch,
        target=1.05,
        batch_scale=JIT_BATCH_SCALE,
    ),
    Measurement(
        "round_trip",
        "jit round trip (returns the instance)",
        _round_trip,
        target=1.10,
        batch_scale=JIT_BATCH_SCALE,
    ),
    Measurement("construct", "construction (10 keyword args)", _construct, target=2.0),
    Measurement("replace", "replace one dynamic field", _replace, target=2.5),
    Measurement("tree_map", "jax.tree.map(lambda x: x, obj)", _tree_map),
    Measurement(
        "nested_dispatch",
        "100 nodes: jit dispatch",
        _dispatch,
        target=1.10,
        nested=True,
        batch_scale=JIT_BATCH_SCALE,
    ),
    Measurement(
        "nested_round_trip",
        "100 nodes: jit round trip",
        _round_trip,
        target=1.10,
        nested=True,
        batch_scale=JIT_BATCH_SCALE,
    ),
)


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    group: str
    note: str
    stats: _timing.Stats


@dataclasses.dataclass(frozen=True)
class Result:
    measurement: Measurement
    rows: tuple[Row, ...]
    """The baseline first, then the others in the order given."""


def measure(
    m: Measurement,
    cases: Sequence[Contender | Tree],
    *,
    rounds: int,
    batch_s: float,
) -> Result:
    """Times `m` for every case, interleaved; `cases[0]` is the baseline."""
    benches = {}
    for c in cases:
        stmt, ns, sync = m.setup(c)
        benches[c.name] = _timing.compile_loop(stmt, ns, sync)
    stats = _timing.interleaved(
        benches, baseline=cases[0].name, rounds=rounds, batch_s=batch_s * m.batch_scale
    )
    rows = tuple(Row(c.name, c.group, getattr(c, "note", ""), stats[c.name]) for c in cases)
    return Result(m, rows)


def run(
    contenders: Sequence[Contender],
    trees: Sequence[Tree],
    *,
    rounds: int,
    batch_s: float,
    only: Sequence[str] = (),
    progress: Callable[[str], None] = print,
) -> list[Result]:
    results = []
    for m in MEASUREMENTS:
        if only and m.key not in only:
            continue
        progress(f"  {m.title} ...")
        cases = trees if m.nested else contenders
        results.append(measure(m, cases, rounds=rounds, batch_s=batch_s))
    return results
