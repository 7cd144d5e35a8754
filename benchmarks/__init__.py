"""Side-by-side measurements of treeclass against raw containers, the designs it
rejected, and peer libraries.

Run `python -m benchmarks` (about 8 minutes; prints the tables and writes them into
`benchmarks/RESULTS.md`) or `python -m benchmarks --quick` (about a minute; prints
only, unless given `--write PATH`). `--only KEY ...` runs some sections; `--help` lists
them. Everything is measured in one process with interleaved rounds, and every number
that matters is a ratio to a baseline measured in the same round, because absolute
times on a shared machine drift by tens of percent between minutes.

Modules, one job each:

- `__main__.py`: the command line and `SECTIONS`, the list of sections; a section is a
  function `run(quick) -> list[Table]` (the comment above `SECTIONS` says how to add one).
- `_timing.py`: compiles a timing loop per statement, runs the contenders
  round-robin, and summarises the samples (median, quartiles, per-round ratio).
- `_table.py`: `Table`, one per measurement, as text and Markdown.
- `_results.py`: writes the tables below the hand-written text of `RESULTS.md`.
- `contenders.py`: the 8-array + 2-static class written every way we compare.
- `rejected.py`: generators for the two designs treeclass rejected.
- `peers.py`: the same class in equinox, flax, chex and jax_dataclasses, when installed.
- `nested.py`: the 100-node tree (a root holding 99 two-array layers).
- `scan.py`: the 1000-step `lax.scan` whose carry is the instance (compile, call).
- `core.py`: the per-call measurements and the sections that run them.
- `methods.py`: each library's idiomatic jitted method (traces for 200 instances, one
  call), and what `obj.method` costs.
- `endtoend.py`: the example benchmarks `pln.py` (the PLN fit in four containers)
  and `neurons.py` (a LIF population against plain arrays) as a section.

`pln.py` and `neurons.py` keep their own entry points (`python -m benchmarks.pln`,
`python -m benchmarks.neurons`).
"""
