"""treeclass.migrate on cases cut down from packages it had never been tuned on (ott-jax,
jax-md, mujoco-mjx, vbjax, jaxsim, haiku, parsmooth): each was a wrong conversion, a
silent miss or a wrong reason in a real run, and each runs before and after `--write`."""

from __future__ import annotations

import io
import tempfile
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytest.importorskip("libcst")

from migrate_runs import differential, forget_pkg, migrate_package

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
    """It converted with no word, as if `__call__` were private; it converts now keeping
    its unpacking, and says that code outside the run gets it."""
    reports, before, after = differential(root, OTT_SOLVER, "--namedtuples")
    assert before == after == "6.0 4.0\n"
    assert reports["Output"]["status"] == "converted", reports["Output"]["reason"]
    assert (
        "a public function of the run is annotated to return it (`return Output(x * 2.0, x + 1.0)`"
        in reports["Output"]["reason"]
    )


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


# --- parsmooth: NamedTuples through lax.scan, associative_scan and while_loop, unpacked ------
# Cut down from parsmooth (1,548 lines; its 5 NamedTuples, 0 of which converted): the
# states are unpacked about everywhere (`m, P = x`), indexed (`x[0]`), zipped over
# types, and carried through jax's loops.
PARSMOOTH = {
    "pkg/__init__.py": "",
    "pkg/_base.py": """
        from typing import Any, Callable, NamedTuple

        class MVNStandard(NamedTuple):
            mean: Any
            cov: Any

        class MVNSqrt(NamedTuple):
            mean: Any
            chol: Any

        class FunctionalModel(NamedTuple):
            function: Callable
            mvn: Any

        class FilterCarry(NamedTuple):
            state: Any
            ell: Any

        class SmootherElement(NamedTuple):
            E: Any
            g: Any
            L: Any
    """,
    "pkg/linearization.py": """
        import jax

        def linearize(model, x):
            f, q = model
            m, P = x
            F = jax.jacfwd(f)(m)
            return F, q.cov, f(m) - F @ m + q.mean
    """,
    "pkg/filtering.py": """
        import jax
        import jax.numpy as jnp

        from pkg._base import FilterCarry, MVNSqrt, MVNStandard
        from pkg.linearization import linearize

        def filtering(ys, x0, transition_model, observation_model):
            def body(carry, y):
                x, ell = carry
                F, Q, b = linearize(transition_model, x)
                m, P = x
                m, P = F @ m + b, F @ P @ F.T + Q
                H, R, c = linearize(observation_model, MVNStandard(m, P))
                S = H @ P @ H.T + R
                K = jnp.linalg.solve(S, H @ P).T
                v = y - H @ m - c
                ell = ell - 0.5 * v @ jnp.linalg.solve(S, v)
                x = MVNStandard(m + K @ v, P - K @ S @ K.T)
                return FilterCarry(x, ell), x
            carry, xs = jax.lax.scan(body, FilterCarry(x0, jnp.zeros(())), ys)
            return xs, carry[1]

        def sqrt_state(x):
            m, P = x
            return MVNSqrt(m, jnp.linalg.cholesky(P))

        def gains(xs):
            return [g for g in zip(*xs)]  # zip over the fields, as parsmooth's tests
    """,
    "pkg/smoothing.py": """
        import jax
        import jax.numpy as jnp

        from pkg._base import MVNStandard, SmootherElement
        from pkg.linearization import linearize

        def _operator(e1, e2):
            E1, g1, L1 = e1
            E2, g2, L2 = e2
            return SmootherElement(E2 @ E1, E2 @ g1 + g2, E2 @ L1 @ E2.T + L2)

        def smoothing(transition_model, xs):
            ms, Ps = xs
            def element(m, P):
                F, Q, b = linearize(transition_model, MVNStandard(m, P))
                Pp = F @ P @ F.T + Q
                E = jnp.linalg.solve(Pp, F @ P).T
                return SmootherElement(E, m - E @ (F @ m + b), P - E @ Pp @ E.T)
            elems = jax.vmap(element)(ms[:-1], Ps[:-1])
            last = SmootherElement(jnp.zeros_like(Ps[-1]), ms[-1], Ps[-1])
            elems = jax.tree.map(lambda a, b: jnp.concatenate([a, b[None]]), elems, last)
            result = jax.lax.associative_scan(jax.vmap(_operator), elems, reverse=True)
            _, g, L = result
            return MVNStandard(g, L)

        def iterated(ys, x0, transition_model, observation_model, filtering, n_iter):
            def cond(carry):
                i, _ = carry
                return i < n_iter
            def body(carry):
                i, traj = carry
                xs, _ = filtering(ys, x0, transition_model, observation_model)
                smoothed = smoothing(transition_model, xs)
                return i + 1, MVNStandard(0.5 * (traj[0] + smoothed.mean), smoothed[1])
            init = (0, MVNStandard(jnp.zeros((ys.shape[0], 2)), jnp.zeros((ys.shape[0], 2, 2))))
            _, traj = jax.lax.while_loop(cond, body, init)
            return traj
    """,
    "pkg/main.py": """
        import jax
        import jax.numpy as jnp
        import numpy as np

        from pkg._base import FunctionalModel, MVNStandard
        from pkg.filtering import filtering, gains, sqrt_state
        from pkg.smoothing import iterated, smoothing

        def show(*arrays):
            for a in arrays:
                print(np.asarray(a).tobytes().hex())  # bit for bit

        A = jnp.array([[1.0, 0.1], [0.0, 1.0]])
        trans = FunctionalModel(lambda x: A @ jnp.sin(x) + 0.9 * x, MVNStandard(jnp.zeros(2), 0.01 * jnp.eye(2)))
        obs = FunctionalModel(lambda x: x[:1] ** 2 + x[:1], MVNStandard(jnp.zeros(1), 0.1 * jnp.eye(1)))
        ys = jnp.sin(jnp.arange(12.0)).reshape(12, 1)
        x0 = MVNStandard(jnp.ones(2) * 0.1, jnp.eye(2))
        xs, ell = jax.jit(lambda ys, x0: filtering(ys, x0, trans, obs))(ys, x0)
        show(*xs, ell)
        smoothed = jax.jit(lambda xs: smoothing(trans, xs))(xs)
        show(*jax.tree.leaves(smoothed))
        traj = jax.jit(lambda ys, x0: iterated(ys, x0, trans, obs, filtering, 2))(ys, x0)
        show(traj.mean, traj[1], sqrt_state(MVNStandard(xs.mean[0], xs.cov[0])).chol)
        print(len(gains(xs)), [k for k in xs._asdict()], xs._replace(mean=1.0)[0], len(x0))
        print([str(p) for p in jax.tree_util.tree_flatten_with_path(x0)[0][0][0]])
    """,
}


def test_parsmooth_like_namedtuples_convert_and_print_bit_identical(root: Path) -> None:
    reports, before, after = differential(root, PARSMOOTH, "--namedtuples")
    converted = [n for n, r in reports.items() if r["status"] == "converted"]
    assert len(converted) >= 4, {n: r["reason"] for n, r in reports.items()}
    assert "raised" not in before, before
    assert before == after  # leaves in field order, bit for bit, key paths `.mean`


# --- haiku: LSTMState beside an unrelated `trace_stack[0]` ----------------------------------
HAIKU = {
    "pkg/__init__.py": "",
    "pkg/recurrent.py": """
        from typing import NamedTuple
        import jax
        import jax.numpy as jnp

        class LSTMState(NamedTuple):
            hidden: jax.Array
            cell: jax.Array

        class Frame(NamedTuple):  # stored in the trace stack, tested as a tuple there
            name: str
            depth: int

        def initial_state(n: int) -> LSTMState:
            return LSTMState(jnp.zeros(n), jnp.zeros(n))

        def lstm(x, prev_state):
            h, c = prev_state
            c = 0.5 * c + jnp.tanh(x + h)
            return jnp.tanh(c), LSTMState(jnp.tanh(c), c)

        def unroll(xs, state):
            return jax.lax.scan(lambda s, x: lstm(x, s)[::-1], state, xs)
    """,
    "pkg/base.py": """
        from pkg.recurrent import Frame

        trace_stack = [("outer", 0), Frame("inner", 1)]

        def _is_plain(frame):
            return isinstance(frame, tuple)

        def current():
            return _is_plain(trace_stack[0]), _is_plain(trace_stack[-1])
    """,
    "pkg/main.py": """
        import jax.numpy as jnp
        from pkg.base import current
        from pkg.recurrent import initial_state, unroll

        state, hs = unroll(jnp.ones((3, 2)), initial_state(2))
        print(hs.tolist(), state[0].tolist(), len(state), current())
    """,
}


def test_a_blocking_use_refuses_only_what_can_flow_there(root: Path) -> None:
    reports, before, after = differential(root, HAIKU, "--namedtuples")
    assert before == after, (before, after)
    assert reports["LSTMState"]["status"] == "converted", reports["LSTMState"]["reason"]
    assert reports["Frame"]["status"] == "refused"
    assert "`isinstance(frame, tuple)` at " in reports["Frame"]["reason"]


# --- ott: a data loader unpacked in a loop, beside NamedTuples that never go there -----------
OTT_LOADER = {
    "pkg/__init__.py": "",
    "pkg/data.py": """
        class Loader:
            def __init__(self, xs, ys):
                self.pairs = list(zip(xs, ys))

            def __iter__(self):
                return iter(self.pairs)

        def total(ld):
            out = 0.0
            for a, b in ld:
                out += a * b
            return out
    """,
    "pkg/states.py": """
        from typing import NamedTuple
        import jax.numpy as jnp

        class SinkhornState(NamedTuple):
            errors: jnp.ndarray
            fu: jnp.ndarray

        class GWState(NamedTuple):
            costs: jnp.ndarray
            plan: jnp.ndarray

        def step(state: SinkhornState) -> SinkhornState:
            errors, fu = state
            return state._replace(errors=errors + 1.0, fu=fu * 2.0)
    """,
    "pkg/main.py": """
        import jax.numpy as jnp
        from pkg.data import Loader, total
        from pkg.states import GWState, SinkhornState, step

        s = step(step(SinkhornState(jnp.zeros(2), jnp.ones(2))))
        g = GWState(jnp.ones(1), jnp.eye(1))
        print(total(Loader([1.0, 2.0], [3.0, 4.0])), s.errors.tolist(), s[1].tolist(), [*g][0].tolist())
    """,
}


def test_a_loader_unpacked_in_a_loop_blocks_nothing(root: Path) -> None:
    reports, before, after = differential(root, OTT_LOADER, "--namedtuples")
    assert before == after == "11.0 [2.0, 2.0] [4.0, 4.0] [1.0]\n"
    for name in ("SinkhornState", "GWState"):
        assert reports[name]["status"] == "converted", reports[name]["reason"]


# --- one run lists every blocking site --------------------------------------------------------
EVERY_SITE = {
    "pkg/__init__.py": "",
    "pkg/m.py": """
        from typing import NamedTuple
        import jax

        class Pair(NamedTuple):
            a: float
            b: float

        @jax.tree_util.register_pytree_node_class
        class Box:
            def __init__(self, w):
                self.w = w

            def tree_flatten(self):
                return (self.w,), None

            @classmethod
            def tree_unflatten(cls, aux, children):
                return cls(*children)

        def uses(p: Pair, box: Box):
            box.w = 1.0
            box.w = 2.0
            return isinstance(p, tuple), p == (1.0, 2.0), p + (3.0,), {p: 1}
    """,
}


def test_a_refusal_lists_every_blocking_site_with_its_fix(root: Path) -> None:
    reports = migrate_package(root, EVERY_SITE, "--namedtuples")
    here = str(root / "after" / "pkg" / "m.py")
    pair, box = reports["Pair"]["reason"], reports["Box"]["reason"]
    assert pair.startswith(
        "code uses an instance as a tuple where a treeclass cannot be one (4 site(s);"
    ), pair
    for i, (code, fix) in enumerate(
        [
            ("isinstance(p, tuple)", "isinstance(x, tuple) is False for a treeclass"),
            ("p == (1.0, 2.0)", "a treeclass never equals a tuple"),
            ("p + (3.0,)", "+ and * do not concatenate a treeclass"),
            ("{p: 1}", "a treeclass hashes by type and static fields"),
        ],
        1,
    ):
        assert f"({i}) `{code}` at {here}:24: {fix}" in pair, pair
    assert f"`box.w = 1.0` at {here}:22; `box.w = 2.0` at {here}:23:" in box, box


# --- a family is one rule in one registry -----------------------------------------------------
def test_a_new_family_is_one_rule_in_the_registry(root: Path, monkeypatch: pytest.MonkeyPatch):
    """What a newcomer writes to add a family: a `Rule` (its decorator, and which fields
    are static), listed in `_families.RULES`; nothing else in the tool changes."""
    from treeclass.migrate import _families
    from treeclass.migrate._families.flax_struct import marked_static
    from treeclass.migrate._rule import Rule

    rule = Rule("mylib", decorators=frozenset({"mylib.pytree"}), statics=marked_static)
    monkeypatch.setattr(_families, "RULES", (*_families.RULES, rule))
    monkeypatch.setitem(_families.BY_NAME, "mylib", rule)
    files = {
        "pkg/__init__.py": "",
        "pkg/m.py": """
            import mylib

            @mylib.pytree
            class Point:
                x: float
                y: float = 1.0
        """,
    }
    reports = migrate_package(root, files)
    assert reports["Point"]["status"] == "converted", reports["Point"]["reason"]
    assert (root / "after" / "pkg" / "m.py").read_text() == (
        "\nimport treeclass as tc\n\nclass Point(tc.TreeClass):\n    x: float\n    y: float = 1.0\n"
    )


# --- what can flow into an untyped name: cut down from haiku's real run ---------------------
_STATE = """
    from typing import NamedTuple
    import jax.numpy as jnp

    class LSTMState(NamedTuple):
        hidden: jnp.ndarray
        cell: jnp.ndarray

    def initial_state(n: int) -> LSTMState:
        return LSTMState(jnp.zeros(n), jnp.ones(n))
"""


@pytest.mark.parametrize(
    ("code", "converts"),
    [
        pytest.param(  # haiku/_src/base.py:1040: the annotation says what it holds
            "def seed(key_or_seed: int | tuple):\n    return isinstance(key_or_seed, tuple)\n"
            "print(seed(3), seed((1, 2)), len(initial_state(2)))\n",
            True,
            id="an-annotated-parameter",
        ),
        pytest.param(  # haiku/_src/bias.py:166: `[1] * n` is a list repeated, n an int
            "def ones(n):\n    return [1] * n\n"
            "print(ones(len(initial_state(2))), initial_state(2)[1].tolist())\n",
            True,
            id="a-list-repeated",
        ),
        pytest.param(  # haiku/_src/pool_test.py:46: a tuple display is a plain tuple
            "dims = (2, 3)\nprint(dims + (4,), [*initial_state(1)][0].tolist())\n",
            True,
            id="a-tuple-display",
        ),
        pytest.param(  # haiku/_src/recurrent_test.py:172: so is a tuple repeated or added
            "def shape(n):\n    s = (16,) * n\n    s = s + (4,)\n    return (2,) + s\n"
            "print(shape(2), initial_state(1)[0].tolist())\n",
            True,
            id="a-tuple-repeated",
        ),
        pytest.param(  # the state handed on through a closure and a second function
            "def outer(s):\n    def inner():\n        return check(s)\n    return inner()\n\n"
            "def check(p):\n    return isinstance(p, tuple)\n\n"
            "print(outer(initial_state(2)))\n",
            False,
            id="handed-on-to-a-blocking-use",
        ),
        pytest.param(  # the same functions, never given the state
            "def outer(s):\n    def inner():\n        return check(s)\n    return inner()\n\n"
            "def check(p):\n    return isinstance(p, tuple)\n\n"
            "print(outer((1, 2)), len(initial_state(2)))\n",
            True,
            id="the-same-functions-never-given-it",
        ),
        pytest.param(  # qdax's crowding distance: a list display added or repeated
            "def crowding(n, rest):\n    return [float('inf')] * n + [n] + rest\n"
            "print(crowding(2, [1]), len([initial_state(1)]))\n",
            True,
            id="a-list-display-added",
        ),
        pytest.param(  # haiku's MLP sizes: a parameter annotated as a tuple of ints
            "from typing import Tuple\n\n"
            "def sizes(hidden: Tuple[int, ...], out: int):\n    return hidden + (out,)\n"
            "for v in ((2, 3), (4,)):  # untyped values: only the annotation says what\n"
            "    print(sizes(v, 4), len([initial_state(1)]))\n",
            True,
            id="an-int-tuple-parameter-added",
        ),
        pytest.param(  # an untyped function only ever given a tuple display
            "def shape_of(x):\n    return len(x) if isinstance(x, tuple) else 0\n"
            "print(shape_of((1, 2)), len([initial_state(1)]))\n",
            True,
            id="only-given-a-tuple-display",
        ),
        pytest.param(  # haiku's PRNGSequence: a union whose tuple holds other types
            "from typing import Union\n\n"
            "def seed(k: Union[int, tuple[int, list[int]]]):\n"
            "    return k[0] if isinstance(k, tuple) else k\n"
            "for v in (3, (1, [2])):\n"
            "    print(seed(v), len([initial_state(1)]))\n",
            True,
            id="a-union-of-other-tuples",
        ),
        pytest.param(  # a comprehension over a list annotated with ints and int pairs
            "from typing import List, Tuple, Union\n\n"
            "def listerize(ranges: List[Union[int, Tuple[int, int]]]) -> List[int]:\n"
            "    return [i for r in ranges\n"
            "            for i in (range(r[0], r[1] + 1) if isinstance(r, tuple) else [r])]\n"
            "states = [initial_state(1)]  # an instance in a list: it reaches untyped code\n"
            "print(listerize([1, (3, 5)]), len(states))\n",
            True,
            id="a-comprehension-over-an-annotated-list",
        ),
        pytest.param(  # the same loop over a list annotated with the class: it is there
            "from typing import List\n\n"
            "def flags(states: List[LSTMState]):\n"
            "    return [isinstance(s, tuple) for s in states]\n"
            "print(flags([initial_state(1)]))\n",
            False,
            id="a-comprehension-over-a-list-of-the-class",
        ),
        pytest.param(  # a bare `list` says nothing of its items
            "def flags(states: list):\n"
            "    return [isinstance(s, tuple) for s in states]\n"
            "print(flags([initial_state(1)]))\n",
            False,
            id="a-comprehension-over-a-bare-list",
        ),
    ],
)
def test_a_blocking_use_counts_only_what_flows_there(root: Path, code: str, converts: bool):
    files = {"pkg/__init__.py": "", "pkg/state.py": _STATE, "pkg/main.py": ""}
    files["pkg/main.py"] = "from pkg.state import LSTMState, initial_state\n\n" + code
    reports, before, after = differential(root, files, "--namedtuples")
    assert before == after, (before, after)
    assert "raised" not in before, before
    status = reports["LSTMState"]["status"]
    assert status == ("converted" if converts else "refused"), reports["LSTMState"]["reason"]


# The generator for the cases above: a parameter annotated with types that name no
# NamedTuple of the run (ints, strings, tuples and lists of them, unions), tested with
# `isinstance(x, tuple)` directly or on each item of it, and given values the run cannot
# type. Only the annotation says what is there: without the class the site blocks
# nothing; with the class among its members the site refuses it.
_ANNOTATIONS = st.recursive(
    st.sampled_from(["int", "str", "float", "bytes"]),
    lambda inner: st.one_of(
        st.builds("Union[{}, {}]".format, inner, inner),
        st.builds("Tuple[{}, {}]".format, inner, inner),
        st.builds("tuple[{}, ...]".format, inner),
        st.builds("List[{}]".format, inner),
        st.builds("{} | {}".format, inner, inner),
    ),
    max_leaves=4,
)


@settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(annotation=_ANNOTATIONS, each=st.booleans(), with_class=st.booleans())
@example(annotation="Union[int, Tuple[int, int]]", each=True, with_class=False)  # the repro
def test_an_annotation_decides_what_reaches_a_blocking_use(
    annotation: str, each: bool, with_class: bool
) -> None:
    item = f"Union[{annotation}, LSTMState]" if with_class else annotation
    site = (
        f"def site(x: List[{item}]):\n    return [isinstance(r, tuple) for r in x]\n"
        if each
        else f"def site(x: {item}):\n    return isinstance(x, tuple)\n"
    )
    files = {
        "pkg/__init__.py": "",
        "pkg/state.py": _STATE,
        "pkg/main.py": "from typing import List, Tuple, Union\n"
        "from pkg.state import LSTMState, initial_state\n\n"
        f"{site}\n"
        "for v in ([],):  # a value the run cannot type\n"
        "    print(site(v))\n"
        "states = [initial_state(1)]  # an instance in a list: it reaches untyped code\n",
    }
    try:
        with tempfile.TemporaryDirectory() as folder:
            reports = migrate_package(Path(folder), files, "--namedtuples")
    finally:
        forget_pkg()
    status = reports["LSTMState"]["status"]
    assert status == ("refused" if with_class else "converted"), (site, reports["LSTMState"])


# --- jax-cosmo 0.1.0: the flatten protocol on a base that is not registered ------------------
# `container` defines tree_flatten / tree_unflatten; only its subclasses carry
# `@register_pytree_node_class`. The run used to skip the base, then refuse each subclass
# for a base "that is not a pytree class".
JAX_COSMO = {
    "pkg/__init__.py": "",
    "pkg/jax_utils.py": """
        class container(object):
            def __init__(self, *args, **kwargs):
                self.params = args
                self.config = kwargs

            def tree_flatten(self):
                children = self.params
                aux_data = self.config
                return (children, aux_data)

            @classmethod
            def tree_unflatten(cls, aux_data, children):
                return cls(*children, **aux_data)
    """,
    "pkg/bias.py": """
        from jax.tree_util import register_pytree_node_class
        from pkg.jax_utils import container

        @register_pytree_node_class
        class constant_linear_bias(container):
            def __call__(self, z):
                (b,) = self.params
                return b * z
    """,
    "pkg/fixed.py": """
        from jax.tree_util import register_pytree_node_class

        class Base:  # one attribute per child: convertible, but not registered itself
            def __init__(self, a, b):
                self.a = a
                self.b = b

            def tree_flatten(self):
                return (self.a, self.b), None

            @classmethod
            def tree_unflatten(cls, aux, children):
                return cls(*children)

        @register_pytree_node_class
        class Sub(Base):
            pass
    """,
    "pkg/main.py": """
        import jax
        from pkg.bias import constant_linear_bias
        from pkg.fixed import Base, Sub

        b = jax.tree.map(lambda x: x * 2.0, constant_linear_bias(1.5))
        print(b(2.0), jax.tree.leaves(Sub(1.0, 2.0)), len(jax.tree.leaves(Base(1.0, 2.0))))
    """,
}


def test_a_base_that_defines_the_flatten_of_registered_subclasses_is_a_root(root: Path) -> None:
    reports, before, after = differential(root, JAX_COSMO)
    assert before == after, (before, after)
    assert "raised" not in before, before
    assert {c: r["status"] for c, r in reports.items()} == dict.fromkeys(
        ["container", "constant_linear_bias", "Base", "Sub"], "refused"
    )
    assert reports["container"]["reason"].startswith(
        "its children are `self.params` itself, a sequence of any length"
    ), reports["container"]["reason"]
    assert reports["constant_linear_bias"]["reason"].startswith(
        "its base class `container` is refused"
    ), reports["constant_linear_bias"]["reason"]
    assert reports["Base"]["reason"].startswith(
        "`Base` is not registered itself, but the registered class `Sub` extends it and "
        "flattens through the tree_flatten / tree_unflatten `Base` defines or inherits"
    ), reports["Base"]["reason"]
    assert reports["Sub"]["reason"].startswith("its base class `Base` is refused")


# --- haiku: why an untyped site counts against LSTMState -------------------------------------
HAIKU_DOT = {
    "pkg/__init__.py": "",
    "pkg/state.py": _STATE,
    "pkg/dot.py": """
        def _graph_to_dot(outputs):  # haiku/_src/dot.py:304: labels a tuple's paths
            if isinstance(outputs, tuple):
                return [f"output[{i}]" for i in range(len(outputs))]
            return ["output"]

        def to_dot(fun):
            return lambda *args: _graph_to_dot(fun(*args))
    """,
    "pkg/main.py": """
        from pkg.dot import to_dot
        from pkg.state import initial_state

        print(to_dot(initial_state)(2))
    """,
}


def test_an_untyped_blocking_site_says_why_it_counts(root: Path) -> None:
    reports, before, after = differential(root, HAIKU_DOT, "--namedtuples")
    assert before == after == "['output[0]', 'output[1]']\n", (before, after)
    reason = reports["LSTMState"]["reason"]
    assert reports["LSTMState"]["status"] == "refused", reason
    assert "`isinstance(outputs, tuple)` at " in reason, reason
    why = "test the class instead (a parameter of `_graph_to_dot`, whose calls can give it `LSTMState`"
    assert why in reason, reason


# The generator that would have found the jax-cosmo miss: a chain of classes, each of
# which defines the flatten protocol or inherits it, and is registered or not (the last
# always is). Every class that defines it under a registered class is reported, and no
# subclass is refused for a base "that is not a pytree class".
_LEVEL = st.tuples(st.booleans(), st.booleans())  # (defines the flatten, registered)


def _chain(levels: list[tuple[bool, bool]]) -> dict[str, str]:
    body = ["import jax\n"]
    for i, (defines, registered) in enumerate(levels):
        base = f"(C{i - 1})" if i else ""
        decorator = "@jax.tree_util.register_pytree_node_class\n" if registered else ""
        methods = (
            "    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n"
            "    def tree_flatten(self):\n        return (self.x, self.y), None\n\n"
            "    @classmethod\n    def tree_unflatten(cls, aux, children):\n"
            "        return cls(*children)\n"
            if defines
            else "    pass\n"
        )
        body.append(f"\n\n{decorator}class C{i}{base}:\n{methods}")
    shown = ", ".join(f"len(jax.tree.leaves(m.C{i}(1.0, 2.0)))" for i in range(len(levels)))
    main = f"import jax\nfrom pkg import m\n\nprint({shown})\n"
    return {"pkg/__init__.py": "", "pkg/m.py": "".join(body), "pkg/main.py": main}


@settings(max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@example((True, True), [(False, False), (True, True)])  # found by it: a plain class between
@example((True, False), [(False, False), (False, True)])  # (the flatten inherited through it)
@given(
    st.tuples(st.booleans(), st.booleans()).map(lambda first: (True, first[1])),
    st.lists(_LEVEL, max_size=2),
)
def test_every_class_defining_the_flatten_of_a_registered_class_is_reported(
    first: tuple[bool, bool], more: list[tuple[bool, bool]]
) -> None:
    levels = [first, *more]
    levels[-1] = (levels[-1][0], True)
    with tempfile.TemporaryDirectory() as folder:
        try:
            reports, before, after = differential(Path(folder), _chain(levels))
        finally:
            forget_pkg()
    assert before == after, (levels, before, after)
    for i, (defines, _) in enumerate(levels):
        if defines:
            assert f"C{i}" in reports, (levels, reports)
    for report in reports.values():
        assert "is not a pytree class converted in this run" not in report["reason"], report


# --- haiku 0.0.17: a sum of an unannotated function's results --------------------------------
# integration/descriptors.py:351 adds a tuple display to `RECURRENT_MODULES`, the sum of two
# calls of `unroll_descriptors`, which returns `tuple(out)`: no NamedTuple can be there, and
# LSTMState used to be refused for it.
HAIKU_DESCRIPTORS = {
    "pkg/__init__.py": "",
    "pkg/state.py": _STATE,
    "pkg/descriptors.py": """
        from typing import NamedTuple

        class ModuleDescriptor(NamedTuple):
            name: str
            shape: tuple

        def unroll_descriptors(descriptors, unroller):
            out = []
            for name, shape in descriptors:
                out.append(ModuleDescriptor(name=f"{name}({unroller})", shape=shape))
            return tuple(out)

        RNN_CORES = (ModuleDescriptor("LSTM", (8, 2)),)
        RECURRENT_MODULES = (
            unroll_descriptors(RNN_CORES, "dynamic") + unroll_descriptors(RNN_CORES, "static")
        )
        NO_NEXT_RNG_KEY_MODULES = (ModuleDescriptor("Flatten", (8, 3)),) + RECURRENT_MODULES
        LOCAL_ONES = unroll_descriptors(RNN_CORES, "local")
        PAIRS = LOCAL_ONES == (1, 2), isinstance(LOCAL_ONES, tuple), LOCAL_ONES + (0,)
    """,
    "pkg/main.py": """
        from pkg.descriptors import NO_NEXT_RNG_KEY_MODULES, PAIRS
        from pkg.state import initial_state

        h, c = initial_state(2)
        print([d.name for d in NO_NEXT_RNG_KEY_MODULES], PAIRS[:2], len(PAIRS[2]))
        print(h.tolist(), c.tolist(), [len(s) for s in [initial_state(1)]])
    """,
}


def test_a_sum_of_what_an_unannotated_function_returns_blocks_nothing(root: Path) -> None:
    reports, before, after = differential(root, HAIKU_DESCRIPTORS, "--namedtuples")
    assert before == after, (before, after)
    assert "raised" not in before, before
    for name in ("LSTMState", "ModuleDescriptor"):
        assert reports[name]["status"] == "converted", reports[name]["reason"]


# --- haiku 0.0.17: a test module's guess does not block the package's classes -----------------
# transform_test.py:129 tests `f.init(None)` with `isinstance(args, tuple)`: the run cannot
# type `args`, and LSTMState, which reaches untyped code, was refused for it.
_TRANSFORM = """
    class Transformed:
        def __init__(self, init):
            self.init = init

    def transform(f):
        return Transformed(lambda rng: {})

    def transform_with_state(f):
        return Transformed(lambda rng: ({}, {}))
"""
_TRANSFORM_TEST = """
    from pkg.state import initial_state
    from pkg.transform import transform, transform_with_state

    def invalid_rng_none_ignored(transform_fn):
        f = transform_fn(lambda: None)
        args = f.init(None)
        if not isinstance(args, tuple):
            args = (args,)
        return len(args)
"""
_TYPED_TEST = """
    def state_is_a_tuple():  # typed: an LSTMState for sure, and a test that would fail
        return isinstance(initial_state(1), tuple)
"""


@pytest.mark.parametrize(
    ("module", "typed", "converts"),
    [
        pytest.param("transform_test", False, True, id="a-test-module-guess"),
        pytest.param("test_transform", False, True, id="a-test-module-guess-test-first"),
        pytest.param("conftest", False, True, id="a-conftest-guess"),
        pytest.param("transform_helpers", False, False, id="the-same-use-in-the-package"),
        pytest.param("transform_test", True, False, id="a-test-module-typed-use"),
    ],
)
def test_a_test_modules_guess_is_listed_not_blocking(
    root: Path, module: str, typed: bool, converts: bool
) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/state.py": _STATE,
        "pkg/transform.py": _TRANSFORM,
        f"pkg/{module}.py": _TRANSFORM_TEST + (_TYPED_TEST if typed else ""),
        "pkg/main.py": f"""
            from pkg import {module}
            from pkg.state import initial_state
            from pkg.transform import transform, transform_with_state

            print({module}.invalid_rng_none_ignored(transform))
            print({module}.invalid_rng_none_ignored(transform_with_state))
            print([len(s) for s in [initial_state(1)]])
        """,
    }
    reports, before, after = differential(root, files, "--namedtuples")
    assert "raised" not in before, before
    reason = reports["LSTMState"]["reason"]
    site = "`isinstance(args, tuple)` at "
    if converts:
        assert before == after, (before, after)
        assert reports["LSTMState"]["status"] == "converted", reason
        assert (
            "a test uses a value the run cannot type as a tuple, where an instance may be (1 site(s)): (1) "
            + site
            in reason
        ), reason
        assert "these do not block the conversion" in reason, reason
    else:
        assert reports["LSTMState"]["status"] == "refused", reason
        typed_site = "`isinstance(initial_state(1), tuple)` at "
        assert (typed_site if typed else site) in reason, reason


# The generator for the two cases above: a helper without annotations returns one or two
# of these (under a branch), its result is bound (or added to another call's) and used as
# a tuple in a way a treeclass cannot keep, in a package module or a test module, in a run
# that may define `__add__` on a class (then `a + b` may be anything). LSTMState, which
# reaches untyped code, is refused exactly when the value can be an instance and the use
# is the package's; each program prints the same before and after.
_RETURNS = {  # the helper's `return`, and whether it is plain (no instance) without __add__
    "tuple(out)": True,
    "list(out)": True,
    "(len(out), 2)": True,
    "tuple(out) + tuple(out)": True,
    "tuple(out) * 2": True,
    "out * 2": False,  # a local of the helper: not followed (it may hold anything)
    "xs": False,  # its parameter: what it is given (an LSTMState, below)
    "LSTMState(jnp.zeros(1), jnp.ones(1))": False,
}
_SUMS = ("tuple(out) + tuple(out)", "tuple(out) * 2")  # plain where no class defines + or *
_USES = ("isinstance(value, tuple)", "value == (1, 2)", "len(value + (0,))")


@settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    results=st.lists(st.sampled_from(sorted(_RETURNS)), min_size=1, max_size=2, unique=True),
    summed=st.booleans(),
    use=st.sampled_from(_USES),
    module=st.sampled_from(["site", "site_test", "test_site"]),
    operator=st.booleans(),
)
@example(  # the haiku repro: a sum of two `tuple(out)` results, beside a tuple display
    results=["tuple(out)"], summed=True, use="len(value + (0,))", module="site", operator=False
)
def test_what_an_unannotated_helper_returns_decides_a_blocking_use(
    results: list[str], summed: bool, use: str, module: str, operator: bool
) -> None:
    body = "".join(
        f"    if len(out) == {i}:\n        return {r}\n" for i, r in enumerate(results[:-1])
    )
    helper = "def helper(xs):\n    out = [1, 2]\n" + body + f"    return {results[-1]}\n"
    value = "helper(s) + helper(s)" if summed else "helper(s)"
    files = {
        "pkg/__init__.py": "",
        "pkg/state.py": _STATE,
        "pkg/ops.py": "class Vec:\n    def __add__(self, other):\n        return self\n\n"
        "    def __rmul__(self, other):\n        return self\n"
        if operator
        else "",
        f"pkg/{module}.py": "import jax.numpy as jnp\n"
        "from pkg.state import LSTMState, initial_state\n\n"
        f"{helper}\n"
        "def run(s):\n"
        f"    value = {value}\n"
        "    try:\n"
        f"        return {use}\n"
        "    except TypeError as e:\n"
        "        return type(e).__name__\n",
        "pkg/main.py": f"from pkg.{module} import run\nfrom pkg.state import initial_state\n\n"
        "print(run(initial_state(1)), [len(s) for s in [initial_state(1)]])\n",
    }
    # A sum of two plain results is plain too, unless a class of the run defines `+`.
    plain = all(_RETURNS[r] and not (operator and r in _SUMS) for r in results)
    plain = plain and not (summed and operator)
    try:
        with tempfile.TemporaryDirectory() as folder:
            reports, before, after = differential(Path(folder), files, "--namedtuples")
    finally:
        forget_pkg()
    status = reports["LSTMState"]["status"]
    converts = plain or module != "site"  # a test module's guess is listed, not blocking
    assert status == ("converted" if converts else "refused"), (files, reports["LSTMState"])
    if plain or not converts:  # a test that would now fail is what the note warns of
        assert before == after, (files, before, after)


# --- jax-cfd 0.2.1: an array given to a static field, directly or through a helper -----------
# `GridArray` keeps `offset` in its aux data (a static field once converted); the package's
# interpolation_test builds one with `jnp.zeros(shape)` as the offset, through a helper
# `periodic_grid_variable(data, offset, grid)`. The old class took the array; a treeclass
# raises at construction, so the test broke after `--write`.
_GRIDS = """
    import dataclasses
    from typing import Tuple

    import jax.numpy as jnp
    from jax.tree_util import register_pytree_node_class

    @register_pytree_node_class
    @dataclasses.dataclass
    class GridArray:
        data: jnp.ndarray
        offset: Tuple[float, ...]

        def tree_flatten(self):
            return (self.data,), (self.offset,)

        @classmethod
        def tree_unflatten(cls, aux_data, children):
            return cls(*children, *aux_data)
"""
_GIVEN = {  # a value given as the offset, and whether a static field can hold it
    "jnp.zeros(3)": False,
    "[0.0, 0.5]": False,
    "np.asarray([0.5])": False,
    "(0.0, 0.5)": True,
    "0.5": True,
    "np.float32(0.5)": True,  # a NumPy scalar hashes
    "jax.tree.structure((1, 2))": True,  # haiku's Box holds a treedef, which hashes
}
_ROUTES = {  # how the test builds the GridArray, `{v}` the offset
    "direct": "grids.GridArray(jnp.ones(3), {v})",
    "helper": "make(jnp.ones(3), {v})",
    "helper-keyword": "make(jnp.ones(3), offset={v})",
    "method": "Builder().make(jnp.ones(3), {v})",
    "keyword-only": "make_kw(jnp.ones(3), offset={v})",
}
_HELPERS = """
    def make(data, offset):
        return grids.GridArray(data, offset)

    def make_kw(data, *, offset):  # a keyword-only parameter handed on (the run crashed)
        return grids.GridArray(data, offset=offset)

    class Builder:
        def make(self, data, offset):
            return grids.GridArray(data, offset)
"""


def _cfd(given: str, route: str, module: str) -> dict[str, str]:
    build = _ROUTES[route].format(v=given)
    return {
        "pkg/__init__.py": "",
        "pkg/grids.py": _GRIDS,
        f"pkg/{module}.py": "import jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom pkg import grids\n"
        + textwrap.dedent(_HELPERS)
        + f"\ndef test_offset():\n    u = {build}\n    return u.data.shape, type(u.offset).__name__\n",
        "pkg/main.py": f"from pkg.{module} import test_offset\n\n"
        "try:\n    print(test_offset())\nexcept TypeError as e:\n    print('raised', type(e).__name__)\n",
    }


@pytest.mark.parametrize("route", sorted(_ROUTES))
def test_an_array_given_to_a_static_field_refuses_the_class(root: Path, route: str) -> None:
    reports, before, after = differential(root, _cfd("jnp.zeros(3)", route, "grids_test"))
    assert before == after == "((3,), 'ArrayImpl')\n", (before, after)
    reason = reports["GridArray"]["reason"]
    assert reports["GridArray"]["status"] == "refused", reason
    assert reason.startswith("its static field `offset` is given an unhashable value at `"), reason
    assert "jnp.zeros(3))` at " in reason, reason
    assert "grids_test.py:" in reason, reason


# The generator for the case above: a value given as the offset (arrays, lists, tuples,
# floats), directly or through a helper's parameter (by position, by keyword, a method's),
# in a test module or the package. The class is refused exactly when a static field
# cannot hold the value, and the program prints the same before and after.
@settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    given_value=st.sampled_from(sorted(_GIVEN)),
    route=st.sampled_from(sorted(_ROUTES)),
    module=st.sampled_from(["grids_test", "use"]),
)
@example(given_value="jnp.zeros(3)", route="keyword-only", module="use")  # the run crashed
@example(given_value="jax.tree.structure((1, 2))", route="direct", module="use")  # haiku's Box
def test_what_a_static_field_is_given_decides_the_conversion(
    given_value: str, route: str, module: str
) -> None:
    try:
        with tempfile.TemporaryDirectory() as folder:
            files = _cfd(given_value, route, module)
            reports, before, after = differential(Path(folder), files, "--namedtuples")
    finally:
        forget_pkg()
    status = reports["GridArray"]["status"]
    assert status == ("converted" if _GIVEN[given_value] else "refused"), reports["GridArray"]
    assert before == after, (files, before, after)
    assert "raised" not in before, before


# --- haiku, ott-jax: a pytree class below module level is reported, never silent -------------
# haiku's layer_stack_test.py defines a `@register_pytree_node_class` class inside a test
# function; ott-jax defines `State(NamedTuple)` in a class body. Both got no record at all.
_CLASSES = {  # a pytree class of each family, its body at the left margin
    "handwritten": "@jax.tree_util.register_pytree_node_class\n"
    "class P:\n"
    "    def __init__(self, w):\n        self.w = w\n\n"
    "    def tree_flatten(self):\n        return (self.w,), None\n\n"
    "    @classmethod\n    def tree_unflatten(cls, aux, children):\n        return cls(*children)\n",
    "flax": "@struct.dataclass\nclass P:\n    w: jax.Array\n",
    "namedtuple": "class P(NamedTuple):\n    w: jax.Array\n",
}
_PLACES = {  # where the class is defined, and how the program reaches it
    "module": ("{cls}", "P"),
    "function": ("def make():\n{cls}\n    return P\n", "make()"),
    "class-body": ("class Holder:\n{cls}", "Holder.P"),
    "if-block": ("if True:\n{cls}", "P"),
}


def _placed(family: str, place: str) -> dict[str, str]:
    template, reach = _PLACES[place]
    body = _CLASSES[family]
    if place != "module":
        body = textwrap.indent(body, "    ")
    return {
        "pkg/__init__.py": "",
        "pkg/m.py": "from typing import NamedTuple\n\nimport jax\nimport jax.numpy as jnp\n"
        "from flax import struct\n\n" + template.format(cls=body) + "\n\n"
        f"cls = {reach}\nprint(jax.tree.leaves(jax.jit(lambda p: p)(cls(jnp.ones(2))))[0].tolist())\n",
        "pkg/main.py": "import pkg.m\n",
    }


@settings(max_examples=24, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    family=st.sampled_from(sorted(_CLASSES)),
    place=st.sampled_from(sorted(_PLACES)),
    namedtuples=st.booleans(),
)
@example(family="handwritten", place="function", namedtuples=False)  # haiku's test class
@example(family="namedtuple", place="class-body", namedtuples=True)  # ott-jax's State
def test_a_pytree_class_below_module_level_is_reported(
    family: str, place: str, namedtuples: bool
) -> None:
    files = _placed(family, place)
    extra = ("--namedtuples",) if namedtuples else ()
    try:
        with tempfile.TemporaryDirectory() as folder:
            reports, before, after = differential(Path(folder), files, *extra)
            text = _text_run(Path(folder) / "before" / "pkg", *extra)
    finally:
        forget_pkg()
    assert before == after == "[1.0, 1.0]\n", (before, after)
    if family == "namedtuple" and not namedtuples:  # not found without the flag: counted
        assert "P" not in reports, reports
        assert "found 1 NamedTuple class(es) (P), not converted" in text, text
    elif place == "module":
        assert reports["P"]["status"] == "converted", reports["P"]
    else:
        reason = reports["P"]["reason"]
        assert reports["P"]["status"] == "refused", reason
        assert reason.startswith("P is a pytree class defined inside "), reason
        assert "the tool rewrites module-level classes only" in reason, reason


# --- torax 1.4.3: a base whose `__new__` registers each class it builds ------------------------
TORAX_NEW = {
    "pkg/__init__.py": "",
    "pkg/base.py": """
        import jax

        class BaseModelFrozen:
            _dynamic = ()

            def __new__(cls, *args, **kwargs):
                try:
                    registered = jax.tree_util.register_pytree_node_class(cls)
                except ValueError:
                    registered = cls  # already registered
                return super().__new__(registered)

            def tree_flatten(self):
                return [getattr(self, n) for n in self._dynamic], None

            @classmethod
            def tree_unflatten(cls, aux, children):
                obj = object.__new__(cls)
                for n, v in zip(cls._dynamic, children):
                    object.__setattr__(obj, n, v)
                return obj
    """,
    "pkg/config.py": """
        from pkg.base import BaseModelFrozen

        class Config(BaseModelFrozen):
            _dynamic = ("x",)

            def __init__(self, x):
                self.x = x
    """,
    "pkg/main.py": """
        import jax
        from pkg.config import Config

        print(jax.tree.leaves(Config(3.0)), jax.tree.leaves(jax.tree.map(lambda v: v * 2, Config(1.0))))
    """,
}


def test_a_base_registering_in_new_is_reported_with_its_subclasses(root: Path) -> None:
    files = {
        **TORAX_NEW,
        # torax_pydantic.py re-exports the base by an assignment, not an import.
        "pkg/sub/__init__.py": "from pkg import base as model_base\n\n"
        "BaseModelFrozen = model_base.BaseModelFrozen\n",
        "pkg/mhd.py": "from pkg import sub as torax_pydantic\n\n\n"
        "class MHD(torax_pydantic.BaseModelFrozen):\n    pass\n",
    }
    reports, before, after = differential(root, files)
    assert reports["MHD"]["status"] == "refused", reports["MHD"]
    assert "(registered by `BaseModelFrozen.__new__` at line 7)" in reports["MHD"]["reason"]
    assert before == after == "[3.0] [2.0]\n", (before, after)
    assert reports["BaseModelFrozen"]["status"] == "refused"
    assert reports["BaseModelFrozen"]["reason"].startswith(
        "BaseModelFrozen is a pytree class that the tool does not rewrite (registered by its own"
        " `__new__` at line 7)"
    ), reports["BaseModelFrozen"]["reason"]
    assert reports["Config"]["status"] == "refused"
    assert reports["Config"]["reason"].startswith(
        "Config is a pytree class that the tool does not rewrite (registered by"
        " `BaseModelFrozen.__new__` at line 7)"
    ), reports["Config"]["reason"]


# --- haiku 0.0.17: a field annotated with a class defined below ---------------------------------
# `MethodContext(NamedTuple)` declares `module: "Module"` and `orig_class: type["Module"]`,
# with `Module` defined further down the module. treeclass reads a field's annotation when
# the class is created (static or dynamic?), so the converted module raised at import; a
# field specifier (`tc.field()`) says which and is not read.
_ANNOTATED = {  # an annotation, and whether it is bound when the class statement runs
    "float": True,
    "jax.Array": True,
    '"jax.Array"': True,
    '"Later"': False,  # a class defined below
    'type["Later"]': False,
    '"OrderedDict"': False,  # imported under `if TYPE_CHECKING:` only
    '"P"': False,  # the class itself
    "Optional[float]": True,
}
_FAMILIES = {
    "namedtuple": ("", "class P(NamedTuple):\n"),
    "flax": ("", "@struct.dataclass\nclass P:\n"),
}


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    annotation=st.sampled_from(sorted(_ANNOTATED)),
    family=st.sampled_from(sorted(_FAMILIES)),
    default=st.booleans(),
)
@example(annotation='"Later"', family="namedtuple", default=False)  # haiku's MethodContext
def test_a_field_annotated_with_a_name_bound_later_converts_and_imports(
    annotation: str, family: str, default: bool
) -> None:
    value = " = None" if default else ""
    files = {
        "pkg/__init__.py": "",
        "pkg/m.py": "from typing import TYPE_CHECKING, NamedTuple, Optional\n\n"
        "import jax\nimport jax.numpy as jnp\nfrom flax import struct\n\n"
        "if TYPE_CHECKING:\n    from collections import OrderedDict\n\n\n"
        + _FAMILIES[family][1]
        + "    w: jax.Array\n"
        + f"    other: {annotation}{value}\n\n\n"
        "class Later:\n    pass\n",
        "pkg/main.py": "import jax\nimport jax.numpy as jnp\nfrom pkg.m import P\n\n"
        "p = P(jnp.ones(2), None)\n"
        "print(jax.tree.leaves(p)[0].tolist(), p.other, len(jax.tree.leaves(p)))\n",
    }
    try:
        with tempfile.TemporaryDirectory() as folder:
            reports, before, after = differential(Path(folder), files, "--namedtuples")
            text = (Path(folder) / "after" / "pkg" / "m.py").read_text(encoding="utf-8")
    finally:
        forget_pkg()
    assert reports["P"]["status"] == "converted", reports["P"]
    assert before == after == "[1.0, 1.0] None 1\n", (text, before, after)
    specifier = f"    other: {annotation} = tc.field({'default=None' if default else ''})\n"
    assert (specifier in text) == (not _ANNOTATED[annotation]), text


# --- torax: a class re-exported by an assignment (`Base = _base.Base`) is that class ----------
ALIAS = {
    "pkg/__init__.py": "",
    "pkg/base.py": """
        import jax

        @jax.tree_util.register_pytree_node_class
        class Base:
            def __init__(self, x):
                self.x = x

            def tree_flatten(self):
                return (self.x,), None

            @classmethod
            def tree_unflatten(cls, aux, children):
                return cls(*children)
    """,
    "pkg/sub/__init__.py": "from pkg import base as _base\n\nBase = _base.Base\n",
    "pkg/child.py": """
        import jax
        from pkg import sub

        @jax.tree_util.register_pytree_node_class
        class Child(sub.Base):
            pass
    """,
    "pkg/main.py": """
        import jax
        from pkg.child import Child
        from pkg.sub import Base

        c = jax.tree.map(lambda v: v + 1.0, Child(1.0))
        print(type(c).__name__, c.x, isinstance(c, Base), jax.tree.leaves(Base(2.0)))
    """,
}


def test_a_base_re_exported_by_an_assignment_converts_with_its_subclass(root: Path) -> None:
    reports, before, after = differential(root, ALIAS)
    assert before == after == "Child 2.0 True [2.0]\n", (before, after)
    for name in ("Base", "Child"):
        assert reports[name]["status"] == "converted", reports[name]["reason"]


# --- haiku 0.0.17: hk.to_dot over a function returning `(out, state)` ---------------------------
# Only `f.apply`s reach `to_dot` in haiku's own code, whose top-level result is a plain tuple
# `(out, state)`; but `_graph_to_dot` labels its outputs by a structural flatten (dm-tree's
# `flatten_with_path`, a tuple's items by position, a NamedTuple's by field), which reads a
# treeclass as one leaf. Converting `LSTMState` made the real `hk.to_dot(apply)` raise
# `KeyError` (checked on haiku 0.0.17), so the untyped site still refuses it.
HAIKU_TO_DOT_APPLY = {
    "pkg/__init__.py": "",
    "pkg/state.py": _STATE,
    "pkg/dot.py": """
        def _paths(x, path=()):  # dm-tree's flatten_with_path, cut down
            if isinstance(x, tuple):
                return [p for i, v in enumerate(x) for p in _paths(v, (*path, i))]
            return [path]

        def _graph_to_dot(outputs):
            return [f"output{list(p)}" for p in _paths(outputs)]

        def to_graph(fun):
            def wrapped_fun(*args):
                return fun(*args)
            return wrapped_fun

        def to_dot(fun):
            graph_fun = to_graph(fun)
            return lambda *args: _graph_to_dot(graph_fun(*args))
    """,
    "pkg/main.py": """
        import jax.numpy as jnp
        from pkg.dot import to_dot
        from pkg.state import initial_state

        class Transformed:
            def __init__(self, apply):
                self.apply = apply

        f = Transformed(lambda x: (x * 2, initial_state(2)))
        print(to_dot(f.apply)(jnp.ones(2)))
    """,
}


def test_to_dot_over_an_apply_returning_a_state_still_refuses_it(root: Path) -> None:
    reports, before, after = differential(root, HAIKU_TO_DOT_APPLY, "--namedtuples")
    assert before == after == "['output[0]', 'output[1, 0]', 'output[1, 1]']\n", (before, after)
    reason = reports["LSTMState"]["reason"]
    assert reports["LSTMState"]["status"] == "refused", reason
    assert "`isinstance(x, tuple)` at " in reason, reason
