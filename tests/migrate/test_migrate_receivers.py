"""treeclass.migrate on what a receiver is, judged by what the code says: cases where a
run over real packages refused a class for a use that was not one. Each case is a
real package's code, cut down (the package and line are named): a subscript of the
class itself is no use of an instance as a tuple; a refusal cites the class's own use
before one on an unknown receiver; an attribute is typed by what the methods store
there, through a local bound to a function of the module annotated to return a class.
Real use stays refused: an instance indexed, unpacked or iterated, an attribute that
may hold anything."""

from __future__ import annotations

import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("libcst")

from migrate_runs import import_fresh, leaf_lists, migrate_package

from treeclass.migrate import check

# flashbax 0.1.3, flashbax/buffers/flat_buffer.py:36-43 and :143 (its imports, lines 15-23).
FLASHBAX = """\
    from dataclasses import dataclass
    from typing import Generic, TypeVar

    from typing_extensions import NamedTuple

    Experience = TypeVar("Experience")


    class ExperiencePair(NamedTuple, Generic[Experience]):
        first: Experience
        second: Experience


    @dataclass(frozen=True)
    class TransitionSample(Generic[Experience]):
        experience: ExperiencePair[Experience]


    def sample(first, second) -> TransitionSample:
        return TransitionSample(experience=ExperiencePair(first=first, second=second))


    def first_of(pair: ExperiencePair[Experience]) -> Experience:
        return pair.first
    """


def test_a_subscript_of_the_namedtuple_class_is_not_tuple_use(root: Path):
    reports = migrate_package(
        root, {"pkg/__init__.py": "", "pkg/flat_buffer.py": FLASHBAX}, "--namedtuples"
    )
    assert reports["ExperiencePair"]["status"] == "converted", reports["ExperiencePair"]["reason"]
    old, new = (
        import_fresh(root / "before", "pkg.flat_buffer"),
        import_fresh(root / "after", "pkg.flat_buffer"),
    )
    pair = (jnp.arange(3.0), jnp.ones(2))
    old_sample, new_sample = old.sample(*pair), new.sample(*pair)
    check(old_sample.experience, new_sample.experience)
    assert leaf_lists(jax.jit(lambda s: s)(new_sample.experience)) == leaf_lists(old_sample.experience)
    assert np.allclose(
        jax.jit(new.first_of)(new_sample.experience), old.first_of(old_sample.experience)
    )


@pytest.mark.parametrize(
    ("use", "code"),
    [
        pytest.param("isinstance(pair, tuple)", "isinstance(pair, tuple)", id="isinstance"),
        pytest.param("pair == (1, 2)", "pair == (1, 2)", id="compared"),
        pytest.param("pair + (1,)", "pair + (1,)", id="concatenated"),
        pytest.param("hash(pair)", "hash(pair)", id="hashed"),
    ],
)
def test_an_instance_annotated_with_a_generic_alias_used_as_a_tuple_stays_refused(
    root: Path, use: str, code: str
):
    source = FLASHBAX + f"\n\n    def use(pair: ExperiencePair[Experience]):\n        return {use}\n"
    reports = migrate_package(root, {"pkg/__init__.py": "", "pkg/flat_buffer.py": source}, "--namedtuples")
    assert reports["ExperiencePair"]["status"] == "refused"
    assert f"(1) `{code}` at " in reports["ExperiencePair"]["reason"]


@pytest.mark.parametrize(
    "use",
    ["pair[0]", "tuple(pair)[1]", "[x for x in pair][0]", "ExperiencePair._make(pair)[0]"],
)
def test_an_instance_annotated_with_a_generic_alias_keeps_its_tuple_uses(root: Path, use: str):
    source = FLASHBAX + f"\n\n    def use(pair: ExperiencePair[Experience]):\n        return {use}\n"
    reports = migrate_package(root, {"pkg/__init__.py": "", "pkg/flat_buffer.py": source}, "--namedtuples")
    assert reports["ExperiencePair"]["status"] == "converted", reports["ExperiencePair"]["reason"]
    got = []
    for folder in ("before", "after"):
        module = import_fresh(root / folder, "pkg.flat_buffer")
        pair = module.ExperiencePair(jnp.arange(3.0), jnp.ones(2))
        got.append(np.asarray(module.use(pair)).tolist())
    assert got[0] == got[1]


# ott-jax 0.6.0: 13 NamedTuples with `def set(self, **kwargs): return self._replace(**kwargs)`,
# e.g. src/ott/experimental/mmsinkhorn.py:49 (MMSinkhornState) and
# src/ott/solvers/linear/sinkhorn.py:46 (SinkhornState); an untyped `state._replace` in
# a module read before them (src/ott/solvers/linear/univariate.py:258 has the form).
OTT_STATES = {
    "pkg/__init__.py": "",
    "pkg/a_utils.py": """\
        def bump(state):
            return state._replace(step=state.step + 1)
        """,
    "pkg/experimental/__init__.py": "",
    "pkg/experimental/mmsinkhorn.py": """\
        from typing import Any, NamedTuple

        import jax


        class MMSinkhornState(NamedTuple):
            potentials: jax.Array

            def set(self, **kwargs: Any) -> "MMSinkhornState":
                return self._replace(**kwargs)
        """,
    "pkg/solvers/__init__.py": "",
    "pkg/solvers/sinkhorn.py": """\
        from typing import Any, NamedTuple

        import jax


        class SinkhornState(NamedTuple):
            potentials: jax.Array

            def set(self, **kwargs: Any) -> "SinkhornState":
                return self._replace(**kwargs)
        """,
}


def test_namedtuples_whose_replace_is_untyped_convert_and_keep_it(root: Path):
    """ott's `state._replace(...)` on an untyped `state` refused every NamedTuple with
    those fields; `_replace` is written into the converted class now."""
    reports = migrate_package(root, OTT_STATES, "--namedtuples")
    for name in ("MMSinkhornState", "SinkhornState"):
        assert reports[name]["status"] == "converted", reports[name]["reason"]
    got = []
    for folder in ("before", "after"):
        state = import_fresh(root / folder, "pkg.solvers.sinkhorn").SinkhornState(jnp.ones(2))
        state = state.set(potentials=state.potentials * 3)
        got.append(np.asarray(state.potentials).tolist())
    assert got[0] == got[1] == [3.0, 3.0]


# The same for the other facts: a flatten call and an attribute write on an instance
# typed as the class are cited before those on an unknown receiver read earlier.
HANDWRITTEN = {
    "pkg/__init__.py": "",
    "pkg/a_utils.py": """\
        def rebuild(obj):
            children, aux = obj.tree_flatten()
            return type(obj).tree_unflatten(aux, children)


        def reset(obj):
            obj.x = 0
        """,
    "pkg/geometry.py": """\
        import jax


        @jax.tree_util.register_pytree_node_class
        class Geometry:
            def __init__(self, x):
                self.x = x

            def tree_flatten(self):
                return (self.x,), None

            @classmethod
            def tree_unflatten(cls, aux, children):
                return cls(*children)


        def materialize(geom: Geometry):
            geom.x = geom.x * 2
            return geom.tree_flatten()
        """,
}


def test_flatten_calls_and_writes_cite_the_class_own_use_first_then_every_other(root: Path):
    (report,) = migrate_package(root, HANDWRITTEN).values()
    assert report["status"] == "refused"
    here, utils = str(root / "after/pkg/geometry.py"), str(root / "after/pkg/a_utils.py")
    assert (
        f"tree_flatten() at `geom.tree_flatten()` at {here}:19; `obj.tree_flatten()` at {utils}:2;"
        in report["reason"]
    )
    assert f"`geom.x = geom.x * 2` at {here}:18; `obj.x = 0` at {utils}:7:" in report["reason"]
    assert (
        "tree_unflatten() at `type(obj).tree_unflatten(aux, children)`" in report["reason"]
    )  # the only one


# evojax 0.2.17, evojax/algo/cma_jax.py: _HyperParameters (:45), _Coefficients (:51),
# _State (:64); CMA_ES_JAX stores only `_State(...)` (:234, :345),
# `self.state._replace(...)` (:279, :289, :326) and `next_state` (:331), bound to
# `_tell_core(...)`, a jitted function annotated `-> _State` (:365-371).
EVOJAX = """\
    from functools import partial
    from typing import NamedTuple

    import jax
    import jax.numpy as jnp


    class _HyperParameters(NamedTuple):
        n_dim: int
        mu: int


    class _Coefficients(NamedTuple):
        c_sigma: jnp.ndarray
        weights: jnp.ndarray


    class _State(NamedTuple):
        mean: jnp.ndarray
        sigma: jnp.ndarray
        g: int


    class CMA_ES_JAX:
        def __init__(self, n_dim):
            self.hyper_parameters = _HyperParameters(n_dim=n_dim, mu=2)
            self.coefficients = _Coefficients(c_sigma=jnp.asarray(0.5), weights=jnp.asarray([0.7, 0.3]))
            self.state = _State(mean=jnp.zeros(n_dim), sigma=jnp.asarray(1.0), g=0)

        def ask(self):
            self.state = self.state._replace(sigma=self.state.sigma * 1.0)
            return jnp.stack([self.state.mean, self.state.mean + 1.0])

        def tell(self, solutions, fitness):
            next_state = _tell_core(
                hps=self.hyper_parameters, coeff=self.coefficients, state=self.state, fitness=fitness, solutions=solutions
            )
            self.state = next_state

        def load_state(self, saved):
            self.state = _State(**saved)


    @partial(jax.jit, static_argnums=0)
    def _tell_core(hps: _HyperParameters, coeff: _Coefficients, state: _State, fitness, solutions) -> _State:
        next_state = state
        order = jnp.argsort(fitness)[: hps.mu]
        mean = (coeff.weights[:, None] * solutions[order]).sum(axis=0)
        next_state = next_state._replace(mean=mean, g=state.g + 1)
        return next_state._replace(sigma=next_state.sigma * jnp.exp(coeff.c_sigma * 0.1))
    """


def test_an_attribute_typed_by_a_local_bound_to_a_function_returning_the_class(root: Path):
    source = textwrap.dedent(EVOJAX) + "\n\ndef probe(es: CMA_ES_JAX):\n    return isinstance(es.state, tuple)\n"
    reports = migrate_package(root, {"pkg/__init__.py": "", "pkg/cma_jax.py": source}, "--namedtuples")
    assert reports["_State"]["status"] == "refused"
    assert "(1) `isinstance(es.state, tuple)` at " in reports["_State"]["reason"]
    for name in ("_HyperParameters", "_Coefficients"):
        assert reports[name]["status"] == "converted", reports[name]["reason"]


def test_evojax_converts_whole_and_runs_the_same(root: Path):
    reports = migrate_package(root, {"pkg/__init__.py": "", "pkg/cma_jax.py": EVOJAX}, "--namedtuples")
    for name in ("_HyperParameters", "_Coefficients", "_State"):
        assert reports[name]["status"] == "converted", reports[name]["reason"]
    runs = []
    for folder in ("before", "after"):
        es = import_fresh(root / folder, "pkg.cma_jax").CMA_ES_JAX(3)
        for step in range(3):  # a static hps (hashed) and a dynamic coeff under jit
            solutions = es.ask()
            es.tell(solutions, jnp.asarray([1.0, 0.0]) * step)
        runs.append(leaf_lists(es.state))
    assert runs[0] == runs[1]


_STORE = "        self.state = next_state\n"
_LOOP = "        for next_state in [next_state]:\n            pass\n"
_CALL = "        next_state = _tell_core(\n"
_COPY = "    next_state = state\n"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param(_STORE, "        self.state = load()\n", id="an-unknown-function"),
        pytest.param(_STORE, _LOOP + _STORE, id="a-loop-binds-the-local"),
        pytest.param(
            _STORE,
            "        if fitness is None:\n            import json as next_state\n" + _STORE,
            id="an-import-binds-it",
        ),
        pytest.param(
            "@partial(jax.jit, static_argnums=0)\n", "@some_decorator\n", id="a-decorator"
        ),
        pytest.param(_CALL, "        _tell_core = make()\n" + _CALL, id="the-function-shadowed"),
        pytest.param(_COPY, "    next_state = fitness\n" + _COPY, id="not-only-a-copy-of-state"),
        pytest.param(
            "", "\n\n_tell_core = some_decorator(_tell_core)\n", id="the-module-rebinds-it"
        ),
    ],
)
def test_an_attribute_that_may_hold_another_value_stays_untyped(root: Path, old: str, new: str):
    source = (
        textwrap.dedent(EVOJAX)
        + "\n\ndef load():\n    pass\n\n\ndef make():\n    pass\n\n\ndef some_decorator(f):\n    return f\n"
    )
    assert old in source
    source = source.replace(old, new, 1) if old else source + new
    reports = migrate_package(root, {"pkg/__init__.py": "", "pkg/cma_jax.py": source}, "--namedtuples")
    # An untyped `x._replace(sigma=...)` refused _State; `_replace` is kept now, so
    # however little the run can type, nothing here blocks a conversion.
    for name in ("_HyperParameters", "_Coefficients", "_State"):
        assert reports[name]["status"] == "converted", reports[name]["reason"]


# Not from the report: found while fixing it. A function of the run imported by its
# absolute name (`from pkg.factory import make_state`) was taken for another library's,
# so what it returns was "not an instance of a class of the run" and its tuple API
# (`s._replace`) refused nothing: State converted, and `s._replace` raised after.
ABSOLUTE = {
    "pkg/__init__.py": "",
    "pkg/state.py": """\
        from typing import NamedTuple

        import jax


        class State(NamedTuple):
            x: jax.Array
        """,
    "pkg/factory.py": """\
        from pkg.state import State


        def make_state(x):
            return State(x)
        """,
    "pkg/use.py": """\
        from pkg.factory import make_state


        def bump(x):
            s = make_state(x)
            return isinstance(s, tuple)
        """,
}


def test_a_function_of_the_run_imported_by_its_absolute_name_is_not_another_library(root: Path):
    (report,) = migrate_package(root, ABSOLUTE, "--namedtuples").values()
    assert report["status"] == "refused"
    assert "(1) `isinstance(s, tuple)` at " + str(root / "after/pkg/use.py") + ":6: " in report["reason"]


# ott-jax 0.6.0, src/ott/tools/k_means.py:344-400: `geom: Union[jnp.ndarray,
# pointcloud.PointCloud]`, then `geom.tree_flatten()` and `type(geom).tree_unflatten(...)`
# refused all 66 hand-written classes of the package that define the methods. Without
# the array type the union names one class: the calls count against PointCloud (and its
# subclasses) only.
def _geometry(annotation: str) -> dict[str, str]:
    return {
        "pkg/__init__.py": "",
        "pkg/geometry.py": """\
            import jax


            @jax.tree_util.register_pytree_node_class
            class Geometry:
                def __init__(self, cost):
                    self.cost = cost

                def tree_flatten(self):
                    return (self.cost,), None

                @classmethod
                def tree_unflatten(cls, aux_data, children):
                    return cls(*children)


            @jax.tree_util.register_pytree_node_class
            class PointCloud:
                def __init__(self, x, batch_size=None):
                    self.x = x
                    self.batch_size = batch_size

                def tree_flatten(self):
                    return (self.x,), {"batch_size": self.batch_size}

                @classmethod
                def tree_unflatten(cls, aux_data, children):
                    return cls(*children, **aux_data)
            """,
        "pkg/k_means.py": f"""\
            from typing import Any, Optional, Union

            import jax
            import jax.numpy as jnp

            from pkg.geometry import Geometry, PointCloud


            def k_means(geom: {annotation}, k: int):
                if isinstance(geom, jnp.ndarray):
                    geom = PointCloud(geom)
                if geom.batch_size is not None:
                    children, aux_data = geom.tree_flatten()
                    aux_data["batch_size"] = None
                    geom = type(geom).tree_unflatten(aux_data, children)
                return geom.x[:k]
            """,
    }


@pytest.mark.parametrize(
    "annotation",
    [
        "Union[jnp.ndarray, PointCloud]",
        "Optional[Union[jax.Array, PointCloud]]",
        "jnp.ndarray | PointCloud | None",
    ],
)
def test_a_union_with_array_types_types_the_receiver_by_its_one_class(root: Path, annotation: str):
    reports = migrate_package(root, _geometry(annotation))
    assert reports["PointCloud"]["status"] == "refused"
    assert "tree_flatten() at `geom.tree_flatten()` at " in reports["PointCloud"]["reason"]
    assert reports["Geometry"]["status"] == "converted", reports["Geometry"]["reason"]
    old, new = import_fresh(root / "before", "pkg.geometry"), import_fresh(root / "after", "pkg.geometry")
    check(old.Geometry(jnp.ones(3)), new.Geometry(jnp.ones(3)))
    assert leaf_lists(jax.jit(lambda g: g)(new.Geometry(jnp.arange(3.0)))) == [[0.0, 1.0, 2.0]]


@pytest.mark.parametrize(
    "annotation",
    [
        "Union[Geometry, PointCloud]",
        "Union[jnp.ndarray, Any]",
        "Union[tuple, PointCloud]",
        "Any",
        "jnp.ndarray",
    ],
)
def test_a_union_that_may_hold_another_class_counts_against_every_class(
    root: Path, annotation: str
):
    reports = migrate_package(root, _geometry(annotation))
    for name in ("Geometry", "PointCloud"):
        assert reports[name]["status"] == "refused", name
        assert "tree_flatten() at `geom.tree_flatten()` at " in reports[name]["reason"]
