"""Construction and class-body behaviour that users bring from dataclasses, flax.struct
and equinox: their own dunders kept, hand-written `__init__`, signatures, typo hints,
generic aliases, property overrides, readable generated source."""

import abc
import dataclasses
import inspect
import sys
import threading
from typing import Any, Generic, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from forms import FORMS, Form
from hypothesis import given
from hypothesis import strategies as st

import treeclass as tc

T = TypeVar("T")


# --- the class body's own dunders are kept -------------------------------------------


def test_own_repr_eq_hash_kept():
    @tc.treeclass
    class Own:
        x: int

        def __repr__(self):
            return "mine"

        def __eq__(self, other):
            return isinstance(other, Own)

        def __hash__(self):
            return 7

    a, b = Own(1), Own(2)
    assert repr(a) == "mine"
    assert a == b  # ours would compare the leaves: 1 != 2
    assert hash(a) == 7


def test_own_eq_without_hash_gets_ours_as_dataclasses_does():
    # dataclasses(eq=True, frozen=True) adds a field hash when the body defines __eq__
    # but not __hash__ (Python set __hash__ = None for it).
    @tc.treeclass
    class OwnEq:
        x: jax.Array
        tag: str = tc.static("a")

        def __eq__(self, other):
            return isinstance(other, OwnEq) and self.tag == other.tag

    a, b = OwnEq(jnp.ones(1)), OwnEq(jnp.zeros(1))
    assert a == b
    assert hash(a) == hash(b)
    assert hash(a) != hash(OwnEq(jnp.ones(1), tag="b"))


def test_explicit_hash_none_is_kept():
    @tc.treeclass
    class Unhashable:
        x: int
        __hash__ = None  # type: ignore[assignment]

    with pytest.raises(TypeError, match="unhashable type"):
        hash(Unhashable(1))


def test_inherited_own_methods_are_not_kept_by_a_decorated_subclass():
    # As dataclasses: only the class's own body counts; a parent's __repr__ is replaced.
    @tc.treeclass
    class Base:
        x: int

        def __repr__(self):
            return "base"

    @tc.treeclass
    class Child(Base):
        y: int = 0

    assert repr(Base(1)) == "base"
    assert repr(Child(1)) == "Child(x=1, y=0)"


# --- a hand-written __init__ ---------------------------------------------------------


def test_hand_written_init_runs_converters_on_the_values_it_set():
    @tc.treeclass
    class Conv:
        x: jax.Array = tc.field(converter=jnp.asarray)

        def __init__(self, x):
            object.__setattr__(self, "x", x)

    c = Conv(1.0)
    assert isinstance(c.x, jax.Array)
    assert isinstance(c.replace(x=2.0).x, jax.Array)


def test_hand_written_init_leaves_defaulted_fields_to_their_defaults():
    @tc.treeclass
    class Defaults:
        x: jax.Array
        scale: float = tc.static(2.0)
        w: jax.Array = tc.field(default_factory=lambda: jnp.zeros(2), converter=jnp.asarray)
        n: int = tc.field(default=3, converter=float)

        def __init__(self, x):
            object.__setattr__(self, "x", x)

    d = Defaults(jnp.ones(1))
    assert d.scale == 2.0
    assert d.w.tolist() == [0.0, 0.0]
    assert isinstance(d.n, float)  # defaults go through the converter too
    assert d.n == 3.0
    leaves, treedef = jax.tree.flatten(d)
    assert treedef.unflatten(leaves).scale == 2.0


def test_hand_written_init_missing_field_without_default_names_the_fix():
    @tc.treeclass
    class Forgot:
        x: jax.Array
        y: jax.Array

        def __init__(self, x):
            object.__setattr__(self, "x", x)

    with pytest.raises(TypeError, match=r"Forgot\.y was not initialized") as info:
        Forgot(jnp.ones(1))
    message = str(info.value)
    assert "init=False" not in message
    assert "Forgot.__init__ does not set it" in message
    assert "self.y = ..." in message


def test_init_false_field_not_set_message_is_unchanged():
    @tc.treeclass
    class Broken:
        x: float
        y: float = tc.field(init=False)

        def __post_init__(self):
            pass

    with pytest.raises(
        TypeError, match=r"Broken\.y was not initialized\.\n\nIt is declared with init=False"
    ):
        Broken(1.0)


# --- signatures ----------------------------------------------------------------------


@tc.treeclass
class Sig:
    a: int
    w: jax.Array = tc.field(default_factory=lambda: jnp.zeros(1))
    tau: float = tc.static(20.0)


@dataclasses.dataclass(frozen=True)
class PlainSig:
    a: int
    w: jax.Array = dataclasses.field(default_factory=lambda: jnp.zeros(1))
    tau: float = 20.0


def test_signature_like_a_dataclass():
    assert str(inspect.signature(Sig)) == str(inspect.signature(PlainSig))
    assert str(inspect.signature(Sig)).startswith("(a: int, w: ")
    assert str(inspect.signature(Sig)).endswith(" = <factory>, tau: float = 20.0) -> None")


def test_replace_signature_is_readable():
    text = str(inspect.signature(Sig.replace))  # type: ignore[attr-defined]
    assert "_MISSING_TYPE" not in text
    assert "object at 0x" not in text
    assert "a: int = <unchanged>" in text


# --- a constructor typo ---------------------------------------------------------------


@tc.treeclass
class Scaled:
    x: jax.Array
    scale: float = tc.static(1.0)


def test_constructor_typo_names_the_class_and_keyword():
    # Python rejects the keyword before the generated __init__ runs, so the hint is
    # Python's own: 3.13 adds "Did you mean 'scale'?"; treeclass does not pay a check
    # on every construction to add it on older versions (see treeclass/_core/init.py).
    with pytest.raises(
        TypeError, match=r"Scaled\.__init__\(\) got an unexpected keyword argument 'sclae'"
    ) as info:
        Scaled(jnp.ones(1), sclae=2.0)  # type: ignore[call-arg]
    if sys.version_info >= (3, 13):
        assert "Did you mean 'scale'?" in str(info.value)


# --- generics, property overrides ----------------------------------------------------


def test_generic_alias_call_sets_orig_class():
    @tc.treeclass
    class Box(Generic[T]):
        item: T

    b = Box[int](1)
    assert b.__orig_class__ == Box[int]  # type: ignore[attr-defined]
    assert jax.tree.leaves(b) == [1]
    with pytest.raises(AttributeError, match=r"cannot assign to Box\.item"):
        b.item = 2  # pyright: ignore[reportAttributeAccessIssue]


def test_subclass_may_override_an_init_false_field_with_a_property():
    @tc.treeclass
    class Base:
        x: float
        y: float = tc.field(init=False)

    @tc.treeclass
    class Child(Base):
        @property
        def y(self) -> float:  # type: ignore[override]
            return self.x * 2

    c = Child(1.5)
    assert c.y == 3.0
    assert jax.tree.leaves(c) == [1.5]
    leaves, treedef = jax.tree.flatten(c)
    assert treedef.unflatten(leaves).y == 3.0
    assert c.replace(x=2.0).y == 4.0
    # tc.fields() agrees with flatten and replace: y is a property now, not a field.
    assert [f.name for f in tc.fields(c)] == ["x"]
    assert c.replace(**{f.name: getattr(c, f.name) for f in tc.fields(c)}) == c


# --- generated source ----------------------------------------------------------------


def _make(with_scale: bool):
    if with_scale:

        @tc.treeclass
        class A:
            x: jax.Array
            scale: float = tc.static(1.0)

    else:

        @tc.treeclass
        class A:  # same qualname, other fields: a second function called twice
            x: jax.Array

    return A


def test_same_qualname_classes_show_their_own_source():
    first, second = _make(True), _make(False)
    assert first.__qualname__ == second.__qualname__
    assert "scale" in inspect.getsource(first.__init__)
    assert "scale" not in inspect.getsource(second.__init__)
    assert "scale" in inspect.getsource(first.replace)  # type: ignore[attr-defined]


# --- what equinox and flax users bring with them (docs/coming-from-equinox.md) -------


def test_init_assigns_fields_with_self_dot_then_the_instance_is_frozen(form: Form):
    @form.decorate
    class Linear(*form.bases):
        w: jax.Array
        b: jax.Array = tc.field(converter=jnp.asarray)
        n: tc.Static[int] = 0

        def __init__(self, size: int):
            self.w = jnp.ones(size)
            self.b = [0.0] * size  # the converter runs after __init__
            self.n = size

        def __post_init__(self):
            assert isinstance(self.b, jax.Array)  # converters ran first

    lin = Linear(3)
    assert lin.w.shape == lin.b.shape == (3,)
    assert lin.n == 3
    assert isinstance(lin.b, jax.Array)
    with pytest.raises(
        dataclasses.FrozenInstanceError, match=r"cannot assign to Linear\.w"
    ) as info:
        lin.w = jnp.zeros(3)
    assert "self.replace(w=...)" in str(info.value)
    assert jax.tree.leaves(lin.replace(n=4))[0] is lin.w


def test_init_may_not_assign_a_name_that_is_no_field(form: Form):
    @form.decorate
    class Typo(*form.bases):
        w: jax.Array

        def __init__(self):
            self.ww = jnp.ones(1)

    with pytest.raises(dataclasses.FrozenInstanceError, match=r"'ww' is not a field of Typo"):
        Typo()


def test_assignment_is_open_only_for_the_instance_whose_init_runs(form: Form):
    # Other instances built meanwhile (of this class or another, in this thread or
    # another) stay frozen: the permission belongs to the instance, not the class.
    caught: list[str] = []

    @form.decorate
    class Leaf(*form.bases):
        x: float

    done = Leaf(0.0)

    def assign_elsewhere() -> None:
        try:
            done.x = 1.0
        except dataclasses.FrozenInstanceError:
            caught.append("thread")

    @form.decorate
    class Node(*form.bases):
        x: float
        child: Any = None

        def __init__(self, depth: int):
            self.x = float(depth)
            self.child = Node(depth - 1) if depth else Leaf(-1.0)
            try:
                self.child.x = 5.0  # built, so frozen, though its class is ours
            except dataclasses.FrozenInstanceError:
                caught.append("nested")
            thread = threading.Thread(target=assign_elsewhere)
            thread.start()
            thread.join()

    node = Node(2)
    assert node.child.child.x == 0.0
    assert node.child.child.child.x == -1.0
    assert caught == ["nested", "thread"] * 3


def test_a_field_init_leaves_unset_without_default_is_named(form: Form):
    @form.decorate
    class Half(*form.bases):
        w: jax.Array
        b: jax.Array

        def __init__(self):
            self.w = jnp.ones(1)

    with pytest.raises(TypeError, match=r"Half\.b was not initialized") as info:
        Half()
    assert "self.b = ..." in str(info.value)


@given(
    form=st.sampled_from(FORMS),
    depth=st.integers(1, 4),
    declare_at=st.one_of(st.none(), st.integers(1, 4)),
)
def test_a_subclass_without_fields_inherits_the_hand_written_init(form, depth, declare_at):
    def __init__(self, k):
        self.w = jnp.full(k, 2.0)
        self.n = k

    annotations = {"w": jax.Array, "n": tc.Static[int]}
    cls = form.decorate(
        type("Root", form.bases, {"__annotations__": annotations, "__init__": __init__})
    )
    declared = False
    for level in range(1, depth + 1):
        body: dict[str, Any] = {"__annotations__": {}}
        if declare_at == level:  # declares a field: a generated __init__, as a dataclass
            body = {"__annotations__": {"extra": float}, "extra": 0.5}
            declared = True
        cls = form.decorate(type(f"Sub{level}", (cls,), body))
    if declared:
        obj = cls(jnp.ones(2), 3)
        assert (obj.w.tolist(), obj.n, obj.extra) == ([1.0, 1.0], 3, 0.5)
    else:
        obj = cls(3)
        assert (obj.w.tolist(), obj.n) == ([2.0, 2.0, 2.0], 3)
    assert jax.jit(lambda o: o)(obj) == obj


@given(
    form=st.sampled_from(FORMS),
    levels=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=4),
    hand_written=st.booleans(),
)
def test_every_check_init_runs_base_first_on_construction_and_replace_never_in_unflatten(
    form, levels, hand_written
):
    log: list[int] = []
    classes: list[type] = []
    for level, (checks, adds_field) in enumerate(levels):
        body: dict[str, Any] = {"__annotations__": {}}
        if level == 0:
            body["__annotations__"]["x"] = float
            if hand_written:
                body["__init__"] = lambda self, x: setattr(self, "x", x)
        elif adds_field:
            body["__annotations__"][f"x{level}"] = float
            body[f"x{level}"] = float(level)
        if checks:
            body["__check_init__"] = lambda self, level=level: log.append(level)
        bases = (classes[-1],) if classes else form.bases
        classes.append(form.decorate(type(f"L{level}", bases, body)))
    expected = [level for level, (checks, _) in enumerate(levels) if checks]
    obj = classes[-1](1.0)
    assert log == expected
    for rebuild in (lambda: obj.replace(x=2.0), lambda: tc.replace_at(obj, lambda o: o.x, 3.0)):
        log.clear()
        rebuild()
        assert log == expected
    log.clear()
    jax.tree.map(lambda v: v, obj)
    jax.jit(lambda o: o)(obj)
    assert log == []


def test_check_init_can_refuse_whatever_the_subclass_overrides(form: Form):
    @form.decorate
    class Positive(*form.bases):
        q: float

        def __check_init__(self):
            if self.q < 0:
                msg = f"q must be >= 0, got {self.q}"
                raise ValueError(msg)

    @form.decorate
    class Child(Positive):
        def __post_init__(self):  # no super(): __check_init__ runs anyway
            pass

    with pytest.raises(ValueError, match="q must be >= 0, got -1"):
        Child(-1.0)
    with pytest.raises(ValueError, match="q must be >= 0, got -2"):
        Child(1.0).replace(q=-2.0)


@pytest.mark.parametrize("abc_base", [False, True])
def test_unimplemented_abstract_methods_refuse_instantiation(form: Form, abc_base: bool):
    bases = (*form.bases, abc.ABC) if abc_base else form.bases

    @form.decorate
    class Layer(*bases):
        w: jax.Array

        @abc.abstractmethod
        def __call__(self, x): ...

        @property
        @abc.abstractmethod
        def width(self) -> int: ...

    with pytest.raises(TypeError, match=r"abstract class Layer") as info:
        Layer(jnp.ones(1))
    assert "__call__" in str(info.value)
    assert "width" in str(info.value)

    @form.decorate
    class Half(Layer):
        def __call__(self, x):
            return x

    with pytest.raises(TypeError, match=r"abstract class Half") as info:
        Half(jnp.ones(1))
    assert "width" in str(info.value)
    assert "__call__" not in str(info.value)

    @form.decorate
    class Dense(Half):
        @property
        def width(self) -> int:
            return 1

    assert Dense(jnp.ones(1)).width == 1


def test_an_abstract_class_stays_refused_once_its_construction_is_warm(form: Form):
    # CPython 3.13+ specialises a warm `Cls(...)` on a plain class into an allocation that
    # skips object.__new__'s abstract check; the second call here was the one let through.
    @form.decorate
    class Layer(*form.bases):
        w: jax.Array

        @abc.abstractmethod
        def __call__(self, x): ...

    for _ in range(4):
        with pytest.raises(TypeError, match=r"abstract class Layer"):
            Layer(jnp.ones(1))

    @form.decorate
    class Dense(Layer):
        def __call__(self, x):
            return self.w * x

    assert [Dense(jnp.ones(1))(2.0).tolist() for _ in range(4)] == [[2.0]] * 4


def test_a_jax_array_default_is_accepted_and_shared(form: Form):
    @form.decorate
    class Zeros(*form.bases):
        w: jax.Array = jnp.zeros(3)
        b: jax.Array = tc.field(default=jnp.ones(2))

    a, b = Zeros(), Zeros()
    assert a.w is b.w
    assert a.w.tolist() == [0.0, 0.0, 0.0]
    assert [f.default.shape for f in tc.fields(Zeros)] == [(3,), (2,)]
    assert Zeros.w is a.w  # the class attribute is the default, as for a dataclass
    assert Zeros(w=jnp.ones(3)).w.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    ("default", "kind"),
    [
        ("np.zeros(3)", "a numpy.ndarray"),
        ("[1.0]", "a list"),
        ("{}", "a dict"),
        ("set()", "a set"),
        ("tc.field(default=[1.0])", "a list"),
    ],
)
def test_a_mutable_default_is_refused_naming_the_field_and_default_factory(
    form: Form, default: str, kind: str
):
    source = f"{form.class_source('Bad')}\n    w: Any = {default}\n"
    with pytest.raises(ValueError, match=rf"Bad\.w has a mutable default \({kind}\)") as info:
        exec(source, {"tc": tc, "np": np, "Any": Any})
    assert "tc.field(default_factory=lambda: ...)" in str(info.value)


def test_of_two_mistakes_in_a_class_the_first_declared_is_reported(form: Form):
    # One pass over the fields, in declaration order: a mutable default declared first is
    # reported before a static option refused on a later field, and the other way round.
    first = "    w: Any = []\n    n: int = tc.static(default=1, trainable=False)\n"
    with pytest.raises(ValueError, match=r"^Bad\.w has a mutable default \(a list\)"):
        exec(f"{form.class_source('Bad')}\n{first}", {"tc": tc, "Any": Any})
    second = "    n: int = tc.static(default=1, trainable=False)\n    w: Any = []\n"
    with pytest.raises(TypeError, match=r"^Bad\.n is static and declared trainable=False\."):
        exec(f"{form.class_source('Bad')}\n{second}", {"tc": tc, "Any": Any})


def test_an_initvar_the_hand_written_init_assigns_goes_to_post_init(form: Form):
    @form.decorate
    class Shifted(*form.bases):
        x: float
        shift: dataclasses.InitVar[float] = 1.0

        def __init__(self, x: float, shift: float = 3.0):
            self.x = x
            self.shift = shift

        def __post_init__(self, shift: float):
            object.__setattr__(self, "x", self.x + shift)

    s = Shifted(1.0)
    assert s.x == 4.0
    assert "shift" not in s.__dict__
    assert Shifted(1.0, 10.0).x == 11.0
    assert s.replace(x=0.0).x == 1.0  # replace: the InitVar's default
    assert s.replace(x=0.0, shift=5.0).x == 5.0


def test_the_frozen_error_says_where_assignment_works(form: Form):
    @form.decorate
    class Point(*form.bases):
        x: float

    with pytest.raises(dataclasses.FrozenInstanceError) as info:
        Point(1.0).x = 2.0
    assert "self.x = ...` works only inside the class's own\n__init__" in str(info.value)


def test_super_init_into_a_generated_init_runs_the_hooks_once_when_the_subclass_is_built(
    form: Form,
):
    # equinox's style: a subclass's own __init__ calls the parent's (generated) one.
    log: list[str] = []

    @form.decorate
    class Base(*form.bases):
        w: jax.Array = tc.field(converter=jnp.asarray)

        def __post_init__(self):
            log.append("base")

        def __check_init__(self):
            log.append("check base")

    @form.decorate
    class Child(Base):
        b: jax.Array

        def __init__(self, size: int):
            super().__init__([1.0] * size)  # stores w (converted), runs no hook yet
            self.b = jnp.zeros(size)

        def __post_init__(self):
            super().__post_init__()
            log.append(f"child {self.b.shape}")  # b is set: the hook runs after __init__

    child = Child(2)
    assert log == ["base", "child (2,)", "check base"]
    assert isinstance(child.w, jax.Array)
    assert jax.tree.leaves(child)[1].shape == (2,)
    log.clear()
    Base([1.0])  # the parent's own instances: hooks as before
    assert log == ["base", "check base"]
