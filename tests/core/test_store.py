"""One store per instance: its `__dict__`. Whatever route writes a built instance's field,
the attribute, JAX's flatten, `==`, `hash`, `repr` and `jax.jit(lambda m: m)` all see the
new value (or the write was refused, naming the field): there is no second copy of the
fields to fall out of step. And the dataclass conformance that follows from having no
descriptor per field: `Cls.w` is the default, an unset field is missing, `vars(obj)` holds
the fields."""

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from forms import Form
from hypothesis import strategies as st
from strategies import instances

import treeclass as tc

# Each route by which Python lets code write into a built instance's `__dict__`.
WRITES: dict[str, Callable[[Any, str, Any], None]] = {
    "object.__setattr__": object.__setattr__,
    "obj.__dict__[name] = v": lambda obj, name, v: obj.__dict__.__setitem__(name, v),
    "obj.__dict__.__setitem__": lambda obj, name, v: obj.__dict__.__setitem__(name, v),
    "obj.__dict__.update": lambda obj, name, v: obj.__dict__.update({name: v}),
    "vars(obj)[name] = v": lambda obj, name, v: vars(obj).__setitem__(name, v),
}


def _write(route: str, obj: Any, name: str, value: Any) -> None:
    if route == "obj.__dict__[name] = v":
        obj.__dict__[name] = value  # the statement itself, not a call standing for it
    else:
        WRITES[route](obj, name, value)


def _children(obj: Any) -> tuple[list[Any], Any]:
    """One level of JAX's flatten: the instance's children and its treedef."""
    return jax.tree_util.tree_flatten(obj, is_leaf=lambda x: x is not obj)


def _jittable(obj: Any) -> bool:
    return all(isinstance(x, jax.Array | np.ndarray) for x in jax.tree.leaves(obj))


@hypothesis.given(st.data(), instances(), st.sampled_from(sorted(WRITES)))
def test_every_write_route_is_seen_by_every_reader(
    data: st.DataObject, inst: Any, route: str
) -> None:
    obj = inst.obj
    hypothesis.assume(inst.gen.fields)
    field = data.draw(st.sampled_from(inst.gen.fields), "field")
    before = copy.copy(obj)
    # A value no generated field holds: a shape (7, 5) array, or a static string.
    value = "written" if field.static else jnp.full((7, 5), 3.0)
    _write(route, obj, field.name, value)

    assert getattr(obj, field.name) is value  # the attribute
    children, treedef = _children(obj)  # JAX's flatten
    rebuilt = jax.tree.unflatten(treedef, children)
    assert getattr(rebuilt, field.name) is value
    if not field.static:
        assert any(child is value for child in children)
    assert vars(obj)[field.name] is value
    assert obj == rebuilt  # ==
    assert obj != before
    assert hash(obj) == hash(rebuilt)  # hash
    assert repr(obj) == repr(rebuilt)  # repr
    assert repr(obj) != repr(before)
    if _jittable(obj):  # jit
        out = jax.jit(lambda m: m)(obj)
        assert tc.tree_equal(out, obj) is True
        assert jax.tree.structure(out) == jax.tree.structure(obj)


@hypothesis.given(instances())
def test_copies_own_their_store(inst: Any) -> None:
    # A write into one instance's store never reaches another built from it.
    obj = inst.obj
    hypothesis.assume(inst.gen.fields)
    name = inst.gen.fields[0].name
    others = [copy.copy(obj), copy.deepcopy(obj), jax.tree.map(lambda x: x, obj), obj.replace()]
    written = object()
    object.__setattr__(obj, name, written)
    assert all(getattr(other, name) is not written for other in others)


def test_a_deleted_field_is_missing_for_every_reader(form: Form) -> None:
    @form.decorate
    class Layer(*form.bases):
        w: jax.Array
        act: tc.Static[str] = "relu"

    m = Layer(jnp.zeros(2))
    del vars(m)["w"]
    assert not hasattr(m, "w")
    assert repr(m) == "Layer(w=<unset>, act='relu')"
    with pytest.raises(
        AttributeError, match=r"(?s)Layer\.w is not set: it was deleted.*replace\(w="
    ):
        jax.tree.leaves(m)


def test_a_deleted_field_with_a_default_reads_the_default_everywhere(form: Form) -> None:
    @form.decorate
    class Layer(*form.bases):
        w: jax.Array
        scale: float = 2.0

    m = Layer(jnp.zeros(2), 5.0)
    del vars(m)["scale"]
    assert m.scale == 2.0  # the class attribute, as for a dataclass
    assert jax.tree.leaves(m)[1] == 2.0
    assert m == Layer(jnp.zeros(2))


def test_assignment_and_deletion_keep_their_messages(form: Form) -> None:
    @form.decorate
    class Layer(*form.bases):
        w: jax.Array

    m = Layer(jnp.zeros(2))
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"cannot assign to Layer\.w"):
        m.w = jnp.ones(2)
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"cannot delete Layer\.w"):
        del m.w


# --- dataclass conformance --------------------------------------------------------------


@hypothesis.given(instances())
def test_class_attributes_and_vars_are_a_dataclasss(inst: Any) -> None:
    # The reference is dataclasses itself: the class attribute of a field is its default
    # (none for a factory or no default); `vars(obj)` is the fields, nothing else.
    cls, obj = type(inst.obj), inst.obj
    for f in tc.fields(cls):
        if f.default is not dataclasses.MISSING:
            assert getattr(cls, f.name) is f.default
        else:
            assert f.name not in vars(cls)
    assert set(vars(obj)) == {f.name for f in tc.fields(cls)}


@hypothesis.given(instances())
def test_cls_of_vars_rebuilds_the_instance(inst: Any) -> None:
    # For the init fields, as `dataclasses`: `Cls(**vars(obj))`; an `init=False` field is
    # no parameter, so it is left out (Cls(**vars(obj)) with it is a TypeError, as there).
    obj = inst.obj
    init = {f.name for f in tc.fields(obj) if f.init}
    again = type(obj)(**{k: v for k, v in vars(obj).items() if k in init})
    assert again == obj


def test_vars_holds_an_init_false_field_which_init_does_not_take() -> None:
    # The store holds every field JAX flattens, an `init=False` one with a plain default
    # too (a dataclass leaves that one to its class attribute), so `Cls(**vars(obj))` is a
    # TypeError there: `__init__` takes no such parameter. Pass the init fields only.
    @tc.treeclass
    class P:
        x: float
        y: float = tc.field(init=False, default=0.0)

    p = P(1.0)
    assert vars(p) == {"x": 1.0, "y": 0.0}
    with pytest.raises(TypeError):
        P(**vars(p))
    assert P(**{f.name: getattr(p, f.name) for f in tc.fields(P) if f.init}) == p


def test_cls_attribute_is_the_default(form: Form) -> None:
    @form.decorate
    class Neuron(*form.bases):
        v: jax.Array
        tau: float = 20.0
        name: tc.Static[str] = "lif"
        trace: jax.Array = tc.field(default_factory=lambda: jnp.zeros(2))

    assert (Neuron.tau, Neuron.name) == (20.0, "lif")
    assert not hasattr(Neuron, "v")
    assert not hasattr(Neuron, "trace")
    n = Neuron(jnp.ones(2))
    assert vars(n) == {"v": n.v, "tau": 20.0, "name": "lif", "trace": n.trace}
    assert Neuron(**vars(n)) == n


def test_an_unset_field_is_missing_in_post_init(form: Form) -> None:
    seen: list[tuple[bool, bool, list[str]]] = []

    @form.decorate
    class Derived(*form.bases):
        x: float
        y: float = tc.field(init=False)
        z: float = 1.0

        def __post_init__(self) -> None:
            seen.append((hasattr(self, "x"), hasattr(self, "y"), sorted(vars(self))))
            object.__setattr__(self, "y", self.x * 2)

    d = Derived(1.0)
    assert seen == [(True, False, ["x", "z"])]
    assert vars(d) == {"x": 1.0, "z": 1.0, "y": 2.0}


def test_an_unset_field_is_missing_in_a_handwritten_init(form: Form) -> None:
    seen: list[Any] = []

    @form.decorate
    class Layer(*form.bases):
        w: float
        b: float
        scale: float = 2.0

        def __init__(self, w: float) -> None:
            seen.append((hasattr(self, "w"), hasattr(self, "b"), self.scale, dict(vars(self))))
            self.w = w
            self.b = w + 1

    m = Layer(1.0)
    assert seen == [(False, False, 2.0, {})]  # `scale` is the class attribute's, as dataclasses
    assert vars(m) == {"w": 1.0, "b": 2.0, "scale": 2.0}


def test_the_record_is_the_one_place_of_a_classs_metadata() -> None:
    class P(tc.TreeClass):
        x: jax.Array
        n: tc.Static[int] = 1

    names = [name for name in vars(P) if name.startswith("__tc")]
    assert names == ["__tc_layout__"]
    assert not [name for name in vars(P(jnp.ones(1))) if name.startswith("__tc")]


# --- replace runs the checks a decorator wrapped around __init__ -----------------------


jaxtyping = pytest.importorskip("jaxtyping")
beartype = pytest.importorskip("beartype")


def test_replace_runs_a_jaxtyped_init_s_checks() -> None:
    from jaxtyping import Array, Float, jaxtyped

    @jaxtyped(typechecker=beartype.beartype)
    @tc.treeclass
    class Linear:
        w: Float[Array, "3 2"]  # noqa: F722 (jaxtyping's shape strings)
        b: Float[Array, "2"]
        act: str = tc.static(default="relu")

    m = Linear(jnp.ones((3, 2)), jnp.zeros(2))
    wrong = jnp.ones((4, 2))
    refusals: list[Callable[[], Any]] = [
        lambda: Linear(wrong, jnp.zeros(2)),
        lambda: dataclasses.replace(m, w=wrong),
        lambda: m.replace(w=wrong),
        lambda: tc.replace(m, w=wrong),
        lambda: tc.replace_at(m, lambda t: t.w, wrong),
        lambda: m.replace(b=jnp.zeros(2, jnp.int32)),  # a dtype
    ]
    for refused in refusals:
        with pytest.raises(jaxtyping.TypeCheckError):
            refused()
    new = m.replace(b=jnp.ones(2), act="tanh")
    assert (new.act, new.w is m.w, float(new.b[0])) == ("tanh", True, 1.0)


def test_replace_runs_a_beartype_init_s_checks() -> None:
    from beartype.roar import BeartypeCallHintParamViolation

    @beartype.beartype
    @tc.treeclass
    class Counter:
        count: jax.Array
        step: int = tc.static(default=1)

    c = Counter(jnp.array(0))
    with pytest.raises(BeartypeCallHintParamViolation):
        Counter(jnp.array(0), step="one")
    with pytest.raises(BeartypeCallHintParamViolation):
        tc.replace(c, step="one")
    assert tc.replace(c, step=2).step == 2


def test_replace_through_a_wrapped_init_refuses_an_init_false_field() -> None:
    def checked(init: Callable[..., None]) -> Callable[..., None]:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)

        return __init__

    @tc.treeclass
    class P:
        x: float
        y: float = tc.field(init=False, default=0.0)

    P.__init__ = checked(P.__init__)  # type: ignore[method-assign]
    p = P(1.0)
    assert p.replace(x=2.0).x == 2.0
    with pytest.raises(
        ValueError, match=r"P\.y is an init=False field, and P\.__init__ is wrapped"
    ):
        p.replace(y=1.0)
