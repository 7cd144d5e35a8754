"""A long search of treeclass against the reference model of its contract.

Each case is a random module of treeclasses with one construction and the operations to
compare (tests/class_strategies.py, drawn from seed i); every check of
tests/reference_checks.py runs on it: leaves and key paths, statics in the treedef,
attribute = leaf, hook call counts, replace, jit / device_put / pickle / deepcopy /
cloudpickle round trips, state dicts, save/load, partition, grad, stack/unstack,
replace_at. Every 50th case is also pickled with cloudpickle and its `@tc.jit` method
called in a new process (one process per batch).

`python -m benchmarks --only reference --cases N` (20000 by default, 300 with --quick)
prints the counts: cases run, cases with a disagreement, and per kind of disagreement
how many cases showed it, with the seed and source of its shortest case.
tests/core/test_reference.py runs a few cases of each check.
"""

from __future__ import annotations

import collections
import sys
import time
import traceback
import warnings
from pathlib import Path

import jax

from benchmarks._table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import class_strategies as cs  # tests/ is not a package
import reference_checks as rc
from class_source import in_new_process

FRESH_EVERY = 50


def _kind(check: str, error: BaseException) -> str:
    if isinstance(error, rc.Disagreement):
        return error.kind
    return f"{check} raised {rc.kind_of(error)}"


def search(
    n: int, start: int = 0
) -> tuple[collections.Counter[tuple[str, str]], dict, collections.Counter[str]]:
    """Runs cases `start .. start+n-1`: (cases per (check, kind), the shortest
    (source, seed) per kind, cases per kind of their first disagreement)."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    firsts: collections.Counter[str] = collections.Counter()
    shortest: dict[str, tuple[str, int]] = {}
    fresh: list[tuple[int, cs.Case]] = []
    began = time.perf_counter()

    def note(check: str, kind: str, text: str, seed: int) -> None:
        counts[(check, kind)] += 1
        if kind not in shortest or len(text) < len(shortest[kind][0]):
            shortest[kind] = (text, seed)

    for seed in range(start, start + n):
        case = cs.draw_case(cs.RandomChooser(seed))
        first = ""
        for name, check in rc.CHECKS.items():
            try:
                check(case)
            except Exception as e:  # noqa: BLE001 (every exception is counted by kind)
                first = first or _kind(name, e)
                detail = (
                    str(e) if isinstance(e, rc.Disagreement) else traceback.format_exc(limit=-3)
                )
                note(name, _kind(name, e), f"{detail}\n{case!r}", seed)
        if first:
            firsts[first] += 1
        if seed % FRESH_EVERY == 0:
            fresh.append((seed, case))
        if len(fresh) == FRESH_EVERY or (seed == start + n - 1 and fresh):
            for (s, c), outcome in zip(
                [f for f in fresh], _fresh([c for _, c in fresh]), strict=True
            ):
                if outcome != "ok" and not outcome.startswith("in this process"):
                    note(
                        "cloudpickle (new process)",
                        f"new process: {rc.normalise(outcome)}",
                        repr(c),
                        s,
                    )
            fresh.clear()
        for name in [m for m in sys.modules if m.startswith("refgen_")]:
            del sys.modules[name]  # the module of each check; JAX's caches may keep the classes
        done = seed - start + 1
        if done % 500 == 0:
            rate = done / (time.perf_counter() - began)
            print(
                f"# reference: {done}/{n} cases, {firsts.total()} with a disagreement, {rate:.1f}/s",
                file=sys.stderr,
                flush=True,
            )
    return counts, shortest, firsts


def _fresh(batch: list[cs.Case]) -> list[str]:
    try:
        return in_new_process([(case.module, case.call) for case in batch])
    except RuntimeError as e:  # the new process failed as a whole
        return [f"the new process failed: {str(e).splitlines()[-1][:60]}"] * len(batch)


def run(quick: bool, cases: int | None = None) -> list[Table]:
    n = cases or (300 if quick else 20000)
    with (
        warnings.catch_warnings(),
        jax.numpy_dtype_promotion("strict"),
        jax.numpy_rank_promotion("raise"),
    ):
        warnings.simplefilter("ignore")
        counts, shortest, firsts = search(n)
    rows = tuple(
        (kind, check, str(k), str(shortest[kind][1]))
        for (check, kind), k in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    )
    for kind, (text, seed) in sorted(shortest.items()):
        print(f"\n--- shortest case of: {kind} (seed {seed})\n{text}", file=sys.stderr)
    note = (
        f"{n} cases, {len(rc.CHECKS)} checks each (+ a new-process cloudpickle check every "
        f"{FRESH_EVERY}th); {firsts.total()} cases with at least one disagreement"
    )
    first_rows = tuple((kind, str(k), str(shortest[kind][1])) for kind, k in firsts.most_common())
    return [
        Table(
            "reference model: disagreements by kind",
            ("kind", "check", "cases", "seed"),
            rows or (("none", "", "0", ""),),
            note=note,
        ),
        Table(
            "reference model: each case's first disagreement",
            ("kind", "cases", "seed"),
            first_rows or (("none", "0", ""),),
            note="the checks in the order tests/reference_checks.py lists them",
        ),
    ]
