"""treeclass.migrate over 10,000+ lines: the corpus's before modules, copied (less the
three whose traps refuse every class of a run); one whole run, read to rewritten text."""

import pathlib
import shutil
import tempfile
import time

from benchmarks._table import Table


def run(quick: bool) -> list[Table]:
    from treeclass.migrate import _engine  # needs libcst: imported when the section runs

    skip = ("before_called.py", "before_flax_serialization.py", "before_namedtuple_tuple_api.py")
    modules = [p for p in sorted((pathlib.Path(__file__).parent.parent / "tests/migrate").glob("before_*.py")) if p.name not in skip]
    lines, times = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in modules), []
    with tempfile.TemporaryDirectory() as tmp:
        for i, module in ((i, m) for i in range(2 if quick else -(-10_000 // lines)) for m in modules):
            shutil.copy(module, pathlib.Path(tmp) / f"{module.stem}_{i}.py")
        for _ in range(1 if quick else 3):
            start = time.perf_counter()
            result = _engine.run([pathlib.Path(tmp)], namedtuples=True)
            times.append(time.perf_counter() - start)
    n, done = sum(len(f.source.splitlines()) for f in result.files), sum(r.status == "converted" for r in result.reports)
    row = (f"{n:,} lines in {len(result.files)} files", f"{done} / {len(result.reports) - done}", f"{min(times):.2f} s")
    note = "the best of 3 runs (1 with --quick); the issue's bound: 10,000 lines under 10 s"
    return [Table("treeclass.migrate: one run over the corpus, copied", ("package", "converted / refused", "time"), (row,), note=note)]
