"""Side-by-side measurements of treeclass against raw containers, the designs it
rejected, and peer libraries.

Run `python -m benchmarks` (a few minutes) or `python -m benchmarks --quick` (under a
minute); both print a table and write `benchmarks/RESULTS.md`. Everything is measured
in one process with interleaved rounds, and every number that matters is a ratio to the
raw tuple measured in the same round, because absolute times on a shared machine drift
by tens of percent between minutes.

Modules, one job each:

- `_timing.py`: compiles a timing loop per statement, runs the contenders
  round-robin, and summarises the samples (median, quartiles, per-round ratio).
- `contenders.py`: the 8-array + 2-static class written every way we compare.
- `rejected.py`: generators for the two designs treeclass rejected.
- `peers.py`: the same class in equinox, flax, chex and jax_dataclasses, when installed.
- `nested.py`: the 100-node tree (a root holding 99 two-array layers).
- `core.py`: the measurements, each a statement timed for every contender.
- `breakdown.py`: for each missed target, the pieces of the cost, timed and counted.
- `report.py`: the terminal table, machine facts and `RESULTS.md`.
- `__main__.py`: the command line.

Other modules here (`pln.py`, ...) are separate end-to-end benchmarks with their own
entry points (`python -m benchmarks.pln`).
"""
