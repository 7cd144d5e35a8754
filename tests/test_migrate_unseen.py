"""treeclass.migrate on cases cut down from packages it had never been tuned on (ott-jax,
jax-md, mujoco-mjx, vbjax, jaxsim, haiku, parsmooth): each was a wrong conversion, a
silent miss or a wrong reason in a real run, and each runs before and after `--write`."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("libcst")

from migrate_runs import differential, forget_pkg

from treeclass.migrate._cli import main


@pytest.fixture
def root(tmp_path: Path):
    yield tmp_path
    forget_pkg()


def _text_run(folder: Path, *extra: str) -> str:
    """What a run without `--json` prints for the package under `folder`."""
    out, err = io.StringIO(), io.StringIO()
    assert main([*extra, str(folder)], out=out, err=err) != 2, err.getvalue()
    return out.getvalue()


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


# --- ott-jax: a NamedTuple returned by `__call__` ------------------------------------------
OTT_SOLVER = {
    "pkg/__init__.py": "",
    "pkg/solver.py": """
        from typing import NamedTuple
        import jax.numpy as jnp

        class Output(NamedTuple):
            cost: float
            plan: float

        class Solver:
            def __call__(self, x: float) -> Output:
                return Output(x * 2.0, x + 1.0)
    """,
    "pkg/main.py": """
        from pkg.solver import Solver
        solver = Solver()
        cost, plan = solver(3.0)  # the package's users call it: __call__ is public
        print(cost, plan)
    """,
}


def test_a_namedtuple_returned_by_dunder_call_is_the_packages_api(root: Path) -> None:
    reports, before, after = differential(root, OTT_SOLVER, "--namedtuples")
    assert before == after == "6.0 4.0\n"
    assert reports["Output"]["status"] == "refused"
    assert "a public function of the run is annotated to return it" in reports["Output"]["reason"]


# --- a package whose state is NamedTuples, run without --namedtuples ------------------------
def test_a_run_without_namedtuples_says_how_many_it_found_and_the_flag(root: Path) -> None:
    _write(root, OTT_SOLVER)
    text = _text_run(root / "pkg")
    assert text.endswith(
        "treeclass.migrate: found 1 NamedTuple class(es) (Output), not converted: NamedTuples"
        " convert only with --namedtuples (run again with it to see which convert and why the"
        " others cannot). docs/migration.md#namedtuple\nconverted 0, refused 0\n"
    ), text
    assert "found 1 NamedTuple" not in _text_run(root / "pkg", "--namedtuples")
    err = io.StringIO()
    out = io.StringIO()
    main(["--json", str(root / "pkg")], out=out, err=err)
    assert out.getvalue() == "converted 0, refused 0\n"  # --json: stdout keeps its format
    assert "found 1 NamedTuple class(es) (Output)" in err.getvalue()


# --- vbjax: a namedtuple(...) given to register_pytree_node ---------------------------------
VBJAX = {
    "pkg/__init__.py": "",
    "pkg/neural_mass.py": """
        import collections
        import jax

        JRTheta = collections.namedtuple("JRTheta", "A B a b")
        jax.tree_util.register_pytree_node(
            JRTheta, lambda t: (tuple(t), None), lambda _, c: JRTheta(*c)
        )
    """,
    "pkg/main.py": """
        import jax
        from pkg.neural_mass import JRTheta
        print(jax.tree.leaves(JRTheta(1.0, 2.0, 3.0, 4.0)))
    """,
}


def test_a_registered_namedtuple_call_is_reported(root: Path) -> None:
    reports, before, after = differential(root, VBJAX)
    assert before == after == "[1.0, 2.0, 3.0, 4.0]\n"
    assert reports["JRTheta"]["status"] == "refused"
    assert reports["JRTheta"]["line"] == 5
    assert reports["JRTheta"]["reason"].startswith(
        "JRTheta is a pytree class that the tool does not rewrite (a `namedtuple(...)` registered"
        " at line 6, no class statement)"
    ), reports["JRTheta"]["reason"]


# --- mujoco-mjx: subclasses registered by a base's __init_subclass__ through a helper -------
MJX = {
    "pkg/__init__.py": "",
    "pkg/dataclasses.py": """
        import dataclasses
        import jax

        class PyTreeNode:
            def __init_subclass__(cls, **kwargs):
                super().__init_subclass__(**kwargs)
                dataclass(cls)

        def dataclass(clz):
            data_clz = dataclasses.dataclass(frozen=True)(clz)
            _register(data_clz, [f.name for f in dataclasses.fields(data_clz)])
            return data_clz

        def _register(cls, data):
            jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=[])
    """,
    "pkg/types.py": """
        import jax.numpy as jnp
        from pkg.dataclasses import PyTreeNode

        class Model(PyTreeNode):
            qpos0: jnp.ndarray

        class Data(PyTreeNode):
            qpos: jnp.ndarray
            qvel: jnp.ndarray
    """,
    "pkg/main.py": """
        import jax
        import jax.numpy as jnp
        from pkg.types import Data
        print(len(jax.tree.leaves(Data(jnp.zeros(2), jnp.ones(2)))))
    """,
}


def test_subclasses_registered_by_init_subclass_through_a_helper_are_reported(root: Path) -> None:
    reports, before, after = differential(root, MJX)
    assert before == after == "2\n"
    for name in ("Model", "Data"):
        assert reports[name]["status"] == "refused"
        assert reports[name]["reason"].startswith(
            f"{name} is a pytree class that the tool does not rewrite (registered by"
            " `PyTreeNode.__init_subclass__` at line 6)"
        ), reports[name]["reason"]


# --- jax-md: the project's dataclass wrapper, in a folder whose parent has __init__.py -------
JAX_MD = {
    "__init__.py": "",  # the checkout's folder: a package too, by its __init__.py
    "pkg/__init__.py": "",
    "pkg/dataclasses.py": """
        import dataclasses
        import jax

        def dataclass(clz):
            data_clz = dataclasses.dataclass(frozen=True)(clz)
            jax.tree_util.register_dataclass(data_clz)
            return data_clz
    """,
    "pkg/space.py": """
        import jax.numpy as jnp
        from pkg import dataclasses

        @dataclasses.dataclass
        class State:
            position: jnp.ndarray
            velocity: jnp.ndarray
    """,
    "pkg/main.py": """
        import jax
        import jax.numpy as jnp
        from pkg.space import State
        s = State(jnp.zeros(2), jnp.ones(2))
        print(jax.tree.leaves(jax.jit(lambda s: s)(s))[1].tolist())
    """,
}


def test_a_dataclass_wrapper_is_found_when_the_folder_above_is_a_package(root: Path) -> None:
    (root / "before").mkdir()
    (root / "before" / "__init__.py").write_text("")
    files = {k: v for k, v in JAX_MD.items() if k.startswith("pkg/")}
    reports, before, after = differential(root, files)
    assert before == after == "[1.0, 1.0]\n"
    assert reports["State"]["status"] == "converted", reports["State"]["reason"]
    assert "tc.TreeClass" in (root / "after" / "pkg" / "space.py").read_text()


# --- wrong reasons: ott's `**kwargs` aux, jaxsim's own __eq__/__hash__, copy.copy(self) ------
WRONG_REASONS = {
    "pkg/__init__.py": "",
    "pkg/geometry.py": """
        import copy
        import jax_dataclasses
        import jax.numpy as jnp
        from jax.tree_util import register_pytree_node_class

        @register_pytree_node_class
        class Geometry:
            def __init__(self, x, epsilon=1.0, **kwargs):
                self.x = x
                self.epsilon = epsilon
                self._kwargs = kwargs

            def tree_flatten(self):
                return (self.x,), {"epsilon": self.epsilon, **self._kwargs}

            @classmethod
            def tree_unflatten(cls, aux_data, children):
                return cls(*children, **aux_data)

        @register_pytree_node_class
        class Solver:
            def __init__(self, x, lr):
                self.x = x
                self.lr = lr

            def tree_flatten(self):
                return (self.x,), (self.lr,)

            @classmethod
            def tree_unflatten(cls, aux, children):
                return cls(*children, *aux)

        class Cache:  # not a pytree: its copy's write is its own business
            def __init__(self, x):
                self.x = x

            def with_x(self, x):
                new = copy.copy(self)
                new.x = x
                return new

        @jax_dataclasses.pytree_dataclass
        class Link:
            mass: jnp.ndarray

            def __eq__(self, other):
                return self is other

            def __hash__(self):
                return 3
    """,
    "pkg/main.py": """
        import jax
        import jax.numpy as jnp
        from pkg.geometry import Cache, Link, Solver
        s = jax.jit(lambda s: s)(Solver(jnp.ones(2), 0.5))
        link = Link(jnp.zeros(1))
        print(s.x.tolist(), s.lr, Cache(1).with_x(2).x, link == link, link == Link(jnp.zeros(1)))
        print(hash(link))
    """,
}


def test_each_refusal_and_note_names_its_own_cause(root: Path) -> None:
    pytest.importorskip("jax_dataclasses")
    reports, before, after = differential(root, WRONG_REASONS)
    assert before == after == "[1.0, 1.0] 0.5 2 True False\n3\n"
    assert reports["Geometry"]["reason"].startswith(
        "its aux data spreads `**self._kwargs` into a dict"
    ), reports["Geometry"]["reason"]
    assert reports["Solver"]["status"] == "converted", reports["Solver"]["reason"]
    assert "keeps its own __eq__ and __hash__" in reports["Link"]["reason"]
    assert "tc.tree_equal" not in reports["Link"]["reason"]
