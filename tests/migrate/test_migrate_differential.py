"""treeclass.migrate on generated packages (benchmarks/migrate_differential.py): each
package's `main.py` prints the same before and after `--write --namedtuples`, the only
allowed difference being code that raised before and runs after (a treeclass adds
`replace`). A few cases here; `python -m benchmarks --only migrate_differential` runs
hundreds and prints the counts."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings

pytest.importorskip("libcst")

from migrate_runs import forget_pkg

# benchmarks/ is not installed and the suite does not put the repository root on
# sys.path (an editable install does, which hides a missing entry here).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
try:
    from benchmarks.migrate_differential import outcome, packages
finally:
    sys.path.pop(0)

_HEADER = "import dataclasses\nimport typing\n\nimport jax\nfrom flax import struct\n"
# Found by the generator: a write to a field of the grandparent, on an instance of the
# subclass, was not counted against the subclass (its fields only, its base's, were).
_GRANDPARENT = {
    "pkg/__init__.py": "",
    "pkg/m1.py": _HEADER + "\n\n@struct.dataclass\nclass C10:\n    x: float\n    y: float\n\n\n@struct.dataclass\nclass C11(C10):\n    z11: float\n",
    "pkg/m2.py": _HEADER + "from pkg import m1 as alias1\n\n\n@struct.dataclass\nclass C20(alias1.C11):\n    z20: float\n",
    "pkg/main.py": (
        "import jax\nfrom pkg import m2\n\ntry:\n    o_C20 = m2.C20(1.0, 2.0, 3.0, 4.0)\n    o_C20.__dict__['x'] = 5.0\n"
        "    print(jax.tree.leaves(o_C20))\nexcept Exception:\n    print('raised')\n"
    ),
}


# Found by the generator: a NamedTuple given to a function whose untyped parameter is
# unpacked, indexed or iterated was converted, and the function raised.
_UNTYPED = {
    "pkg/__init__.py": "",
    "pkg/m0.py": "import typing\n\n\nclass C00(typing.NamedTuple):\n    x: float\n    y: float\n",
    "pkg/main.py": (
        "from pkg import m0\n\n\ndef second(p):\n    return p[1]\n\n\ndef unpacked(p):\n    a, b = p\n    return a\n\n\n"
        "for f in (second, unpacked):\n    try:\n        print(f(m0.C00(1.0, 2.0)))\n    except Exception:\n        print('raised')\n"
    ),
}


@settings(max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(packages())
@example(_GRANDPARENT if importlib.util.find_spec("flax") else {"pkg/__init__.py": "", "pkg/main.py": ""})
@example(_UNTYPED)
def test_generated_packages_print_the_same_after_the_rewrite(files: dict[str, str]) -> None:
    try:
        with tempfile.TemporaryDirectory() as folder:
            what, _, _ = outcome(files, Path(folder))
    finally:
        forget_pkg()
    assert what in ("agrees", "gains"), files
