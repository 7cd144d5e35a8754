"""Command line: `python -m benchmarks [--quick] [--only KEY ...] [--no-write]`.

Default mode (1001 interleaved rounds of ~0.5 ms batches) takes a few minutes;
`--quick` (61 rounds of ~0.3 ms batches) under a minute. Short batches keep most
samples clear of the scheduler's time slices on a shared machine; many rounds and the
median do the rest. Prints the table and writes `benchmarks/RESULTS.md`
(unless `--no-write`), including a breakdown of every missed target.
"""

from __future__ import annotations

import argparse
import pathlib
import time

from benchmarks import _timing, breakdown, contenders, core, nested, peers, report

MODES = {"quick": (61, 0.0003), "default": (1001, 0.0005)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few short rounds (< 60 s)")
    parser.add_argument("--rounds", type=int, help="override the number of rounds")
    parser.add_argument(
        "--only",
        nargs="*",
        default=(),
        choices=[m.key for m in core.MEASUREMENTS],
        help="run only these measurements",
    )
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    mode = "quick" if args.quick else "default"
    rounds, batch_s = MODES[mode]
    rounds = args.rounds or rounds

    found, skipped = peers.peers()
    for note in skipped:
        print(f"note: {note}")
    cases = contenders.contenders() + found
    loop_ns = _timing.loop_overhead() * 1e9
    print(
        f"{mode} mode: {rounds} rounds, ~{batch_s * 1e3:.1f} ms batches "
        f"(x{core.JIT_BATCH_SCALE:.0f} for jit calls), {len(cases)} contenders; "
        f"timing loop {loop_ns:.0f} ns per call"
    )
    results = core.run(cases, nested.trees(), rounds=rounds, batch_s=batch_s, only=args.only)
    print(report.text_table(results))
    print("\nTargets (treeclass / tuple, same round):")
    print(report.targets_summary(results))

    missed = report.misses(results)
    misses_md = "None: every target met."
    if missed:
        print("\nBreaking down the misses ...")
        misses_md = breakdown.explain(missed, rounds=max(rounds // 2, 11), batch_s=batch_s)
    if missed:
        print("\nMisses:\n" + misses_md)

    runtime = time.perf_counter() - start
    print(f"\nTotal runtime: {runtime:.1f} s")
    if not args.no_write and not args.only:
        path = pathlib.Path(__file__).with_name("RESULTS.md")
        path.write_text(
            report.results_markdown(
                results,
                report.machine(),
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
