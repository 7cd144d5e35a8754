"""Where `Static` may stand in an annotation, and the one rule of static fields.

`Static` is found at the top, inside `Optional[...]`, `Union[...]`, `X | None` and
`Annotated[...]`, behind plain aliases, `TypeAliasType` and PEP 695 `type` aliases, also
under `from __future__ import annotations` and for aliases local to a function; one
nested inside another type (`list[tc.Static[int]]`) is refused naming `Class.field`.
The three spellings of a static field take and refuse the same options alike."""

import importlib.util
import sys
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from forms import FORMS, Form, exec_module
from hypothesis import given
from hypothesis import strategies as st

import treeclass as tc

PEP695 = sys.version_info >= (3, 12)
# chex is no test dependency (it comes with the interop extra): its cases skip without it.
NEEDS_CHEX = pytest.mark.skipif(
    importlib.util.find_spec("chex") is None, reason="chex is not installed"
)

_PRELUDE = """\
{future}
import typing
from typing import Annotated, Optional, Union
from typing_extensions import TypeAliasType
import jax
import treeclass as tc
"""


def _declare(annotation: str, *, future: bool, aliases: str = "", local: bool = False, form: Form = FORMS[1]) -> type:
    """The class `S` with `x: jax.Array` and `n: <annotation> = 3`, the alias lines at
    module level or (`local`) in the function that runs the class statement."""
    body = "\n".join(" " * 4 + line for line in form.class_source("S").splitlines())
    indent = " " * 4 if local else ""
    lines = [indent + line for line in aliases.splitlines()]
    source = _PRELUDE.format(future="from __future__ import annotations" if future else "")
    source += "\n".join(lines if not local else []) + "\ndef make():\n" + "\n".join(lines if local else [])
    source += f"\n{body}\n        x: jax.Array\n        n: {annotation} = 3\n    return S\nS = make()\n"
    return exec_module(source)["S"]


def _kinds(cls: type) -> dict[str, bool]:
    return {f.name: f.metadata["static"] for f in tc.fields(cls)}


# ---------------------------------------------------------------------------------------
# Static inside Optional / Union / X | None / Annotated.

_WRAPPED = [
    "tc.Static[int] | None",
    "None | tc.Static[int]",
    "Optional[tc.Static[int]]",
    "typing.Optional[tc.Static[int]]",
    "Union[tc.Static[int], None]",
    "Union[None, tc.Static[int], str]",
    "Annotated[tc.Static[int], 'doc']",
    "Annotated[Optional[tc.Static[int]], 'doc']",
    "Optional[Annotated[tc.Static[int], 'doc']]",
]


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
@pytest.mark.parametrize("future", [False, True], ids=["evaluated", "future"])
@pytest.mark.parametrize("annotation", _WRAPPED)
def test_static_inside_optional_union_annotated_is_static(annotation: str, future: bool, form: Form) -> None:
    cls = _declare(annotation, future=future, form=form)
    assert _kinds(cls) == {"x": False, "n": True}
    m = cls(jnp.ones(1))
    assert len(jax.tree.leaves(m)) == 1  # 3 is in the treedef, not a leaf
    assert jax.tree.structure(m) != jax.tree.structure(m.replace(n=None))


@pytest.mark.parametrize("future", [False, True], ids=["evaluated", "future"])
@pytest.mark.parametrize("local", [False, True], ids=["module", "function"])
def test_optional_alias_of_static_is_static(future: bool, local: bool) -> None:
    cls = _declare("Optional[Hyper]", future=future, aliases="Hyper = tc.Static[str]", local=local)
    assert _kinds(cls) == {"x": False, "n": True}


def test_static_with_an_unknown_name_inside_a_union_is_static() -> None:
    # `tc.Static[Later] | None` cannot be evaluated as a whole; its parts decide.
    cls = _declare("tc.Static[Later] | None", future=True)
    assert _kinds(cls) == {"x": False, "n": True}


def test_unknown_name_in_a_union_raises_naming_the_field() -> None:
    # It could be a Static alias: treeclass says so rather than guess "dynamic".
    with pytest.raises(TypeError, match=r"^S\.n is annotated 'Later \| None', which treeclass cannot resolve"):
        _declare("Later | None", future=True)


def test_unknown_name_nested_in_a_container_is_a_forward_reference() -> None:
    # Static would be refused there anyway: the field is dynamic, as any forward reference.
    cls = _declare("tuple[Later, ...] | None", future=True)
    assert _kinds(cls) == {"x": False, "n": False}


# ---------------------------------------------------------------------------------------
# Static nested where treeclass does not look: refused naming the field.

_NESTED = [
    ("list[tc.Static[int]]", "list"),
    ("tuple[tc.Static[int], ...]", "tuple"),
    ("dict[str, tc.Static[int]]", "dict"),
    ("Optional[list[tc.Static[int]]]", "list"),
    ("tuple[Optional[tc.Static[int]], int]", "tuple"),
    ("list[Hyper]", "list"),
]


@pytest.mark.parametrize("future", [False, True], ids=["evaluated", "future"])
@pytest.mark.parametrize(("annotation", "outer"), _NESTED)
def test_static_nested_in_a_container_is_refused_naming_the_field(annotation: str, outer: str, future: bool) -> None:
    match = rf"^S\.n is annotated .*: tc\.Static stands inside {outer}\[\.\.\.\], where treeclass\ndoes not look"
    with pytest.raises(TypeError, match=match) as info:
        _declare(annotation, future=future, aliases="Hyper = tc.Static[int]")
    assert "n: tc.Static[tuple[int, ...]]" in str(info.value)  # the fix


# ---------------------------------------------------------------------------------------
# TypeAliasType and PEP 695 aliases.

_ALIAS_DEFINITIONS = [
    ("typing_extensions", "Hyper = TypeAliasType('Hyper', tc.Static[float])", "Hyper"),
    ("typing_extensions-optional", "Hyper = TypeAliasType('Hyper', tc.Static[float])", "Hyper | None"),
    ("typing_extensions-of-alias", "Inner = tc.Static[float]\nHyper = TypeAliasType('Hyper', Optional[Inner])", "Hyper"),
]
if PEP695:
    _ALIAS_DEFINITIONS += [
        ("typing", "Hyper = typing.TypeAliasType('Hyper', tc.Static[float])", "Hyper"),
        ("pep695", "type Hyper = tc.Static[float]", "Hyper"),
        ("pep695-generic", "type Hyper[T] = tc.Static[T]", "Hyper[float]"),
        ("pep695-optional", "type Hyper = tc.Static[float] | None", "Hyper"),
        ("pep695-lazy", "type Hyper = Later\nLater = tc.Static[float]", "Hyper"),
    ]


@pytest.mark.parametrize("future", [False, True], ids=["evaluated", "future"])
@pytest.mark.parametrize("local", [False, True], ids=["module", "function"])
@pytest.mark.parametrize(("aliases", "annotation"), [d[1:] for d in _ALIAS_DEFINITIONS], ids=[d[0] for d in _ALIAS_DEFINITIONS])
def test_type_alias_of_static_is_static(aliases: str, annotation: str, future: bool, local: bool) -> None:
    cls = _declare(annotation, future=future, aliases=aliases, local=local)
    assert _kinds(cls) == {"x": False, "n": True}
    assert len(jax.tree.leaves(cls(jnp.ones(1)))) == 1


def test_type_alias_of_a_dynamic_type_is_dynamic() -> None:
    cls = _declare("Hyper", future=False, aliases="Hyper = TypeAliasType('Hyper', int | None)")
    assert _kinds(cls) == {"x": False, "n": False}


@pytest.mark.skipif(not PEP695, reason="PEP 695 syntax needs Python 3.12")
def test_recursive_type_alias_ends() -> None:
    cls = _declare("Tree", future=False, aliases="type Tree = int | list[Tree]")
    assert _kinds(cls) == {"x": False, "n": False}


# ---------------------------------------------------------------------------------------
# Recursive aliases: the walk remembers what it has looked into. chex's ArrayTree (and
# every library built on it, qdax's Genotype among them) sent it into RecursionError at
# class creation.

# A recursive alias of each kind, named `Tree`, whose value is a dynamic type.
_RECURSIVE = [
    ("chex", "from chex import ArrayTree as Tree"),
    ("union-of-forward-refs", "Tree = Union[jax.Array, typing.Iterable['Tree'], typing.Mapping[typing.Any, 'Tree']]"),
    ("TypeAliasType", "Tree = TypeAliasType('Tree', Union[int, list['Tree']])"),
    ("alias-of-alias", "from chex import ArrayTree\nTree = ArrayTree"),
]
if PEP695:
    _RECURSIVE += [
        ("pep695", "type Tree = int | list[Tree]"),
        ("pep695-generic", "type Generic[T] = T | list[Generic[T]]\nTree = Generic[int]"),
        ("typing.TypeAliasType", "Tree = typing.TypeAliasType('Tree', int | dict[str, 'Tree'])"),
    ]


_RECURSIVE_PARAMS = [
    pytest.param(source, id=name, marks=[NEEDS_CHEX] if "chex" in source else [])
    for name, source in _RECURSIVE
]


@pytest.mark.parametrize("future", [False, True], ids=["evaluated", "future"])
@pytest.mark.parametrize("local", [False, True], ids=["module", "function"])
@pytest.mark.parametrize("annotation", ["Tree", "Optional[Tree]", "Tree | None", "list[Tree]", "Annotated[Tree, 'doc']"])
@pytest.mark.parametrize("aliases", _RECURSIVE_PARAMS)
def test_recursive_alias_is_dynamic(aliases: str, annotation: str, future: bool, local: bool) -> None:
    cls = _declare(annotation, future=future, aliases=aliases, local=local)
    assert _kinds(cls) == {"x": False, "n": False}


@pytest.mark.parametrize("aliases", _RECURSIVE_PARAMS)
def test_static_of_a_recursive_alias_is_static(aliases: str) -> None:
    # Static at the top, around the alias or beside it in a union: found where it stands.
    for annotation in ["tc.Static[Tree]", "Optional[tc.Static[Tree]]", "tc.Static[int] | list[Tree]"]:
        cls = _declare(annotation, future=True, aliases=aliases)
        assert _kinds(cls) == {"x": False, "n": True}, annotation


def test_static_at_the_top_of_a_recursive_alias_is_refused_where_it_recurs() -> None:
    # The alias stands again inside list[...], its Static with it: nested, as in
    # `Union[tc.Static[int], list[tc.Static[int]]]` written out.
    match = r"^S\.n is annotated .*: tc\.Static stands inside list\[\.\.\.\], where treeclass"
    with pytest.raises(TypeError, match=match):
        _declare("Tree", future=False, aliases="Tree = Union[tc.Static[int], list['Tree']]")
    with pytest.raises(TypeError, match=match):
        _declare("Tree", future=True, aliases="Tree = TypeAliasType('Tree', Union[tc.Static[int], list['Tree']])")


@NEEDS_CHEX
def test_recursive_alias_naming_an_unknown_inside_a_container_is_a_forward_reference() -> None:
    # chex's ArrayTree imported under another name: its forward ref 'ArrayTree' names
    # nothing here, and stands inside Iterable[...], so the field is dynamic, as today.
    cls = _declare("AT", future=False, aliases="from chex import ArrayTree as AT")
    assert _kinds(cls) == {"x": False, "n": False}
    cls = _declare("chex.ArrayTree", future=True, aliases="import chex")
    assert _kinds(cls) == {"x": False, "n": False}


_QDAX = """\
{future}
from typing import Optional
import jax
import jax.numpy as jnp
from chex import ArrayTree
import treeclass as tc

Genotype = ArrayTree
Fitness = jax.Array
RNGKey = jax.Array


class MapElitesRepertoire(tc.TreeClass):
    genotypes: Genotype
    fitnesses: Fitness
    extra_scores: Optional[ArrayTree] = None
    batch_size: tc.Static[int] = 2

    def best(self) -> jax.Array:
        return jnp.max(self.fitnesses)
"""


@pytest.mark.parametrize("future", [False, True], ids=["evaluated", "future"])
@NEEDS_CHEX
def test_qdax_style_repertoire_of_array_trees(future: bool) -> None:
    # Cut down from qdax's MAP-Elites repertoire (a flax.struct.dataclass there).
    namespace = exec_module(_QDAX.format(future="from __future__ import annotations" if future else ""))
    cls = namespace["MapElitesRepertoire"]
    assert _kinds(cls) == {"genotypes": False, "fitnesses": False, "extra_scores": False, "batch_size": True}
    repertoire = cls({"w": jnp.ones((2, 3)), "b": [jnp.zeros(2)]}, jnp.array([1.0, 3.0]))
    assert len(jax.tree.leaves(repertoire)) == 3
    assert float(jax.jit(cls.best)(repertoire)) == 3.0


@pytest.mark.skipif(not PEP695, reason="PEP 695 syntax needs Python 3.12")
def test_pep695_alias_naming_an_unknown_raises_naming_the_field() -> None:
    with pytest.raises(TypeError, match=r"^S\.n is annotated .*Hyper.*, which treeclass cannot resolve"):
        _declare("Hyper", future=False, aliases="type Hyper = Later")


# ---------------------------------------------------------------------------------------
# Generated annotations: Static wrapped any number of times, every way, kind as expected.

_WRAPS = [
    "Optional[{}]",
    "Union[{}, None]",
    "Union[None, {}]",
    "({}) | None",
    "None | ({})",
    "Annotated[{}, 'doc']",
    "alias",
    "TypeAliasType",
    "list[{}]",
    "tuple[{}, ...]",
    *(["type"] if PEP695 else []),
    # Recursive aliases: the value comes back inside list[...], its Static with it.
    "A{i} = Union[{}, list['A{i}']]",
    "A{i} = TypeAliasType('A{i}', Union[{}, list['A{i}']])",
    *(["type A{i} = {} | list[A{i}]"] if PEP695 else []),
]


@st.composite
def wrapped_annotations(draw: st.DrawFn) -> tuple[str, str, str]:
    """`(alias lines, annotation, expected kind)`: `tc.Static[int]` or `int` wrapped in
    unions, Annotated, aliases of every kind (recursive ones too) and containers; "nested"
    where a container holds the Static."""
    static = draw(st.booleans())
    text, kind = ("tc.Static[int]", "static") if static else ("int", "dynamic")
    lines: list[str] = []
    for i in range(draw(st.integers(0, 4))):
        wrap = draw(st.sampled_from(_WRAPS))
        if "A{i}" in wrap:
            lines.append(wrap.replace("A{i}", f"A{i}").format(text))
            text = f"A{i}"
            kind = "nested" if kind == "static" else kind
        elif wrap in ("alias", "TypeAliasType", "type"):
            value = {"alias": "{}", "TypeAliasType": f"TypeAliasType('A{i}', {{}})", "type": "{}"}[wrap].format(text)
            lines.append(f"type A{i} = {value}" if wrap == "type" else f"A{i} = {value}")
            text = f"A{i}"
        else:
            if wrap.startswith(("list", "tuple")) and kind == "static":
                kind = "nested"
            text = wrap.format(text)
    return "\n".join(lines), text, kind


@given(wrapped=wrapped_annotations(), future=st.booleans(), local=st.booleans())
def test_generated_annotations_have_the_expected_kind(wrapped: tuple[str, str, str], future: bool, local: bool) -> None:
    aliases, annotation, kind = wrapped
    if kind == "nested":
        with pytest.raises(TypeError, match=r"^S\.n is annotated .*: tc\.Static stands inside"):
            _declare(annotation, future=future, aliases=aliases, local=local)
        return
    cls = _declare(annotation, future=future, aliases=aliases, local=local)
    assert _kinds(cls) == {"x": False, "n": kind == "static"}


# ---------------------------------------------------------------------------------------
# The frame walk: function-local aliases under `from __future__ import annotations`.


def test_function_local_alias_is_read_from_the_defining_frame() -> None:
    # Under `from __future__ import annotations`, `n: Hyper` is the string "Hyper", and
    # `Hyper` lives only in the locals of `make()`, which treeclass reads from its frame
    # (treeclass/_core/prepare.py, `_scopes`). If a Python release stops exposing them,
    # this test fails: the field would otherwise be silently dynamic.
    cls = _declare("Hyper", future=True, aliases="Hyper = tc.Static[float]", local=True)
    assert _kinds(cls) == {"x": False, "n": True}, "the frame walk no longer sees function locals"


# ---------------------------------------------------------------------------------------
# One rule for the three spellings of a static field.

# The options `field()` takes, with the values tried on a static field.
_OPTIONS = {
    "converter": ["int"],
    "trainable": ["False", "True"],
    "axes": ["('batch',)", "None"],
    "init": ["False"],
    "repr": ["False"],
    "kw_only": ["True"],
    "metadata": ["{'unit': 'ms'}"],
    "default_factory": ["lambda: '7'"],
}
# The ones a static field refuses, in the order the rule checks them.
_REFUSED = {("axes", "('batch',)"): "axes=...", ("trainable", "False"): "trainable=False"}
_SPELLINGS = {
    "static()": "n: Any = tc.static({})",
    "field(static=True)": "n: Any = tc.field(static=True, {})",
    "Static[T] = field()": "n: tc.Static[Any] = tc.field({})",
}
options_on_static = st.lists(st.sampled_from(sorted(_OPTIONS)), unique=True, max_size=4).flatmap(
    lambda keys: st.tuples(*(st.tuples(st.just(k), st.sampled_from(_OPTIONS[k])) for k in keys)).map(dict)
)


def _outcome(spelling: str, options: dict[str, str]) -> tuple[str, object]:
    """What declaring and building `S` gives: the error message, or the field's options
    and the instance's `n` and treedef size."""
    args = ", ".join(f"{k}={v}" for k, v in options.items())
    if "default_factory" not in options:
        args = ", ".join(filter(None, ["default='7'", args]))
    ns: dict[str, Any] = {"tc": tc, "Any": Any}
    source = f"class S(tc.TreeClass):\n    x: float = 0.0\n    {_SPELLINGS[spelling].format(args)}\n"
    try:
        exec(source, ns)
    except TypeError as e:
        return "refused", str(e)
    (f,) = (f for f in tc.fields(ns["S"]) if f.name == "n")
    m = ns["S"]()
    meta = {k: v for k, v in f.metadata.items() if k != "converter"}
    return "accepted", (meta, f.init, f.repr, f.kw_only, m.n, len(jax.tree.leaves(m)))


@given(options=options_on_static)
def test_static_spellings_accept_and_refuse_alike(options: dict[str, str]) -> None:
    outcomes = {spelling: _outcome(spelling, options) for spelling in _SPELLINGS}
    assert len(set(map(repr, outcomes.values()))) == 1, outcomes
    kind, detail = next(iter(outcomes.values()))
    refused = [r for option, r in _REFUSED.items() if option in options.items()]
    if refused:
        assert kind == "refused"
        assert isinstance(detail, str)
        assert detail.startswith(f"S.n is static and declared {refused[0]}.")
        assert f"n: ... = tc.field({refused[0]})" in detail  # the fix: make it dynamic
    else:
        assert kind == "accepted", detail
        assert isinstance(detail, tuple)
        assert detail[4] == (7 if "converter" in options else "7")  # the converter ran
        assert detail[5] == 1  # only x is a leaf


@pytest.mark.parametrize("spelling", sorted(_SPELLINGS))
@pytest.mark.parametrize("option", [(k, v) for k, vs in _OPTIONS.items() for v in vs], ids=str)
def test_static_option_matrix(spelling: str, option: tuple[str, str]) -> None:
    kind, detail = _outcome(spelling, dict([option]))
    assert kind == ("refused" if option in _REFUSED else "accepted"), detail
    if option in _REFUSED:
        assert detail == _outcome("field(static=True)", dict([option]))[1]


def test_converter_on_a_static_field_converts_before_the_check() -> None:
    # A list is unhashable; the converter makes it the tuple that is checked and stored.
    @tc.treeclass
    class S:
        shape: tc.Static[tuple[int, ...]] = tc.field(default=(2,), converter=tuple)

    assert S([3, 4]).shape == (3, 4)
    assert S().replace(shape=[5]).shape == (5,)
    assert jax.tree.leaves(S([3])) == []


def test_static_without_options_still_refuses_axes_from_untyped_callers() -> None:
    with pytest.raises(TypeError, match=r"^S\.n is static and declared axes=\.\.\.\."):

        @tc.treeclass
        class S:
            n: int = tc.static(default=1, axes=("batch",))  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue]


def test_a_shared_field_object_stays_dynamic_elsewhere() -> None:
    shared = tc.field(default=1)

    @tc.treeclass
    class A:
        n: tc.Static[int] = shared

    @tc.treeclass
    class B:
        n: int = shared

    assert _kinds(A) == {"n": True}
    assert _kinds(B) == {"n": False}
