"""`treeclass._jit.untraceable`: the error naming `Class.field` for a leaf JAX cannot
trace, shared by `tc.jit` (tests/jit/test_jit.py pins it end to end) and `tc.grad`.

`is_traceable` is checked against JAX itself, not against a copy of its rules: a leaf is
traceable exactly when `jax.jit` accepts it as an argument.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treeclass as tc
from treeclass._jit.untraceable import field_error, is_traceable, untraceable_field


class Config(tc.TreeClass):
    w: jax.Array
    name: str


def f(x: Any, cfg: Any, *rest: Any, scale: Any = 1.0) -> Any:
    return x


def _jax_accepts(leaf: Any) -> bool:
    try:
        jax.jit(lambda x: x)(leaf)
    except (TypeError, ValueError, OverflowError):
        return False
    return True


@pytest.mark.parametrize(
    "leaf",
    [1, 2.5, True, 1j, 2**70, np.float32(1), np.int8(2), np.ones(2), jnp.ones(2), jnp.ones(2, jnp.bfloat16),
     jax.random.key(0), "a", b"a", print, f, object(), np.array("a"), np.array([object()]), np.datetime64(1, "D")],
    ids=repr,
)
def test_is_traceable_agrees_with_jax_jit(leaf: Any) -> None:
    assert is_traceable(leaf) == _jax_accepts(leaf)


def test_names_the_field_the_value_the_argument_and_the_fix() -> None:
    found = untraceable_field(f, (jnp.ones(1), Config(jnp.ones(1), "a")), {})
    assert isinstance(found, TypeError)
    first, *rest = str(found).splitlines()
    assert first == "Config.name is a dynamic field holding a str ('a'), which JAX cannot trace (argument 'cfg')."
    assert "    name: tc.Static[str]" in rest  # the fix, with the field's own annotation
    assert any("jnp.asarray(...)" in line for line in rest)  # the other fix


def test_a_nested_field_shows_its_path_from_the_argument() -> None:
    class Outer(tc.TreeClass):
        inner: Config

    found = untraceable_field(f, (1.0, Outer(Config(jnp.ones(1), "a"))), {})
    assert str(found).startswith(
        "Config.name is a dynamic field holding a str ('a'), which JAX cannot trace "
        "(Outer.inner.name, argument 'cfg')."
    )


@pytest.mark.parametrize("static", [("cfg",), (1,)])
def test_static_arguments_are_never_blamed(static: tuple[Any, ...]) -> None:
    args = (1.0, Config(jnp.ones(1), "a"))
    assert untraceable_field(f, args, {}, static) is None
    assert untraceable_field(f, (1.0,), {"cfg": args[1]}, static) is None


def test_extra_positional_and_keyword_arguments_are_labelled() -> None:
    bad = Config(jnp.ones(1), "a")
    assert "(argument 'args[2]')" in str(untraceable_field(f, (1.0, None, bad), {}))
    assert "(argument 'scale')" in str(untraceable_field(f, (1.0, None), {"scale": bad}))


def test_a_bad_leaf_outside_any_treeclass_is_named_by_its_path() -> None:
    found = untraceable_field(f, ({"w": 1.0, "act": "relu"}, None), {})
    assert str(found).startswith("x['act'] holds a str ('relu'), which JAX cannot trace (argument 'x').")


def test_every_traceable_leaf_passes() -> None:
    args = (jnp.ones(1), Config(jnp.ones(1), 3), 2.0, None, [1, 2j])
    assert untraceable_field(f, args, {"scale": True}) is None


@pytest.mark.parametrize("words", ["", "any wording a new JAX may choose"])
def test_the_field_is_found_from_the_error_type_and_the_leaves_not_the_words(words: str) -> None:
    # Regression: JAX's English text was matched; a reworded error lost the field.
    args = (jnp.ones(1), Config(jnp.ones(1), "a"))
    found = field_error(TypeError(words), f, args, {}, ())
    assert str(found).startswith("Config.name is a dynamic field holding a str ('a')")
    assert field_error(TypeError(words), f, (jnp.ones(1), Config(jnp.ones(1), 2.0)), {}, ()) is None


class Held(tc.TreeClass):
    names: list[str]
    table: dict[str, str]
    pairs: dict  # type: ignore[type-arg]


class Tagged(tc.TreeClass):
    tags: set[str]  # a set is one leaf, which JAX cannot trace


class Fixed(tc.TreeClass):
    value: tc.Static[Any]


@pytest.mark.parametrize(
    ("held", "fix", "static"),
    [
        (Held(["a"], {}, {}), "names: tc.Static[tuple[str, ...]]", ("a",)),
        (Held([], {"k": "v"}, {}), "table: tc.Static[tuple[tuple[str, str], ...]]", (("k", "v"),)),
        (Tagged({"a"}), "tags: tc.Static[frozenset[str]]", frozenset({"a"})),
        (Held([], {}, {"k": "v"}), "pairs: tc.Static[tuple[tuple[Any, Any], ...]]", (("k", "v"),)),
    ],
)
def test_the_static_fix_for_a_list_dict_or_set_is_hashable(held: Any, fix: str, static: Any) -> None:
    # Regression: the fix kept the annotation (`table: tc.Static[dict[str, str]]`), which
    # a static field refuses (unhashable), and that error says to make it dynamic again.
    error = untraceable_field(f, (1.0, held), {})
    assert error is not None
    assert f"    {fix}\n" in str(error)
    Fixed(static)  # the form the fix names is one a static field holds


def test_jax_still_raises_from_a_frame_that_holds_the_tracer() -> None:
    # treeclass/_jit/untraceable.py's note_held reads the locals of the frame that raised
    # (kept, treeclass/README.md says why): JAX's errors for a traced value whose concrete
    # value was needed do not carry the tracer, and the message text must not be read.
    # If JAX moves the raise, this test fails here, loudly, before the messages degrade
    # to naming every int field instead of the one that was needed.
    held: list[Any] = []

    def body(n: Any) -> Any:
        held.append(n)
        return jnp.zeros(()) + sum(range(n))

    with pytest.raises(TypeError) as info:
        jax.jit(body)(3)
    tb = info.value.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    assert tb is not None
    frame_values = list(tb.tb_frame.f_locals.values())
    assert any(value is held[0] for value in frame_values), (
        "JAX no longer raises from a frame holding the tracer: update note_held()"
    )

    class Two(tc.TreeClass):
        n: int
        k: int

    with pytest.raises(TypeError, match=r"^Two\.n \(3\) is a dynamic field holding a Python int") as named:
        tc.jit(lambda t: jnp.zeros(()) + sum(range(t.n)) + t.k)(Two(3, 4))
    assert "Two.k" not in str(named.value)  # only the field whose value was needed
