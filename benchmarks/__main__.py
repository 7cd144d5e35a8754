"""Measures treeclass against raw containers, the designs it rejected and the peer
libraries (when installed), with interleaved rounds: one table per measurement, each
figure a median per call with its interquartile range, and the median per-round ratio
to the table's first row. Only ratios from one run mean anything.

A full run writes its tables into benchmarks/RESULTS.md, below the hand-written text;
--quick, --only and --no-write print only; --write PATH writes them to PATH in any mode.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import sys
import time
from collections.abc import Callable, Sequence

from benchmarks import _results, _targets, _timing
from benchmarks._table import Table

# A section is a function `run(quick: bool) -> list[Table]`: it times its contenders
# interleaved, round by round (`_timing.interleaved`, or `core.measure` for a statement
# timed per contender), and returns one table per measurement. `quick` asks for a
# smoke-sized run (`_timing.mode(quick)`: rounds, batch length; smaller models).
#
# To add one, add a line below: "key": "module" (the module's `run`) or
# "module:function". `--only key` runs it alone; a full run runs every section, in
# this order. Modules are imported when their section runs, so a peer library that is
# missing only thins the tables it appears in (each says what it left out).
SECTIONS: dict[str, str] = {
    "pytree": "benchmarks.core:pytree",
    "jit": "benchmarks.core:jit",
    "python": "benchmarks.core:python",
    "scan": "benchmarks.core:scan_carry",
    "nested": "benchmarks.core:nested_tree",
    "methods": "benchmarks.methods",
    "examples": "benchmarks.example_models",
    "multiprocess": "benchmarks.multiprocess",
    "whole_models": "benchmarks.whole_models",
    "compare": "benchmarks.compare",  # pyPLNmodels and brainpy, when installed
    "migrate": "benchmarks.migrate",  # treeclass.migrate's speed (needs libcst)
    "fuzz": "benchmarks.fuzz_checkpoints",  # treeclass.load() of damaged files: counts
    # treeclass against the reference model of tests/reference.py, over generated classes:
    # counts of disagreements by kind (--cases N)
    "reference": "benchmarks.reference",
    # treeclass against equinox's filtered transforms, over generated models mixing eqx.nn
    # layers, flax.struct and chex nodes in treeclass fields: counts by kind (--cases N)
    "owner": "benchmarks.owner_search",
    # treeclass.migrate on public packages from PyPI (needs network for their sdists; their
    # tests run only through `python -m benchmarks.migrate_packages`)
    "migrate_packages": "benchmarks.migrate_packages",
    # treeclass.migrate run on generated packages, each run before and after `--write`: counts
    "migrate_differential": "benchmarks.migrate_differential",
}

RESULTS = pathlib.Path(__file__).with_name("RESULTS.md")


def section(key: str) -> Callable[[bool], list[Table]]:
    """The `run` function registered under `key`."""
    module, _, name = SECTIONS[key].partition(":")
    return getattr(importlib.import_module(module), name or "run")  # type: ignore[no-any-return]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        epilog="sections (--only KEY): " + ", ".join(SECTIONS) + "\n\n"
        "examples: python -m benchmarks                  # everything, writes RESULTS.md\n"
        "          python -m benchmarks --quick          # smoke-sized, prints only\n"
        "          python -m benchmarks --only jit python --write /tmp/jit.md",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="smoke-sized rounds and models")
    parser.add_argument("--only", nargs="+", default=[], choices=list(SECTIONS), metavar="KEY")
    parser.add_argument("--no-write", action="store_true", help="a full run that writes nothing")
    parser.add_argument(
        "--cases", type=int, metavar="N", help="how many generated cases --only reference runs"
    )
    parser.add_argument(
        "--write", type=pathlib.Path, metavar="PATH", help="write the tables to PATH, in any mode"
    )
    return parser.parse_args(argv)


def results_path(args: argparse.Namespace) -> pathlib.Path | None:
    """Where this run writes its tables: the path given with --write; else RESULTS.md,
    but only after a full run (not --quick or --only, whose figures are not the
    committed ones) unless --no-write; else nowhere."""
    if args.write is not None:
        return args.write  # type: ignore[no-any-return]
    if args.quick or args.only or args.no_write:
        return None
    return RESULTS


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    start, load_start = time.perf_counter(), _results.load_average()
    rounds, batch_s = _timing.mode(args.quick)
    loop_ns = _timing.loop_overhead() * 1e9
    print(
        f"{'quick' if args.quick else 'full'} mode: {rounds} rounds of ~{batch_s * 1e3:.1f} ms"
        f" batches (fewer rounds for long statements); timing loop {loop_ns:.0f} ns per"
        f" call; load average {load_start}"
    )
    tables: list[Table] = []
    for key in args.only or SECTIONS:
        print(f"\n# {key}", file=sys.stderr, flush=True)
        section_start = time.perf_counter()
        options = {"cases": args.cases} if key in ("reference", "owner") and args.cases else {}
        new = section(key)(args.quick, **options)
        for table in new:
            print(f"\n{table.text()}", flush=True)
        tables += new
        print(f"# {key}: {time.perf_counter() - section_start:.0f} s", file=sys.stderr)
    if (targets := _targets.targets_table(tables)) is not None:
        print(f"\n{targets.text()}", flush=True)
        tables.append(targets)
    runtime = time.perf_counter() - start
    print(f"\nTotal runtime: {runtime:.0f} s; load average {_results.load_average()}")

    path = results_path(args)
    if path is None:
        return
    command = " ".join(["python -m benchmarks", *(sys.argv[1:] if argv is None else argv)])
    facts = {
        **_results.machine(),
        "mode": f"{rounds} rounds of ~{batch_s * 1e3:.1f} ms batches"
        f"{' (--quick)' if args.quick else ''}",
        "timing loop": f"{loop_ns:.0f} ns per call, included in every figure",
        "run time": f"{runtime:.0f} s",
        "load average (1, 5, 15 min) at start": load_start,
        "load average at end": _results.load_average(),
    }
    _results.write(path, _results.figures(tables, command=command, facts=facts))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
