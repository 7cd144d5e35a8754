"""Once per construction, whatever the route: each converter runs once per field,
`__post_init__` once and each `__check_init__` of the hierarchy once, whether the
instance is built by the generated `__init__`, a hand-written one that assigns fields,
one that calls `super().__init__(...)` (the parent's generated or hand-written), or one
that calls `self.__post_init__()` itself; `replace()` runs them once on the changed
values; unflatten runs none. And one source of truth: what JAX flattens is what the
attributes hold, and `object.__setattr__` on a built instance is refused.

The classes are written as source (a hierarchy of levels `L0`, `L1`, ..., each declaring
one field `f<k>` with a counting converter `x + 1`), so a failing case shows its classes."""

import collections
import copy
import dataclasses
from dataclasses import InitVar  # noqa: F401 - the string annotations below name it
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from forms import FORMS, Form
from hypothesis import given
from hypothesis import strategies as st

import treeclass as tc

# How a level's `__init__` is written: dataclasses' (generated), or by hand, setting its
# fields with `self.f = v` or `object.__setattr__`, or with `super().__init__(...)` for
# the parent's fields and `self.f = v` for its own.
STYLES = ("generated", "assign", "setattr", "super")


@dataclasses.dataclass(frozen=True)
class Spec:
    styles: tuple[str, ...]  # one per level, base first
    calls_post_init: tuple[
        bool, ...
    ] = ()  # a hand-written `__init__` ends with self.__post_init__()
    post_init_level: int | None = 0  # the level defining __post_init__, if any
    check_levels: frozenset[int] = frozenset({0, 1, 2})  # the levels defining __check_init__

    def calls(self, k: int) -> bool:
        return (
            self.post_init_level is not None
            and k < len(self.calls_post_init)
            and self.calls_post_init[k]
        )


def _init(spec: Spec, k: int) -> list[str]:
    names = [f"f{i}" for i in range(k + 1)]
    style = spec.styles[k]
    if style == "generated":
        return []
    if style == "assign":
        body = [f"{', '.join(f'self.{n}' for n in names)}, = vals"]
    elif style == "setattr":
        body = [f"for name, v in zip({names!r}, vals): object.__setattr__(self, name, v)"]
    else:
        body = ["super().__init__(*vals[:-1])", f"self.f{k} = vals[-1]"]
    if spec.calls(k):
        body.append("self.__post_init__()")
    return ["    def __init__(self, *vals):", *(f"        {line}" for line in body)]


def source(spec: Spec, form: Form) -> str:
    lines: list[str] = []
    for k in range(len(spec.styles)):
        header = form.class_source(f"L{k}") if k == 0 else f"class L{k}(L{k - 1}):"
        if k and not form.bases:
            header = "@tc.treeclass\n" + header
        lines += [*header.splitlines(), f"    f{k}: float = tc.field(converter=conv({k}))"]
        lines += _init(spec, k)
        if spec.post_init_level == k:
            lines += ["    def __post_init__(self):", "        COUNT['post'] += 1"]
        if k in spec.check_levels:
            lines += ["    def __check_init__(self):", f"        COUNT['check{k}'] += 1"]
    return "\n".join(lines) + "\n"


def build(spec: Spec, form: Form) -> tuple[type, collections.Counter[str]]:
    """The last level's class and the counter its hooks write."""
    count: collections.Counter[str] = collections.Counter()

    def conv(k: int) -> Any:
        def converter(x: float) -> float:
            count[f"conv{k}"] += 1
            return x + 1

        return converter

    ns: dict[str, Any] = {"tc": tc, "conv": conv, "COUNT": count}
    exec(source(spec, form), ns)  # the test's own class source
    return ns[f"L{len(spec.styles) - 1}"], count


def expected(spec: Spec, changed: frozenset[int] | None = None) -> collections.Counter[str]:
    """One call per hook of the hierarchy; with `changed`, the converters of those only."""
    n = len(spec.styles)
    want = collections.Counter({f"conv{k}": 1 for k in range(n) if changed is None or k in changed})
    if spec.post_init_level is not None and spec.post_init_level < n:
        want["post"] = 1
    want.update({f"check{k}": 1 for k in spec.check_levels if k < n})
    return want


def check_routes(spec: Spec, form: Form) -> None:
    cls, count = build(spec, form)
    n = len(spec.styles)
    obj = cls(*(10.0 * k for k in range(n)))
    assert count == expected(spec), source(spec, form)
    assert [getattr(obj, f"f{k}") for k in range(n)] == [10.0 * k + 1 for k in range(n)]
    assert jax.tree.leaves(obj) == [getattr(obj, f"f{k}") for k in range(n)]

    count.clear()
    new = obj.replace(f0=5.0)
    assert count == expected(spec, changed=frozenset({0})), source(spec, form)
    assert [getattr(new, f"f{k}") for k in range(n)] == [6.0, *(10.0 * k + 1 for k in range(1, n))]

    count.clear()
    jax.tree.map(lambda x: x, obj)
    copy.deepcopy(obj)
    assert not count  # unflatten and copies run no user code


# Each route of the contract, with every hook: the regression cases.
ROUTES = {
    "generated __init__": Spec(("generated", "generated")),
    "hand-written, self.f = v": Spec(("assign", "assign")),
    "hand-written, object.__setattr__": Spec(("setattr", "setattr")),
    "super().__init__ to a generated one": Spec(("generated", "super")),
    "super().__init__ to a hand-written one": Spec(("assign", "super")),
    "super().__init__ twice over": Spec(("generated", "super", "super")),
    "self.__post_init__() in __init__": Spec(("assign",), calls_post_init=(True,)),
    "self.__post_init__() in the parent's __init__": Spec(
        ("assign", "super"), calls_post_init=(True, False)
    ),
    "self.__post_init__() in both": Spec(("assign", "super"), calls_post_init=(True, True)),
    "__post_init__ on the subclass": Spec(
        ("assign", "super"), calls_post_init=(True, True), post_init_level=1
    ),
}


@pytest.mark.parametrize("spec", ROUTES.values(), ids=ROUTES.keys())
def test_each_hook_runs_once_per_construction(spec: Spec, form: Form):
    check_routes(spec, form)


def test_converter_runs_once_through_super_init():
    # Regression: the parent's converter ran twice (equinox gives 2.0)
    class P(tc.TreeClass):
        a: float = tc.field(converter=lambda x: x + 1)

    class C(P):
        b: float

        def __init__(self, a, b):
            super().__init__(a)
            self.b = b

    assert C(1.0, 2.0).a == 2.0


def test_post_init_called_by_init_runs_once_after_converters():
    # Regression: the dataclasses idiom ran __post_init__ twice, its side effects doubled
    seen = []

    class Scaled(tc.TreeClass):
        x: jax.Array = tc.field(converter=jnp.asarray)
        scale: dataclasses.InitVar[float] = 1.0
        y: jax.Array = tc.field(init=False)

        def __init__(self, x, scale):
            self.x = x
            self.__post_init__(scale)

        def __post_init__(self, scale):
            seen.append(scale)
            object.__setattr__(self, "y", self.x * scale)  # x converted already

    s = Scaled([1.0, 2.0], 3.0)
    assert seen == [3.0]
    assert s.y.tolist() == [3.0, 6.0]


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    n = draw(st.integers(1, 3))
    styles = tuple(draw(st.sampled_from(STYLES if k else STYLES[:-1])) for k in range(n))
    calls = tuple(draw(st.booleans()) for _ in range(n))
    post_init_level = draw(st.none() | st.integers(0, n - 1))
    check_levels = draw(st.frozensets(st.integers(0, n - 1)))
    return Spec(styles, calls, post_init_level, check_levels)


@given(specs(), st.sampled_from(FORMS))
def test_generated_hierarchies_run_each_hook_once(spec: Spec, form: Form):
    check_routes(spec, form)


# --- one source of truth ---------------------------------------------------------------


def test_object_setattr_on_a_built_instance_is_what_jax_flattens(form: Form):
    # Regression: it changed m.w but not the leaf JAX flattened (a cached copy). Now the
    # instance's __dict__ is the one store: the write is seen by every reader.
    @form.decorate
    class Layer(*form.bases):
        w: jax.Array
        act: tc.Static[str] = "relu"

    m = Layer(jnp.zeros(2))
    rebuilt = jax.tree.map(lambda x: x, m)
    for obj in (m, rebuilt, copy.deepcopy(m), copy.copy(m), m.replace(w=jnp.ones(2))):
        w = jnp.full(2, 7.0)
        object.__setattr__(obj, "w", w)
        object.__setattr__(obj, "act", "tanh")
        assert jax.tree.leaves(obj) == [w]
        assert obj == Layer(w, act="tanh")
        assert repr(obj) == "Layer(w=f32[2], act='tanh')"


def test_object_setattr_while_building_is_what_jax_flattens(form: Form):
    @form.decorate
    class Derived(*form.bases):
        x: jax.Array
        y: jax.Array = tc.field(init=False)
        n: tc.Static[int] = 0

        def __post_init__(self):
            object.__setattr__(self, "y", self.x * 2)
            object.__setattr__(self, "n", int(self.x.size))

    d = Derived(jnp.ones(3))
    assert jax.tree.leaves(d) == [d.x, d.y]
    assert jax.tree.structure(d) == jax.tree.structure(Derived(jnp.zeros(3)))
    assert d.replace(x=jnp.ones(2)).n == 2


def test_subclass_annotating_a_field_again_keeps_the_parents_default(form: Form):
    # dataclasses: the class attribute is the default, inherited
    @form.decorate
    class Base(*form.bases):
        a: float
        b: float = 2.0

    @form.decorate
    class Child(Base):
        a: float  # no default: none inherited
        b: float  # the parent's default

    assert Child(1.0).b == 2.0
    assert Base.b == Child.b == 2.0


def test_initvar_found_in_string_annotations():
    # dataclasses resolves `InitVar` in the class's module: this one
    ns: dict[str, Any] = {"__name__": __name__}
    exec(  # the test's own class source
        "from __future__ import annotations\n"
        "import dataclasses\nfrom dataclasses import InitVar\nimport treeclass as tc\n"
        "@tc.treeclass\nclass Shifted:\n"
        "    x: float\n    shift: InitVar[float] = 1.0\n    scale: dataclasses.InitVar[float] = 1.0\n"
        "    def __post_init__(self, shift, scale):\n"
        "        object.__setattr__(self, 'x', (self.x + shift) * scale)\n",
        ns,
    )
    assert ns["Shifted"](1.0, 2.0, 3.0).x == 9.0
    assert [f.name for f in tc.fields(ns["Shifted"])] == ["x"]


def test_object_delattr_on_an_instance_is_seen_by_jax_naming_the_field():
    # Regression: Python's bare `AttributeError: __delete__` named nothing. Deleting a field
    # from the one store leaves it missing for every reader; JAX's flatten names it.
    class W(tc.TreeClass):
        w: jax.Array

    m = W(jnp.zeros(2))
    object.__delattr__(m, "w")
    assert not hasattr(m, "w")
    with pytest.raises(
        AttributeError, match=r"(?s)W\.w is not set: it was deleted.*replace\(w=\.\.\.\)"
    ):
        jax.tree.leaves(m)
