"""treeclass.migrate judged by running the package: each case is cut down from a real
package or program whose behaviour a conversion changed (or whose run the tool broke),
and runs its `pkg/main.py` before and after `--write`: the outputs are equal, and the
class that would have changed them is refused with its reason."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("libcst")

from migrate_runs import differential, migrate_package, output

from treeclass.migrate import _rewrite

# torax 1.4.3: `_src/` has no __init__.py, the subclass names its base through a module alias.
_TORAX = {
    "pkg/__init__.py": "",
    "pkg/_src/edge/__init__.py": "",
    "pkg/_src/edge/runtime_params.py": """
        import dataclasses
        import jax

        @jax.tree_util.register_dataclass
        @dataclasses.dataclass(frozen=True)
        class RuntimeParams:
          pass
    """,
    "pkg/_src/edge/model.py": """
        import dataclasses
        import jax
        from pkg._src.edge import runtime_params as edge_runtime_params

        @jax.tree_util.register_dataclass
        @dataclasses.dataclass(frozen=True)
        class RuntimeParams(edge_runtime_params.RuntimeParams):
          tau: float
          mode: str = dataclasses.field(metadata={"static": True}, default="a")

        def solve(state):
          object.__setattr__(state, "tau", 2.0)
          return state
    """,
    "pkg/main.py": """
        import jax
        from pkg._src.edge import model
        p = model.solve(model.RuntimeParams(1.0))
        print(jax.tree.leaves(p), p.tau)
    """,
}


def test_base_and_subclass_across_a_namespace_folder_are_refused_together(root: Path) -> None:
    reports, before, after = differential(root, _TORAX)
    assert before == after == "[2.0] 2.0\n"
    base = next(r for r in reports.values() if r["path"].endswith("runtime_params.py"))
    assert base["status"] == "refused"
    assert "its subclass `RuntimeParams`" in base["reason"]


def test_a_base_the_run_cannot_resolve_refuses_the_class_of_its_name(root: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/base.py": """
            import dataclasses
            import jax

            @jax.tree_util.register_dataclass
            @dataclasses.dataclass(frozen=True)
            class Base:
                x: float
        """,
        "pkg/sub.py": """
            import dataclasses
            from pkg.base import *

            @dataclasses.dataclass(frozen=True)
            class Sub(Base):
                y: float = 0.0
        """,
        "pkg/main.py": """
            from pkg.sub import Sub
            print(Sub(1.0, 2.0))
        """,
    }
    reports, before, after = differential(root, files)
    assert before == after
    assert reports["Base"]["status"] == "refused"
    assert "extends `Base`, which may be `Base`" in reports["Base"]["reason"]


def test_a_plain_dataclass_subclass_under_an_alias_refuses_its_base(root: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/base.py": """
            import dataclasses
            import jax

            @jax.tree_util.register_dataclass
            @dataclasses.dataclass
            class Base:
                x: float
        """,
        "pkg/user.py": """
            import dataclasses
            from pkg.sub import base as alias

            @dataclasses.dataclass
            class Plain(alias.Base):
                y: float = 0.0
        """,
        "pkg/main.py": """
            from pkg.user import Plain
            print(Plain(1.0, 2.0))
        """,
    }
    reports, before, after = differential(root, files)
    assert before == after == "Plain(x=1.0, y=2.0)\n"
    assert reports["Base"]["status"] == "refused"
    assert "is not registered as a pytree" in reports["Base"]["reason"]


def test_a_class_body_on_its_header_line_converts(root: Path) -> None:
    files = {  # xminigrid 0.9.3, types.py
        "pkg/__init__.py": "",
        "pkg/types.py": """
            from flax import struct

            class EnvCarry(struct.PyTreeNode): ...

            class Carry(struct.PyTreeNode): pass  # a comment
        """,
        "pkg/main.py": """
            import jax
            from pkg.types import Carry, EnvCarry
            print(jax.tree.leaves(EnvCarry()), jax.tree.leaves(Carry()))
        """,
    }
    reports, before, after = differential(root, files)
    assert before == after == "[] []\n"
    assert reports["EnvCarry"]["status"] == reports["Carry"]["status"] == "converted"
    assert "# a comment" in (root / "after/pkg/types.py").read_text()


def test_an_internal_error_refuses_that_class_and_the_run_goes_on(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = _rewrite._class

    def failing(node: Any, plan: Any, *args: Any, **kwargs: Any) -> Any:
        if plan.cls == "Broken":
            msg = "a construct the tool does not handle"
            raise AssertionError(msg)
        return real(node, plan, *args, **kwargs)

    monkeypatch.setattr(_rewrite, "_class", failing)
    files = {
        "pkg/__init__.py": "",
        "pkg/m.py": """
            from flax import struct

            class Broken(struct.PyTreeNode):
                x: float

            class Sub(Broken):
                y: float

            class Fine(struct.PyTreeNode):
                z: float
        """,
        "pkg/main.py": """
            import jax
            from pkg.m import Fine, Sub
            print(jax.tree.leaves(Sub(1.0, 2.0)), jax.tree.leaves(Fine(3.0)))
        """,
    }
    reports, before, after = differential(root, files)
    assert before == after
    assert reports["Broken"]["status"] == "refused"
    assert "the tool failed on Broken (AssertionError" in reports["Broken"]["reason"]
    assert "a construct the tool does not handle" in reports["Broken"]["reason"]
    assert reports["Sub"]["status"] == "refused"  # with its base
    assert reports["Fine"]["status"] == "converted"


def test_tuple_use_through_a_method_return_annotation_is_kept(root: Path) -> None:
    files = {  # jaxlie 1.5.0: `SO3.from_rpy_radians(*T.as_rpy_radians())`, `-> hints.RollPitchYaw`
        "pkg/__init__.py": "",
        "pkg/hints.py": """
            from typing import NamedTuple

            class RollPitchYaw(NamedTuple):
                roll: float
                pitch: float
                yaw: float
        """,
        "pkg/so3.py": """
            from pkg import hints

            class SO3:
                def __init__(self, rpy):
                    self.rpy = rpy

                @staticmethod
                def from_rpy_radians(roll, pitch, yaw):
                    return SO3((roll, pitch, yaw))

                def as_rpy_radians(self) -> hints.RollPitchYaw:
                    return hints.RollPitchYaw(*self.rpy)
        """,
        "pkg/main.py": """
            from pkg.so3 import SO3

            def make():
                return SO3((1.0, 2.0, 3.0))

            T = make()
            print(SO3.from_rpy_radians(*T.as_rpy_radians()).rpy)
        """,
    }
    reports, before, after = differential(root, files, "--namedtuples")
    assert before == after == "(1.0, 2.0, 3.0)\n"
    assert reports["RollPitchYaw"]["status"] == "converted", reports["RollPitchYaw"]["reason"]
    assert "a public function of the run is annotated to return it (`return" in reports["RollPitchYaw"]["reason"]


_POINT = """
    from typing import NamedTuple
    import jax.numpy as jnp

    class Point(NamedTuple):
        x: float
        y: float

    def _make() -> Point:  # private: the tool reads its annotation, not as the package's API
        return Point(1.0, 2.0)
"""


@pytest.mark.parametrize(
    "use",
    [
        "jnp.stack(p)",
        "sum(p)",
        "max(p)",
        "jnp.asarray(p)",
        "[v for v in _make()]",
        "list(map(float, p))",
        "p[1]",
        "p[-1:]",
        "len(p)",
        "tuple(p)",
        "dict(zip(p._fields, p))",
        "p._asdict()",
        "p._replace(y=3.0).y",
        "Point._make([5.0, 6.0]).x",
        "[a - b for a, b in [p]]",
        "(lambda a, b: a * b)(*p)",
        "3.0 in p",
    ],
)
def test_namedtuple_used_as_a_sequence_keeps_working(root: Path, use: str) -> None:
    main = f"""
        import jax.numpy as jnp
        from pkg.m import Point, _make
        p = Point(1.0, 2.0)
        try:
            print({use})
        except Exception as e:
            print(type(e).__name__)
    """
    reports, before, after = differential(root, {"pkg/__init__.py": "", "pkg/m.py": _POINT, "pkg/main.py": main}, "--namedtuples")
    assert before == after
    assert "Error" not in before, before
    assert reports["Point"]["status"] == "converted", reports["Point"]["reason"]


@pytest.mark.parametrize(
    "use",
    ["p == (1.0, 2.0)", "isinstance(p, tuple)", "p + (3.0,)", "p * 2", "hash(p) == hash((1.0, 2.0))", "{p: 1}[(1.0, 2.0)]", "len({p, (1.0, 2.0)})"],
)
def test_namedtuple_used_as_a_tuple_is_refused(root: Path, use: str) -> None:
    main = f"""
        import jax.numpy as jnp
        from pkg.m import Point, _make
        p = Point(1.0, 2.0)
        try:
            print({use})
        except Exception as e:
            print(type(e).__name__)
    """
    reports, before, after = differential(root, {"pkg/__init__.py": "", "pkg/m.py": _POINT, "pkg/main.py": main}, "--namedtuples")
    assert before == after
    assert reports["Point"]["status"] == "refused"
    assert reports["Point"]["reason"].startswith("code uses an instance as a tuple where a treeclass cannot be one (1 site(s)"), reports["Point"]["reason"]


def test_a_namedtuple_in_a_public_signature_converts_and_its_users_outside_the_run_keep_working(root: Path) -> None:
    """jaxlie 1.5.0 migrated as its package folder: `SO3.as_rpy_radians() ->
    hints.RollPitchYaw`, star-unpacked by the tests, which are not in the run."""
    files = {
        "pkg/__init__.py": "",
        "pkg/hints.py": "from typing import NamedTuple\n\nclass RollPitchYaw(NamedTuple):\n    roll: float\n    pitch: float\n    yaw: float\n",
        "pkg/so3.py": "from pkg import hints\n\nclass SO3:\n    def as_rpy_radians(self) -> hints.RollPitchYaw:\n        return hints.RollPitchYaw(1.0, 2.0, 3.0)\n",
    }
    reports = migrate_package(root, files, "--namedtuples")
    assert reports["RollPitchYaw"]["status"] == "converted", reports["RollPitchYaw"]["reason"]
    assert "a public function of the run is annotated to return it (`return hints.RollPitchYaw(" in reports["RollPitchYaw"]["reason"]
    outside = "from pkg.so3 import SO3\nprint(sum(SO3().as_rpy_radians()))\n"  # the package's tests
    for folder in (root / "before", root / "after"):
        (folder / "pkg" / "outside.py").write_text(outside)
    assert output(root / "before", "pkg.outside") == output(root / "after", "pkg.outside") == "6.0\n"


@pytest.mark.parametrize("conversion", ["float(x)", "np.asarray(x)"])
def test_init_converting_a_child_that_unflatten_reruns_is_refused(root: Path, conversion: str) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/m.py": f"""
            import jax
            import numpy as np

            @jax.tree_util.register_pytree_node_class
            class Scale:
                def __init__(self, x):
                    self.x = {conversion}

                def tree_flatten(self):
                    return (self.x,), None

                @classmethod
                def tree_unflatten(cls, aux, children):
                    return cls(*children)
        """,
        "pkg/main.py": """
            import jax
            from pkg.m import Scale
            print(type(jax.device_put(Scale(1.0)).x).__name__)
        """,
    }
    reports, before, after = differential(root, files)
    assert before == after
    assert reports["Scale"]["status"] == "refused"
    assert "tree_unflatten calls __init__, which sets `x`" in reports["Scale"]["reason"]


@pytest.mark.parametrize(
    "write",
    [
        "obj = Pair.__new__(Pair)\n    obj.w = 1.0\n    obj.b = 2.0",
        "obj = Pair(0.0, 2.0)\n    obj.__dict__['w'] = 1.0",
    ],
)
def test_writes_that_bypass_the_constructor_are_refused(root: Path, write: str) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/m.py": textwrap.dedent("""
            import dataclasses
            import jax

            @jax.tree_util.register_dataclass
            @dataclasses.dataclass
            class Pair:
                w: float
                b: float
        """) + f"\ndef build():\n    {write}\n    return obj\n",
        "pkg/main.py": """
            import jax
            from pkg.m import build
            print(jax.tree.leaves(build()))
        """,
    }
    reports, before, after = differential(root, files)
    assert before == after == "[1.0, 2.0]\n"
    assert reports["Pair"]["status"] == "refused"
    assert "`w` is assigned after construction" in reports["Pair"]["reason"]


def test_a_write_to_a_field_of_a_grandparent_refuses_the_chain(root: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/m1.py": """
            import dataclasses
            import jax

            @jax.tree_util.register_dataclass
            @dataclasses.dataclass
            class Base:
                x: float

            @jax.tree_util.register_dataclass
            @dataclasses.dataclass
            class Mid(Base):
                y: float
        """,
        "pkg/m2.py": """
            import dataclasses
            import jax
            from pkg import m1 as alias

            @jax.tree_util.register_dataclass
            @dataclasses.dataclass
            class Leaf(alias.Mid):
                z: float
        """,
        "pkg/main.py": """
            import jax
            from pkg import m2
            o = m2.Leaf(1.0, 2.0, 3.0)
            o.__dict__["x"] = 5.0
            print(jax.tree.leaves(o))
        """,
    }
    reports, before, after = differential(root, files)
    assert before == after == "[5.0, 2.0, 3.0]\n"
    assert reports["Leaf"]["status"] == "refused"
    assert "`x` is assigned after construction" in reports["Leaf"]["reason"]
    assert reports["Base"]["status"] == reports["Mid"]["status"] == "refused"
