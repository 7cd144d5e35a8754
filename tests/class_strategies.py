"""Generated class declarations for the reference model (tests/reference.py).

Where tests/strategies.py draws one class at a time, this module draws a whole *module*
of treeclasses across the declaration space users write: every spelling of a static
field (`tc.static()`, `tc.field(static=True)`, `tc.Static[T]`, alone or with
`= tc.field(...)`) and every place `Static` may stand (`Optional[...]`, `X | None`,
`Union`, `Annotated`, a plain alias, `TypeAliasType`, a PEP 695 `type` alias, a string);
converters; defaults (values, arrays, factories); `init=False` fields derived in
`__post_init__`; `__check_init__`; hand-written `__init__`s that assign, call
`super().__init__(...)` or call `self.__post_init__()`; inheritance chains of up to three
classes; both class forms; `from __future__ import annotations`. tests/class_source.py
renders a drawn module as source and execs it.

A `Case` is a module, a construction of its last class, and the arguments of the
operations the checks make (tests/reference_checks.py). Drawing goes through a chooser
(a choice among options, first = simplest), so one generator serves hypothesis
(`cases()`) and the long random search of `python -m benchmarks --only reference`
(`draw_case(RandomChooser(seed))`).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import sys
from collections.abc import Sequence
from typing import Any, TypeVar

from hypothesis import strategies as st

T = TypeVar("T")


# ---------------------------------------------------------------------------------------
# Choosing: hypothesis or a seeded random generator behind one interface.


class RandomChooser:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def choice(self, options: Sequence[T]) -> T:
        return self.rng.choice(list(options))

    def chance(self, n: int) -> bool:
        """True with probability 1/n."""
        return self.rng.randrange(n) == 0


class HypothesisChooser:
    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw

    def choice(self, options: Sequence[T]) -> T:
        return self.draw(st.sampled_from(list(options)))

    def chance(self, n: int) -> bool:
        return self.draw(st.integers(0, n - 1)) == n - 1  # shrinks towards False


# ---------------------------------------------------------------------------------------
# Declarations.

# Values as source, by kind. Arrays are float32 or int32 (JAX runs strict in the tests).
NUMBERS = ("1.5", "jnp.array([1.0, 2.0])", "3", "jnp.asarray(0.5)", "jnp.float32(2.0)",
           "jnp.arange(2, dtype=jnp.int32)", "-2.0")
LEAVES = (*NUMBERS, "None", "True", "(jnp.array([1.0]), 2.5)", "[jnp.ones(2), None]")
STATIC_VALUES = {"int": ("3", "0", "-1"), "str": ("'relu'", "'tanh'"), "tuple": ("(1, 2)", "()")}
STATIC_TYPES = {"int": "int", "str": "str", "tuple": "tuple[int, ...]", "any": "Any"}
DYNAMIC_ANNOTATIONS = ("jax.Array", "Any", "float", "Optional[jax.Array]", "jax.Array | None",
                       "'jax.Array'")
# Where `Static` stands in an annotation ({} is the type).
PLACES = {
    "top": "tc.Static[{}]",
    "optional": "Optional[tc.Static[{}]]",
    "or_none": "tc.Static[{}] | None",
    "union": "Union[tc.Static[{}], None]",
    "annotated": "Annotated[tc.Static[{}], 'doc']",
    "alias": "{alias}",
    "type_alias_type": "{alias}TA",
    "pep695": "{alias}P",
    "string": "'tc.Static[{}]'",
}
if sys.version_info < (3, 12):
    del PLACES["pep695"]  # `type X = ...` is a syntax error before 3.12
NONE_PLACES = ("optional", "or_none", "union")


@dataclasses.dataclass(frozen=True)
class FieldDecl:
    name: str
    static: bool
    spelling: str
    """Static: "static" (`tc.static()`), "field" (`tc.field(static=True)`), "ann"
    (`Static` in the annotation) or "ann_field" (that and `= tc.field(...)`). Dynamic:
    "bare" or "field"."""
    annotation: str
    kind: str
    """The values it holds: "int", "str", "tuple" (static), "number" (converted),
    "leaf", or the name of a generated class."""
    default: str = "none"  # "none", "value", "array", "factory"
    default_src: str = ""
    converter: bool = False
    derived: bool = False  # init=False, set by the class's __post_init__
    trainable: bool = True
    nullable: bool = False  # a static whose annotation admits None

    @property
    def has_default(self) -> bool:
        return self.default != "none"


@dataclasses.dataclass(frozen=True, eq=False)
class ClassDecl:
    name: str
    parent: ClassDecl | None
    form: str  # "decorator" or "base"
    own: tuple[FieldDecl, ...]
    post_init: bool
    check_init: bool
    init: str = "generated"  # or "assign" (sets fields) or "super" (calls super().__init__)
    assigns: tuple[str, ...] = ()  # the fields a hand-written __init__ takes and sets
    init_calls_post_init: bool = False
    kw_only: bool = False

    @property
    def fields(self) -> tuple[FieldDecl, ...]:
        return (*(self.parent.fields if self.parent else ()), *self.own)

    @property
    def chain(self) -> list[ClassDecl]:
        """This class and its ancestors, base first."""
        return [*(self.parent.chain if self.parent else []), self]

    def field(self, name: str) -> FieldDecl:
        return next(f for f in self.fields if f.name == name)


def init_owner(c: ClassDecl) -> ClassDecl:
    """The class whose `__init__` builds a `c`: `c` itself, unless it declares no
    fields and writes no `__init__`, where it inherits a parent's hand-written one."""
    if c.init == "generated" and not c.own and c.parent:
        owner = init_owner(c.parent)
        return owner if owner.init != "generated" else c
    return c


def params(c: ClassDecl) -> list[str]:
    """The parameters of the `__init__` that builds a `c`, by field name."""
    owner = init_owner(c)
    if owner.init == "generated":
        return [f.name for f in owner.fields if not f.derived]
    inherited = params(owner.parent) if owner.init == "super" and owner.parent else []
    return [*inherited, *owner.assigns]


def defines_post_init(c: ClassDecl) -> bool:
    return any(k.post_init for k in c.chain)


@dataclasses.dataclass(frozen=True, eq=False)
class ModuleDecl:
    classes: tuple[ClassDecl, ...]
    future: bool
    aliases: tuple[str, ...]

    @property
    def target(self) -> ClassDecl:
        return self.classes[-1]


# ---------------------------------------------------------------------------------------
# Values and calls.


@dataclasses.dataclass(frozen=True)
class Val:
    src: str

    def __str__(self) -> str:
        return self.src


@dataclasses.dataclass(frozen=True, eq=False)
class Call:
    decl: ClassDecl
    kwargs: tuple[tuple[str, Val | Call], ...]

    def __str__(self) -> str:
        return f"{self.decl.name}({', '.join(f'{k}={v}' for k, v in self.kwargs)})"


@dataclasses.dataclass(frozen=True, eq=False)
class Case:
    """A module, a construction of its last class, and the operations a check makes."""

    module: ModuleDecl
    call: Call
    changes: tuple[tuple[str, Val | Call], ...]  # for replace()
    at_path: tuple[str, ...]  # for replace_at(): fields from the instance down
    at_value: Val | Call
    set_field: str | None  # a dynamic field for object.__setattr__
    set_value: Val
    where_field: str | None  # a dynamic field for partition(where=...)

    def source(self) -> str:
        from class_source import render_module  # class_source imports this module

        return f"{render_module(self.module)}\n\nobj = {self.call}\n"

    def __repr__(self) -> str:
        extra = [f"# replace: {dict((k, str(v)) for k, v in self.changes)}"]
        extra.append(f"# replace_at: m.{'.'.join(self.at_path)} -> {self.at_value}")
        if self.set_field:
            extra.append(f"# object.__setattr__(obj, {self.set_field!r}, {self.set_value})")
        return "\n" + self.source() + "\n".join(extra) + "\n"


def draw_value(ch: Any, f: FieldDecl, classes: dict[str, ClassDecl], depth: int = 0) -> Val | Call:
    if f.kind in STATIC_VALUES:
        options = STATIC_VALUES[f.kind] + (("None",) if f.nullable and not f.converter else ())
        return Val(ch.choice(options))
    if f.kind == "number":
        return Val(ch.choice(NUMBERS))
    if f.kind == "leaf":
        return Val(ch.choice(LEAVES))
    if depth > 2 or ch.chance(6):
        return Val("None")
    return draw_call(ch, classes[f.kind], classes, depth + 1)


def draw_call(ch: Any, c: ClassDecl, classes: dict[str, ClassDecl], depth: int = 0) -> Call:
    generated = init_owner(c).init == "generated"
    kwargs = []
    for name in params(c):
        f = c.field(name)
        if generated and f.has_default and ch.chance(2):
            continue  # left to its default
        kwargs.append((name, draw_value(ch, f, classes, depth)))
    return Call(c, tuple(kwargs))


# ---------------------------------------------------------------------------------------
# Drawing declarations.

_names = itertools.count()


def _draw_field(ch: Any, name: str, earlier: list[ClassDecl], post_init: bool) -> FieldDecl:
    derived = post_init and ch.chance(5)
    if ch.chance(2):  # static
        spelling = ch.choice(("ann", "static", "field", "ann_field"))
        kind = ch.choice(("int", "str", "tuple", "any"))
        place = ch.choice(tuple(PLACES)) if spelling.startswith("ann") else "plain"
        converter = spelling in ("field", "ann_field") and not derived and ch.chance(3)
        if converter or kind == "any":
            kind = "int" if converter else ch.choice(("int", "str", "tuple"))
        t = STATIC_TYPES[kind] if not derived else "str"
        kind = "str" if derived else kind
        annotation = t if place == "plain" else PLACES[place].format(t, alias=f"Hyper{kind.title()}")
        nullable = place in NONE_PLACES
        default, src = "none", ""
        if not derived and ch.chance(2):
            default = ch.choice(("value", "factory"))
            value = ch.choice(STATIC_VALUES[kind])
            src = value if default == "value" else f"lambda: {value}"
        return FieldDecl(name, True, spelling, annotation, kind, default, src, converter,
                         derived, True, nullable)
    nested = [c for c in earlier if not derived] and ch.chance(4)
    spelling = ch.choice(("bare", "field"))
    converter = not nested and not derived and ch.chance(3)
    trainable = not ch.chance(4)
    if not trainable or converter:
        spelling = "field"
    if nested:
        kind = ch.choice([c.name for c in earlier])
        annotation = ch.choice((kind, repr(kind), f"Optional[{kind}]"))
    else:
        kind = "number" if converter else "leaf"
        annotation = ch.choice(DYNAMIC_ANNOTATIONS)
    default, src = "none", ""
    if not derived and not nested and ch.chance(2):
        default = ch.choice(("value", "array", "factory"))
        src = {"value": ch.choice(("1.5", "2")), "array": "jnp.zeros(2)",
               "factory": "lambda: jnp.ones(2)"}[default]
    return FieldDecl(name, False, spelling, annotation, kind, default, src, converter,
                     derived, trainable)


def _needs_kw_only(parent: ClassDecl | None, own: Sequence[FieldDecl]) -> bool:
    # dataclasses refuses a positional field without a default after one with a default.
    seen = False
    inherited = [f for k in (parent.chain if parent else []) if not k.kw_only for f in k.own]
    for f in [*inherited, *own]:
        if f.derived:
            continue
        if f.has_default:
            seen = True
        elif seen:
            return True
    return False


def _draw_class(ch: Any, index: int, earlier: list[ClassDecl]) -> ClassDecl:
    parents = [c for c in earlier if len(c.chain) < 3]
    parent = ch.choice(parents) if parents and not ch.chance(3) else None
    post_init = ch.chance(2)
    letter = "abcdefgh"[index]
    n = ch.choice((0, 1, 2, 3, 4)) if parent else ch.choice((1, 2, 3, 4))
    nestable = [c for c in earlier if parent is None or c not in parent.chain]
    own = tuple(_draw_field(ch, f"{letter}{i}", nestable, post_init) for i in range(n))
    form = "base" if parent and parent.form == "base" else ch.choice(("decorator", "base"))
    init, assigns, calls_post = "generated", (), False
    if ch.chance(3):
        init = "super" if parent and ch.chance(2) else "assign"
        mine = own if init == "super" else (*(parent.fields if parent else ()), *own)
        assigns = tuple(f.name for f in mine if not f.derived and (not f.has_default or ch.chance(2)))
        calls_post = defines_post_init_chain(parent, post_init) and ch.chance(2)
    return ClassDecl(f"Gen{next(_names)}", parent, form, own, post_init, ch.chance(3), init,
                     assigns, calls_post, _needs_kw_only(parent, own))


def defines_post_init_chain(parent: ClassDecl | None, own: bool) -> bool:
    return own or (parent is not None and defines_post_init(parent))


def draw_module(ch: Any) -> ModuleDecl:
    classes: list[ClassDecl] = []
    for i in range(ch.choice((1, 2, 3, 4))):
        classes.append(_draw_class(ch, i, classes))
    aliases = sorted({f.annotation for c in classes for f in c.own if "Hyper" in f.annotation})
    return ModuleDecl(tuple(classes), ch.chance(2), tuple(aliases))


def _paths(c: ClassDecl, call: Call, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Paths replace_at can reach through this call: every non-derived field, and
    through each nested instance."""
    out = [(*prefix, f.name) for f in c.fields if not f.derived]
    for name, value in call.kwargs:
        if isinstance(value, Call):
            out += _paths(value.decl, value, (*prefix, name))
    return out


def draw_case(ch: Any) -> Case:
    module = draw_module(ch)
    classes = {c.name: c for c in module.classes}
    target = module.target
    call = draw_call(ch, target, classes)
    settable = [f for f in target.fields if not f.derived]
    changes = []
    for f in settable:
        if ch.chance(2):
            changes.append((f.name, draw_value(ch, f, classes, 1)))
    at_path = ch.choice(_paths(target, call, ())) if settable else ()
    cursor = target
    for name in at_path[:-1]:
        cursor = classes[cursor.field(name).kind]
    at_value = draw_value(ch, cursor.field(at_path[-1]), classes, 1) if at_path else Val("None")
    dynamic = [f.name for f in target.fields if not f.static]
    return Case(module, call, tuple(changes), at_path, at_value,
                ch.choice(dynamic) if dynamic else None, Val(ch.choice(NUMBERS)),
                ch.choice(dynamic) if dynamic else None)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A `Case`, drawn by hypothesis (which shrinks it and prints its source)."""
    return draw_case(HypothesisChooser(draw))


# ---------------------------------------------------------------------------------------
# Models that mix other libraries' nodes (the owner rule, tests/core/test_owner_reference.py).
#
# A `MixedCase` is a chain of 1-3 treeclasses (each form), the innermost first, each
# holding components in its fields, alone or in a tuple, and the next one holding the
# one before: equinox layers (`eqx.nn.*`), a flax.struct and a chex node, Python floats,
# float arrays and int counters. Its source defines `build(s)`, the model with weights
# drawn from seed `s`; tests/reference_checks.py compares treeclass on it with equinox
# (its own filtered transforms, for its Modules) and with plain JAX (for the rest).

# Each component as source ({k}: a distinct PRNG seed); chex is left out where missing.
COMPONENTS = {
    "linear": "eqx.nn.Linear(2, 2, key=jax.random.key(s + {k}))",
    "mlp": "eqx.nn.MLP(2, 2, 4, 1, key=jax.random.key(s + {k}))",
    "conv": "eqx.nn.Conv1d(1, 1, 3, padding=1, padding_mode={mode!r}, key=jax.random.key(s + {k}))",
    "batchnorm": "eqx.nn.BatchNorm(2, 'batch', mode='batch')",
    "dropout": "eqx.nn.Dropout({p}, inference={inference})",
    "layernorm": "eqx.nn.LayerNorm(2)",
    "embedding": "eqx.nn.Embedding(4, 2, key=jax.random.key(s + {k}))",
    "gru": "eqx.nn.GRUCell(2, 2, key=jax.random.key(s + {k}))",
    "sequential": "eqx.nn.Sequential([eqx.nn.Linear(2, 2, key=jax.random.key(s + {k})), "
    "eqx.nn.Lambda(jax.nn.relu), eqx.nn.Dropout(0.2, inference=True)])",
    "lambda": "eqx.nn.Lambda(jnp.tanh)",
    "flax": "FlaxNode(w=jnp.arange(2.0) + s, rate=0.5 + s, act=jax.nn.relu)",
    "chex": "ChexNode(w=jnp.ones(2) + s, b=jnp.zeros(2))",
    "float": "1.5 + s",
    "array": "jnp.arange(2.0) * (s + {k})",
    "counter": "jnp.asarray(s + {k}, jnp.int32)",
}
EQUINOX_KINDS = ("linear", "mlp", "conv", "batchnorm", "dropout", "layernorm", "embedding",
                 "gru", "sequential", "lambda")


def has_chex() -> bool:
    try:
        import chex  # noqa: F401
    except ImportError:
        return False
    return True


@dataclasses.dataclass(frozen=True)
class Component:
    kind: str
    src: str  # its source, `s` the model's seed

    def __str__(self) -> str:
        return self.src


@dataclasses.dataclass(frozen=True)
class MixedClass:
    name: str
    form: str  # "decorator" or "base"
    fields: tuple[tuple[str, Component | tuple[Component, ...] | str], ...]
    """(name, content): a component, a tuple of them, or the name of the class it nests."""


_MIXED_HEADER = """\
from typing import Any

import equinox as eqx
import flax.struct
import jax
import jax.numpy as jnp

import treeclass as tc


@flax.struct.dataclass
class FlaxNode:
    w: jax.Array
    rate: float
    act: Any
"""

_CHEX = """
import chex


@chex.dataclass(frozen=True)
class ChexNode:
    w: jax.Array
    b: jax.Array
"""


@dataclasses.dataclass(frozen=True, eq=False)
class MixedCase:
    classes: tuple[MixedClass, ...]  # the innermost first; the last is the model's

    def components(self) -> list[tuple[tuple[str | int, ...], Component]]:
        """Each component with its path from the model down (field names, tuple indices)."""
        by_name = {c.name: c for c in self.classes}

        def inside(c: MixedClass, prefix: tuple[str | int, ...]) -> list[Any]:
            out: list[Any] = []
            for name, content in c.fields:
                if isinstance(content, str):
                    out += inside(by_name[content], (*prefix, name))
                elif isinstance(content, tuple):
                    out += [((*prefix, name, i), comp) for i, comp in enumerate(content)]
                else:
                    out.append(((*prefix, name), content))
            return out

        return inside(self.classes[-1], ())

    def source(self) -> str:
        kinds = {comp.kind for _, comp in self.components()}
        lines = [_MIXED_HEADER + (_CHEX if "chex" in kinds else "")]
        for c in self.classes:
            if c.form == "decorator":
                lines.append(f"\n@tc.treeclass\nclass {c.name}:")
            else:
                lines.append(f"\nclass {c.name}(tc.TreeClass):")
            lines += [f"    {name}: Any" for name, _ in c.fields]
        lines.append("\n\ndef build(s):")
        for c in self.classes:
            args = []
            for name, content in c.fields:
                if isinstance(content, str):
                    value = content.lower()
                elif isinstance(content, tuple):
                    value = f"({''.join(f'{comp}, ' for comp in content)})"
                else:
                    value = str(content)
                args.append(f"{name}={value}")
            lines.append(f"    {c.name.lower()} = {c.name}({', '.join(args)})")
        lines.append(f"    return {self.classes[-1].name.lower()}\n")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return "\n" + self.source()


def _draw_component(ch: Any, k: int) -> Component:
    kinds = [kind for kind in COMPONENTS if kind != "chex" or has_chex()]
    kind = ch.choice(kinds)
    options = {"k": k, "mode": ch.choice(("ZEROS", "CIRCULAR")), "p": ch.choice((0.1, 0.5)),
               "inference": ch.choice((False, True))}
    return Component(kind, COMPONENTS[kind].format(**options))


def draw_mixed_case(ch: Any) -> MixedCase:
    classes: list[MixedClass] = []
    k = itertools.count(1)
    for depth in range(ch.choice((1, 2, 3))):
        fields: list[tuple[str, Any]] = []
        for i in range(ch.choice((1, 2, 3))):
            if ch.chance(4):
                content: Any = tuple(_draw_component(ch, next(k)) for _ in range(ch.choice((1, 2))))
            else:
                content = _draw_component(ch, next(k))
            fields.append((f"{'abc'[depth]}{i}", content))
        if classes:  # the class before, at a place of its own among the fields
            fields.insert(ch.choice(range(len(fields) + 1)), ("inner", classes[-1].name))
        form = ch.choice(("decorator", "base"))
        classes.append(MixedClass(f"Mixed{next(_names)}", form, tuple(fields)))
    return MixedCase(tuple(classes))


@st.composite
def mixed_cases(draw: st.DrawFn) -> MixedCase:
    """A `MixedCase`, drawn by hypothesis."""
    return draw_mixed_case(HypothesisChooser(draw))
