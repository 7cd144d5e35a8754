"""Hostile probes of the NamedTuple conversion (`--namedtuples`): every use of a
NamedTuple either converts with the same behaviour, or refuses the class with the right
reason. Each program runs before and after `--write`.

Found by these probes: `d[p] = v` (a key), `p < q` and `sorted([p, q])` (an order),
`p.count(v)`, `p.index(v)` and `P._field_defaults` (tuple API the converted class does not
keep), `json.dumps(p)` (a JSON list) and `match p: case (x, y):` (a sequence pattern)
converted and changed behaviour: each now refuses the class."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytest.importorskip("libcst")

from migrate_runs import differential, forget_pkg

_HEAD = """\
import json
import struct
from typing import NamedTuple

import jax


class P(NamedTuple):
    a: float
    b: float


p = P(1.0, 2.0)
"""

# Each use of `p`, and the piece of the refusal it must cause (None: it converts).
USES: dict[str, str | None] = {
    "d = {}\nd[p] = 1\nprint(len(d))": "a treeclass hashes by type and static fields",
    "print(p in {p: 1})": "a treeclass hashes by type and static fields",
    "print(sorted([p, P(0.0, 0.0)])[0].a)": "a treeclass has no order",
    "print(p < P(2.0, 0.0))": "a treeclass has no order",
    "print(min(p, P(0.0, 5.0)).a)": "a treeclass has no order",
    "print(p.count(1.0), p.index(2.0))": "a treeclass has no tuple method `count`",
    "print(P._field_defaults)": "a treeclass has no tuple method `_field_defaults`",
    "print(json.dumps(p))": "json.dumps takes a tuple as a list and knows no treeclass",
    "match p:\n    case (x, y):\n        print('seq', x, y)\n    case _:\n        print('other')": (
        "a `case` sequence pattern never matches a treeclass"
    ),
    "print(p == (1.0, 2.0))": "a treeclass never equals a tuple",
    "print(isinstance(p, tuple))": "isinstance(x, tuple) is False for a treeclass",
    "print(len(p + (3.0,)))": "+ and * do not concatenate a treeclass",
    # What the converted class keeps.
    "x, y = p\nprint(x, y)": None,
    "print(p[0], p[-1], p[::-1])": None,
    "print(len(p), list(p), tuple(p))": None,
    "print(p._replace(a=3.0).a, p._asdict(), P._make([1.0, 2.0]).b, P._fields)": None,
    "print(struct.pack('ff', *p))": None,
    "print(max(p), sum(p), 1.0 in p)": None,
    "print(p == P(1.0, 2.0), p != P(1.0, 3.0))": None,
    "print(jax.tree.map(lambda v: v * 2, p).a)": None,
    "print(repr(p), isinstance(p, P))": None,
    "print(jax.jit(lambda q: q.a + len(q))(p))": None,
}


def _run(uses: list[str]) -> tuple[dict[str, dict[str, str]], str, str]:
    files = {"pkg/__init__.py": "", "pkg/main.py": _HEAD + "\n" + "\n".join(uses) + "\n"}
    try:
        with tempfile.TemporaryDirectory() as folder:
            return differential(Path(folder), files, "--namedtuples")
    finally:
        forget_pkg()


@pytest.mark.parametrize("use", list(USES))
def test_each_use_converts_the_same_or_refuses_with_its_reason(use: str) -> None:
    reports, before, after = _run([use])
    assert before == after, (use, before, after)
    reason = reports["P"]["reason"]
    expected = USES[use]
    if expected is None:
        assert reports["P"]["status"] == "converted", (use, reason)
    else:
        assert reports["P"]["status"] == "refused", (use, reason)
        assert expected in reason, (use, reason)


# The generator: a program with a few uses of one instance, kept or not. The class
# converts exactly when every use is kept, the program prints the same before and after,
# and a refusal names every use that blocks it.
@settings(max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(uses=st.lists(st.sampled_from(list(USES)), min_size=1, max_size=3, unique=True))
@example(uses=["d = {}\nd[p] = 1\nprint(len(d))", "x, y = p\nprint(x, y)"])
def test_a_program_of_uses_converts_exactly_when_every_use_is_kept(uses: list[str]) -> None:
    reports, before, after = _run(uses)
    assert before == after, (uses, before, after)
    blocking = [USES[u] for u in uses if USES[u] is not None]
    reason = reports["P"]["reason"]
    assert reports["P"]["status"] == ("refused" if blocking else "converted"), (uses, reason)
    for piece in blocking:
        assert piece in reason, (uses, reason)
