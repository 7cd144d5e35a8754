"""Declaring a class: field kinds, inheritance, hooks, frozenness, copies.

Every behaviour the two forms share runs in both (the `form` fixture, tests/forms.py:
`@tc.treeclass` and `tc.TreeClass` subclasses). What only the decorator has is at the
end of this file; what only the base class has is in test_base.py."""

import copy
import dataclasses
import inspect
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import jax
import jax.numpy as jnp
import pytest
from forms import FORMS, Form, exec_module
from hypothesis import given
from hypothesis import strategies as st

import treeclass as tc

T = TypeVar("T")


@pytest.fixture
def Neuron(form: Form) -> Any:
    @form.decorate
    class Neuron(*form.bases):
        v: jax.Array
        w: jax.Array = tc.field(default_factory=lambda: jnp.zeros(3))
        tau: float = tc.static(default=20.0)
        dt: tc.Static[float] = 0.1

    return Neuron


# Module level so pickle can find them.
@tc.treeclass
class Pickled:
    x: jax.Array
    name: str = tc.static("p")


class PickledBase(tc.TreeClass):
    x: jax.Array
    name: str = tc.static("p")


def test_is_a_frozen_dataclass(Neuron: Any):
    assert tc.is_treeclass(Neuron)
    assert dataclasses.is_dataclass(Neuron)
    assert Neuron.__dataclass_params__.frozen
    n = Neuron(jnp.zeros(2))
    assert dataclasses.replace(n, tau=5.0).tau == 5.0


def test_dynamic_by_default_and_three_static_spellings(form: Form):
    @form.decorate
    class C(*form.bases):
        a: jax.Array
        b: int = tc.static(1)
        c: tc.Static[int] = 2
        d: int = tc.field(static=True, default=3)
        e: tc.Static[int] = tc.field(default=4)

    kinds = {f.name: f.metadata["static"] for f in tc.fields(C)}
    assert kinds == {"a": False, "b": True, "c": True, "d": True, "e": True}
    leaves, treedef = jax.tree.flatten(C(jnp.ones(1)))
    assert len(leaves) == 1
    assert treedef.unflatten(leaves).e == 4


def test_static_annotation_as_string(form: Form):
    # from __future__ import annotations turns annotations into strings.
    ns: dict[str, object] = {}
    source = (
        "from __future__ import annotations\n"
        "import treeclass as tc\n"
        f"{form.class_source('S')}\n"
        "    x: float\n"
        "    n: tc.Static[int] = 3\n"
        "    later: tc.Static[NotYetDefined] = 4\n"
    )
    exec(source, ns)
    kinds = {f.name: f.metadata["static"] for f in tc.fields(ns["S"])}
    assert kinds == {"x": False, "n": True, "later": True}


_ALIAS_SOURCE = """\
{future}
import jax
import treeclass as tc
{module}
def outer():
    {outer}
    def inner():
        {inner}
{cls}
            x: jax.Array
            h: {annotation} = 0.5
        return {name}
    return inner()
{name} = outer()
"""


@given(
    form=st.sampled_from(FORMS),
    future=st.booleans(),
    placement=st.sampled_from(["module", "outer", "inner"]),
    spelling=st.sampled_from([("tc.Static[float]", "Hyper"), ("tc.Static", "Hyper[float]")]),
)
def test_static_alias_is_static_wherever_it_is_defined(form, future, placement, spelling):
    # Regression: under `from __future__ import annotations` an alias local to
    # a function made the field silently dynamic (trained by tc.grad, updated by optax).
    alias, annotation = spelling
    where = {key: f"Hyper = {alias}" if key == placement else "pass" for key in ("module", "outer", "inner")}
    cls_source = "\n".join(" " * 8 + line for line in form.class_source("Gen").splitlines())
    source = _ALIAS_SOURCE.format(
        future="from __future__ import annotations" if future else "",
        cls=cls_source, annotation=annotation, name="Gen", **where,
    )
    gen = exec_module(source)["Gen"]
    assert {f.name: f.metadata["static"] for f in tc.fields(gen)} == {"x": False, "h": True}
    assert len(jax.tree.leaves(gen(jnp.ones(1)))) == 1


def test_unresolvable_annotation_raises_naming_class_field(form: Form):
    source = (
        "from __future__ import annotations\n"
        "import jax\n"
        "import treeclass as tc\n"
        f"{form.class_source('S')}\n"
        "    x: jax.Array\n"
        "    h: Hyperr = 0.5\n"
    )
    with pytest.raises(TypeError, match=r"S\.h is annotated 'Hyperr', which treeclass cannot resolve") as info:
        exec_module(source)
    assert "h: Hyperr = tc.static()" in str(info.value)
    # A field specifier declares the kind itself: nothing to resolve.
    ns = exec_module(source.replace("= 0.5", "= tc.static(default=0.5)"))
    assert [f.metadata["static"] for f in tc.fields(ns["S"])] == [False, True]


def test_classvar_is_not_a_field(form: Form):
    @form.decorate
    class C(*form.bases):
        x: float
        registry: ClassVar[dict[str, int]] = {}

    assert [f.name for f in tc.fields(C)] == ["x"]
    assert jax.tree.leaves(C(1.0)) == [1.0]


def test_inheritance_keeps_kinds_and_defaults(form: Form):
    @form.decorate
    class Base(*form.bases):
        x: jax.Array
        n: int = tc.static(3)

    @form.decorate
    class Child(Base):
        y: jax.Array = tc.field(default_factory=lambda: jnp.ones(2))

    c = Child(jnp.zeros(1))
    assert [(f.name, f.metadata["static"]) for f in tc.fields(c)] == [
        ("x", False),
        ("n", True),
        ("y", False),
    ]
    assert c.n == 3
    leaves, treedef = jax.tree.flatten(c)
    assert len(leaves) == 2
    assert type(treedef.unflatten(leaves)) is Child


def test_generic_class(form: Form):
    @form.decorate
    class Box(*form.bases, Generic[T]):
        item: T
        label: tc.Static[str] = "box"

    b = Box[jax.Array](jnp.ones(2))
    assert type(b) is Box
    assert b.__orig_class__ == Box[jax.Array]
    out = jax.jit(lambda b: b.replace(item=b.item * 2))(b)
    assert out.label == "box"
    assert out.item.tolist() == [2.0, 2.0]


@pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 695 syntax needs Python 3.12")
def test_pep695_class(form: Form):
    ns: dict[str, object] = {"tc": tc}
    exec(f"{form.class_source('Box[T]')}\n    item: T\n", ns)
    box = ns["Box"](1.0)  # type: ignore[operator]
    assert jax.tree.leaves(box) == [1.0]
    assert [p.__name__ for p in ns["Box"].__type_params__] == ["T"]  # type: ignore[attr-defined]


def test_init_false_field_derived_in_post_init_survives_flatten(form: Form):
    calls = []

    @form.decorate
    class Scaled(*form.bases):
        x: jax.Array
        scale: float = tc.static(2.0)
        y: jax.Array = tc.field(init=False)
        size: int = tc.static(init=False)

        def __post_init__(self):
            calls.append(1)
            object.__setattr__(self, "y", self.x * self.scale)
            object.__setattr__(self, "size", int(self.x.size))

    s = Scaled(jnp.ones(3))
    assert s.y.tolist() == [2.0] * 3
    assert s.size == 3
    out = jax.jit(lambda s: s)(s)
    assert out.y.tolist() == [2.0] * 3
    assert out.size == 3
    assert len(calls) == 1  # the jit round trip ran no __post_init__


def test_initvar_passed_to_post_init(form: Form):
    @form.decorate
    class WithInitVar(*form.bases):
        x: jax.Array
        offset: dataclasses.InitVar[float] = 0.0

        def __post_init__(self, offset):
            object.__setattr__(self, "x", self.x + offset)

    assert WithInitVar(jnp.ones(1), offset=2.0).x.tolist() == [3.0]
    assert [f.name for f in tc.fields(WithInitVar)] == ["x"]


def test_converter_runs_at_construction_before_post_init(form: Form):
    seen = []

    @form.decorate
    class C(*form.bases):
        x: jax.Array = tc.field(converter=jnp.asarray)

        def __post_init__(self):
            seen.append(type(self.x))

    c = C([1.0, 2.0])
    assert isinstance(c.x, jax.Array)
    assert seen == [type(c.x)]


def test_hand_written_init_is_kept_and_finalised(form: Form):
    @form.decorate
    class Custom(*form.bases):
        x: jax.Array
        n: int = tc.static(0)

        def __init__(self, size: int):
            object.__setattr__(self, "x", jnp.zeros(size))
            object.__setattr__(self, "n", size)

    c = Custom(4)
    leaves, treedef = jax.tree.flatten(c)
    assert leaves[0].shape == (4,)
    assert treedef.unflatten(leaves).n == 4


def test_assignment_raises_naming_class_field_and_fix(Neuron: Any):
    n = Neuron(jnp.zeros(2))
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"cannot assign to Neuron\.tau") as info:
        n.tau = 3.0
    assert "self.replace(tau=...)" in str(info.value)
    assert n.tau == 20.0


def test_deletion_raises(Neuron: Any):
    n = Neuron(jnp.zeros(2))
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"cannot delete Neuron\.v"):
        del n.v
    assert n.v.shape == (2,)


def test_new_attribute_raises_and_says_it_is_not_a_field(Neuron: Any):
    n = Neuron(jnp.zeros(2))
    with pytest.raises(dataclasses.FrozenInstanceError, match="'extra' is not a field of Neuron"):
        n.extra = 1
    assert not hasattr(n, "extra")


def test_mutation_inside_jit_raises_instead_of_being_lost(form: Form):
    @form.decorate
    class Counter(*form.bases):
        count: jax.Array

        def bump(self):
            self.count = self.count + 1
            return self

    with pytest.raises(dataclasses.FrozenInstanceError, match=r"self\.replace\(count=\.\.\.\)"):
        jax.jit(Counter.bump)(Counter(jnp.array(0)))


def test_field_named_replace_rejected(form: Form):
    with pytest.raises(TypeError, match=r"Bad\.replace: this name is reserved by treeclass"):

        @form.decorate
        class Bad(*form.bases):
            replace: int


def test_class_defining_replace_rejected(form: Form):
    with pytest.raises(TypeError, match=r"Bad\.replace: this name is reserved by treeclass"):

        @form.decorate
        class Bad(*form.bases):
            x: int

            def replace(self):
                return self


@pytest.mark.parametrize("method", ["tree_flatten", "tree_unflatten", "__replace__"])
def test_class_defining_registration_methods_rejected(form: Form, method: str):
    body = {"__annotations__": {"x": int}, method: lambda self: None}
    with pytest.raises(TypeError, match=rf"Bad\.{method}: this name is reserved by treeclass"):
        form.decorate(type("Bad", form.bases, body))


def test_field_with_reserved_prefix_rejected(form: Form):
    with pytest.raises(TypeError, match=r"Bad\._tc_x: this name is reserved by treeclass \(generated code uses the _tc_ prefix\)"):

        @form.decorate
        class Bad(*form.bases):
            _tc_x: int


def test_static_annotation_with_dynamic_only_options_rejected(form: Form):
    with pytest.raises(TypeError, match=r"^Bad\.x is static and declared axes=\.\.\.\."):

        @form.decorate
        class Bad(*form.bases):
            x: tc.Static[int] = tc.field(default=1, axes=("batch",))


def test_required_after_default_is_the_dataclass_error(form: Form):
    # The message is Python's dataclasses'; the part that matters is the field named.
    with pytest.raises(TypeError, match=r"\bdefault\b.*'b'|'b'.*\bdefault\b"):

        @form.decorate
        class Bad(*form.bases):
            a: int = 1
            b: int


def test_missing_and_unexpected_arguments_are_the_standard_errors(Neuron: Any):
    # Python's own wording for a call that does not fit the signature; it names the
    # class's __init__ and the argument.
    with pytest.raises(TypeError, match=r"Neuron\.__init__\(\) .*'v'"):
        Neuron()
    with pytest.raises(TypeError, match=r"Neuron\.__init__\(\) .*'bogus'"):
        Neuron(jnp.zeros(1), bogus=1)


def test_generated_code_is_readable(Neuron: Any):
    source = inspect.getsource(Neuron.__init__)
    assert source.startswith("def __init__(_tc_self, v, w=_tc_FACTORY, tau=_tc_dflt_tau, dt=_tc_dflt_dt):")
    assert "__post_init__" not in source


@pytest.mark.parametrize("cls", [Pickled, PickledBase], ids=["decorator", "base"])
def test_copy_deepcopy_pickle_round_trip(cls: Any):
    p = cls(jnp.arange(3.0), name="q")
    for clone in (copy.copy(p), copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert type(clone) is cls
        assert clone == p
        assert clone.name == "q"
        assert jax.tree.structure(clone) == jax.tree.structure(p)
        clone_leaves = jax.tree.leaves(clone)
        assert clone_leaves[0].dtype == p.x.dtype
    assert copy.copy(p).x is p.x  # a shallow copy shares the arrays
    assert copy.deepcopy(p).x is not p.x


@pytest.mark.skipif(sys.version_info < (3, 13), reason="copy.replace is new in Python 3.13")
@pytest.mark.parametrize("cls", [Pickled, PickledBase], ids=["decorator", "base"])
def test_copy_replace(cls: Any):
    p = cls(jnp.zeros(1))
    assert copy.replace(p, name="r").name == "r"  # type: ignore[attr-defined]


@pytest.mark.parametrize("cls", [Pickled, PickledBase], ids=["decorator", "base"])
def test_dunder_replace_is_replace(cls: Any):
    p = cls(jnp.zeros(1))
    assert p.__replace__(name="r").name == "r"


def test_fields_may_shadow_builtins_the_generated_code_uses(form: Form):
    @form.decorate
    class Shadow(*form.bases):
        self: jax.Array
        object: jax.Array
        type: str = tc.static("a")
        KeyError: int = tc.static(1)

        def __post_init__(self):
            pass

    s = Shadow(jnp.zeros(1), jnp.ones(1), type="b")
    assert s.type == "b"
    assert s.replace(type="c", KeyError=2).KeyError == 2
    leaves, treedef = jax.tree.flatten(s)
    assert treedef.unflatten(leaves) == s
    with pytest.raises(TypeError, match=r"Shadow\.type is a static field but holds an unhashable list"):
        Shadow(jnp.zeros(1), jnp.ones(1), type=[1])


# --- the decorator only -----------------------------------------------------------------


@tc.treeclass
class Decorated:
    v: jax.Array


def test_bare_and_with_arguments():
    @tc.treeclass(kw_only=True)
    class K:
        a: int
        b: int = 2

    assert inspect.signature(K).parameters["a"].kind is inspect.Parameter.KEYWORD_ONLY
    with pytest.raises(TypeError, match=r"K\.__init__\(\)"):
        K(1)  # pyright: ignore[reportCallIssue]
    assert K(a=1).b == 2
    assert tc.is_treeclass(Decorated)


def test_decorating_twice_is_a_no_op():
    assert tc.treeclass(Decorated) is Decorated
    assert tc.treeclass()(Decorated) is Decorated
    assert jax.tree.leaves(Decorated(jnp.zeros(1)))  # still registered once


@pytest.mark.parametrize("value", [lambda: None, 3, "Neuron", jnp.zeros(2)])
def test_decorating_a_non_class_rejected(value: object):
    with pytest.raises(TypeError, match=r"^@treeclass decorates a class; got "):
        tc.treeclass(value)  # type: ignore[call-overload]


def test_undecorated_subclass_rejected_at_construction():
    # The base form has no such trap: a subclass of a tc.TreeClass class is processed
    # when it is defined (test_base.py).
    class Plain(Decorated):
        pass

    with pytest.raises(TypeError, match=r"Plain subclasses the treeclass Decorated but is not decorated"):
        Plain(jnp.zeros(1))


def test_repr_false_and_eq_false_keep_object_behaviour():
    @tc.treeclass(repr=False, eq=False)
    class Plain:
        x: int

    a, b = Plain(1), Plain(1)
    assert a != b
    assert repr(a).startswith("<")
    assert hash(a) != hash(b) or a is b


def test_decorating_again_with_other_options_is_refused():
    @tc.treeclass(kw_only=True)
    class Kw:
        x: int

    assert tc.treeclass(Kw) is Kw  # bare: a no-op
    assert tc.treeclass(kw_only=True)(Kw) is Kw  # the options it was built with
    with pytest.raises(TypeError, match=r"(?s)^Kw is a treeclass already, built with kw_only=True, repr=True, eq=True;.*would not apply them"):
        tc.treeclass(eq=False)(Kw)


def test_base_form_options_message_names_every_base():
    class Mixin:
        pass

    class Layer(tc.TreeClass):
        w: int

    with pytest.raises(TypeError, match=r"(?s)class Both\(Mixin, Layer, kw_only=True\)"):

        @tc.treeclass(kw_only=True)
        class Both(Mixin, Layer):
            x: int = 0



# --- cloudpickle: classes defined in __main__ -----------------------------------------

_MAIN_SOURCE = """\
import sys
import cloudpickle
import jax
import jax.numpy as jnp
import treeclass as tc

{header}
    w: jax.Array
    n: tc.Static[int] = 2

    @tc.jit
    def scaled(self, x):
        return self.w * x * self.n

    def __check_init__(self):
        assert self.n > 0

m = Model(jnp.arange(3.0))
m.scaled(1.0)  # the jit wrapper and its trace log exist
sys.stdout.buffer.write(cloudpickle.dumps(m))
"""

_LOAD_SOURCE = """\
import pickle, sys
import jax, jax.numpy as jnp
import treeclass as tc
m = pickle.loads(sys.stdin.buffer.read())
assert type(m).__module__ == "__main__" and tc.is_treeclass(m)
assert jax.tree.leaves(m)[0].tolist() == [0.0, 1.0, 2.0]
assert m.scaled(2.0).tolist() == [0.0, 4.0, 8.0]
assert jax.jit(lambda m: m)(m) == m
assert type(m)(jnp.ones(1), n=3).replace(n=4).n == 4
print("ok")
"""


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
def test_cloudpickle_carries_a_main_class_with_jit_methods_to_a_new_process(form: Form, tmp_path):
    # Each side is a process of its own: in one process cloudpickle hands back the
    # class it already has, which proves nothing. They run in tmp_path, so that they
    # import the treeclass this test imports, not one in the current directory.
    pytest.importorskip("cloudpickle")
    package = str(Path(tc.__file__).parent.parent)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": package}
    dumped = subprocess.run(
        [sys.executable, "-c", _MAIN_SOURCE.format(header=form.class_source("Model"))],
        capture_output=True, check=False, env=env, cwd=tmp_path,
    )
    assert dumped.returncode == 0, dumped.stderr.decode()[-2000:]
    loaded = subprocess.run(
        [sys.executable, "-c", _LOAD_SOURCE], input=dumped.stdout,
        capture_output=True, check=False, env=env, cwd=tmp_path,
    )
    assert loaded.returncode == 0, loaded.stderr.decode()[-2000:]
    assert loaded.stdout.strip() == b"ok"
