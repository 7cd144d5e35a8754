"""treeclass.migrate on pytree code it refused for the wrong reason or passed over in
silence. Each case is a real package's code, cut down (the package and line
are named): an untyped `_replace(k=...)`, `_fields` or an unpacking no longer blocks
a NamedTuple (the converted class keeps them); a call is typed by a method's return annotation; a loop over another library's
call binds that library's objects; a vendored copy of flax.struct.dataclass converts as
flax's; equinox.Module classes and classes registered by their base's
`__init_subclass__` are reported, with what to do."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("libcst")

from migrate_runs import forget_pkg, import_fresh, migrate_package

from treeclass.migrate._cli import main


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    forget_pkg()


def _leaves(tree: object) -> list[list[float]]:
    return [np.asarray(x).tolist() for x in jax.tree.leaves(tree)]


# jaxopt 0.8.5, jaxopt/_src/backtracking_linesearch.py:36-47 and :274 (the state's
# `_replace` on an untyped `state`), beside a NamedTuple that nothing replaces.
JAXOPT = {
    "pkg/__init__.py": "",
    "pkg/linesearch.py": """\
        from typing import NamedTuple

        import jax.numpy as jnp


        class LineSearchState(NamedTuple):
            iter_num: int
            value: float


        class OptStep(NamedTuple):
            params: jnp.ndarray
            state: jnp.ndarray


        def update(state, value):
            return state._replace(iter_num=state.iter_num + 1, value=value)


        def step(params):
            return OptStep(params * 2.0, params + 1.0)
        """,
}


def test_an_untyped_replace_no_longer_refuses(root: Path):
    """`state._replace(...)` on an untyped `state` refused LineSearchState; the converted
    class keeps `_replace`, and `update` runs the same."""
    reports = migrate_package(root, JAXOPT, "--namedtuples")
    for name in ("LineSearchState", "OptStep"):
        assert reports[name]["status"] == "converted", reports[name]["reason"]
    runs = []
    for folder in ("before", "after"):
        module = import_fresh(root / folder, "pkg.linesearch")
        state = module.update(module.LineSearchState(1, 0.5), 2.0)
        runs.append([*_leaves(jax.jit(module.step)(jnp.ones(2))), state.iter_num, state.value])
    assert runs[0] == runs[1]


def test_code_that_walks_every_namedtuple_through_fields_and_replace_keeps_working(root: Path):
    """optax 0.2.8, optax/tree_utils/_state_utils.py:621 and :748: code that walks any
    NamedTuple through `_fields` and `_replace(**kw)` refused all of them."""
    files = dict(JAXOPT)
    files["pkg/walk.py"] = """\
        def tree_set(node, **kw):
            return node._replace(**{k: v for k, v in kw.items() if k in node._fields})
        """
    reports = migrate_package(root, files, "--namedtuples")
    for name in ("LineSearchState", "OptStep"):
        assert reports[name]["status"] == "converted", reports[name]["reason"]
    runs = []
    for folder in ("before", "after"):
        step = import_fresh(root / folder, "pkg.linesearch").OptStep(jnp.ones(2), jnp.zeros(2))
        walk = import_fresh(root / folder, "pkg.walk")
        runs.append(_leaves(walk.tree_set(step, state=jnp.ones(2), other=3)))
    assert runs[0] == runs[1]


# jaxlie 1.5.0, jaxlie/_so3.py:197 (`def as_rpy_radians(self) -> RollPitchYaw`): what a
# method returns, by its annotation; here the result is written to.
RETURNS = {
    "pkg/__init__.py": "",
    "pkg/so3.py": """\
        import jax


        @jax.tree_util.register_pytree_node_class
        class RollPitchYaw:
            def __init__(self, roll):
                self.roll = roll

            def tree_flatten(self):
                return (self.roll,), None

            @classmethod
            def tree_unflatten(cls, aux, children):
                return cls(*children)


        @jax.tree_util.register_pytree_node_class
        class Joint:
            def __init__(self, roll):
                self.roll = roll

            def tree_flatten(self):
                return (self.roll,), None

            @classmethod
            def tree_unflatten(cls, aux, children):
                return cls(*children)

            def as_rpy(self) -> "RollPitchYaw":
                return RollPitchYaw(self.roll)


        def zeroed(joint: Joint):
            rpy = joint.as_rpy()
            rpy.roll = 0.0
            return rpy
        """,
}


def test_a_call_is_typed_by_the_method_return_annotation(root: Path):
    reports = migrate_package(root, RETURNS)
    assert reports["RollPitchYaw"]["status"] == "refused"
    assert "`roll` is assigned after construction at `rpy.roll = 0.0`" in reports["RollPitchYaw"]["reason"]
    assert reports["Joint"]["status"] == "converted", reports["Joint"]["reason"]


# An arcade game over pygame (xminigrid-style event loop): `event.key` is pygame's.
EVENTS = {
    "pkg/__init__.py": "",
    "pkg/play.py": """\
        import jax
        import pygame


        @jax.tree_util.register_pytree_node_class
        class Action:
            def __init__(self, key):
                self.key = key

            def tree_flatten(self):
                return (self.key,), None

            @classmethod
            def tree_unflatten(cls, aux, children):
                return cls(*children)


        def poll():
            for event in pygame.event.get():
                event.key = 0
            return [e.key for e in pygame.event.get(0)]
        """,
}


def test_a_write_to_another_library_object_in_a_loop_refuses_nothing(root: Path):
    reports = migrate_package(root, EVENTS)
    assert reports["Action"]["status"] == "converted", reports["Action"]["reason"]


def test_a_loop_over_a_call_given_the_run_objects_stays_unknown(root: Path):
    files = dict(EVENTS)
    files["pkg/play.py"] = files["pkg/play.py"].replace("pygame.event.get():", "itertools.chain(actions):").replace(
        "def poll():", "def poll(actions):"
    ).replace("import pygame", "import itertools\n        import pygame")
    reports = migrate_package(root, files)
    assert reports["Action"]["status"] == "refused"
    assert "`key` is assigned after construction at `event.key = 0`" in reports["Action"]["reason"]


# pgx 2.6.0, pgx/_src/struct.py:47-195 (a copy of flax.struct.dataclass), cut down, and
# pgx/connect_four.py:24-31.
PGX = {
    "pkg/__init__.py": "",
    "pkg/struct.py": """\
        import dataclasses

        import jax


        def dataclass(clz):
            for name in clz.__annotations__.keys():
                if hasattr(clz, name):
                    obj = getattr(clz, name)
                    if obj.__hash__ is None:
                        setattr(clz, name, dataclasses.field(default_factory=lambda x=obj: x))

            data_clz = dataclasses.dataclass(frozen=True)(clz)
            meta_fields, data_fields = [], []
            for field_info in dataclasses.fields(data_clz):
                if field_info.metadata.get("pytree_node", True):
                    data_fields.append(field_info.name)
                else:
                    meta_fields.append(field_info.name)

            def replace(self, **updates):
                return dataclasses.replace(self, **updates)

            data_clz.replace = replace

            def flatten(x):
                meta = tuple(getattr(x, name) for name in meta_fields)
                data = tuple((jax.tree_util.GetAttrKey(name), getattr(x, name)) for name in data_fields)
                return data, meta

            def unflatten(meta, data):
                return data_clz(**dict(tuple(zip(meta_fields, meta)) + tuple(zip(data_fields, data))))

            jax.tree_util.register_pytree_with_keys(data_clz, flatten, unflatten)
            return data_clz
        """,
    "pkg/game.py": """\
        import jax
        import jax.numpy as jnp

        from pkg.struct import dataclass


        @dataclass
        class State:
            current_player: jax.Array = jnp.int32(0)
            board: jax.Array = jnp.zeros(3)


        def step(state):
            return state.replace(current_player=1 - state.current_player, board=state.board + 1)
        """,
}


def test_a_vendored_flax_struct_dataclass_converts_as_flax(root: Path):
    reports = migrate_package(root, PGX)
    assert reports["State"]["status"] == "converted", reports["State"]["reason"]
    assert "class State(tc.TreeClass):" in (root / "after/pkg/game.py").read_text()
    runs = []
    for folder in ("before", "after"):
        game = import_fresh(root / folder, "pkg.game")
        state = jax.jit(game.step)(game.State())
        runs.append((_leaves(state), [str(k) for k, _ in jax.tree_util.tree_leaves_with_path(state)]))
    assert runs[0] == runs[1]


def test_a_wrapper_that_sorts_its_fields_is_no_flax_copy(root: Path):
    files = dict(PGX)
    files["pkg/struct.py"] = files["pkg/struct.py"].replace(
        "dataclasses.fields(data_clz):", "sorted(dataclasses.fields(data_clz), key=lambda f: f.name):"
    )
    reports = migrate_package(root, files)
    assert reports["State"]["status"] == "refused"
    assert "registered by the project's dataclass wrapper `dataclass`" in reports["State"]["reason"]


# numpyro 0.22.0, numpyro/distributions/distribution.py:176-178 and a subclass in
# another module; equinox's examples (an eqx.Module and a subclass).
UNHANDLED = {
    "pkg/__init__.py": "",
    "pkg/dist.py": """\
        from jax import tree_util


        class Distribution:
            def __init_subclass__(cls, **kwargs):
                super().__init_subclass__(**kwargs)
                tree_util.register_pytree_node(cls, cls.tree_flatten, cls.tree_unflatten)
        """,
    "pkg/normal.py": """\
        from pkg.dist import Distribution


        class Normal(Distribution):
            def __init__(self, loc):
                self.loc = loc

            def tree_flatten(self):
                return (self.loc,), None

            @classmethod
            def tree_unflatten(cls, aux, children):
                return cls(*children)


        class HalfNormal(Normal):
            pass
        """,
    "pkg/mlp.py": """\
        import equinox as eqx
        import jax


        class Linear(eqx.Module):
            weight: jax.Array


        class Scaled(Linear):
            scale: float
        """,
}


def test_pytree_classes_the_tool_does_not_rewrite_are_reported(root: Path):
    pytest.importorskip("equinox")
    reports = migrate_package(root, UNHANDLED)
    for name, how in (
        ("Normal", "registered by `Distribution.__init_subclass__` at line 5"),
        ("HalfNormal", "registered by `Distribution.__init_subclass__` at line 5"),
        ("Linear", "a subclass of equinox.Module"),
        ("Scaled", "a subclass of equinox.Module"),
    ):
        assert reports[name]["status"] == "refused"
        assert reports[name]["reason"].startswith(f"{name} is a pytree class that the tool does not rewrite ({how})")
        assert "port it by hand" in reports[name]["reason"]
    assert "Distribution" not in reports  # not a pytree itself
    for name in ("normal", "mlp"):
        assert (root / f"after/pkg/{name}.py").read_text() == (root / f"before/pkg/{name}.py").read_text()
    out, err = io.StringIO(), io.StringIO()
    assert main(["--check", str(root / "after/pkg")], out=out, err=err) == 0
    assert out.getvalue().splitlines()[-1] == "converted 0, refused 4"


def test_an_unpacked_call_of_unknown_type_keeps_working(root: Path):
    """jaxopt 0.8.5, jaxopt/_src/zoom_linesearch.py:770: `new_stepsize, new_state =
    cond(...)` unpacks a LineSearchStep that lax.cond's branches return; it refused
    every NamedTuple with two fields, and the converted class unpacks now."""
    files = dict(JAXOPT)
    files["pkg/zoom.py"] = """\
        from jax import lax

        from pkg.linesearch import OptStep


        def update(params):
            stepsize, state = lax.cond(True, lambda p: OptStep(p, p), lambda p: OptStep(p, p), params)
            return stepsize + state
        """
    reports = migrate_package(root, files, "--namedtuples")
    assert reports["OptStep"]["status"] == "converted", reports["OptStep"]["reason"]
    runs = [_leaves(import_fresh(root / f, "pkg.zoom").update(jnp.ones(2))) for f in ("before", "after")]
    assert runs[0] == runs[1] == [[2.0, 2.0]]
