"""Construction and class-body behaviour that users bring from dataclasses, flax.struct
and equinox: their own dunders kept, hand-written `__init__`, signatures, typo hints,
generic aliases, property overrides, readable generated source."""

import dataclasses
import inspect
import sys
from typing import Generic, TypeVar

import jax
import jax.numpy as jnp
import pytest

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
    assert 'object.__setattr__(self, "y", ...)' in message


def test_init_false_field_not_set_message_is_unchanged():
    @tc.treeclass
    class Broken:
        x: float
        y: float = tc.field(init=False)

        def __post_init__(self):
            pass

    with pytest.raises(TypeError, match=r"Broken\.y was not initialized\.\n\nIt is declared with init=False"):
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
    with pytest.raises(TypeError, match=r"Scaled\.__init__\(\) got an unexpected keyword argument 'sclae'") as info:
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
