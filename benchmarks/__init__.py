"""Side-by-side measurements of treeclass against raw containers, the designs it
rejected, and peer libraries.

One command line: `python -m benchmarks [--only KEY ...] [--quick] [--write PATH]`
(`--help` lists the sections). A full run prints the tables and writes them into
`benchmarks/RESULTS.md`; `--quick` and `--only` print only, unless given `--write
PATH`. Everything is measured in one process with interleaved rounds, and every number
that matters is a ratio to a baseline measured in the same round, because absolute
times on a shared machine drift by tens of percent between minutes. The figures live
in RESULTS.md, never in this code.

Modules, one job each:

- `__main__.py`: the command line and `SECTIONS`; a section is a function
  `run(quick) -> list[Table]` (the comment above `SECTIONS` says how to add one).
- `_timing.py`: a compiled timing loop per statement, contenders round-robin, the
  statistics (median, quartiles, per-round ratio); `_table.py`: `Table`, as text and
  Markdown; `_results.py`: writes below the hand-written text of `RESULTS.md`;
  `_examples.py`: loads an example script (examples/ is not a package) as a module.
- `contenders.py`: the 8-array + 2-static class written every way we compare, and the
  100-node tree; `rejected.py`: the two designs treeclass rejected; `peers.py`: the
  class in equinox, flax, chex and jax_dataclasses, when installed.
- `core.py`: per-call measurements (pytree operations, jit, construction, replace,
  `lax.scan` carry); `methods.py`: each library's jitted method and `obj.method`.
- `example_models.py`: the PLN fit in four containers, the LIF population against
  plain arrays; `multiprocess.py`: one PLN iteration on 1, 2 and 4 processes.
- `whole_models.py`: `tc.replace_at` against the `replace()` chain and `eqx.tree_at`;
  one training step of examples/cnn.py's CNN, and of the same net in equinox and nnx.
- `compare.py`: the PLN fit against pyPLNmodels, the LIF population against brainpy.
- `migrate.py`: `python -m treeclass.migrate` over 10,000 lines.
"""
