"""`tc.TreeClass`: what only the base-class form has (class keywords, the base itself,
mixing with the decorator). The behaviours both forms share run in both in
test_treeclass.py and the other files that take the `form` fixture."""

import abc
import dataclasses
import inspect

import jax
import jax.numpy as jnp
import pytest

import treeclass as tc


class Linear(tc.TreeClass):
    w: jax.Array
    b: jax.Array
    act: tc.Static[str] = "relu"


@tc.treeclass
class DecoratedLinear:
    w: jax.Array
    b: jax.Array
    act: tc.Static[str] = "relu"


class MLP(tc.TreeClass, kw_only=True):
    layers: tuple[Linear, ...]
    scale: float = tc.static(1.0)


def lin(n: int = 2) -> Linear:
    return Linear(jnp.ones(n), jnp.zeros(n))


def test_base_itself_is_not_a_treeclass():
    assert not tc.is_treeclass(tc.TreeClass)
    assert not dataclasses.is_dataclass(tc.TreeClass)
    assert "replace" not in vars(tc.TreeClass)  # declared for type checkers only
    bare = tc.TreeClass()
    assert jax.tree.leaves(bare)[0] is bare  # a leaf: not registered with JAX


def test_subclass_is_what_the_decorator_makes():
    assert tc.is_treeclass(Linear)
    assert tc.is_treeclass(lin())
    assert Linear.__dataclass_params__.frozen  # type: ignore[attr-defined]
    kinds = [(f.name, f.metadata["static"]) for f in tc.fields(Linear)]
    assert kinds == [(f.name, f.metadata["static"]) for f in tc.fields(DecoratedLinear)]
    a, d = lin(), DecoratedLinear(jnp.ones(2), jnp.zeros(2))
    assert repr(a) == repr(d).replace("DecoratedLinear", "Linear")
    assert str(jax.tree.structure(a)) == str(jax.tree.structure(d)).replace("DecoratedLinear", "Linear")


def test_each_subclass_gets_its_own_generated_replace():
    a = lin()
    assert Linear.replace is not MLP.replace  # type: ignore[attr-defined]
    assert Linear.replace.__qualname__ == "Linear.replace"  # type: ignore[attr-defined]
    assert a.replace(act="tanh").act == "tanh"
    with pytest.raises(TypeError, match=r"Linear\.replace\(\) got an unexpected field 'wq'\. Did you mean 'w'\?"):
        a.replace(wq=1)


def test_class_keywords_are_the_decorator_options():
    assert inspect.signature(MLP).parameters["layers"].kind is inspect.Parameter.KEYWORD_ONLY
    with pytest.raises(TypeError, match=r"MLP\.__init__\(\)"):
        MLP((lin(),))  # type: ignore[misc]
    m = MLP(layers=(lin(),))
    assert m.scale == 1.0

    class NoRepr(tc.TreeClass, repr=False, eq=False):
        x: int

    a, b = NoRepr(1), NoRepr(1)
    assert repr(a).startswith("<")
    assert a != b


def test_forms_mix_both_ways():
    # A decorated class holding base-form instances, and the reverse.
    @tc.treeclass
    class Holder:
        inner: Linear
        other: DecoratedLinear

    class BaseHolder(tc.TreeClass):
        inner: DecoratedLinear
        other: Linear

    d = DecoratedLinear(jnp.ones(1), jnp.ones(1))
    h, bh = Holder(lin(1), d), BaseHolder(d, lin(1))
    assert len(jax.tree.leaves(h)) == len(jax.tree.leaves(bh)) == 4
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(h)[0]]
    assert paths == [".inner.w", ".inner.b", ".other.w", ".other.b"]
    assert jax.jit(lambda x: x)(bh) == bh


def test_base_form_subclass_of_a_decorated_class():
    class Child(DecoratedLinear, tc.TreeClass):
        extra: jax.Array = tc.field(default_factory=lambda: jnp.zeros(1))

    c = Child(jnp.ones(2), jnp.zeros(2))
    assert [f.name for f in tc.fields(c)] == ["w", "b", "act", "extra"]
    assert len(jax.tree.leaves(c)) == 3


def test_decorating_a_base_form_class_is_a_no_op_and_options_are_refused():
    assert tc.treeclass(Linear) is Linear

    @tc.treeclass
    class Child(Linear):
        extra: int = 0

    assert Child(jnp.ones(1), jnp.ones(1)).extra == 0
    with pytest.raises(TypeError, match=r"(?s)Kw subclasses tc\.TreeClass, so it is a treeclass already.*class Kw\(Linear, kw_only=True\)"):

        @tc.treeclass(kw_only=True)
        class Kw(Linear):
            extra: int = 0


def test_init_subclass_keywords_pass_through_to_other_bases():
    seen = []

    class Mixin:
        def __init_subclass__(cls, *, tag: str = "", **kwargs):
            super().__init_subclass__(**kwargs)
            seen.append(tag)

    class Tagged(tc.TreeClass, Mixin, tag="t"):
        x: int

    assert seen == ["t"]
    assert Tagged(1).x == 1


def test_abstract_base_classes_mix_in():
    # The equinox pattern: an abstract interface, concrete treeclass implementations.
    class Layer(tc.TreeClass, abc.ABC):
        @abc.abstractmethod
        def __call__(self, x: jax.Array) -> jax.Array: ...

    class Scale(Layer):
        w: jax.Array

        def __call__(self, x: jax.Array) -> jax.Array:
            return x * self.w

    assert inspect.isabstract(Layer)
    assert not inspect.isabstract(Scale)
    with pytest.raises(TypeError, match=r"\bLayer\b"):  # Python's message, naming the class
        Layer()  # type: ignore[abstract]
    s = Scale(jnp.full(2, 2.0))
    assert jax.jit(lambda m, x: m(x))(s, jnp.ones(2)).tolist() == [2.0, 2.0]
    assert type(jax.tree.map(lambda x: x, s)) is Scale
