"""A long search of treeclass against equinox itself, over generated models that mix
other libraries' nodes in treeclass fields (the owner rule).

Each case is a random chain of 1-3 treeclasses holding equinox layers, flax.struct and
chex nodes, floats and arrays (tests/class_strategies.py `MixedCase`, drawn from seed i);
every check of tests/reference_checks.py `MIXED_CHECKS` runs on it: partition against
`eqx.partition`, grad against `eqx.filter_grad`, jit against `eqx.filter_jit`,
apply_updates against `eqx.apply_updates` (an AdamW step), the summary's parameter count,
state dicts, and save/load against `eqx.tree_serialise_leaves`.

`python -m benchmarks --only owner --cases N` (300 by default, 30 with --quick) prints the
counts: cases run, cases with a disagreement, and per kind of disagreement how many
cases showed it, with the seed of its shortest case (whose source goes to stderr).
tests/core/test_owner_reference.py runs a few cases of each check.
"""

from __future__ import annotations

import collections
import sys
import time
import traceback
import warnings
from pathlib import Path

from benchmarks._table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import class_strategies as cs  # tests/ is not a package
import reference_checks as rc


def search(n: int, start: int = 0) -> tuple[collections.Counter[tuple[str, str]], dict, int]:
    """Runs cases `start .. start+n-1`: (cases per (check, kind), the shortest
    (source, seed) per kind, cases with at least one disagreement)."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    shortest: dict[str, tuple[str, int]] = {}
    failing = 0
    began = time.perf_counter()
    for seed in range(start, start + n):
        case = cs.draw_mixed_case(cs.RandomChooser(seed))
        failed = False
        for name, check in rc.MIXED_CHECKS.items():
            try:
                check(case)
            except Exception as e:  # noqa: BLE001 (every exception is counted by kind)
                failed = True
                kind = (
                    e.kind if isinstance(e, rc.Disagreement) else f"{name} raised {rc.kind_of(e)}"
                )
                detail = (
                    str(e) if isinstance(e, rc.Disagreement) else traceback.format_exc(limit=-3)
                )
                text = f"{detail}\n{case!r}"
                counts[(name, kind)] += 1
                if kind not in shortest or len(text) < len(shortest[kind][0]):
                    shortest[kind] = (text, seed)
        failing += failed
        for name in [m for m in sys.modules if m.startswith("mixedgen_")]:
            del sys.modules[name]
        done = seed - start + 1
        if done % 50 == 0:
            rate = done / (time.perf_counter() - began)
            print(
                f"# owner: {done}/{n} cases, {failing} with a disagreement, {rate:.2f}/s",
                file=sys.stderr,
                flush=True,
            )
    return counts, shortest, failing


def run(quick: bool, cases: int | None = None) -> list[Table]:
    import jax

    n = cases or (30 if quick else 300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # equinox's BatchNorm mode warning, among others
        jax.config.update("jax_numpy_dtype_promotion", "standard")  # equinox's layers need it
        counts, shortest, failing = search(n)
    rows = tuple(
        (kind, check, str(k), str(shortest[kind][1]))
        for (check, kind), k in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    )
    for kind, (text, seed) in sorted(shortest.items()):
        print(f"\n--- shortest case of: {kind} (seed {seed})\n{text}", file=sys.stderr)
    kinds = collections.Counter(
        comp.kind
        for s in range(n)
        for _, comp in cs.draw_mixed_case(cs.RandomChooser(s)).components()
    )
    note = (
        f"{n} cases, {len(rc.MIXED_CHECKS)} checks each; {failing} cases with at least one "
        f"disagreement; components drawn: {dict(sorted(kinds.items()))}"
    )
    return [
        Table(
            "owner rule against equinox: disagreements by kind",
            ("kind", "check", "cases", "seed"),
            rows or (("none", "", "0", ""),),
            note=note,
        )
    ]
