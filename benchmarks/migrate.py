"""treeclass.migrate's time against lines: synthetic packages of growing size, each a
whole package run (read, resolve across modules, plan, rewrite to text).

Each generated module holds a flax.struct chain that crosses modules (`from .m0 import
State as BaseState`), a hand-written pytree class, and filler: plain functions and
classes full of attribute assignments (what made the old scan quadratic). One module
per package is a big file (a fifth of the package, at most 6,000 lines: the size of
the real file that took 100 s before), timed alone too: the "no file over 2 s" check. Run `python -m benchmarks --only migrate` (`--quick`: the two smaller sizes).
"""

from __future__ import annotations

import pathlib
import tempfile
import time

from benchmarks._table import Table

_HEAD = '''\
"""Module {i} of a generated package."""

import jax.numpy as jnp
from flax import struct
from jax.tree_util import register_pytree_node_class
{imports}

@struct.dataclass
class State{i}({base}):
    step{i}: jnp.ndarray
    scale{i}: float = struct.field(pytree_node=False, default=1.0)


@register_pytree_node_class
class Linear{i}:
    def __init__(self, w, b, act="relu"):
        self.w = w
        self.b = b
        self.act = act

    def tree_flatten(self):
        return (self.w, self.b), self.act

    @classmethod
    def tree_unflatten(cls, act, children):
        return cls(*children, act=act)

    def __call__(self, x):
        return x @ self.w + self.b
'''

_FILLER = """

class Helper{i}_{j}:
    def __init__(self, n):
        self.n = n
        self.total = 0

    def run(self, values):
        for v in values:
            self.total = self.total + v * self.n
        self.items = [v for v in values]
        return self.total


def work{i}_{j}(obj, values):
    obj.n = len(values)
    obj.counter = obj.n + 1
    result = {{"a": obj.n, "b": obj.counter}}
    result["c"] = sum(values)
    return result
"""


def generate(root: pathlib.Path, lines: int, modules: int = 10) -> int:
    """Writes a package `pkg` of about `lines` lines under `root`; returns its line count."""
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        '"""A generated package."""\n\nfrom .m0 import State0 as State0\n'
    )
    filler_lines = _FILLER.count("\n")
    total = 3
    for i in range(modules):
        imports, base = (
            ("", "") if i == 0 else (f"from .m{i - 1} import State{i - 1} as Base{i}\n", f"Base{i}")
        )
        text = _HEAD.format(i=i, imports=imports, base=base)
        big = min(lines // 5, 6_000)
        share = big if i == 0 else (lines - big) // (modules - 1)
        text += "".join(
            _FILLER.format(i=i, j=j)
            for j in range(max(1, (share - text.count("\n")) // filler_lines))
        )
        (pkg / f"m{i}.py").write_text(text)
        total += text.count("\n")
    return total


def run(quick: bool) -> list[Table]:
    from treeclass.migrate import _engine  # needs libcst: imported when the section runs

    rows = []
    for size in (1_000, 10_000) if quick else (1_000, 10_000, 30_000, 100_000):
        with tempfile.TemporaryDirectory() as tmp:
            n = generate(pathlib.Path(tmp), size)
            start = time.perf_counter()
            result = _engine.run([pathlib.Path(tmp) / "pkg"])
            took = time.perf_counter() - start
            one = float("inf")
            for _ in range(3):  # the best of 3: the machine is shared
                start = time.perf_counter()
                _engine.run([pathlib.Path(tmp) / "pkg" / "m0.py"])
                one = min(one, time.perf_counter() - start)
        done = sum(r.status == "converted" for r in result.reports)
        rows.append(
            (
                f"{n:,}",
                f"{done} / {len(result.reports) - done}",
                f"{took:.2f} s",
                f"{took / n * 1e6:.0f} us",
                f"{one:.2f} s",
            )
        )
    note = "one run per package, the best of 3 for the big file alone; bounds: 10,000 lines under 10 s, 100,000 under 30 s, no file over 2 s (the big file: a fifth of the lines, at most 6,000)"
    header = ("lines", "converted / refused", "time", "per line", "biggest file alone")
    return [
        Table(
            "treeclass.migrate: time against lines (a generated package)",
            header,
            tuple(rows),
            note=note,
        )
    ]
