"""A differential test of treeclass.migrate: generated packages run before and after
`--write` must print the same.

Each package (hypothesis) has two to four modules of pytree classes of every family
the tool finds (register_pytree_node_class, register_pytree_node with module
functions, register_dataclass, flax.struct.dataclass, flax.struct.PyTreeNode,
chex.dataclass, NamedTuple under `--namedtuples`), subclasses of them in later modules
under every import spelling (`from pkg import m0`, `import pkg.m0 as alias`, `from .m0
import C as Alias`, ...), plain unregistered subclasses among them, and a `main.py`
that uses each class: construction, leaves, `jax.jit`, `jax.tree.map`, unpacking,
indexing, iteration, `len`, `_asdict`, `==` against a tuple, `isinstance(p, tuple)`,
`p + (1.0,)`, `hash(p)`, writes of every form, `_replace`, `replace`, star-unpacking
through a call annotated to return the class, and unpacking, indexing, iteration,
`isinstance(p, tuple)` and `p + (0.0,)` inside a function whose parameter is untyped
(`def second(p): return p[1]`). Each use prints its leaves as floats, or "raised".

A case "agrees" when the package imports and `main.py` prints the same after the
rewrite; any other outcome (a different output, a package that no longer imports, the
tool failing) is a defect. `python -m benchmarks --only migrate_differential` runs 1000
cases (100 with --quick) and prints the counts; tests/migrate/test_migrate_differential.py runs
a few.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
import textwrap
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks._table import Table

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))  # the tests' package runner
from migrate_runs import differential

_NEEDS = {
    "flax": "flax",
    "pytreenode": "flax",
    "chex": "chex",
}  # the families of libraries not installed are left out
FAMILIES = tuple(
    f
    for f in (
        "handwritten",
        "functions",
        "register_dataclass",
        "flax",
        "pytreenode",
        "chex",
        "namedtuple",
    )
    if f not in _NEEDS or importlib.util.find_spec(_NEEDS[f])
)
# How module `m{j}` names a class of module `m{i}` (i < j): (import line, expression).
SPELLINGS = (
    ("from pkg import m{i}", "m{i}.{cls}"),
    ("from pkg import m{i} as alias{i}", "alias{i}.{cls}"),
    ("import pkg.m{i}", "pkg.m{i}.{cls}"),
    ("import pkg.m{i} as mod{i}", "mod{i}.{cls}"),
    ("from pkg.m{i} import {cls}", "{cls}"),
    ("from pkg.m{i} import {cls} as {cls}Alias", "{cls}Alias"),
    ("from . import m{i}", "m{i}.{cls}"),
    ("from .m{i} import {cls}", "{cls}"),
    ("from pkg import m{i} as _m{i}\n{cls}Ref = _m{i}.{cls}", "{cls}Ref"),  # torax's re-export
)
USES = (
    "{o}",
    "jax.jit(lambda t: jax.tree.map(lambda v: v * 2, t))({o})",
    "jax.tree.map(lambda v: v + 1, {o})",
    "tuple({o})",
    "{o}[0]",
    "[v for v in {o}]",
    "{o} == (1.0, 2.0)",
    "isinstance({o}, tuple)",
    "{o}._replace(x=7.0)",
    "{o}.replace(x=7.0)",
    "total(*{make}())",
    "sum({o})",
    "len({o})",
    "{o}._asdict()",
    "{o} + (1.0,)",
    "hash({o}) == hash(tuple({o}))",
)
# Functions of `main.py` whose parameter is untyped: what they do to it cannot be
# attributed to a class. A class gets one use of them, or none, besides its USES (among
# them, most NamedTuples are refused for a typed tuple use); each is written only when
# a use calls it.
UNTYPED = {
    "unpacked": "def unpacked(p):\n    a, b, *_ = p\n    return [a, b]\n",
    "second": "def second(p):\n    return p[1]\n",
    "each": "def each(p):\n    return [v for v in p]\n",
    "is_tuple": "def is_tuple(p):\n    return isinstance(p, tuple)\n",
    "plus": "def plus(p):\n    return p + (0.0,)\n",
}
# Each leaves in `{o}` what is shown. (A variable rebound to another type is untyped:
# what is done to it is not attributed to the class.)
WRITES = (
    "{o}.x = 5.0",
    "setattr({o}, 'x', 5.0)",
    "object.__setattr__({o}, 'x', 5.0)",
    "{o}.__dict__['x'] = 5.0",
    "a, b, *_ = {o}",
)


def _class(family: str, name: str, base: str | None, fields: list[str]) -> str:
    """The source of one class; `base` (an expression) is a class of the same family."""
    ann = "".join(f"    {f}: float\n" for f in fields)
    bases = f"({base})" if base else ""
    init = f"    def __init__(self, {', '.join(fields)}):\n" + "".join(
        f"        self.{f} = {f}\n" for f in fields
    )
    if family == "handwritten":
        children = ", ".join(f"self.{f}" for f in fields)
        return (
            f"@jax.tree_util.register_pytree_node_class\nclass {name}{bases}:\n{init}\n"
            f"    def tree_flatten(self):\n        return ({children},), None\n\n"
            f"    @classmethod\n    def tree_unflatten(cls, aux, children):\n        return cls(*children)\n"
        )
    if family == "functions":
        children = ", ".join(f"o.{f}" for f in fields)
        return (
            f"class {name}{bases}:\n{init}\n\n"
            f"def _flatten_{name}(o):\n    return ({children},), None\n\n\n"
            f"def _unflatten_{name}(aux, children):\n    return {name}(*children)\n\n\n"
            f"jax.tree_util.register_pytree_node({name}, _flatten_{name}, _unflatten_{name})\n"
        )
    decorators = {
        "register_dataclass": "@jax.tree_util.register_dataclass\n@dataclasses.dataclass\n",
        "plain": "@dataclasses.dataclass\n",
        "flax": "@struct.dataclass\n",
        "chex": "@chex.dataclass\n",
    }
    if family in decorators:
        return f"{decorators[family]}class {name}{bases}:\n{ann}"
    default = {"pytreenode": "struct.PyTreeNode", "namedtuple": "typing.NamedTuple"}[family]
    return f"class {name}({base or default}):\n{ann}"


_HEADER = "import dataclasses\nimport typing\n\nimport jax\n" + "".join(
    line
    for lib, line in (("chex", "import chex\n"), ("flax", "from flax import struct\n"))
    if importlib.util.find_spec(lib)
)
# What a subclass of each family is (a plain dataclass subclass stays unregistered).
_SUBCLASS = {
    family: subclasses
    for family, subclasses in {
        "register_dataclass": ("register_dataclass", "plain"),
        "flax": ("flax",),
        "pytreenode": ("pytreenode",),
        "chex": ("chex",),
        "handwritten": ("handwritten",),
    }.items()
    if family in FAMILIES
}


@st.composite
def packages(draw: st.DrawFn) -> dict[str, str]:
    """The files of one generated package (`pkg/__init__.py`, `pkg/m*.py`, `pkg/main.py`)."""
    n_modules = draw(st.integers(2, 4))
    modules: list[list[str]] = [[_HEADER] for _ in range(n_modules)]
    classes: list[tuple[int, str, str, int]] = []  # (module, name, family, number of fields)
    for j in range(n_modules):
        for k in range(draw(st.integers(1, 2))):
            name = f"C{j}{k}"
            parents = [c for c in classes if c[2] in _SUBCLASS and c[0] <= j]
            if parents and draw(st.booleans()):
                i, base, base_family, n_fields = draw(st.sampled_from(parents))
                family = draw(st.sampled_from(_SUBCLASS[base_family]))
                if i == j:
                    spelled = base
                else:
                    line, expr = draw(st.sampled_from(SPELLINGS))
                    modules[j].insert(1, line.format(i=i, cls=base) + "\n")
                    spelled = expr.format(i=i, cls=base)
                fields = (
                    [f"z{j}{k}"]
                    if family != "handwritten"
                    else ["x", "y", f"z{j}{k}"][: n_fields + 1]
                )
                if family == "handwritten":
                    modules[j].append("\n\n" + _class("handwritten", name, spelled, fields))
                else:
                    modules[j].append("\n\n" + _class(family, name, spelled, fields))
                classes.append((j, name, family, n_fields + 1))
            else:
                family = draw(st.sampled_from(FAMILIES))
                modules[j].append("\n\n" + _class(family, name, None, ["x", "y"]))
                classes.append((j, name, family, 2))
            modules[j].append(
                f"\n\ndef _make_{name}() -> {name}:\n    return {name}({', '.join(str(float(v + 1)) for v in range(classes[-1][3]))})\n"
            )
    main = [
        "import jax\n",
        *(f"from pkg import m{j}\n" for j in range(n_modules)),
        "\n\ndef show(v):\n    return [float(x) for x in jax.tree.leaves(v)]\n\n\ndef total(*a):\n    return sum(a)\n",
    ]
    for j, name, _, n_fields in classes:
        args = ", ".join(str(float(v + 1)) for v in range(n_fields))
        o = f"o_{name}"  # one variable per class: what is done to it is done to that class
        untyped = draw(st.sampled_from([None, None, *(f"{f}({{o}})" for f in UNTYPED)]))
        for use in [
            *draw(st.lists(st.sampled_from(USES), min_size=1, max_size=4, unique=True)),
            *filter(None, [untyped]),
        ]:
            expr = use.format(o=o, make=f"m{j}._make_{name}")
            main.append(
                f"\ntry:\n    {o} = m{j}.{name}({args})\n    print({name!r}, {use!r}, show({expr}))\nexcept Exception:\n    print({name!r}, {use!r}, 'raised')\n"
            )
        for write in draw(st.lists(st.sampled_from(WRITES), max_size=2, unique=True)):
            code = write.format(o=o)
            main.append(
                f"\ntry:\n    {o} = m{j}.{name}({args})\n    {code}\n    print({name!r}, {write!r}, show({o}))\nexcept Exception:\n    print({name!r}, {write!r}, 'raised')\n"
            )
    used = [f"\n\n{code}" for name, code in UNTYPED.items() if any(f"{name}(o_" in m for m in main)]
    main[n_modules + 2 : n_modules + 2] = used
    files = {"pkg/__init__.py": "", "pkg/main.py": "".join(main)}
    files |= {f"pkg/m{j}.py": "".join(m) for j, m in enumerate(modules)}
    return files


def outcome(files: dict[str, str], root: Path) -> tuple[str, int, int]:
    """ "agrees", "gains" (only what raised before runs after), "differs", "breaks" (the
    package no longer imports) or "tool failed", with the classes converted and refused."""
    try:
        reports, before, after = differential(
            root, {k: textwrap.dedent(v) for k, v in files.items()}, "--namedtuples"
        )
    except Exception:  # noqa: BLE001 - counted
        return "tool failed", 0, 0
    statuses = Counter(r["status"] for r in reports.values())
    pairs = list(zip(before.splitlines(), after.splitlines(), strict=False))
    if len(before.splitlines()) == len(after.splitlines()) and all(
        b == a or b.endswith(" raised") for b, a in pairs
    ):
        # Code that raised before and runs after uses what a treeclass adds (`replace`).
        return (
            ("agrees" if before == after else "gains"),
            statuses["converted"],
            statuses["refused"],
        )
    if before != after:
        broken = after.startswith("raised ") and not before.startswith(
            "raised "
        )  # pkg.main no longer imports
        return ("breaks" if broken else "differs"), statuses["converted"], statuses["refused"]
    return "agrees", statuses["converted"], statuses["refused"]


def _counts(n: int) -> tuple[Counter[str], list[dict[str, str]]]:
    counts: Counter[str] = Counter()
    failures: list[dict[str, str]] = []

    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=["generate"],
    )
    @given(packages())
    def case(files: dict[str, str]) -> None:
        with tempfile.TemporaryDirectory() as folder:
            what, converted, refused = outcome(files, Path(folder))
        counts[what] += 1
        counts["classes converted"] += converted
        counts["classes refused"] += refused
        if what not in ("agrees", "gains"):
            failures.append(files)

    case()
    return counts, failures


def run(quick: bool) -> list[Table]:
    n = 100 if quick else 1000
    counts, failures = _counts(n)
    rows = tuple(
        (k, str(counts[k]))
        for k in (
            "agrees",
            "gains",
            "differs",
            "breaks",
            "tool failed",
            "classes converted",
            "classes refused",
        )
    )
    note = f"{n} generated packages (2 to 4 modules), each run before and after `--write --namedtuples`; 'differs', 'breaks' and 'tool failed' are defects"
    if failures:
        note += f"; first failing package:\n{failures[0]}"
    return [Table("treeclass.migrate differential", ("outcome", "cases"), rows, note)]
