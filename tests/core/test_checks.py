"""Construction-time checks on static fields: errors name `Class.field`, what was found
and the fix; they run at construction and replace, never when JAX rebuilds."""

import enum
import functools
import re
import types
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import treeclass as tc


@tc.treeclass
class Model:
    w: jax.Array
    act: object = tc.static(None)


def relu(x):
    return jnp.maximum(x, 0)


class Color(enum.Enum):
    RED = 1


class NoEq:
    pass


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (jnp.ones(3), r"a jax\.Array \(shape \(3,\), dtype float32\)"),
        (np.ones((2, 2)), r"a numpy\.ndarray \(shape \(2, 2\), dtype float64\)"),
        (jnp.float32(1.0), r"a jax\.Array \(shape \(\), dtype float32\)"),
    ],
)
def test_static_array_rejected(value, kind):
    with pytest.raises(TypeError, match=rf"Model\.act is a static field but holds {kind}") as info:
        Model(jnp.zeros(1), act=value)
    assert "act: jax.Array" in str(info.value)  # the fix: make it dynamic


def test_static_tracer_rejected():
    def build(x):
        return Model(x, act=x)

    with pytest.raises(TypeError, match=r"Model\.act is a static field but holds a JAX tracer"):
        jax.jit(build)(jnp.ones(2))


def test_static_array_inside_tuple_rejected():
    with pytest.raises(TypeError, match=r"Model\.act is a static field but holds a jax\.Array"):
        Model(jnp.zeros(1), act=(1, jnp.ones(2)))


@pytest.mark.parametrize(
    ("value", "typename"),
    [([1, 2], "list"), ({"a": 1}, "dict"), ({1}, "set")],
)
def test_static_unhashable_rejected(value, typename):
    with pytest.raises(TypeError, match=rf"Model\.act is a static field but holds an unhashable {typename}") as info:
        Model(jnp.zeros(1), act=value)
    assert "a tuple instead of a list" in str(info.value)


def test_static_default_checked_at_class_definition():
    with pytest.raises(TypeError, match=r"Bad\.table is a static field but holds an unhashable list"):

        @tc.treeclass
        class Bad:
            table: tuple = tc.static(default=[1, 2])  # type: ignore[assignment]


def test_static_checked_on_replace():
    m = Model(jnp.zeros(1))
    with pytest.raises(TypeError, match=r"Model\.act is a static field but holds a numpy\.ndarray"):
        m.replace(act=np.zeros(2))
    assert m.act is None  # the original is unchanged


def test_static_from_default_factory_checked():
    @tc.treeclass
    class Factory:
        table: list = tc.static(default_factory=list)

    with pytest.raises(TypeError, match=r"Factory\.table is a static field but holds an unhashable list"):
        Factory()


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (lambda x: x, r"the function <lambda>"),
        (functools.partial(relu), r"a functools\.partial of 'relu'"),
        (NoEq(), r"a NoEq instance \(its class has no __eq__\)"),
    ],
)
def test_identity_compared_static_warns(value, what):
    with pytest.warns(tc.RecompileWarning, match=rf"Model\.act is a static field holding {what}"):
        Model(jnp.zeros(1), act=value)


@pytest.mark.parametrize("value", [relu, jnp.tanh, Color.RED, int, "relu", 3, (1, "a"), None, jnp.float32])
def test_value_compared_static_accepted_silently(value):
    assert Model(jnp.zeros(1), act=value).act is value


def test_checks_do_not_run_when_jax_rebuilds(monkeypatch):
    # The generated functions of a class share one namespace; the spy goes where they
    # look the check up (patching treeclass._core.checks would change nothing they call).
    calls = []
    namespace = Model.__init__.__globals__
    monkeypatch.setitem(namespace, "_tc_check", lambda *a: calls.append(a[1:]))
    m = Model(jnp.zeros(1), act=(1, 2))
    m = m.replace(act=(3, 4))
    assert calls == [("act", (1, 2)), ("act", (3, 4))]  # the spy sees the checks
    jax.jit(lambda m: m)(m)
    jax.tree.map(lambda x: None, m)
    leaves, treedef = jax.tree.flatten(m)
    treedef.unflatten(leaves)
    assert calls == [("act", (1, 2)), ("act", (3, 4))]  # and none when JAX rebuilds


def test_dynamic_fields_accept_anything():
    # Dynamic fields are pytree children: None, nested containers and arrays all fit.
    m = Model(w=[jnp.ones(1), {"b": None}])  # type: ignore[arg-type]
    assert len(jax.tree.leaves(m)) == 1


# ---------------------------------------------------------------------------------------
# The deep check: an array anywhere inside a static value, at any depth. A model
# keeping layers and functions in one static tuple (equinox's MNIST example) had every
# weight silently baked into the compiled code as a constant.


@tc.treeclass
class Linear:
    w: jax.Array
    act: object = tc.static(None)

    def __call__(self, x):
        return x @ self.w


@tc.treeclass
class CNN:
    layers: tuple = tc.static(())  # the mistake under test: layers in a static field

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Pair(NamedTuple):
    a: object
    b: object


@tc.treeclass
class Outer:
    inner: object


@pytest.mark.parametrize(
    ("value", "path", "kind"),
    [
        ((Linear(jnp.ones((2, 2))), relu), r"CNN\.layers\[0\]\.w", r"a jax\.Array"),
        ([np.ones(2)], r"CNN\.layers\[0\]", r"a numpy\.ndarray"),
        ((1, Pair(2, (3, np.ones(2)))), r"CNN\.layers\[1\]\.b\[1\]", r"a numpy\.ndarray"),
        (frozenset({Linear(jnp.ones(2))}), r"CNN\.layers\.w", r"a jax\.Array"),
        ({"head": Linear(jnp.ones(2))}, r"CNN\.layers\['head'\]\.w", r"a jax\.Array"),
        ((Outer(Outer((jnp.ones(1),))),), r"CNN\.layers\[0\]\.inner\.inner\[0\]", r"a jax\.Array"),
    ],
    ids=["treeclass-in-tuple", "list", "namedtuple", "frozenset", "dict", "nested-treeclass"],
)
def test_static_array_deep_inside_rejected_naming_the_path(value, path, kind):
    match = rf"^CNN\.layers is a static field but holds {kind} at {path} \(shape"
    with pytest.raises(TypeError, match=match) as info:
        CNN(value)
    message = str(info.value)
    assert "Make the\nfield dynamic" in message
    assert "jax.tree_util.Partial(jax.nn.relu)" in message  # a function among the layers


def test_static_array_inside_an_equinox_module_rejected():
    eqx = pytest.importorskip("equinox")
    with pytest.raises(TypeError, match=r"^CNN\.layers is a static field but holds a jax\.Array at CNN\.layers\[0\]\.weight"):
        CNN((eqx.nn.Linear(2, 2, key=jax.random.key(0)),))


def test_static_array_deep_inside_checked_on_replace_and_default():
    with pytest.raises(TypeError, match=r"CNN\.layers\[0\]\.w"):
        CNN().replace(layers=(Linear(jnp.ones(2)),))
    with pytest.raises(TypeError, match=r"^Bad\.layers is a static field but holds a jax\.Array at Bad\.layers\[0\]\.w"):

        @tc.treeclass
        class Bad:
            layers: tuple = tc.static((Linear(jnp.ones(2)),))


def test_static_tracer_deep_inside_rejected():
    with pytest.raises(TypeError, match=r"holds a JAX tracer at CNN\.layers\[0\]\.w"):
        jax.jit(lambda w: CNN((Linear(w),)))(jnp.ones(2))


def test_static_without_arrays_deep_inside_accepted():
    m = CNN((Linear(1.0, act="relu"), Pair(1, ("a", None)), frozenset({2}), relu))
    assert jax.tree.leaves(m) == []


def test_the_advice_for_a_function_among_layers_works_under_jit_and_grad():
    # What the message above advises: the field dynamic, the function wrapped in
    # jax.tree_util.Partial (the function in the treedef, no leaves).
    @tc.treeclass
    class Model:
        layers: tuple

        def __call__(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    model = Model((Linear(jnp.eye(2)), jax.tree_util.Partial(jax.nn.relu), Linear(2 * jnp.eye(2))))
    assert len(jax.tree.leaves(model)) == 2  # the weights; relu is in the treedef
    x = jnp.array([1.0, -1.0])

    def loss(m, x):
        return jnp.sum(m(x))

    assert jax.jit(loss)(model, x) == 2.0
    grads = jax.grad(loss)(model, x)
    assert grads.layers[0].w.tolist() == [[2.0, 0.0], [-2.0, 0.0]]
    assert grads.layers[2].w.tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert tc.grad(loss)(model, x) == grads
    # A new model of the same structure compiles nothing new: relu is one object.
    assert jax.tree.structure(model) == jax.tree.structure(Model((Linear(jnp.ones((2, 2))), jax.tree_util.Partial(jax.nn.relu), Linear(jnp.ones((2, 2))))))


@tc.treeclass
class Box:
    item: object
    tag: str = tc.static("box")


_PLAIN = st.one_of(st.integers(-3, 3), st.sampled_from(["a", None, 1.5]))
_ARRAYS = st.sampled_from([np.ones(2), jnp.zeros(()), jnp.ones((1, 2))])


def _containers(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.one_of(
        st.lists(children, max_size=3).map(tuple),
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(["p", "q"]), children, max_size=2),
        st.tuples(children, children).map(lambda ab: Pair(*ab)),
        children.map(Box),
    )


@given(value=st.recursive(st.one_of(_PLAIN, _ARRAYS), _containers, max_leaves=6))
def test_generated_static_values_refused_iff_an_array_is_inside(value):
    paths = [jax.tree_util.keystr(p) for p, leaf in jax.tree_util.tree_flatten_with_path(value)[0] if isinstance(leaf, jax.Array | np.ndarray)]
    if not paths:
        try:
            hash(value)
        except TypeError:  # a list or dict: refused, but not for an array
            with pytest.raises(TypeError, match=r"^CNN\.layers is a static field but holds an unhashable"):
                CNN(value)
        else:
            assert jax.tree.leaves(CNN(value)) == []
        return
    with pytest.raises(TypeError, match=r"^CNN\.layers is a static field but holds a") as info:
        CNN(value)
    found = re.match(r"CNN\.layers is a static field but holds an? [\w.]+(?: [\w.]+)?(?: at CNN\.layers(\S*))? \(", str(info.value))
    assert found is not None, str(info.value)
    assert (found.group(1) or "") in paths


# ---------------------------------------------------------------------------------------
# The deep check looks into what callables hold: a bound method's `__self__`, a
# closure's cells, a functools.partial's arguments. JAX sees each as one opaque leaf, so
# `feat=encoder.apply` in a static field was accepted, and the encoder's weights became
# compile-time constants that got no gradient.


@tc.treeclass
class Encoder:
    w: jax.Array

    def apply(self, x):
        return self.w * x


@tc.treeclass
class Head:
    fn: object = tc.static(None)


def scaled(scale, x):
    return scale * x


def closure_over(captured):
    def fn(x):
        return captured, x

    return fn


def default_of(captured):
    def fn(x, captured=captured):
        return captured, x

    return fn


def keyword_default_of(captured):
    def fn(x, *, captured=captured):
        return captured, x

    return fn


def test_static_array_in_a_functions_defaults_rejected_naming_the_parameter():
    # `lambda x, w=w: ...` captures `w` as much as a closure does, in __defaults__.
    w = jnp.ones(3)
    with pytest.raises(TypeError, match=r"holds a jax\.Array at Head\.fn\.__defaults__\[w\]"):
        Head(fn=lambda x, w=w: x * w)
    with pytest.raises(TypeError, match=r"at Head\.fn\.__kwdefaults__\[w\] (.*\n)*    w: Any"):
        Head(fn=lambda x, *, w=w: x * w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tc.RecompileWarning)  # a lambda: identity equality
        fn = lambda x, w=2.0: x * w  # noqa: E731
        assert Head(fn=fn).fn is fn  # defaults without arrays stay accepted


def closure_of_closure(captured):
    inner = closure_over(captured)

    def outer(x):
        return inner(x)

    return outer


_ENCODER = Encoder(jnp.ones(3))


@pytest.mark.parametrize(
    ("make", "path", "captor", "fix"),
    [
        (lambda: _ENCODER.apply, r"Head\.fn\.__self__\.w", "the bound method Encoder.apply", "fn=tc.bind(obj.method)"),
        (lambda: tc.bind(_ENCODER.apply), r"Head\.fn\.__self__\.w", "the bound method Encoder.apply", "fn=tc.bind(obj.method)"),
        (lambda: (1, _ENCODER.apply), r"Head\.fn\[1\]\.__self__\.w", "the bound method Encoder.apply", "fn=tc.bind(obj.method)"),
        (lambda: closure_over(jnp.ones(2)), r"Head\.fn\.__closure__\[captured\]", "the closure closure_over.<locals>.fn", "def fn(self, *args): ...                # the closure's body, reading self.captured"),
        (lambda: closure_over(_ENCODER), r"Head\.fn\.__closure__\[captured\]\.w", "the closure closure_over.<locals>.fn", "fn=jax.tree_util.Partial(fn, captured)"),
        (lambda: closure_of_closure(jnp.ones(2)), r"Head\.fn\.__closure__\[inner\]\.__closure__\[captured\]", "the closure closure_of_closure.<locals>.outer", "inner: Any"),
        (lambda: types.MethodType(closure_over(jnp.ones(2)), Config()), r"Head\.fn\.__func__\.__closure__\[captured\]", "the closure closure_over.<locals>.fn", "captured: Any"),
        (lambda: functools.partial(scaled, jnp.ones(2)), r"Head\.fn\.args\[0\]", "the partial partial(scaled)", "fn=jax.tree_util.Partial(fn, *args, **kwargs)"),
        (lambda: functools.partial(scaled, scale=jnp.ones(2)), r"Head\.fn\.keywords\['scale'\]", "the partial partial(scaled)", "Partial(Encoder.apply, encoder)"),
        (lambda: functools.partial(_ENCODER.apply, 2.0), r"Head\.fn\.func\.__self__\.w", "the partial partial(Encoder.apply)", "not inside fn (a bound method, a closure)"),
        (lambda: jax.tree_util.Partial(scaled, jnp.ones(2)), r"Head\.fn\.args\[0\]", "the partial Partial(scaled)", "fn=jax.tree_util.Partial(fn, *args, **kwargs)"),
    ],
    ids=["bound-method", "tc.bind", "bound-method-in-tuple", "closure", "closure-of-treeclass", "closure-of-closure", "method-of-a-closure", "partial-args", "partial-keywords", "partial-of-bound-method", "jax-Partial"],
)
def test_static_array_captured_by_a_callable_rejected_naming_the_path(make, path, captor, fix):
    match = rf"^Head\.fn is a static field but holds a jax\.Array at {path} \(shape \(\d,\), dtype float32\),\ncaptured by {re.escape(captor)}\.\n"
    with pytest.raises(TypeError, match=match) as info:
        Head(fn=make())
    assert "never traced, never differentiated" in str(info.value)
    assert fix in str(info.value)
    with pytest.raises(TypeError, match=match):  # replace() runs the same check
        Head().replace(fn=make())


def test_static_array_captured_by_a_callable_refused_in_a_default():
    with pytest.raises(TypeError, match=r"^Bad\.fn is a static field but holds a jax\.Array at Bad\.fn\.__self__\.w"):

        @tc.treeclass
        class Bad:
            fn: object = tc.static(_ENCODER.apply)


class Flag(enum.Enum):
    ON = 1


@tc.treeclass
class Config:
    size: int = tc.static(3)

    def describe(self):
        return self.size


@pytest.mark.parametrize(
    "value",
    [relu, len, print, jax.nn.relu, jax.nn.gelu, jnp.tanh, Linear, Flag.ON, Config().describe, Config.describe, (relu, jax.nn.relu, Flag)],
    ids=["module-function", "builtin", "builtin-print", "jax.nn.relu", "jax.nn.gelu", "jnp.tanh", "class", "enum", "bound-method-without-arrays", "function-of-a-class", "tuple-of-them"],
)
def test_callables_without_arrays_stay_accepted_silently(value):
    assert Head(fn=value).fn is value


@pytest.mark.parametrize(
    "make",
    [lambda: closure_over(3), lambda: closure_of_closure("a"), lambda: functools.partial(scaled, 2.0), lambda: functools.partial(Config().describe)],
    ids=["closure", "closure-of-closure", "partial", "partial-of-bound-method"],
)
def test_callables_without_arrays_accepted_with_the_identity_warning(make):
    with pytest.warns(tc.RecompileWarning, match=r"^Head\.fn is a static field holding"):
        Head(fn=make())


def _recursive_closure():
    def countdown(n):
        return n if n <= 0 else countdown(n - 1)

    return countdown


def test_cycles_through_callables_end():
    # A closure that names itself (its cell holds it), and a bound method whose object
    # holds, in a list, a bound method of itself: each is read once.
    with pytest.warns(tc.RecompileWarning):
        head = Head(fn=_recursive_closure())
    assert head.fn(3) == 0
    loop: list = []
    box = Box(loop)
    loop.append(box.replace)
    with pytest.raises(TypeError, match=r"holds an unhashable tuple"):  # no array: refused for the list
        Head(fn=(box.replace, loop))
    loop.append(jnp.ones(2))
    with pytest.raises(TypeError, match=r"holds a jax\.Array at Head\.fn\.__self__\.item\[1\] \("):
        Head(fn=box.replace)


def test_a_closure_cell_not_yet_assigned_is_skipped():
    def outer():
        def early():
            return late

        return early
        late = 1  # never runs: early's cell for `late` stays empty

    with pytest.warns(tc.RecompileWarning):
        Head(fn=outer())


# The fixes the messages above advise, each trained: the arrays become leaves.


def test_the_advice_for_a_bound_method_works_under_jit_and_grad():
    @tc.treeclass
    class Model:
        feat: object  # dynamic, holding tc.bind(encoder.apply)

        def __call__(self, x):
            return self.feat(x)

    model = Model(tc.bind(Encoder(jnp.array([1.0, 2.0])).apply))
    assert len(jax.tree.leaves(model)) == 1
    loss = tc.jit(lambda m, x: jnp.sum(m(x) ** 2))
    assert float(loss(model, jnp.array([1.0, 1.0]))) == 5.0
    grads = tc.grad(lambda m, x: jnp.sum(m(x) ** 2))(model, jnp.array([1.0, 1.0]))
    assert grads.feat.__self__.w.tolist() == [2.0, 4.0]
    # A new encoder is a new leaf value, not a new treedef: no recompile.
    loss(Model(tc.bind(Encoder(jnp.array([3.0, 4.0])).apply)), jnp.array([1.0, 1.0]))
    assert loss.trace_log.count == 1


def test_the_advice_for_a_partial_and_a_closure_works_under_jit_and_grad():
    @tc.treeclass
    class Model:
        fn: object  # dynamic, holding jax.tree_util.Partial(scaled, scale)

    def loss(m, x):
        return jnp.sum(m.fn(x))

    model = Model(jax.tree_util.Partial(scaled, jnp.array([2.0, 3.0])))
    assert float(jax.jit(loss)(model, jnp.array([1.0, 1.0]))) == 5.0
    grads = tc.grad(loss)(model, jnp.array([1.0, 2.0]))
    assert grads.fn.args[0].tolist() == [1.0, 2.0]

    # The closure's other fix: what it captured is a field, its body a method.
    @tc.treeclass
    class Scaled:
        captured: jax.Array

        def fn(self, x):
            return self.captured * x

    grads = tc.grad(lambda m, x: jnp.sum(m.fn(x)))(Scaled(jnp.array([2.0, 3.0])), jnp.array([1.0, 2.0]))
    assert grads.captured.tolist() == [1.0, 2.0]


# Generated static values: arrays at random depths inside tuples, frozensets,
# NamedTuples, treeclass instances, bound methods, closures and partials. Each value
# comes with the paths of its arrays (the reference the check is compared with).


@tc.treeclass
class Holder:
    item: object

    def get(self):
        return self.item


def _keyword(item):
    return functools.partial(scaled, scale=item)


# (make the container, the path to its item): one child each.
_WRAPPERS = {
    "tuple": (lambda v: (0, v), "[1]"),
    "namedtuple": (lambda v: Pair("a", v), ".b"),
    "treeclass": (lambda v: Holder(v), ".item"),
    "bound method": (lambda v: Holder(v).get, ".__self__.item"),
    "closure": (closure_over, ".__closure__[captured]"),
    "default": (default_of, ".__defaults__[captured]"),
    "keyword-only default": (keyword_default_of, ".__kwdefaults__[captured]"),
    "partial": (lambda v: functools.partial(scaled, v), ".args[0]"),
    "partial keyword": (_keyword, ".keywords['scale']"),
    "jax Partial": (lambda v: jax.tree_util.Partial(scaled, v), ".args[0]"),
}


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


@st.composite
def static_values(draw: st.DrawFn, depth: int = 0) -> tuple[object, list[str]]:
    """`(value, paths of its arrays)`; a frozenset of two, or one child wrapped, or a leaf."""
    kind = draw(st.sampled_from(["leaf", "array", "frozenset", *_WRAPPERS]) if depth < 4 else st.sampled_from(["leaf", "array"]))
    if kind == "leaf":
        return draw(st.sampled_from([1, "a", None, 2.5, relu, jax.nn.relu, Flag.ON])), []
    if kind == "array":
        return draw(_ARRAYS), [""]
    if kind == "frozenset":  # its items have no key; arrays only inside hashable wrappers
        items = [item for item in (draw(static_values(depth + 1)) for _ in range(2)) if _hashable(item[0])]
        return frozenset(v for v, _ in items), [p for _, ps in items for p in ps]
    make, key = _WRAPPERS[kind]
    value, paths = draw(static_values(depth + 1))
    return make(value), [key + p for p in paths]


@given(generated=static_values())
def test_generated_static_values_refused_naming_an_array_path_inside_callables(generated):
    value, paths = generated
    if not paths:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tc.RecompileWarning)  # closures and partials
            assert Head(fn=value).fn is value
        return
    with pytest.raises(TypeError, match=r"^Head\.fn is a static field but holds a") as info:
        Head(fn=value)
    found = re.match(r"Head\.fn is a static field but holds an? [\w.]+(?: [\w.]+)?(?: at Head\.fn(\S*))? \(", str(info.value))
    assert found is not None, str(info.value)
    assert (found.group(1) or "") in paths
