"""A treeclass in `jax.export` travels with its fields by name (treeclass/_checkpoint/interop.py):
a function deserialized where the class was defined again finds each static value by its
field's name, and each dynamic field in its declared place; a field missing, renamed or of
another kind, or dynamic fields declared in another order, are an error naming the class and
the field, never a value in another field. Checked over generated classes and changes of
them, in this process and in a fresh one."""

import functools
import itertools
import pathlib
import re
import textwrap
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fresh_process import run_fresh
from hypothesis import given, note, settings
from hypothesis import strategies as st

import treeclass as tc

pytest.importorskip("flatbuffers")  # jax.export's serialization needs it


class Window(tc.TreeClass):
    """A treeclass held as configuration (in static fields of the generated classes)."""

    size: int
    stride: tc.Static[tuple[int, ...]] = (1,)


# Static values: numbers, strings, None, tuples, frozensets and treeclasses, nested.
STATICS = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-2, 2) | st.sampled_from("xyz"),
    lambda inner: (
        st.tuples(inner, inner)
        | st.frozensets(st.integers(0, 5) | st.sampled_from("ab"), max_size=3)
        | st.builds(Window, st.integers(1, 4), st.tuples(st.integers(1, 3)))
    ),
    max_leaves=4,
)
DTYPES = (jnp.float32, jnp.int32, jnp.float16, jnp.bool_)
SHAPES = ((), (2,), (2, 3))


@dataclass(frozen=True)
class Spec:
    """A generated field: its name, and its array (dtype, shape) or its static value."""

    name: str
    static: bool
    dtype: Any = None
    shape: tuple[int, ...] = ()
    value: Any = None

    def array(self, index: int) -> jax.Array:
        """A value no other field of the class holds: offset by the field's index."""
        values = np.arange(int(np.prod(self.shape)), dtype=np.int32).reshape(self.shape)
        values = values + 10 * index
        return jnp.asarray(values % 2 if self.dtype == jnp.bool_ else values, self.dtype)


_CLASSES = itertools.count()


def define(module: str, qualname: str, specs: list[Spec]) -> type:
    """The treeclass `module.qualname` with `specs`'s fields, in that order (no defaults)."""
    annotations = {s.name: tc.Static[Any] if s.static else jax.Array for s in specs}
    body = {"__annotations__": annotations, "__module__": module, "__qualname__": qualname}
    return tc.treeclass(type(qualname, (), body))


def instance(cls: type, specs: list[Spec], order: list[Spec]) -> Any:
    """`cls` holding each spec's value, by name; arrays indexed by their place in `order`."""
    return cls(**{s.name: s.value if s.static else s.array(order.index(s)) for s in specs})


def exported_bytes(old: type, specs: list[Spec]) -> bytes:
    """A function of an `old` instance, serialized: the instance itself, and per dynamic
    field a value computed from that field by name (so a value in another field shows)."""

    def f(m: Any) -> Any:
        out = {}
        for i, s in enumerate(specs):
            if not s.static:
                out[s.name] = getattr(m, s.name).astype(jnp.float32) * 2 + i
        return m, out

    return bytes(jax.export.export(jax.jit(f))(instance(old, specs, specs)).serialize())


def as_defined_in(data: bytes, old: type, new: type) -> bytearray:
    """`data` as written where `new` is the class of `old`'s name (as another process would)."""
    old_name, new_name = (f"{c.__module__}.{c.__qualname__}".encode() for c in (old, new))
    assert len(old_name) == len(new_name)  # a flatbuffer string of the same length
    assert data.count(old_name) >= 1
    return bytearray(data.replace(old_name, new_name))


@st.composite
def specs(draw: st.DrawFn) -> list[Spec]:
    names = draw(st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=5, unique=True))
    statics = draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
    statics[draw(st.integers(0, len(names) - 1))] = False  # at least one array
    fields = []
    for name, static in zip(names, statics, strict=True):
        if static:
            fields.append(Spec(name, True, value=draw(STATICS)))
        else:
            dtype, shape = draw(st.sampled_from(DTYPES)), draw(st.sampled_from(SHAPES))
            fields.append(Spec(name, False, dtype=dtype, shape=shape))
    return fields


@given(specs(), st.data())
@settings(max_examples=25, deadline=None)
def test_fields_travel_by_name_over_generated_classes(fields: list[Spec], data: st.DataObject):
    # The generator that would have found a reordered class taking values into the wrong
    # field ([2, 3, 4] where [1, 3, 5] is right): random classes, a function exported with
    # one, deserialized where its fields were permuted, one dropped, or one renamed.
    n = next(_CLASSES)
    old = define("tc_export_old", f"Gen{n}", fields)
    change = data.draw(st.sampled_from(["permute", "drop", "rename"]))
    if change == "permute":
        changed = data.draw(st.permutations(fields))
    elif change == "drop":
        dropped = data.draw(st.sampled_from(fields))
        changed = [f for f in fields if f is not dropped]
    else:
        renamed = data.draw(st.sampled_from(fields))
        changed = [
            Spec("z", f.static, f.dtype, f.shape, f.value) if f is renamed else f for f in fields
        ]
    note(f"exported with {[(f.name, f.static) for f in fields]}, then {change}: {changed}")
    new = define("tc_export_new", f"Gen{n}", changed)
    data_bytes = as_defined_in(exported_bytes(old, fields), old, new)
    dynamic = [f.name for f in fields if not f.static]
    missing = [f for f in fields if f.name not in {c.name for c in changed}]
    assert len(missing) <= 1
    if missing:
        kind = "static" if missing[0].static else "dynamic"
        what = rf"^Gen{n}\.{missing[0].name}: exported as a {kind} field, which is missing here"
        with pytest.raises(ValueError, match=what):
            jax.export.deserialize(data_bytes)
        return
    if [f.name for f in changed if not f.static] != dynamic:
        with pytest.raises(
            ValueError,
            match=rf"^Gen{n} was exported with its dynamic fields in the order "
            + re.escape(str(dynamic)),
        ):
            jax.export.deserialize(data_bytes)
        return
    back = jax.export.deserialize(data_bytes)
    model = instance(new, changed, fields)  # each field holds what it held at export
    out_model, out = back.call(model)
    assert type(out_model) is new
    assert tc.tree_equal(out_model, model)
    for i, f in enumerate(fields):
        if not f.static:
            expected = f.array(i).astype(jnp.float32) * 2 + i
            assert bool((out[f.name] == expected).all()), f.name
        else:
            assert getattr(out_model, f.name) == f.value
            assert type(getattr(out_model, f.name)) is type(f.value)


def test_a_field_of_another_kind_is_named():
    old = define("tc_export_old", "Kind", [Spec("w", False, jnp.float32), Spec("n", True, value=1)])
    new = define("tc_export_new", "Kind", [Spec("w", False, jnp.float32), Spec("n", False)])
    data = as_defined_in(
        exported_bytes(old, [Spec("w", False, jnp.float32), Spec("n", True, value=1)]), old, new
    )
    with pytest.raises(
        ValueError,
        match=r"^Kind\.n: exported as a static field, dynamic here\.\nThe class here has dynamic "
        r"fields \['w', 'n'\] and static fields \[\]\. jax\.export finds",
    ):
        jax.export.deserialize(data)


def test_a_field_the_export_lacks_is_named():
    old = define("tc_export_old", "Grown", [Spec("w", False, jnp.float32)])
    grown = [Spec("w", False, jnp.float32), Spec("extra", True, value="x")]
    new = define("tc_export_new", "Grown", grown)
    data = as_defined_in(exported_bytes(old, [Spec("w", False, jnp.float32)]), old, new)
    with pytest.raises(
        ValueError,
        match=r"^Grown\.extra: a static field here, which the exported function does not have",
    ):
        jax.export.deserialize(data)


def test_a_record_of_another_format_is_refused():
    old = define("tc_export_old", "Form", [Spec("w", False, jnp.float32), Spec("n", True, value=1)])
    data = exported_bytes(old, [Spec("w", False, jnp.float32), Spec("n", True, value=1)])
    record = b'{"dynamic": ["w"], "static": {"n": 1}}'
    assert data.count(record) == 2  # in the arguments' structure and the results'
    damaged = data.replace(record, b'{"dynamic": ["w"], "statiX": {"n": 1}}')
    with pytest.raises(ValueError, match=r"^Form: the exported function's record of this class"):
        jax.export.deserialize(bytearray(damaged))


PAIR = """
import jax
import treeclass as tc


class Pair(tc.TreeClass):
{fields}

    def __call__(self):
        return self.a * self.k + self.b
"""
_EXPORTED_ORDER = "a: jax.Array\nk: tc.Static[int]\nb: jax.Array\ns: tc.Static[str]"


@functools.cache
def _exported_pair() -> bytes:
    """A function of `Pair` (a, k, b, s) exported here, once: `pair_models.Pair` is then the
    first class of its name in this process, as in the process that deserializes it."""
    source = PAIR.format(fields=textwrap.indent(_EXPORTED_ORDER, "    "))
    namespace: dict[str, Any] = {"__name__": "pair_models"}
    exec(compile(source, "pair_models.py", "exec"), namespace)
    pair = namespace["Pair"](jnp.arange(3.0), 2, jnp.ones(3), "s")
    return bytes(jax.export.export(jax.jit(lambda p: (p(), p)))(pair).serialize())


def _export_pair(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "f.bin"
    path.write_bytes(_exported_pair())
    return path


def _deserialize_elsewhere(tmp_path: pathlib.Path, fields: str, path: pathlib.Path) -> str:
    """What a fresh process prints that defines `Pair` with `fields` and calls the function."""
    (tmp_path / "here").mkdir(exist_ok=True)
    source = PAIR.format(fields=textwrap.indent(fields, "    "))
    (tmp_path / "here" / "pair_models.py").write_text(source)
    code = f"""
        import jax, jax.numpy as jnp
        from pair_models import Pair
        try:
            exported = jax.export.deserialize(bytearray(open({str(path)!r}, "rb").read()))
        except ValueError as e:
            print(e)
        else:
            y, pair = exported.call(Pair(a=jnp.arange(3.0), k=2, b=jnp.ones(3), s="s"))
            print(y.tolist(), pair.a.tolist(), pair.b.tolist(), pair.k, pair.s)
    """
    return run_fresh(textwrap.dedent(code), tmp_path / "here")


def test_statics_moved_land_in_their_fields_in_another_process(tmp_path: pathlib.Path):
    path = _export_pair(tmp_path)
    moved = "s: tc.Static[str]\na: jax.Array\nk: tc.Static[int]\nb: jax.Array"
    out = _deserialize_elsewhere(tmp_path, moved, path)
    assert out == "[1.0, 3.0, 5.0] [0.0, 1.0, 2.0] [1.0, 1.0, 1.0] 2 s\n"


def test_arrays_reordered_are_refused_in_another_process(tmp_path: pathlib.Path):
    # Regression: `b` and `a` swapped fed each value into the other field ([2, 3, 4]
    # where [1, 3, 5] is right): jax.export passes arrays in the exported order.
    path = _export_pair(tmp_path)
    swapped = "b: jax.Array\nk: tc.Static[int]\na: jax.Array\ns: tc.Static[str]"
    out = _deserialize_elsewhere(tmp_path, swapped, path)
    assert out.startswith(
        "Pair was exported with its dynamic fields in the order ['a', 'b']; the class here "
        "declares\nthem in the order ['b', 'a']."
    )


def test_a_renamed_field_is_named_in_another_process(tmp_path: pathlib.Path):
    path = _export_pair(tmp_path)
    renamed = "a: jax.Array\nk: tc.Static[int]\nbias: jax.Array\ns: tc.Static[str]"
    out = _deserialize_elsewhere(tmp_path, renamed, path)
    assert out.startswith("Pair.b: exported as a dynamic field, which is missing here.\n")
