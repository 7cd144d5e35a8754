"""Measures treeclass against raw containers, the designs it rejected and the peer
libraries (equinox, flax.struct, chex, jax_dataclasses), all in one process with
interleaved rounds; prints the tables and writes benchmarks/RESULTS.md (machine,
versions, date, load average, every number, and a breakdown of every missed target).

Every figure is µs per call and the median per-round ratio to the raw tuple (or to the
row named in the table's "x ..." column) timed in the same round. Default mode (1001
rounds of ~0.5 ms batches, fewer for millisecond-long statements, then the example
benchmarks at full size) takes about 8 minutes; --quick (61 rounds of ~0.3 ms batches
and the examples' quick modes) about a minute. Short batches keep most samples clear of
the scheduler's time slices on a shared machine; many rounds and the median do the rest.
Only ratios from one run mean anything.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

from benchmarks import (
    _timing,
    breakdown,
    contenders,
    core,
    endtoend,
    methods,
    nested,
    peers,
    prose,
    report,
    targets,
)

MODES = {"quick": (61, 0.0003), "default": (1001, 0.0005)}


def _epilog() -> str:
    lines = ["measurements (--only KEY):"]
    for m in core.MEASUREMENTS:
        if m.target is not None:
            target = f"  [target: treeclass <= {m.target:.2f} x {m.base}]"
        elif m.target_us is not None:
            target = f"  [target: treeclass < {m.target_us:.1f} us]"
        else:
            target = ""
        lines.append(f"  {m.key:<20} {m.title}{target}")
    lines += [
        "  pln                  PLN fit in its four containers, run and compile time"
        " [target: treeclass run <= 1.05 x namedtuple]",
        "  neurons              LIF population in lax.scan vs plain arrays"
        " [target: treeclass <= 1.02 x plain]",
        "",
        "also checked: treeclass ahead of every peer (treeclass / peer < 1, same rounds)"
        " on dispatch, round trip, construction and replace;",
        f"a @tc.jit method call <= {targets.TC_JIT_TARGET:.2f} x jax.jit(f)(obj) on the"
        f" same function; {targets.TRACE_INSTANCES} instances through a @tc.jit method"
        " trace exactly once.",
        "",
        "examples: python -m benchmarks            # everything, writes RESULTS.md (~8 min)",
        "          python -m benchmarks --quick    # the same, fewer rounds (~1 min)",
        "          python -m benchmarks --only dispatch replace --rounds 201",
        "          python -m benchmarks.pln --help, python -m benchmarks.neurons --help",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="61 rounds of ~0.3 ms batches and the examples' quick modes (~1 min)",
    )
    parser.add_argument(
        "--rounds", type=int, help="override the number of rounds of the per-call tables"
    )
    parser.add_argument(
        "--only",
        nargs="*",
        default=(),
        metavar="KEY",
        choices=[m.key for m in core.MEASUREMENTS] + list(endtoend.NAMES),
        help="run only these measurements (keys below); implies --no-write",
    )
    parser.add_argument(
        "--no-examples",
        action="store_true",
        help="skip the example benchmarks (the PLN fit and the LIF population)",
    )
    parser.add_argument(
        "--large",
        action="store_true",
        help="run the PLN fit in its large mode (the data rows repeated 100x)",
    )
    parser.add_argument(
        "--no-write", action="store_true", help="do not write RESULTS.md after a full run"
    )
    parser.add_argument(
        "--write",
        type=pathlib.Path,
        metavar="PATH",
        help="write the results to PATH, in any mode (a full run writes RESULTS.md)",
    )
    return parser.parse_args(argv)


RESULTS = pathlib.Path(__file__).with_name("RESULTS.md")


def results_path(args: argparse.Namespace) -> pathlib.Path | None:
    """Where this run writes its results: the path given with --write; else RESULTS.md,
    but only after a full run (not --quick, --rounds or --only, whose figures are not
    the committed ones) unless --no-write; else nowhere."""
    if args.write is not None:
        return args.write  # type: ignore[no-any-return]
    if args.quick or args.rounds or args.only or args.no_write:
        return None
    return RESULTS


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    start = time.perf_counter()
    load_start = report.load_average()
    mode = "quick" if args.quick else "default"
    rounds, batch_s = MODES[mode]
    rounds = args.rounds or rounds
    only = set(args.only)
    measured = [m.key for m in core.MEASUREMENTS if not only or m.key in only]
    example_names = [] if args.no_examples else [n for n in endtoend.NAMES if not only or n in only]

    found, skipped = peers.peers()
    for note in skipped:
        print(f"note: {note}")
    cases = contenders.contenders() + found
    loop_ns = _timing.loop_overhead() * 1e9
    print(
        f"{mode} mode: {rounds} rounds, ~{batch_s * 1e3:.1f} ms batches "
        f"(x{core.JIT_BATCH_SCALE:.0f} for jit calls), {len(cases)} contenders; "
        f"timing loop {loop_ns:.0f} ns per call; load average {load_start}"
    )
    results = []
    if measured:
        results = core.run(cases, nested.trees(), rounds=rounds, batch_s=batch_s, only=measured)
        print(report.text_table(results, targets.checks(results)))
    trace_count = None
    if not only or "jit_methods" in only:
        trace_count = methods.traces(targets.TRACE_INSTANCES)
    examples = []
    if example_names:
        print("\nExample benchmarks:")
        examples = endtoend.run(quick=args.quick, large=args.large, only=example_names)
        for e in examples:
            print(f"\n{e.table}")

    checks = targets.checks(
        results, traces=trace_count, examples={e.name: e.rows for e in examples}
    )
    print("\nTargets:")
    print(prose.targets_markdown(checks))
    print("\ntreeclass / peer, median over rounds (below 1: treeclass faster):")
    print(prose.peer_table(checks, markdown=False))
    print(prose.peer_verdict(checks))

    missed = [c for c in checks if not c.passed]
    misses_md = "None: every target met."
    if missed:
        print("\nBreaking down the misses ...")
        misses_md = breakdown.explain(missed, rounds=max(rounds // 2, 11), batch_s=batch_s)
        print("\nMisses:\n" + misses_md)

    runtime = time.perf_counter() - start
    load_end = report.load_average()
    print(f"\nTotal runtime: {runtime:.1f} s; load average {load_end} (start: {load_start})")
    path = results_path(args)
    if path is not None:
        info = report.machine()
        info["load average (1, 5, 15 min) at start"] = load_start
        info["load average (1, 5, 15 min) at end"] = load_end
        given = sys.argv[1:] if argv is None else argv
        command = " ".join(["python -m benchmarks", *given])
        path.write_text(
            prose.results_markdown(
                results,
                checks,
                examples,
                info,
                command=command,
                mode=mode,
                rounds=rounds,
                batch_s=batch_s,
                runtime_s=runtime,
                skipped=skipped,
                misses_md=misses_md,
                loop_ns=loop_ns,
            ),
            encoding="utf-8",
        )
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
