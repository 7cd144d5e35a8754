"""`tc.jit`: methods with `self` traced, one compile per structure, nothing lost."""

import collections
import dataclasses
import functools
import gc
import types
import weakref
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treeclass as tc


@tc.treeclass
class Counter:
    count: jax.Array
    step: int = tc.static(1)

    @tc.jit
    def inc(self):
        return self.replace(count=self.count + self.step)

    @tc.jit(static_argnames="times")
    def add(self, x, times):
        return self.replace(count=self.count + x * times)


class TutorialCounter:
    """The counter of JAX's stateful-computations tutorial: jax.jit with self static (the trap)."""

    def __init__(self):
        self.count = 0
        self.traces = 0

    def __hash__(self):
        return id(self)

    @functools.partial(jax.jit, static_argnums=(0,))
    def inc(self):
        self.traces += 1
        self.count += 1


def test_tutorial_counter_loses_count_and_compiles_per_instance():
    counters = [TutorialCounter() for _ in range(20)]
    for c in counters:
        c.inc()
        c.inc()
    assert all(c.count == 1 for c in counters)  # the second increment was lost
    assert sum(c.traces for c in counters) == 20  # one compile per instance


def test_counter_200_instances_one_trace_count_kept():
    @tc.treeclass
    class Fresh:
        count: jax.Array

        @tc.jit
        def inc(self):
            return self.replace(count=self.count + 1)

    counters = [Fresh(jnp.array(i)) for i in range(200)]
    counters = [c.inc().inc() for c in counters]
    assert [int(c.count) for c in counters] == [i + 2 for i in range(200)]
    assert Fresh.inc.trace_log.count == 1


def test_changed_static_retraces_and_array_values_are_never_baked():
    @tc.treeclass
    class Scale:
        w: jax.Array
        k: int = tc.static(1)

        @tc.jit
        def apply(self, x):
            return self.w * x * self.k

    a, b = Scale(jnp.array(2.0)), Scale(jnp.array(3.0))
    assert float(a.apply(1.0)) == 2.0
    assert float(b.apply(1.0)) == 3.0  # b's value, not a's baked in
    assert Scale.apply.trace_log.count == 1
    assert float(Scale(jnp.array(2.0), k=5).apply(1.0)) == 10.0
    assert Scale.apply.trace_log.count == 2


def test_static_argnames_pass_through():
    c = Counter(jnp.array(0.0))
    assert float(c.add(1.0, times=3).count) == 3.0
    assert float(c.add(1.0, times=4).count) == 4.0
    assert Counter.add.trace_log.count == 2


def test_donate_self():
    @tc.treeclass
    class Buf:
        x: jax.Array

        @tc.jit(donate_argnames=("self",))
        def double(self):
            return self.replace(x=self.x * 2)

    lowered = Buf.double.lower(Buf(jnp.ones(4)))
    assert "jax.buffer_donor" in lowered.as_text() or "tf.aliasing_output" in lowered.as_text()


def test_plain_function_drop_in():
    @tc.jit
    def f(x, n):
        return x * n

    assert float(f(jnp.array(2.0), 3)) == 6.0
    assert f.trace_log.count == 1
    assert "stablehlo" in f.lower(jnp.array(2.0), 3).as_text()


def test_method_access_binds_the_class_level_function():
    c = Counter(jnp.array(0))
    bound = c.inc
    assert bound.__func__ is Counter.__dict__["inc"]
    assert bound.__self__ is c


def test_subclass_override_gets_its_own_compiled_function():
    @tc.treeclass
    class Base:
        x: jax.Array

        @tc.jit
        def f(self):
            return self.x + 1

    @tc.treeclass
    class Child(Base):
        @tc.jit
        def f(self):
            return self.x + 2

    assert float(Base(jnp.array(0.0)).f()) == 1.0
    assert float(Child(jnp.array(0.0)).f()) == 2.0
    assert Base.f.trace_log.count == 1
    assert Child.f.trace_log.count == 1


def test_staticmethod_and_classmethod():
    @tc.treeclass
    class M:
        x: jax.Array

        @tc.jit
        @staticmethod
        def twice(y):
            return y * 2

        @tc.jit
        @classmethod
        def make(cls, y):
            return cls(y + 1)

    assert float(M.twice(jnp.array(2.0))) == 4.0
    m = M.make(jnp.array(1.0))
    assert type(m) is M
    assert float(m.x) == 2.0


def test_jit_of_plain_bound_method_traces_self_and_shares_cache():
    @tc.treeclass
    class Lin:
        w: jax.Array

        def apply(self, x):
            return self.w * x

    a, b = Lin(jnp.array(2.0)), Lin(jnp.array(3.0))
    fa, fb = tc.jit(a.apply), tc.jit(b.apply)
    assert float(fa(1.0)) == 2.0
    assert float(fb(1.0)) == 3.0
    assert fa.__func__ is fb.__func__  # one compiled function for the method
    assert fa.trace_log.count == 1


def test_jit_of_transient_bound_methods_keeps_none_of_them_alive():
    # Regression: a module-level weak-key cache whose values held
    # the key kept every function and its executable alive; jax.jit keeps none.
    @tc.treeclass
    class Lin:
        w: jax.Array

    lin = Lin(jnp.ones(2))
    functions, compiled = [], []
    for k in range(30):

        def apply(self, x, k=k):
            return self.w * x + k

        method = tc.jit(types.MethodType(apply, lin))
        assert method(1.0).tolist() == [1.0 + k] * 2
        assert tc.jit(types.MethodType(apply, Lin(jnp.zeros(2)))).__func__ is method.__func__  # still shared
        functions.append(weakref.ref(apply))
        compiled.append(weakref.ref(method.__func__))
    del apply, method
    gc.collect()
    assert [r() for r in functions + compiled] == [None] * 60


def test_jit_of_a_bound_method_leaves_the_function_untouched():
    # Regression: the compiled function was cached in the method's own
    # __dict__, state in the user's object that cloudpickle and functools.wraps copy.
    @tc.treeclass
    class Lin:
        w: jax.Array

        def apply(self, x):
            return self.w * x

    lin = Lin(jnp.ones(2))
    before = dict(vars(Lin.apply))
    method = tc.jit(lin.apply)
    assert method(2.0).tolist() == [2.0, 2.0]
    assert vars(Lin.apply) == before
    assert tc.jit(lin.apply).__func__ is method.__func__  # shared while in use


def test_jit_of_a_bound_method_whose_function_wraps_another_runs_the_wrapper():
    # Regression: the per-method cache lived in the function's __dict__, which
    # functools.wraps copies into a wrapper, so tc.jit(obj.method) after the method was
    # wrapped (a logging decorator, a notebook patch) ran the old function in silence.
    @tc.treeclass
    class Lin:
        w: jax.Array

        def apply(self, x):
            return self.w * x

    lin = Lin(jnp.ones(2))
    assert tc.jit(lin.apply)(1.0).tolist() == [1.0, 1.0]
    inner = Lin.apply

    @functools.wraps(inner)
    def logged(self, x):
        return inner(self, x) + 100

    Lin.apply = logged  # type: ignore[method-assign]
    assert tc.jit(lin.apply)(1.0).tolist() == [101.0, 101.0]


def test_mutation_in_jitted_method_raises_with_fix():
    @tc.treeclass
    class Acc:
        total: jax.Array

        @tc.jit
        def add(self, x):
            self.total = self.total + x  # pyright: ignore[reportAttributeAccessIssue]
            return self

    with pytest.raises(dataclasses.FrozenInstanceError, match=r"cannot assign to Acc\.total") as info:
        Acc(jnp.array(0.0)).add(1.0)
    assert "self.replace(total=...)" in str(info.value)


@pytest.mark.parametrize(
    ("value", "what"),
    [("relu", r"a str \('relu'\)"), (print, r"a builtin_function_or_method \(<built-in function print>\)")],
)
def test_untraceable_dynamic_field_error_names_class_field(value, what):
    @tc.treeclass
    class Layer:
        w: jax.Array
        act: object

        @tc.jit
        def f(self):
            return self.w

    with pytest.raises(TypeError, match=rf"^Layer\.act is a dynamic field holding {what}, which JAX cannot trace \(argument 'self'\)") as info:
        Layer(jnp.ones(1), value).f()
    assert "act: tc.Static[object]" in str(info.value)  # the fix, with the field's annotation


def test_untraceable_leaf_in_nested_treeclass():
    @tc.treeclass
    class Inner:
        name: str

    @tc.treeclass
    class Outer:
        inner: Inner

    @tc.jit
    def f(o):
        return 0

    with pytest.raises(TypeError, match=r"^Inner\.name is a dynamic field holding a str \('x'\), which JAX cannot trace \(Outer\.inner\.name, argument 'o'\)"):
        f(Outer(Inner("x")))


def test_other_type_errors_untouched():
    def f(x):
        return x + "s"

    # JAX's error, whatever its wording: tc.jit passes it on as jax.jit raises it.
    with pytest.raises(TypeError) as plain:
        jax.jit(f)(jnp.ones(1))
    with pytest.raises(TypeError) as ours:
        tc.jit(f)(jnp.ones(1))
    assert str(ours.value) == str(plain.value)


def test_cache_keeps_no_instance_alive():
    @tc.treeclass
    class Cell:
        v: jax.Array

        @tc.jit
        def step(self):
            return self.replace(v=self.v + 1)

    refs = []
    for i in range(2000):
        c = Cell(jnp.array(float(i)))
        c.step()
        refs.append(weakref.ref(c))
    del c
    gc.collect()
    assert sum(r() is not None for r in refs) == 0
    assert Cell.step.trace_log.count == 1


def test_jit_rejects_non_callable():
    with pytest.raises(TypeError, match=r"tc\.jit\(\) takes a function or method; got 3"):
        tc.jit(3)  # type: ignore[call-overload]


@tc.treeclass
class Config:
    """Hashable (no statics), so usable as a static argument, but its dynamic field
    holds a str that JAX could not trace."""

    name: str


def test_body_type_error_with_static_treeclass_argument_surfaces_unchanged():
    # Regression: any TypeError was blamed on the first untraceable field of any
    # argument, static ones included ("Config.name is a dynamic field ...").
    def f(x, cfg):
        return jnp.add(x, cfg.name)  # the user's own bug: JAX rejects the str

    with pytest.raises(TypeError) as plain:
        jax.jit(f, static_argnames="cfg")(jnp.ones(1), cfg=Config("oops"))
    with pytest.raises(TypeError) as ours:
        tc.jit(f, static_argnames="cfg")(jnp.ones(1), cfg=Config("oops"))
    assert str(ours.value) == str(plain.value)
    assert "Config.name" not in str(ours.value)


def test_body_type_error_is_never_rewritten_even_if_a_traced_field_could_be_blamed():
    def f(x, cfg):
        return x + "oops"

    with pytest.raises(TypeError) as plain:
        jax.jit(f, static_argnums=1)(jnp.ones(1), Config("oops"))
    with pytest.raises(TypeError) as ours:
        tc.jit(f, static_argnums=1)(jnp.ones(1), Config("oops"))
    assert str(ours.value) == str(plain.value)
    assert "Config.name" not in str(ours.value)


def test_static_argnums_treeclass_with_untraceable_field_is_not_blamed():
    @tc.jit(static_argnums=0)
    def f(cfg, x):
        return x * len(cfg.name)

    assert float(f(Config("abc"), jnp.array(2.0))[()]) == 6.0


class Pair(NamedTuple):
    first: object
    second: object


def test_untraceable_field_inside_a_namedtuple_is_named():
    # Regression: the walk knew only exact list/tuple/dict, so a NamedTuple hid the
    # field and the user got JAX's pathless error.
    @tc.jit
    def f(pair):
        return pair.first

    with pytest.raises(TypeError, match=r"^Config\.name is a dynamic field holding a str \('x'\).*\(pair\.second\.name, argument 'pair'\)"):
        f(Pair(jnp.ones(1), Config("x")))


def test_untraceable_field_inside_any_registered_container_is_named():
    @tc.jit
    def f(tree):
        return 0

    tree = collections.OrderedDict(b=[jnp.ones(1)], a=(Config("x"),))
    with pytest.raises(TypeError, match=r"^Config\.name .*\(tree\['a'\]\[0\]\.name, argument 'tree'\)"):
        f(tree)


def test_untraceable_value_in_a_container_inside_a_field_is_named():
    @tc.treeclass
    class Model:
        acts: tuple[object, ...]

    @tc.jit
    def f(m):
        return 0

    with pytest.raises(TypeError, match=r"^Model\.acts is a dynamic field holding a str \('relu'\).*\(Model\.acts\[1\], argument 'm'\)") as info:
        f(Model((jnp.ones(1), "relu")))
    assert "acts: tc.Static[tuple[object, ...]]" in str(info.value)


def test_untraceable_leaf_outside_any_treeclass_is_named_by_its_path():
    @tc.jit
    def f(params):
        return 0

    with pytest.raises(TypeError, match=r"^params\['act'\] holds a str \('relu'\), which JAX cannot trace \(argument 'params'\)"):
        f({"w": jnp.ones(1), "act": "relu"})


def test_jax_jit_static_argnums_on_an_instance_compiles_per_value_as_documented():
    # docs/jit.md: treeclass cannot make this loud. Instances hash by type and static
    # values (as == needs), so jax.jit accepts one as a static argument, compares it
    # with == (array values) and compiles once per distinct value, arrays baked in.
    # @tc.jit traces the instance instead: one compile.
    traces = []

    def total(counter):
        traces.append(1)  # a Python side effect: runs once per trace
        return counter.count * 2

    static = jax.jit(total, static_argnums=0)
    counters = [Counter(jnp.array(i)) for i in range(3)]
    assert [int(static(c)) for c in counters] == [0, 2, 4]
    assert [int(static(c)) for c in counters] == [0, 2, 4]  # cached: no new trace
    assert len(traces) == 3
    # The instance's array is no input of the compiled program: it was baked in.
    assert jax.make_jaxpr(total, static_argnums=0)(counters[1]).jaxpr.invars == []
    assert len(jax.make_jaxpr(total)(counters[1]).jaxpr.invars) == 1
    traced = tc.jit(total)
    assert [int(traced(c)) for c in counters] == [0, 2, 4]
    assert traced.trace_log.count == 1


# ---------------------------------------------------------------------------------------
# A Python int or bool in a dynamic field, needed as a concrete value (docs/training.md).


class Looped(tc.TreeClass):
    w: jax.Array
    n: int
    flag: bool = False

    @tc.jit
    def scan(self) -> jax.Array:
        return jax.lax.scan(lambda c, _: (c * 2, None), self.w, None, length=self.n)[0]

    @tc.jit
    def shaped(self) -> jax.Array:
        return jnp.zeros(self.n) + self.w

    @tc.jit
    def branch(self) -> jax.Array:
        return self.w if self.flag else -self.w


@pytest.mark.parametrize(
    ("method", "field", "cause"),
    [
        ("scan", r"Looped\.n \(3\) is a dynamic field holding a Python int", jax.errors.ConcretizationTypeError),
        ("shaped", r"Looped\.n \(3\) is a dynamic field holding a Python int", TypeError),
        ("branch", r"Looped\.flag \(False\) is a dynamic field holding a Python bool", jax.errors.TracerBoolConversionError),
    ],
)
def test_concrete_int_or_bool_needed_names_the_field_and_the_fix(method: str, field: str, cause: type[Exception]) -> None:
    with pytest.raises(TypeError, match=rf"(?s)^{field}, which tc\.jit traces as an array.*tc\.Static\[") as info:
        getattr(Looped(jnp.ones(3), 3), method)()
    assert isinstance(info.value.__cause__, cause)  # JAX's own error stays attached
    name = "flag" if method == "branch" else "n"
    assert f"    {name}: tc.Static[{'bool' if name == 'flag' else 'int'}]" in str(info.value)


def test_concrete_int_in_a_nested_field_is_named_by_its_path() -> None:
    class Outer(tc.TreeClass):
        inner: Looped

    @tc.jit
    def run(o: Outer) -> jax.Array:
        return o.inner.scan.__wrapped__(o.inner)  # the plain body, traced with o

    with pytest.raises(TypeError, match=r"^Outer\.inner\.n \(3\) is a dynamic field holding a Python int"):
        run(Outer(Looped(jnp.ones(3), 3)))


def test_other_body_errors_are_not_blamed_on_an_int_field() -> None:
    @tc.jit
    def wrong(m: Looped) -> jax.Array:
        return m.w + "s"  # the body's own bug

    @tc.jit
    def needs_array_value(m: Looped, size: jax.Array) -> jax.Array:
        return jnp.zeros(size) + m.n  # the array, not the int field, must be concrete

    m = Looped(jnp.ones(3), 3)
    for call in (lambda: wrong(m), lambda: needs_array_value(m, jnp.array(3))):
        with pytest.raises(TypeError) as info:
            call()
        assert "dynamic field" not in str(info.value)


def test_a_static_int_field_compiles_per_value_instead() -> None:
    class Fixed(tc.TreeClass):
        w: jax.Array
        n: tc.Static[int]

        @tc.jit
        def scan(self) -> jax.Array:
            return jax.lax.scan(lambda c, _: (c * 2, None), self.w, None, length=self.n)[0]

    assert Fixed(jnp.ones(1), 3).scan().tolist() == [8.0]
    assert Fixed(jnp.ones(1), 2).scan().tolist() == [4.0]
    assert Fixed.scan.trace_log.count == 2


def test_concrete_int_error_runs_the_body_once_per_trace() -> None:
    # Regression: the field was found by tracing the body again, 1 + N times
    # with jax.eval_shape, so its Python side effects ran again on the error path.
    runs = []

    class Sized(tc.TreeClass):
        w: jax.Array
        n: int
        m: int = 2

        @tc.jit
        def grow(self) -> jax.Array:
            runs.append(1)
            return jnp.zeros(self.n) + self.w

    for attempt in (1, 2):  # a failed trace is not cached: each call traces once
        with pytest.raises(TypeError, match=r"^Sized\.n \(3\) is a dynamic field holding a Python int"):
            Sized(jnp.ones(3), 3).grow()
        assert len(runs) == attempt


def test_an_untraceable_field_is_named_without_running_the_body() -> None:
    runs = []

    @tc.jit
    def f(cfg: Config) -> int:
        runs.append(1)
        return 0

    with pytest.raises(TypeError, match=r"^Config\.name is a dynamic field holding a str"):
        f(Config("x"))
    assert runs == []


def test_a_numpy_string_array_in_a_dynamic_field_is_named() -> None:
    # Regression: is_traceable took every numpy array for traceable (JAX rejects
    # strings), so the error stayed JAX's pathless one.
    @tc.jit
    def f(cfg: Config) -> int:
        return 0

    with pytest.raises(TypeError, match=r"^Config\.name is a dynamic field holding a"):
        f(Config(np.array(["a", "b"])))  # pyright: ignore[reportArgumentType]


# On jax 0.7 the scan's length error reaches tc.jit without the body's frames marked (the
# candidates are not named; JAX's own error stands): the floor leg skips it.
@pytest.mark.newest_jax
def test_a_value_computed_from_int_fields_names_every_candidate() -> None:
    # The frame that raised holds a value computed from the fields, none of the
    # arguments' tracers: a ConcretizationTypeError names each int or bool field.
    @tc.jit
    def doubled(m: Looped) -> jax.Array:
        return jax.lax.scan(lambda c, _: (c, None), m.w, None, length=m.n * 2)[0]

    with pytest.raises(TypeError, match=r"^Looped\.n \(3\), Looped\.flag \(False\) are each a dynamic field") as info:
        doubled(Looped(jnp.ones(3), 3))
    assert "needed a value computed from one of them" in str(info.value)
    assert isinstance(info.value.__cause__, jax.errors.ConcretizationTypeError)


def test_a_type_error_the_body_raises_itself_passes_through_unchanged() -> None:
    # Regression: the body's own TypeError, raised in a frame that held an int field's
    # tracer (a local `n = self.n`, a helper given `self.n`), was replaced by "Looped.n
    # ... needed its value": only JAX's errors (raised in JAX's code) are about a value.
    raised: list[TypeError] = []

    def check(n: object, x: jax.Array) -> None:
        raised.append(TypeError("x must have 3 rows"))
        raise raised[-1]

    @tc.jit
    def local(m: Looped, x: jax.Array) -> jax.Array:
        n = m.n
        if x.shape[0] != 3:
            raised.append(TypeError(f"x must have 3 rows, not {x.shape[0]} (n={n})"))
            raise raised[-1]
        return m.w * x

    @tc.jit
    def helper(m: Looped, x: jax.Array) -> jax.Array:
        check(m.n, x)
        return m.w * x

    m = Looped(jnp.ones(3), 3)
    for call in (local, helper):
        with pytest.raises(TypeError, match=r"^x must have 3 rows") as info:
            call(m, jnp.ones(2))
        assert info.value is raised[-1]


def test_concrete_int_needed_by_a_tc_jit_method_called_from_another_is_named() -> None:
    # Regression: inside an outer tc.jit, the inner one's arguments are the outer's
    # tracers (no Python int to name), and the outer's frame check saw only the inner
    # tracers, so `jnp.zeros(self.n)` one call down gave JAX's pathless TypeError.
    class Nested(tc.TreeClass):
        w: jax.Array
        n: int

        @tc.jit
        def zeros(self) -> jax.Array:
            return jnp.zeros(self.n) + self.w

        @tc.jit
        def twice(self) -> jax.Array:
            return self.zeros() * 2

    with pytest.raises(TypeError, match=r"^Nested\.n \(3\) is a dynamic field holding a Python int") as info:
        Nested(jnp.ones(3), 3).twice()
    assert "    n: tc.Static[int]" in str(info.value)


def test_jit_of_a_class_method_rebuilt_in_a_loop_compiles_once():
    # Regression: with the compiled function held only while in use, `tc.jit(m.loss)(x)`
    # rebuilt every step (nothing holding it) traced on every call.
    @tc.treeclass
    class Lin:
        w: jax.Array

        def loss(self, x):
            return jnp.sum(self.w * x)

    models = [Lin(jnp.full(2, float(k))) for k in range(4)]
    assert [float(tc.jit(m.loss)(1.0)) for m in models] == [0.0, 2.0, 4.0, 6.0]
    assert tc.jit(models[0].loss).trace_log.count == 1
