"""treeclass.migrate: a static field annotated with a class of the run converts only when
that class is provably hashable. A treeclass hashes its statics at construction, where a
hand-written pytree never hashed its aux data; jax-cfd 0.2.1's `GridVariable.bc:
BoundaryConditions` (a frozen dataclass, built with lists inside) became a static and
every construction with such a value raised."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("libcst")

from migrate_runs import forget_pkg, import_fresh, migrate_package


def _same_tree(old: object, new: object, *statics: str) -> None:
    """Equal leaves and equal static values (by repr: before and after are two modules,
    so their classes differ, which `treeclass.migrate.check` would report)."""
    old_leaves, new_leaves = jax.tree.leaves(old), jax.tree.leaves(new)
    assert len(old_leaves) == len(new_leaves)
    assert all(np.array_equal(a, b) for a, b in zip(old_leaves, new_leaves, strict=True))
    assert [repr(getattr(old, s)) for s in statics] == [repr(getattr(new, s)) for s in statics]


@pytest.fixture(autouse=True)
def _forget_pkg() -> Iterator[None]:
    yield
    forget_pkg()


# The shape of jax_cfd/base/grids.py and boundaries.py (0.2.1), cut down.
JAX_CFD = {
    "pkg/__init__.py": "",
    "pkg/grids.py": """
        import dataclasses
        import operator
        from typing import Optional, Sequence, Tuple, Union

        import jax.numpy as jnp
        from jax.tree_util import register_pytree_node_class


        @dataclasses.dataclass(init=False, frozen=True)
        class Grid:
            shape: Tuple[int, ...]
            step: Tuple[float, ...]
            domain: Tuple[Tuple[float, float], ...]

            def __init__(self, shape: Sequence[int], step: Optional[Union[float, Sequence[float]]] = None, domain=None):
                shape = tuple(operator.index(s) for s in shape)
                object.__setattr__(self, "shape", shape)
                if step is not None and domain is not None:
                    raise TypeError("cannot provide both step and domain")
                elif domain is not None:
                    domain = tuple((float(lower), float(upper)) for lower, upper in domain)
                else:
                    if step is None:
                        step = 1
                    step = (step,) * len(shape)
                    domain = tuple((0.0, float(step_ * size)) for step_, size in zip(step, shape))
                object.__setattr__(self, "domain", domain)
                step = tuple((upper - lower) / size for (lower, upper), size in zip(domain, shape))
                object.__setattr__(self, "step", step)


        @register_pytree_node_class
        @dataclasses.dataclass
        class GridArray:
            data: jnp.ndarray
            offset: Tuple[float, ...]
            grid: Grid

            def tree_flatten(self):
                return (self.data,), (self.offset, self.grid)

            @classmethod
            def tree_unflatten(cls, aux_data, children):
                return cls(*children, *aux_data)


        @dataclasses.dataclass(init=False, frozen=True)
        class BoundaryConditions:
            types: Tuple[Tuple[str, str], ...]


        @register_pytree_node_class
        @dataclasses.dataclass
        class GridVariable:
            array: GridArray
            bc: BoundaryConditions

            def tree_flatten(self):
                return (self.array,), (self.bc,)

            @classmethod
            def tree_unflatten(cls, aux_data, children):
                return cls(*children, *aux_data)
    """,
    "pkg/boundaries.py": """
        import dataclasses
        from typing import Sequence, Tuple

        from pkg import grids

        BoundaryConditions = grids.BoundaryConditions


        @dataclasses.dataclass(init=False, frozen=True)
        class ConstantBoundaryConditions(BoundaryConditions):
            types: Tuple[Tuple[str, str], ...]

            def __init__(self, types: Sequence[Tuple[str, str]]):
                types = tuple(types)
                object.__setattr__(self, "types", types)


        def dirichlet(ndim):
            types = []
            for _ in range(ndim):
                types.append(["dirichlet", "dirichlet"])  # lists inside, as jax-cfd builds them
            return ConstantBoundaryConditions(types)
    """,
}


def test_static_typed_by_a_run_class_built_with_lists_is_refused(tmp_path: Path):
    reports = migrate_package(tmp_path, JAX_CFD)
    refused = reports["GridVariable"]
    assert refused["status"] == "refused"
    assert (
        "its static field `bc` is annotated `BoundaryConditions`, but `ConstantBoundaryConditions.__init__` "
        "stores `types` as `tuple(types)`, which may hold an unhashable value"
    ) in refused["reason"]
    assert "Make that class build its fields as tuples" in refused["reason"]
    # The package behaves as before: a GridVariable holding list-built boundary conditions.
    for root in (tmp_path / "before", tmp_path / "after"):
        grids, boundaries = import_fresh(root, "pkg.grids"), import_fresh(root, "pkg.boundaries")
        grid = grids.Grid((4,), domain=((0.0, 1.0),))
        variable = grids.GridVariable(
            grids.GridArray(jnp.zeros(4), (0.5,), grid), boundaries.dirichlet(1)
        )
        assert variable.bc.types == (["dirichlet", "dirichlet"],)


def test_grid_that_converts_its_inputs_to_tuples_still_converts(tmp_path: Path):
    reports = migrate_package(tmp_path, JAX_CFD)
    assert reports["GridArray"]["status"] == "converted", reports["GridArray"]["reason"]
    assert "grid: tc.Static[Grid]" in (tmp_path / "after/pkg/grids.py").read_text()
    arrays = []
    for root in (tmp_path / "before", tmp_path / "after"):
        grids = import_fresh(root, "pkg.grids")
        grid = grids.Grid([4], step=0.25)  # a list in: the Grid stores tuples
        arrays.append(grids.GridArray(jnp.arange(4.0), (0.5,), grid))
    old, new = arrays
    _same_tree(old, new, "offset", "grid")
    f = lambda a: jnp.sum(a.data**2)  # noqa: E731
    assert np.allclose(jax.jit(f)(old), jax.jit(f)(new))
    assert np.allclose(jax.grad(f)(old).data, jax.grad(f)(new).data)


HASHABLE = """
    import dataclasses
    import enum
    from typing import NamedTuple, Optional, Tuple

    import jax.numpy as jnp
    from jax.tree_util import register_pytree_node_class


    class Kind(enum.Enum):
        A = "a"
        B = "b"


    class Spec(NamedTuple):
        n: int
        label: Optional[str]


    @dataclasses.dataclass(frozen=True)
    class Meta:
        name: str
        sizes: Tuple[int, ...]
        kind: Kind
        spec: Spec
        scale: float | None = None


    @register_pytree_node_class
    class Layer:
        def __init__(self, w, meta: Meta):
            self.w = w
            self.meta = meta

        def tree_flatten(self):
            return (self.w,), (self.meta,)

        @classmethod
        def tree_unflatten(cls, meta, children):
            return cls(*children, *meta)
"""


def test_provably_hashable_run_class_converts(tmp_path: Path):
    reports = migrate_package(tmp_path, {"pkg/__init__.py": "", "pkg/layer.py": HASHABLE})
    assert reports["Layer"]["status"] == "converted", reports["Layer"]["reason"]
    assert "meta: tc.Static[Meta]" in (tmp_path / "after/pkg/layer.py").read_text()
    layers = []
    for root in (tmp_path / "before", tmp_path / "after"):
        m = import_fresh(root, "pkg.layer")
        meta = m.Meta("l", (2, 3), m.Kind.A, m.Spec(1, None))
        layers.append(m.Layer(jnp.ones(3), meta))
    _same_tree(*layers, "meta")
    f = lambda layer: jnp.sum(layer.w * layer.meta.spec.n)  # noqa: E731
    assert np.allclose(jax.jit(f)(layers[0]), jax.jit(f)(layers[1]))


@pytest.mark.parametrize(
    ("meta", "why"),
    [
        (
            "@dataclasses.dataclass(frozen=True)\nclass Meta:\n    sizes: Sequence[int]\n",
            "`Meta.sizes` is annotated `Sequence[int]`, which does not prove it hashable",
        ),
        (
            "@dataclasses.dataclass(frozen=True)\nclass Meta:\n    extra: Any\n",
            "`Meta.extra` is annotated `Any`",
        ),
        (
            "@dataclasses.dataclass(frozen=True)\nclass Meta:\n    sizes: Tuple\n",
            "`Meta.sizes` is annotated `Tuple`",
        ),
        (
            "@dataclasses.dataclass\nclass Meta:\n    n: int\n",
            "`Meta` is a dataclass without frozen=True, so its instances are unhashable",
        ),
        ("class Meta(NamedTuple):\n    sizes: list\n", "`Meta.sizes` is annotated `list`"),
        (
            "class Meta:\n    def __eq__(self, other):\n        return True\n",
            "`Meta` defines __eq__ without __hash__",
        ),
        ("class Meta(dict):\n    pass\n", "`Meta` has the base `dict`, which may be unhashable"),
        ("class Meta:\n    __hash__ = None\n", "`Meta` sets __hash__ in its body"),
        (
            "@dataclasses.dataclass(frozen=True)\nclass Base:\n    n: int\n\n\n"
            "@dataclasses.dataclass(frozen=True)\nclass Meta(Base):\n    def __init__(self, n):\n        super().__init__(n)\n",
            "`Meta.__init__` stores through `super().__init__`, which the tool cannot follow",
        ),
    ],
)
def test_run_class_not_provably_hashable_is_refused(tmp_path: Path, meta: str, why: str):
    source = (
        "import dataclasses\nfrom typing import Any, NamedTuple, Sequence, Tuple\n\n"
        "from jax.tree_util import register_pytree_node_class\n\n\n"
        + meta
        + textwrap.dedent("""

            @register_pytree_node_class
            class Layer:
                def __init__(self, w, meta: Meta):
                    self.w = w
                    self.meta = meta

                def tree_flatten(self):
                    return (self.w,), (self.meta,)

                @classmethod
                def tree_unflatten(cls, meta, children):
                    return cls(*children, *meta)
        """)
    )
    reports = migrate_package(tmp_path, {"pkg/__init__.py": "", "pkg/layer.py": source})
    assert reports["Layer"]["status"] == "refused"
    assert f"its static field `meta` is annotated `Meta`, but {why}" in reports["Layer"]["reason"]


def test_flax_static_typed_by_a_subclassed_run_class_is_refused(tmp_path: Path):
    pytest.importorskip("flax")
    source = """
        import dataclasses
        from typing import Tuple

        import flax.struct
        import jax.numpy as jnp


        @dataclasses.dataclass(frozen=True)
        class Config:
            sizes: Tuple[int, ...]


        @dataclasses.dataclass(frozen=True)
        class Loose(Config):
            def __init__(self, sizes):
                object.__setattr__(self, "sizes", sizes)


        @flax.struct.dataclass
        class State:
            x: jnp.ndarray
            config: Config = flax.struct.field(pytree_node=False)
    """
    reports = migrate_package(tmp_path, {"pkg/__init__.py": "", "pkg/state.py": source})
    assert reports["State"]["status"] == "refused"
    assert (
        "its static field `config` is annotated `Config`, but `Loose.__init__` stores `sizes` as `sizes`"
        in reports["State"]["reason"]
    )


@pytest.mark.parametrize(
    ("meta", "annotation"),
    [
        ("class Meta:\n    pass\n", "Meta"),  # identity hashing
        ("@dataclasses.dataclass\nclass Meta:\n    n: list\n", "type[Meta]"),  # a class is hashable
        (
            "@dataclasses.dataclass\nclass Meta:\n    n: list\n",
            "Callable[[Meta], int]",
        ),  # so is a function
        (  # a class that says how it hashes (flax's GraphDef)
            "@dataclasses.dataclass(frozen=True)\nclass Meta:\n    nodes: list\n\n"
            "    def __hash__(self):\n        return hash(tuple(self.nodes))\n",
            "Meta",
        ),
    ],
)
def test_hashable_by_identity_type_or_own_hash_converts(tmp_path: Path, meta: str, annotation: str):
    source = (
        "import dataclasses\nfrom typing import Callable\n\n"
        "from jax.tree_util import register_pytree_node_class\n\n\n"
        + meta
        + textwrap.dedent(f"""

            @register_pytree_node_class
            class Layer:
                def __init__(self, w, meta: {annotation}):
                    self.w = w
                    self.meta = meta

                def tree_flatten(self):
                    return (self.w,), (self.meta,)

                @classmethod
                def tree_unflatten(cls, meta, children):
                    return cls(*children, *meta)
        """)
    )
    reports = migrate_package(tmp_path, {"pkg/__init__.py": "", "pkg/layer.py": source})
    assert reports["Layer"]["status"] == "converted", reports["Layer"]["reason"]
