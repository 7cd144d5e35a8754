"""Side-by-side measurements of treeclass against raw containers, the designs it
rejected, and peer libraries.

Run `python -m benchmarks` (about 8 minutes; prints the tables and writes
`benchmarks/RESULTS.md`) or `python -m benchmarks --quick` (about a minute; prints only,
unless given `--write PATH`). `--help` lists every measurement, target and flag. Everything is measured in one process with interleaved
rounds, and every number that matters is a ratio to the raw tuple measured in the same
round, because absolute times on a shared machine drift by tens of percent between
minutes.

Modules, one job each:

- `_timing.py`: compiles a timing loop per statement, runs the contenders
  round-robin, and summarises the samples (median, quartiles, per-round ratio).
- `contenders.py`: the 8-array + 2-static class written every way we compare.
- `rejected.py`: generators for the two designs treeclass rejected.
- `peers.py`: the same class in equinox, flax, chex and jax_dataclasses, when installed.
- `nested.py`: the 100-node tree (a root holding 99 two-array layers).
- `scan.py`: the 1000-step `lax.scan` whose carry is the instance (compile, call).
- `methods.py`: each library's idiomatic jitted method (traces for 200 instances, one
  call), and what `obj.method` costs.
- `core.py`: the measurements, each a statement timed for every contender.
- `endtoend.py`: runs the example benchmarks `pln.py` (the PLN fit in four containers)
  and `neurons.py` (a LIF population against plain arrays) through their `run()`.
- `targets.py`: every target of the issue as a PASS/MISS check.
- `breakdown.py`, `breakdown_calls.py`: for each missed target, the pieces of the cost,
  timed and counted (`_ladder.py` holds their tools).
- `report.py`: the tables and machine facts; `prose.py`: the words of `RESULTS.md`.
- `__main__.py`: the command line.

`pln.py` and `neurons.py` keep their own entry points (`python -m benchmarks.pln`,
`python -m benchmarks.neurons`).
"""
