"""`replace()`: the method, the function, and what runs on the way."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from forms import FORMS
from hypothesis import given, settings
from hypothesis import strategies as st

import treeclass as tc


@tc.treeclass
class Counter:
    count: jax.Array
    total: jax.Array
    step: int = tc.static(1)


def test_method_and_function_share_unchanged_fields():
    c = Counter(jnp.array(0), jnp.zeros(3))
    for new in (c.replace(count=jnp.array(5)), tc.replace(c, count=jnp.array(5))):
        assert type(new) is Counter
        assert int(new.count) == 5
        assert new.total is c.total  # shared, not copied
        assert new.step == 1
    assert int(c.count) == 0  # the original is unchanged


def test_static_change_changes_the_treedef():
    c = Counter(jnp.array(0), jnp.zeros(3))
    new = c.replace(step=2)
    assert new.step == 2
    assert jax.tree.structure(new) != jax.tree.structure(c)
    assert jax.tree.structure(new.replace(step=1)) == jax.tree.structure(c)


def test_unknown_name_lists_valid_names_and_closest_match():
    c = Counter(jnp.array(0), jnp.zeros(3))
    with pytest.raises(TypeError, match=r"Counter\.replace\(\) got an unexpected field 'stpe'\. Did you mean 'step'\?") as info:
        c.replace(stpe=3)
    assert "Valid fields: count, total, step." in str(info.value)


def test_unknown_name_without_close_match():
    c = Counter(jnp.array(0), jnp.zeros(3))
    with pytest.raises(TypeError, match=r"unexpected field 'zzz'\.\nValid fields") as info:
        c.replace(zzz=3)
    assert "Did you mean" not in str(info.value)


def test_replace_rejects_non_treeclass():
    with pytest.raises(TypeError, match=r"treeclass\.replace\(\) takes a treeclass instance; got tuple"):
        tc.replace((1, 2), x=1)


def test_converter_runs_on_changed_values_only():
    calls = []

    def to_array(x):
        calls.append(x)
        return jnp.asarray(x)

    @tc.treeclass
    class C:
        a: jax.Array = tc.field(converter=to_array)
        b: jax.Array = tc.field(converter=to_array)

    c = C(1.0, 2.0)  # type: ignore[arg-type]
    calls.clear()
    new = c.replace(b=3.0)
    assert calls == [3.0]
    assert new.a is c.a
    assert isinstance(new.b, jax.Array)


def test_post_init_runs_on_replace_and_can_reject():
    calls = []

    @tc.treeclass
    class Positive:
        x: jax.Array
        doubled: jax.Array = tc.field(init=False)

        def __post_init__(self):
            calls.append(1)
            if (self.x < 0).any():
                msg = "Positive.x must be >= 0"
                raise ValueError(msg)
            object.__setattr__(self, "doubled", self.x * 2)

    p = Positive(jnp.ones(2))
    assert calls == [1]
    q = p.replace(x=jnp.full(2, 3.0))
    assert q.doubled.tolist() == [6.0, 6.0]  # derived again
    assert calls == [1, 1]
    with pytest.raises(ValueError, match=r"Positive\.x must be >= 0"):
        p.replace(x=-jnp.ones(2))


def test_replace_may_set_init_false_field():
    @tc.treeclass
    class State:
        x: jax.Array
        steps: int = tc.static(default=0, init=False)

    s = State(jnp.zeros(1)).replace(steps=3)
    assert s.steps == 3


def test_initvar_without_default_must_be_given():
    @tc.treeclass
    class Shifted:
        x: jax.Array
        shift: dataclasses.InitVar[float]

        def __post_init__(self, shift):
            object.__setattr__(self, "x", self.x + shift)

    s = Shifted(jnp.zeros(1), 1.0)
    assert s.replace(x=jnp.zeros(1), shift=2.0).x.tolist() == [2.0]
    with pytest.raises(ValueError, match=r"InitVar 'shift' has no default, so Shifted\.replace\(\) needs it"):
        s.replace(x=jnp.zeros(1))


def test_replace_works_under_jit():
    @jax.jit
    def bump(c):
        return c.replace(count=c.count + c.step)

    c = Counter(jnp.array(0), jnp.zeros(3), step=2)
    assert int(bump(bump(c)).count) == 4


# --- replace() rebuilds as construction does ------------------------------------------


def _derive(self):
    object.__setattr__(self, "y", self.x * 2 + 1)


def _init_calling_post_init(self, x):
    object.__setattr__(self, "x", x)
    self.__post_init__()


@settings(max_examples=25)
@given(
    x0=st.integers(-50, 50),
    x1=st.integers(-50, 50),
    hand_written=st.booleans(),
    form=st.sampled_from(FORMS),
    via=st.sampled_from(["method", "function", "replace_at"]),
)
def test_replace_derives_init_false_fields_again_as_dataclasses_replace_does(x0, x1, hand_written, form, via):
    body: dict[str, object] = {"__annotations__": {"x": int, "y": int}, "__post_init__": _derive}
    if hand_written:
        body["__init__"] = _init_calling_post_init
    plain = dataclasses.dataclass(frozen=True)(type("P", (), {**body, "y": dataclasses.field(init=False)}))
    cls = form.decorate(type("C", form.bases, {**body, "y": tc.field(init=False)}))
    obj = cls(x0)
    new = {
        "method": lambda: obj.replace(x=x1),
        "function": lambda: tc.replace(obj, x=x1),
        "replace_at": lambda: tc.replace_at(obj, lambda c: c.x, x1),
    }[via]()
    expected = dataclasses.replace(plain(x0), x=x1)
    assert (new.x, new.y) == (expected.x, expected.y) == (x1, 2 * x1 + 1)
    leaves = jax.tree.leaves(new)
    assert leaves == [x1, 2 * x1 + 1]  # the flatten cache holds the derived value too


@pytest.mark.parametrize("via", ["method", "replace_at"])
def test_replace_refuses_a_derived_field_that_post_init_would_overwrite(form, via):
    # Regression: C(1).replace(y=5).y was 3, silently; dataclasses.replace
    # refuses every init=False field. Here the value __post_init__ overwrites is refused.
    body: dict[str, object] = {"__annotations__": {"x": int, "y": int}, "__post_init__": _derive}
    cls = form.decorate(type("C", form.bases, {**body, "y": tc.field(init=False)}))
    obj = cls(1)
    change = {
        "method": lambda: obj.replace(y=5),
        "replace_at": lambda: tc.replace_at(obj, lambda c: c.y, 5),
    }[via]
    with pytest.raises(ValueError, match=r"^C\.y is an init=False field that __post_init__ sets"):
        change()


def test_replace_keeps_a_derived_field_that_post_init_leaves_alone(form):
    @form.decorate
    class C(*form.bases):
        x: int
        y: int = tc.field(init=False, default=0)

        def __post_init__(self) -> None:
            if self.x < 0:
                msg = "x must be >= 0"
                raise ValueError(msg)

    assert C(1).replace(y=5).y == 5
