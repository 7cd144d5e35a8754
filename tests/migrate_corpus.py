"""The migration corpus: what the tool must do with each class of
tests/migrate/corpus/before_*.py.

`CORPUS` lists, per before module, the classes it must convert and the classes it must
refuse, each with a piece of its reason. `CASES` says how to build each converted
class through its old call sites and what to compute with it, so that the tests can
compare the before and after modules under eager, jit, grad and vmap.

Regenerate the after modules (a change in the tool's output then shows as a diff):

    TREECLASS_MIGRATE_REGENERATE=1 pytest tests/migrate/test_migrate_corpus.py -k after
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import jax.numpy as jnp

HERE = Path(__file__).parent / "migrate" / "corpus"


@dataclasses.dataclass(frozen=True)
class Module:
    stem: str  # before_<stem>.py, after_<stem>.py
    converted: tuple[str, ...]
    refused: dict[str, str]  # class -> a piece of its reason
    namedtuples: bool = False

    @property
    def before(self) -> Path:
        return HERE / f"before_{self.stem}.py"

    @property
    def after(self) -> Path:
        return HERE / f"after_{self.stem}.py"


CORPUS = [
    Module(
        "handwritten",
        ("Linear", "Neuron", "Spline", "Standardizer", "Cosmology"),
        {
            "FlaggedCosmology": "its structure depends on values: an `if` in tree_flatten",
            "GrowthModel": "its aux data holds `self.gamma is not None`, which is computed",
            "CachedPower": "__init__ sets `self._workspace`, which is neither a child nor aux data",
            "Memo": "`memo` is mutated in place at `m.memo[key] = value`",
            "Steps": "its structure depends on values: an `if` in tree_flatten",
            "Accumulator": "`total` is assigned after construction at `self.total = self.total + x`",
            "Params": "its children are `self.params` itself, a sequence of any length",
            "Solver": "its aux data holds `options`, set to `dict(tol=tol, maxiter=maxiter)`",
            "Scaled": "tree_unflatten calls __init__, which sets `w` to `w * scale`",
            "Embedding": "__init__ sets `self.vocab_size`, which is neither a child nor aux data",
        },
    ),
    Module(
        "semimechanical",
        ("Interpolant", "SqPNorm", "PointCloud", "SO2", "NormalNP", "Interval", "Position", "Kernel", "Moments", "Bounds"),
        {
            "Range": "a staticmethod tree_unflatten builds `Range` by name, and `OpenRange` extends it",
            "OpenRange": "its base class `Range` is refused",
            "Stats": "(`obj.__dict__.update(count=children[0], total=children[1])`)",
            "Grid": "its aux data holds `shape`, given an unhashable value at `Grid(jnp.zeros(4), [2, 2])`",
        },
    ),
    Module(
        "called",
        (),
        {
            "Bounds": "code calls its tree_flatten() at `bounds.tree_flatten()`",
            "Interval": "code calls its tree_flatten() at `bounds.tree_flatten()`",
        },
    ),
    Module(
        "functions",
        ("Point", "Gaussian", "Box"),
        {
            "Segment": "code calls its flatten function _flatten_segment()",
            "Moments": "tree_flatten_with_keys gives `mean` the key `<jtu.DictKey('mean')>`",
        },
    ),
    Module(
        "keys",
        ("Affine",),
        {"Offset": "tree_flatten_with_keys gives `_value` the key `value`"},
    ),
    Module(
        "inheritance",
        ("Kernel", "L1Kernel"),
        {
            "Layer": "its subclass `BiasedLayer` (",
            "BiasedLayer": "tree_flatten extends the base class's through super()",
            "Distribution": "its subclass `PointMass` (",
        },
    ),
    Module(
        "dataclasses",
        ("FlaxLinear", "FlaxState", "ChexParams", "Adam", "Sgd", "Window"),
        {
            "ChexState": "a chex dataclass is a mapping unless mappable_dataclass=False",
            "ChexUnsorted": "chex flattens fields sorted by name (bias, weight), not in declaration order",
            "Rmsprop": "register_dataclass lists data_fields as ['grad', 'nu'], not in declaration order",
        },
    ),
    Module("flax_serialization", ("Checkpointed",), {}),
    Module(
        "namedtuple",
        ("LoopState",),
        {"Flags": "the default of `done` is `jnp.array(False)`, not a literal"},
        namedtuples=True,
    ),
    Module(
        "namedtuple_tuple_api",
        ("Carry",),
        {"Pair": "code uses an instance as a tuple where a treeclass cannot be one (1 site(s)"},
        namedtuples=True,
    ),
]


def load(path: Path, name: str) -> ModuleType:
    """Imports a corpus file as a module of its own."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while decorating
    spec.loader.exec_module(module)
    return module


def _x() -> Any:
    return jnp.linspace(0.0, 1.0, 5)


# (module stem, class, a label) -> (build an instance from the module, f(module, obj)
# -> a float array: what is compared eagerly and differentiated under jit, grad, vmap)
Build = Callable[[ModuleType], Any]
Apply = Callable[[ModuleType, Any], Any]
CASES: dict[tuple[str, str, str], tuple[Build, Apply]] = {
    ("handwritten", "Linear", "default act"): (
        lambda m: m.Linear(jnp.ones((3, 2)), jnp.full(2, 0.5)),
        lambda m, o: o(jnp.arange(3.0)).sum(),
    ),
    ("handwritten", "Linear", "act by keyword"): (
        lambda m: m.Linear(jnp.ones((3, 2)), jnp.zeros(2), act="tanh"),
        lambda m, o: o(jnp.arange(3.0)).sum(),
    ),
    ("handwritten", "Neuron", "positional"): (
        lambda m: m.Neuron(jnp.zeros(4), 10.0),
        lambda m, o: o.step(1.0).step(2.0).v.sum(),
    ),
    ("handwritten", "Neuron", "keywords"): (
        lambda m: m.Neuron(v=jnp.ones(4), dt=0.5),
        lambda m, o: o.step(1.0).v.sum(),
    ),
    ("handwritten", "Spline", ""): (
        lambda m: m.Spline(_x(), _x() ** 2),
        lambda m, o: o(0.3) + o(0.7),
    ),
    ("handwritten", "Standardizer", ""): (
        lambda m: m.Standardizer([1.0, 2.0], [2.0, 4.0]),
        lambda m, o: o(jnp.ones(2)).sum(),
    ),
    ("handwritten", "Cosmology", "gamma unset"): (
        lambda m: m.Cosmology(0.25, 0.05, 0.7, 0.96, 0.8, 0.0, -1.0, 0.0),
        lambda m, o: m.growth(o, 0.5),
    ),
    ("handwritten", "Cosmology", "gamma set"): (
        lambda m: m.Cosmology(0.25, 0.05, 0.7, 0.96, 0.8, 0.0, -1.0, 0.0, gamma=0.6),
        lambda m, o: m.growth(o, 0.5),
    ),
    ("semimechanical", "Interpolant", ""): (
        lambda m: m.Interpolant(_x(), _x() ** 2, k=2),
        lambda m, o: o(0.3) + o(0.7),
    ),
    ("semimechanical", "SqPNorm", ""): (lambda m: m.SqPNorm(1.5, 0.25), lambda m, o: o(_x(), 2.0 * _x())),
    ("semimechanical", "PointCloud", "default epsilon"): (
        lambda m: m.PointCloud(_x(), _x() + 1.0),
        lambda m, o: o.cost(),
    ),
    ("semimechanical", "PointCloud", "keywords"): (
        lambda m: m.PointCloud(_x(), _x(), epsilon=0.1, scale_cost=2.0),
        lambda m, o: o.cost(),
    ),
    ("semimechanical", "SO2", ""): (lambda m: m.SO2(jnp.array([0.6, 0.8])), lambda m, o: o.log()),
    ("semimechanical", "NormalNP", ""): (
        lambda m: m.NormalNP(jnp.ones(3), jnp.full(3, -0.5), dimensions=3),
        lambda m, o: o.mean().sum() * o.dimensions,
    ),
    ("semimechanical", "Interval", ""): (
        lambda m: m.Interval(jnp.zeros(2), jnp.array([1.0, 3.0])),
        lambda m, o: o.width(),
    ),
    ("semimechanical", "Position", "defaults"): (lambda m: m.Position(3.0), lambda m, o: o.norm()),
    ("semimechanical", "Position", "every argument"): (
        lambda m: m.Position(3.0, 4.0, "deg"),
        lambda m, o: o.norm(),
    ),
    ("semimechanical", "Kernel", ""): (lambda m: m.Kernel(0.5, order=3), lambda m, o: o(_x()).sum()),
    ("semimechanical", "Moments", ""): (
        lambda m: m.Moments(jnp.ones(2), jnp.full(2, 0.25)),
        lambda m, o: o.second(),
    ),
    ("semimechanical", "Bounds", ""): (lambda m: m.Bounds(jnp.zeros(2), jnp.ones(2)), lambda m, o: o.span()),
    ("functions", "Point", ""): (lambda m: m.Point(3.0, 4.0), lambda m, o: o.norm()),
    ("functions", "Gaussian", ""): (
        lambda m: m.Gaussian(jnp.zeros(3), jnp.full(3, 0.1)),
        lambda m, o: o.log_prob(jnp.ones(3)).sum(),
    ),
    ("functions", "Box", ""): (lambda m: m.Box(jnp.zeros(2), jnp.ones(2) * 2), lambda m, o: o.volume()),
    ("keys", "Affine", ""): (lambda m: m.Affine(2.0, jnp.ones(3)), lambda m, o: o(jnp.arange(3.0)).sum()),
    ("inheritance", "Kernel", ""): (
        lambda m: m.Kernel(0.5, 2.0),
        lambda m, o: o(jnp.zeros(2), jnp.ones(2)),
    ),
    ("inheritance", "L1Kernel", ""): (
        lambda m: m.L1Kernel(0.5, 2.0),
        lambda m, o: o(jnp.zeros(2), jnp.ones(2)),
    ),
    ("dataclasses", "FlaxLinear", ""): (
        lambda m: m.FlaxLinear(jnp.ones((3, 2)), jnp.zeros(2)),
        lambda m, o: o(jnp.arange(3.0)).sum(),
    ),
    ("dataclasses", "FlaxState", ""): (
        lambda m: m.FlaxState(step=jnp.zeros(()), params=m.FlaxLinear(jnp.ones((3, 2)), jnp.zeros(2)), lr=0.5),
        lambda m, o: o.params(jnp.arange(3.0)).sum() * o.lr + o.step,
    ),
    ("dataclasses", "ChexParams", ""): (
        lambda m: m.ChexParams(bias=jnp.zeros(2), weight=jnp.ones(2)),
        lambda m, o: (o.weight * 3.0 + o.bias).sum(),
    ),
    ("dataclasses", "Adam", ""): (lambda m: m.Adam(jnp.ones(2), jnp.ones(2) * 2), lambda m, o: (o.mu / o.nu).sum() * o.lr),
    ("dataclasses", "Sgd", ""): (lambda m: m.Sgd(jnp.ones(2), lr=0.5), lambda m, o: o.momentum.sum() * o.lr),
    ("dataclasses", "Window", ""): (lambda m: m.Window(jnp.arange(5.0), size=2), lambda m, o: o.mean()),
    ("flax_serialization", "Checkpointed", ""): (lambda m: m.Checkpointed(jnp.ones(3)), lambda m, o: (o.w * 2.0).sum()),
    ("namedtuple_tuple_api", "Carry", ""): (
        lambda m: m.Carry(jnp.ones(2), jnp.arange(2.0)),
        lambda m, o: m.step(m.step(o, 1.0), 2.0).h.sum(),
    ),
    ("namedtuple", "LoopState", ""): (
        lambda m: m.LoopState(jnp.ones(2), jnp.zeros(())),
        lambda m, o: m.body(m.body(o)).x.sum() + m.body(o).i * o.scale,
    ),
}
