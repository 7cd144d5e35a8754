"""treeclasses beside the libraries users combine them with, each used as that library
documents it, with no registration or wrapper written by the user: rich, beartype,
jaxtyping, treescope, jax.export, equinox, optax and orbax. A test skips where its
library is not installed."""

import dataclasses
import enum
import functools
import io
import pathlib
import re
import sys
import textwrap
import warnings
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import pytest
from fresh_process import run_fresh
from hypothesis import given, settings
from hypothesis import strategies as st

import treeclass as tc

ROOT = pathlib.Path(__file__).parents[2]
# Each library is used as its documentation shows, under JAX's default promotion rules.
pytestmark = pytest.mark.usefixtures("jax_defaults")


class Linear(tc.TreeClass):
    w: jax.Array
    b: jax.Array
    act: tc.Static[str] = "relu"

    def __call__(self, x: jax.Array) -> jax.Array:
        return getattr(jax.nn, self.act)(x @ self.w + self.b)


def linear() -> Linear:
    return Linear(jnp.ones((64, 32)), jnp.zeros(32))


# Display


def test_rich_prints_the_summarised_repr():
    # Regression: rich took a `__repr__` from reprlib for dataclasses' own and printed
    # every field itself, arrays in full.
    rich_console = pytest.importorskip("rich.console")
    rich_pretty = pytest.importorskip("rich.pretty")
    out = io.StringIO()
    rich_console.Console(file=out, width=100).print(linear())
    assert out.getvalue().strip() == "Linear(w=f32[64,32], b=f32[32], act='relu')"
    assert rich_pretty.pretty_repr({"model": linear()}) == repr({"model": linear()})


def test_bare_beartype_decorates_a_treeclass():
    # Regression: beartype could not resolve the annotations of reprlib's wrapper.
    beartype = pytest.importorskip("beartype")
    roar = pytest.importorskip("beartype.roar")

    @beartype.beartype
    class Scaled(tc.TreeClass):
        w: jax.Array
        n: tc.Static[int] = 2

        def __call__(self, x: jax.Array) -> jax.Array:
            return self.w * x

    m = Scaled(jnp.ones(2))
    assert repr(m) == "Scaled(w=f32[2], n=2)"
    assert m(jnp.ones(2)).shape == (2,)
    with pytest.raises(roar.BeartypeCallHintParamViolation):
        m("not an array")  # type: ignore[arg-type]


def test_jaxtyped_with_beartype_checks_shapes():
    jaxtyping = pytest.importorskip("jaxtyping")
    beartype = pytest.importorskip("beartype")

    @jaxtyping.jaxtyped(typechecker=beartype.beartype)
    class Dense(tc.TreeClass):
        w: jaxtyping.Float[jax.Array, "n m"]  # noqa: F722 (jaxtyping's shape strings)
        b: jaxtyping.Float[jax.Array, " m"]  # noqa: F722

    assert repr(Dense(jnp.ones((3, 2)), jnp.zeros(2))) == "Dense(w=f32[3,2], b=f32[2])"
    with pytest.raises(jaxtyping.TypeCheckError):
        Dense(jnp.ones((3, 2)), jnp.zeros(3))


def test_jaxtyped_checks_shapes_under_postponed_annotations(tmp_path):
    # With `from __future__ import annotations` the generated __init__'s annotations were
    # strings that jaxtyping resolves in the generated code's globals, not the class's
    # module: nothing was checked, silently (a plain dataclass is checked). An inherited
    # field's annotation resolves in its own class's module (`jax` is not imported in the
    # subclass's).
    jaxtyping = pytest.importorskip("jaxtyping")
    pytest.importorskip("beartype")
    (tmp_path / "postponed_models.py").write_text("""
from __future__ import annotations
import jax, jaxtyping, beartype, treeclass as tc

@jaxtyping.jaxtyped(typechecker=beartype.beartype)
class Dense(tc.TreeClass):
    w: jaxtyping.Float[jax.Array, "n m"]
    b: jaxtyping.Float[jax.Array, " m"]
""")
    (tmp_path / "postponed_subclass.py").write_text("""
from __future__ import annotations
import jaxtyping, beartype
from postponed_models import Dense

@jaxtyping.jaxtyped(typechecker=beartype.beartype)
class Scaled(Dense):
    scale: float = 1.0
""")
    sys.path.insert(0, str(tmp_path))
    try:
        dense, scaled = __import__("postponed_models").Dense, __import__("postponed_subclass").Scaled
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("postponed_models", None)
        sys.modules.pop("postponed_subclass", None)
    assert repr(scaled(jnp.ones((3, 2)), jnp.zeros(2))) == "Scaled(w=f32[3,2], b=f32[2], scale=1.0)"
    for cls in (dense, scaled):
        with pytest.raises(jaxtyping.TypeCheckError):
            cls(jnp.ones((3, 2)), jnp.zeros(3))


def test_treescope_marks_static_fields():
    treescope = pytest.importorskip("treescope")

    @tc.treeclass
    class MLP:
        layers: list[Linear]
        depth: tc.Static[int] = 1

    shown = treescope.render_to_text(MLP([linear()]), roundtrip_mode=True)
    lines = [line.strip() for line in shown.splitlines()]
    assert "act='relu',  # static" in lines
    assert "depth=1,  # static" in lines
    assert not any(line.startswith(("w=", "b=")) and "static" in line for line in lines)
    assert lines[0].endswith("MLP(")
    assert lines[-1] == ")"
    assert treescope.render_to_html(MLP([linear()])).startswith("<")  # a notebook's rendering


def test_treescope_marks_a_hand_written_init_not_roundtrippable():
    treescope = pytest.importorskip("treescope")

    class Scale(tc.TreeClass):
        w: jax.Array

        def __init__(self, n: int):
            self.w = jnp.ones(n)

    shown = treescope.render_to_text(Scale(2), roundtrip_mode=True)
    assert shown.startswith("<")
    assert shown.endswith(")>")


def test_treescope_renders_a_summary():
    treescope = pytest.importorskip("treescope")
    assert "trainable: 2,080 parameters" in treescope.render_to_text(tc.summary(linear()))


def test_import_treeclass_imports_no_display_library():
    code = (
        "import sys, treeclass; print(sorted({'rich', 'treescope', 'beartype'} & set(sys.modules)))"
    )
    assert run_fresh(code).strip() == "[]"


# jax.export

MODELS = """
import dataclasses
import jax
import numpy as np
import treeclass as tc


@dataclasses.dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...]
    tags: frozenset[str]


class Pad(tc.TreeClass):
    width: int
    mode: tc.Static[str] = "same"


class Net(tc.TreeClass):
    w: jax.Array
    act: tc.Static[object] = jax.nn.relu
    config: tc.Static[Config] = Config((3, 2), frozenset({"a", "b"}))
    scale: tc.Static[float] = float("inf")
    dtype: tc.Static[object] = np.dtype("float32")
    pad: tc.Static[Pad] = Pad(2, "valid")  # a treeclass as configuration

    def __call__(self, x):
        return self.act(x @ self.w)
"""


def _import_models(tmp_path: pathlib.Path, name: str):
    (tmp_path / f"{name}.py").write_text(MODELS)
    sys.path.insert(0, str(tmp_path))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(tmp_path))


def test_exported_function_deserializes_in_another_process(tmp_path):
    pytest.importorskip("flatbuffers")  # jax.export's serialization needs it
    models = _import_models(tmp_path, "export_models")
    net = models.Net(jnp.ones((3, 2)))
    exported = jax.export.export(jax.jit(lambda n, x: (n(x), n)))(net, jnp.ones(3))
    (tmp_path / "f.bin").write_bytes(exported.serialize())
    code = f"""
        import jax, jax.numpy as jnp
        from export_models import Net
        exported = jax.export.deserialize(bytearray(open({str(tmp_path / "f.bin")!r}, "rb").read()))
        y, net = exported.call(Net(jnp.ones((3, 2))), jnp.ones(3))
        print(y.tolist(), type(net).__name__, net.config.sizes, sorted(net.config.tags), net.act is jax.nn.relu, net.dtype)
        print(repr(net.pad), net.pad == Net(jnp.ones((3, 2))).pad)
    """
    assert run_fresh(textwrap.dedent(code), tmp_path).split() == [
        "[3.0,",
        "3.0]",
        "Net",
        "(3,",
        "2)",
        "['a',",
        "'b']",
        "True",
        "float32",
        "Pad(width=2,",
        "mode='valid')",
        "True",
    ]


def test_export_refuses_a_static_it_cannot_carry():
    pytest.importorskip("flatbuffers")

    class Holder(tc.TreeClass):
        w: jax.Array
        opaque: tc.Static[Opaque] = Opaque()

    exported = jax.export.export(jax.jit(lambda m: m.w))(Holder(jnp.ones(2)))
    with pytest.raises(ValueError, match=r"Holder\.opaque holds <opaque>, which jax.export cannot"):
        exported.serialize()


class Act(enum.Enum):
    RELU = "relu"
    TANH = "tanh"


class Sizes(NamedTuple):
    inner: tuple[int, ...]
    act: Act


class Shape(NamedTuple):
    sizes: Sizes
    scale: float


class Statics(tc.TreeClass):
    w: jax.Array
    s: tc.Static[Any] = None


def _round_trip(value: Any) -> Any:
    exported = jax.export.export(jax.jit(lambda m: m))(Statics(jnp.ones(2), value))
    return jax.export.deserialize(exported.serialize()).out_tree


@pytest.mark.parametrize(
    "value",
    [Act.TANH, Shape(Sizes((3, 2), Act.RELU), 0.5), (Act.RELU, frozenset({Act.TANH}))],
    ids=["enum", "nested NamedTuple", "enums in containers"],
)
def test_export_carries_enum_members_and_namedtuples(value: Any):
    # Regression: an enum member was refused (travelling by its repr, which no name finds),
    # and a NamedTuple static raised a bare TypeError from NamedTuple.__new__ at serialize.
    pytest.importorskip("flatbuffers")
    back = jax.tree.unflatten(_round_trip(value), [jnp.ones(2)]).s
    assert type(back) is type(value)
    assert back == value


_STATICS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.sampled_from(Act),
    lambda inner: (
        st.tuples(inner, inner)
        | st.builds(Sizes, st.tuples(st.integers()), st.sampled_from(Act))
        | st.builds(Shape, st.builds(Sizes, st.tuples(), st.sampled_from(Act)), inner)
        | st.frozensets(st.integers() | st.sampled_from(Act), max_size=3)
    ),
    max_leaves=4,
)


@given(value=_STATICS)
@settings(max_examples=10, deadline=None)
def test_export_carries_the_statics_it_lists(value: Any):
    # The generator that would have found the enum and NamedTuple refusals above.
    pytest.importorskip("flatbuffers")
    back = jax.tree.unflatten(_round_trip(value), [jnp.ones(2)]).s
    assert (type(back), back) == (type(value), value)


def _relu(x: Any) -> Any:
    return x


def test_export_refuses_a_partial_a_lambda_and_a_local_enum_naming_the_field():
    pytest.importorskip("flatbuffers")
    local = enum.Enum("Local", ["A"], module=__name__)  # no module attribute names it
    for value in (functools.partial(_relu), lambda x: x, local.A):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tc.RecompileWarning)  # a new object each time
            model = Statics(jnp.ones(2), value)
        exported = jax.export.export(jax.jit(lambda m: m.w))(model)
        with pytest.raises(
            ValueError, match=r"^Statics\.s holds .*, which jax\.export cannot carry"
        ):
            exported.serialize()


@dataclasses.dataclass(frozen=True)
class Config:
    act: Any


class Harmless(frozenset[int]):
    """A container a static may hold."""


class Recorded:
    """A class a crafted file names in place of `Harmless`: calling it is recorded."""

    calls: ClassVar[list[Any]] = []

    def __init__(self, *args: Any) -> None:
        Recorded.calls.append(args)


def test_deserialize_calls_no_class_but_a_container():
    # Regression: a crafted exported function ran the constructor of any class it named
    # ({"subprocess.Popen": ["rm", ...]} ran a command), and a dataclass whose field named
    # nothing was rebuilt holding an internal sentinel, silently.
    pytest.importorskip("flatbuffers")
    for value, swap in (
        (Harmless({1}), (b".Harmless", b".Recorded")),
        (Config(_relu), (b"._relu", b"._relX")),
    ):
        data = bytes(
            jax.export.export(jax.jit(lambda m: m.w))(Statics(jnp.ones(2), value)).serialize()
        )
        assert data.count(swap[0]) == 1
        with pytest.raises(
            ValueError, match=r"Statics\.s: the exported static value .* names nothing"
        ):
            jax.export.deserialize(bytearray(data.replace(*swap)))
    assert Recorded.calls == []


CONVERTED: list[Any] = []


def _record(value: Any) -> Any:
    CONVERTED.append(value)
    return value


class Recording(tc.TreeClass):
    """A treeclass held as configuration whose converter and `__post_init__` are recorded."""

    size: int = tc.field(converter=_record)
    mode: tc.Static[str] = tc.static(default="same", converter=_record)

    def __post_init__(self) -> None:
        CONVERTED.append("post_init")


def test_a_treeclass_in_a_static_field_exports_without_running_its_code():
    # Regression: a treeclass held in a static field (a config) was refused at serialize,
    # where a frozen dataclass there was carried. Read back as JAX's unflatten builds it.
    pytest.importorskip("flatbuffers")
    model = Statics(jnp.ones(2), (Recording(3, "valid"), frozenset({Recording(1)})))
    data = jax.export.export(jax.jit(lambda m: m))(model).serialize()
    CONVERTED.clear()
    back = jax.tree.unflatten(jax.export.deserialize(data).out_tree, [jnp.ones(2)]).s
    assert CONVERTED == []
    assert back == model.s
    assert type(back[0]) is Recording
    assert (back[0].size, back[0].mode) == (3, "valid")
    assert hash(back) == hash(model.s)


class Opaque:
    """A static value equal to every other, which no name finds."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque)

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "<opaque>"


def _defined_again(static: bool = True):
    if static:

        class Redefined(tc.TreeClass):
            w: jax.Array
            n: tc.Static[int] = 1

    else:

        class Redefined(tc.TreeClass):  # type: ignore[no-redef]
            w: jax.Array
            n: int = 1

    return Redefined


def test_two_live_classes_of_one_name_each_deserialize_into_their_own():
    # Regression: the second class of one `module.qualname` (a factory; a notebook cell run
    # twice) took over the name, so a function exported with the first deserialized into the
    # second (its outputs were instances of the other class).
    pytest.importorskip("flatbuffers")
    first, second = _defined_again(), _defined_again()
    assert first is not second
    assert first.__qualname__ == second.__qualname__
    for cls in (first, second):
        exported = jax.export.export(jax.jit(lambda m: m))(cls(jnp.ones(2)))
        back = jax.export.deserialize(exported.serialize())
        assert type(back.call(cls(jnp.ones(2)))) is cls
        assert type(jax.tree.unflatten(back.out_tree, [jnp.ones(2)])) is cls
        other = second if cls is first else first
        with pytest.raises(ValueError, match="Redefined"):
            back.call(other(jnp.ones(2)))  # jax's own check: the argument's structure differs


def test_each_live_class_of_one_name_is_written_under_its_own_name():
    # `module.qualname` for the first, then `module.qualname#2`, `#3`, ...: jax.export
    # refuses a name twice and has no public call that replaces one.
    pytest.importorskip("flatbuffers")
    written = []
    for cls in (_defined_again(), _defined_again()):
        data = bytes(jax.export.export(jax.jit(lambda m: m))(cls(jnp.ones(2))).serialize())
        written.append(set(re.findall(rb"<locals>\.Redefined(?:#\d+)?", data)))
    assert len(written[0]) == len(written[1]) == 1
    assert written[0] != written[1]
    assert b"#" in next(iter(written[1]))


# equinox, optax, orbax


def test_treeclass_inside_an_equinox_module():
    eqx = pytest.importorskip("equinox")

    class Wrapper(eqx.Module):
        inner: Linear

        def __call__(self, x):
            return self.inner(x)

    model = Wrapper(linear())
    grads = eqx.filter_grad(lambda m, x: m(x).sum())(model, jnp.ones(64))
    assert isinstance(grads.inner, Linear)
    assert grads.inner.act == "relu"
    assert grads.inner.w.shape == (64, 32)


def test_repr_indents_an_equinox_layer_that_prints_several_lines():
    eqx = pytest.importorskip("equinox")

    @tc.treeclass
    class Head:
        layer: eqx.nn.Linear

    layer = eqx.nn.Linear(4, 8, key=jax.random.key(0))
    inner = repr(layer).splitlines()
    assert len(inner) > 1
    shown = repr(Head(layer)).splitlines()
    assert shown == [
        "Head(",
        f"  layer={inner[0]}",
        *[f"  {line}" for line in inner[1:-1]],
        f"  {inner[-1]},",
        ")",
    ]


def test_optax_multi_transform_with_a_callable_model():
    # optax calls a label tree that is callable, as a model with __call__ is: labels as
    # a function of the parameters, or built with jax.tree.map, are not called.
    optax = pytest.importorskip("optax")
    model = linear()
    labels = lambda params: jax.tree.map(lambda _: "adam", params).replace(b="frozen")  # noqa: E731
    tx = optax.multi_transform({"adam": optax.adam(1e-2), "frozen": optax.set_to_zero()}, labels)
    state = tx.init(model)
    grads = jax.tree.map(jnp.ones_like, model)
    updates, state = tx.update(grads, state, model)
    assert isinstance(updates, Linear)
    new = tc.apply_updates(model, updates)
    assert bool((new.b == model.b).all())
    assert not bool((new.w == model.w).all())


def test_orbax_restores_into_an_abstract_target(tmp_path):
    ocp = pytest.importorskip("orbax.checkpoint")
    model = linear()
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(tmp_path / "ckpt", model)
    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), model)
    with ocp.StandardCheckpointer() as checkpointer:
        restored = checkpointer.restore(tmp_path / "ckpt", target)
    assert isinstance(restored, Linear)
    assert tc.tree_equal(restored, model)
