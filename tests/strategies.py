"""Hypothesis strategies that generate whole treeclass definitions, and instances of them.

Like attrs' `tests/strategies.py`, the unit of generation is a *class*, not a value:
`treeclasses()` draws a description of a class (its fields, how each is spelled, its
defaults, hooks, parent and nested classes), renders it as Python source, and `exec`s it.
The source is what hypothesis prints for a failing example, so a failure can be pasted
into a file and replayed. A drawn class looks like:

    @tc.treeclass(kw_only=True)
    class Gen7(Gen3):
        tag: ClassVar[str] = 'not a field'
        b0: Gen5
        b1: 'tc.Static[int]' = tc.field(default_factory=lambda: (1, 'x'), kw_only=False)
        b2: jax.Array = tc.field(default=1.5, converter=counting_converter)
        b3: Any = tc.static(init=False)

        def __post_init__(self):
            CALLS['post_init'] += 1
            super().__post_init__()
            object.__setattr__(self, 'b3', DERIVED_STATIC)

Every user hook counts its calls in `CALLS` ("init", "post_init", "convert"), so a
test can assert that JAX rebuilds instances without running any of them, and that
construction and `replace()` run each exactly as often as they should.
"""

import collections
import dataclasses
import itertools
import math
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

import treeclass as tc

# ---------------------------------------------------------------------------------------
# User code, counted.

CALLS: collections.Counter[str] = collections.Counter()
"""How often the generated classes' user code ran: `init` (the class's `__init__`),
`post_init` (each `__post_init__` in the MRO chain) and `convert` (each converter)."""


def counting_converter(value: Any) -> Any:
    """The converter of generated dynamic fields: counts, turns a list into a tuple
    (the classic converter), and returns anything else itself, so a test can check
    with `is` that the stored value is the converter's result."""
    CALLS["convert"] += 1
    return tuple(value) if type(value) is list else value


# What `__post_init__` stores in the `init=False` fields it derives. Module constants,
# so a rebuilt or replaced instance can be checked with `is` as well. The array is a
# numpy one: a leaf need not be a jax.Array.
DERIVED_ARRAY = np.arange(3, dtype=np.int32)
DERIVED_STATIC = "derived"


def _count_init_calls(cls: type) -> None:
    # Counts in `__new__`, so every `cls(...)` counts, whoever makes it, while JAX's rebuild
    # (`object.__new__`, no `__init__`) does not. Not by wrapping `__init__`: `replace()`
    # goes through a wrapped `__init__` (it may hold a checker's checks).
    def __new__(klass: type, *args: Any, **kwargs: Any) -> Any:
        CALLS["init"] += 1
        return object.__new__(klass)

    cls.__new__ = __new__  # type: ignore[method-assign]


# ---------------------------------------------------------------------------------------
# Values.

DTYPES = (jnp.float32, jnp.int32, jnp.bool_, jnp.float16, jnp.bfloat16, jnp.uint8, jnp.complex64)
SHAPES = ((), (1,), (3,), (2, 2), (0,), (2, 0, 1))


@st.composite
def arrays(draw: st.DrawFn) -> jax.Array:
    """A small `jax.Array` of any dtype in `DTYPES`, zero-size shapes included."""
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.sampled_from(SHAPES))
    size = math.prod(shape)
    ints = np.array(draw(st.lists(st.integers(0, 3), min_size=size, max_size=size)), np.int32)
    base = ints.reshape(shape)
    if dtype == jnp.bool_:
        base = base % 2 == 1
    return jnp.asarray(base, dtype=dtype)


# Floats of width 16 are exact in every float dtype a leaf can end up in.
python_floats = st.floats(-4, 4, allow_nan=False, width=16)
python_ints = st.integers(-100, 100)
python_scalars = st.one_of(python_floats, python_ints, st.booleans())
weak_arrays = st.one_of(python_floats, python_ints).map(jnp.asarray)  # weak_type=True
# one_of picks a branch uniformly: arrays() twice makes half the leaves strong-typed
# arrays, so each dtype turns up within the ci profile's 40 examples.
leaves = st.one_of(arrays(), arrays(), weak_arrays, python_scalars)
"""One pytree leaf: an array (strong or weak dtype) or a Python scalar."""

dynamic_values = st.one_of(
    leaves,
    leaves,
    st.none(),
    st.lists(st.one_of(leaves, st.none()), max_size=2).map(tuple),
)
"""The value of a dynamic field: a leaf, `None` (an empty subtree) or a small tuple."""

static_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 3),
        st.floats(-4, 4, allow_nan=False, width=16),
        st.text("abx", max_size=3),
    ),
    lambda inner: st.lists(inner, max_size=2).map(tuple),
    max_leaves=3,
)
"""The value of a static field: a hashable builtin that `repr` writes as source."""

# Defaults of dynamic fields: a plain default must be hashable (dataclasses refuses
# mutable ones), a factory returns a fresh value each time.
_DYNAMIC_DEFAULTS = st.one_of(st.none(), python_floats, st.integers(-5, 5))
_DYNAMIC_FACTORIES = st.sampled_from(
    (
        "lambda: jnp.zeros((2,), jnp.float32)",
        "lambda: jnp.arange(3, dtype=jnp.int32)",
        "lambda: (1.5, None)",
    )
)


# ---------------------------------------------------------------------------------------
# Class descriptions.


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """One field of a generated class, as declared."""

    name: str
    static: bool
    spelling: str
    """Static: "field" (`tc.field(static=True)`), "static" (`tc.static()`), "annotation"
    (`tc.Static[T]`) or "annotation_str" (`'tc.Static[T]'`). Dynamic: "bare" (a plain
    annotation) or "field" (`tc.field()`)."""
    annotation: str
    default: str = "none"
    """"none", "value" or "factory"."""
    default_source: str = ""
    """The default value, or the factory, as source."""
    default_value: Any = None
    """What an omitted argument should give: the default, or what a static field's
    factory returns (a dynamic field's factory makes a new array each time)."""
    kw_only: bool | None = None
    """As passed to `field(kw_only=...)`; None: not passed (the class's setting)."""
    positional: bool = True
    """Resolved: the field is a positional parameter of `__init__`."""
    converter: bool = False
    trainable: bool = True
    """False: a dynamic field declared `tc.field(trainable=False)` (state)."""
    derived: bool = False
    """`init=False`, set by the class's `__post_init__`."""
    nested: "Generated | None" = dataclasses.field(default=None, repr=False)
    """For a dynamic field holding another generated treeclass: that class."""

    @property
    def init(self) -> bool:
        return not self.derived

    @property
    def has_default(self) -> bool:
        return self.default != "none"


@dataclasses.dataclass(frozen=True, eq=False)
class Generated:
    """A generated treeclass: the class object, the description it was built from, and
    its source. Its repr is the source of the class and every class it uses."""

    cls: type
    own_fields: tuple[FieldSpec, ...]
    parent: "Generated | None"
    kw_only: bool
    defines_post_init: bool
    source: str
    form: str = "decorator"
    """How the class is declared: "decorator" (`@tc.treeclass`) or "base" (a
    `tc.TreeClass` subclass; the subclass of a "base" class is one too)."""

    @property
    def name(self) -> str:
        return self.cls.__name__

    @property
    def fields(self) -> tuple[FieldSpec, ...]:
        """Every field in declaration order, the parents' first (as `dataclasses`)."""
        inherited = self.parent.fields if self.parent else ()
        return (*inherited, *self.own_fields)

    @property
    def has_post_init(self) -> bool:
        return self.defines_post_init or (self.parent is not None and self.parent.has_post_init)

    @property
    def post_init_calls(self) -> int:
        """How many `__post_init__` bodies one construction runs: each defining class
        calls its parent's through `super()`."""
        inherited = self.parent.post_init_calls if self.parent else 0
        return inherited + (1 if self.defines_post_init else 0)

    def field(self, name: str) -> FieldSpec:
        return next(f for f in self.fields if f.name == name)

    def all_sources(self) -> list[str]:
        """The sources this class needs (parents and nested classes first), once each."""
        deps: list[str] = []
        if self.parent:
            deps += self.parent.all_sources()
        for f in self.own_fields:
            if f.nested:
                deps += f.nested.all_sources()
        return [*dict.fromkeys(deps), self.source]

    def __repr__(self) -> str:
        return "\n\n".join(self.all_sources())

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis prints a failing example with this: the source, ready to paste.
        printer.text(f"\n{self!r}\n")


def _render_field(f: FieldSpec) -> str:
    value = f.default_source if f.default == "value" else None
    extras = []  # the options other than `default=`
    if f.derived:
        extras.append("init=False")
    if f.default == "factory":
        extras.append(f"default_factory={f.default_source}")
    if f.kw_only is not None:
        extras.append(f"kw_only={f.kw_only}")
    if f.converter:
        extras.append("converter=counting_converter")
    if not f.trainable:
        extras.append("trainable=False")
    options = ([f"default={value}"] if value is not None else []) + extras
    if f.spelling == "static":  # static() also takes its default positionally
        rhs = f"tc.static({', '.join(([value] if value is not None else []) + extras)})"
    elif f.spelling == "field":
        rhs = f"tc.field({', '.join((['static=True'] if f.static else []) + options)})"
    elif not extras:  # a bare or Static[T] annotation: `name: T = value` where it can
        rhs = value if value is not None else ""
    else:
        rhs = f"tc.field({', '.join(options)})"
    return f"{f.name}: {f.annotation}" + (f" = {rhs}" if rhs else "")


def _render_class(
    name: str,
    fields: tuple[FieldSpec, ...],
    parent: Generated | None,
    kw_only: bool,
    post_init: bool,
    classvar: bool,
    form: str = "decorator",
) -> str:
    if form == "decorator":
        lines = ["@tc.treeclass(kw_only=True)" if kw_only else "@tc.treeclass"]
        lines.append(f"class {name}({parent.name}):" if parent else f"class {name}:")
    else:
        bases = [parent.name] if parent else []
        if parent is None or parent.form != "base":
            bases.append("tc.TreeClass")
        if kw_only:
            bases.append("kw_only=True")
        lines = [f"class {name}({', '.join(bases)}):"]
    if classvar:
        lines.append("    tag: ClassVar[str] = 'not a field'")
    lines += [f"    {_render_field(f)}" for f in fields]
    if post_init:
        lines += ["", "    def __post_init__(self):", "        CALLS['post_init'] += 1"]
        if parent and parent.has_post_init:
            lines.append("        super().__post_init__()")
        for f in fields:
            if f.derived:
                value = "DERIVED_STATIC" if f.static else "DERIVED_ARRAY"
                lines.append(f"        object.__setattr__(self, {f.name!r}, {value})")
    if lines[-1].startswith("class "):
        lines.append("    pass")
    return "\n".join(lines)


_class_names = (f"Gen{i}" for i in itertools.count())


def _build(
    fields: tuple[FieldSpec, ...],
    parent: Generated | None,
    kw_only: bool,
    post_init: bool,
    classvar: bool,
    form: str = "decorator",
) -> Generated:
    name = next(_class_names)
    source = _render_class(name, fields, parent, kw_only, post_init, classvar, form)
    namespace: dict[str, Any] = {
        "__name__": __name__,  # string annotations are evaluated in this module
        "tc": tc,
        "jax": jax,
        "jnp": jnp,
        "Any": Any,
        "ClassVar": ClassVar,
        "CALLS": CALLS,
        "counting_converter": counting_converter,
        "DERIVED_ARRAY": DERIVED_ARRAY,
        "DERIVED_STATIC": DERIVED_STATIC,
    }
    if parent:
        namespace[parent.name] = parent.cls
    for f in fields:
        if f.nested:
            namespace[f.nested.name] = f.nested.cls
    exec(compile(source, f"<generated {name}>", "exec", dont_inherit=True), namespace)
    cls = namespace[name]
    _count_init_calls(cls)
    return Generated(cls, fields, parent, kw_only, post_init, source, form)


@st.composite
def _field_specs(draw: st.DrawFn, name: str, depth: int, allow_derived: bool) -> FieldSpec:
    static = draw(st.booleans())
    derived = allow_derived and draw(st.integers(0, 5)) == 0
    trainable = True
    if static:
        spelling = draw(st.sampled_from(("field", "static", "annotation", "annotation_str")))
        annotation = draw(st.sampled_from(("Any", "int", "tuple[int, ...]")))
        if spelling == "annotation":
            annotation = f"tc.Static[{annotation}]"
        elif spelling == "annotation_str":
            annotation = repr(f"tc.Static[{annotation}]")
        nested = None
    else:
        spelling = draw(st.sampled_from(("bare", "field")))
        trainable = draw(st.integers(0, 3)) != 0
        spelling = spelling if trainable else "field"  # trainable=False is a field() option
        nests = depth > 0 and not derived and draw(st.integers(0, 3)) == 0
        nested = draw(treeclasses(depth - 1, max_fields=3)) if nests else None
        if nested:
            annotation = draw(st.sampled_from((nested.name, repr(nested.name))))
        else:
            annotation = draw(st.sampled_from(("jax.Array", "Any", "'jax.Array'")))
    default, default_source, default_value = "none", "", None
    # A nested class gets no default: building one would run its hooks, and the counts
    # of the hooks would then depend on which defaults a construction used.
    if not derived and nested is None:
        default = draw(st.sampled_from(("none", "value", "factory")))
        if default == "value":
            default_value = draw(static_values if static else _DYNAMIC_DEFAULTS)
            default_source = repr(default_value)
        elif default == "factory" and static:
            default_value = draw(static_values)
            default_source = f"lambda: {default_value!r}"
        elif default == "factory":
            default_source = draw(_DYNAMIC_FACTORIES)
    return FieldSpec(
        name=name,
        static=static,
        spelling=spelling,
        annotation=annotation,
        default=default,
        default_source=default_source,
        default_value=default_value,
        kw_only=None if derived else draw(st.sampled_from((None, None, True, False))),
        converter=not static and not derived and draw(st.booleans()),
        trainable=static or trainable,
        derived=derived,
        nested=nested,
    )


@st.composite
def treeclasses(draw: st.DrawFn, depth: int = 2, max_fields: int = 6) -> Generated:
    """A freshly defined treeclass, as a `Generated`.

    `max_fields` own fields (each dynamic or static, in any of the spellings, with or
    without a default or `default_factory`, `kw_only` or not, with a counting converter
    or not, or `init=False` and derived in `__post_init__`); maybe a `ClassVar`; maybe a
    counting `__post_init__`. While `depth > 0`, a dynamic field may hold another
    generated treeclass, and the class may subclass a generated parent. Declared with
    `@tc.treeclass` or as a `tc.TreeClass` subclass, so every property covers both.
    """
    parent = (
        draw(treeclasses(depth - 1, max_fields=3))
        if depth > 0 and draw(st.integers(0, 2)) == 0
        else None
    )
    kw_only = draw(st.booleans())
    post_init = draw(st.booleans())
    level = 0
    ancestor = parent
    while ancestor:
        level, ancestor = level + 1, ancestor.parent
    n = draw(st.integers(0, max_fields))
    fields = []
    for i in range(n):
        private = draw(st.integers(0, 4)) == 0
        name = f"{'_' if private else ''}{'abcdefg'[level]}{i}"
        fields.append(draw(_field_specs(name, depth, allow_derived=post_init)))
    # dataclasses refuses a positional parameter without a default after one with a
    # default; make such a field keyword-only (after its parents' fields, in order).
    inherited = parent.fields if parent else ()
    seen_default = any(f.init and f.positional and f.has_default for f in inherited)
    resolved = []
    for f in fields:
        positional = f.init and not (f.kw_only if f.kw_only is not None else kw_only)
        if positional and not f.has_default and seen_default:
            spelling = "field" if f.spelling == "bare" else f.spelling  # bare: no kw_only
            f = dataclasses.replace(f, kw_only=True, spelling=spelling)
            positional = False
        seen_default = seen_default or (positional and f.has_default)
        resolved.append(dataclasses.replace(f, positional=positional))
    classvar = draw(st.integers(0, 3)) == 0
    # Both forms make the same class; a subclass of a base-form class is base-form.
    form = (
        "base" if parent and parent.form == "base" else draw(st.sampled_from(("decorator", "base")))
    )
    return _build(tuple(resolved), parent, kw_only, post_init, classvar, form)


# ---------------------------------------------------------------------------------------
# Instances.


def values_for(f: FieldSpec) -> st.SearchStrategy[Any]:
    """Values a user might pass for field `f` (to the constructor or `replace`)."""
    if f.static:
        return static_values
    if f.nested:
        return st.one_of(st.none(), instances(f.nested).map(lambda i: i.obj))
    if f.converter:  # a list, which the converter turns into a tuple
        return st.one_of(dynamic_values, st.lists(st.one_of(leaves, st.none()), max_size=2))
    return dynamic_values


@dataclasses.dataclass(frozen=True, eq=False)
class Construction:
    """A call `gen.cls(*args, **kwargs)`, not yet made."""

    gen: Generated
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    passed: dict[str, Any]
    """Every value passed, positionally or not, by field name."""

    def build(self) -> Any:
        return self.gen.cls(*self.args, **self.kwargs)

    def __repr__(self) -> str:
        call = ", ".join([*map(repr, self.args), *(f"{k}={v!r}" for k, v in self.kwargs.items())])
        return f"{self.gen!r}\n\n{self.gen.name}({call})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"\n{self!r}\n")

    @property
    def expected_calls(self) -> collections.Counter[str]:
        """One `__init__`, the chain of `__post_init__`s, and one converter call per
        field with a converter: converters run on defaults too."""
        converters = sum(1 for f in self.gen.fields if f.converter)
        return collections.Counter(init=1, post_init=self.gen.post_init_calls, convert=converters)


@st.composite
def constructions(draw: st.DrawFn, gen: Generated | None = None) -> Construction:
    """A constructor call for `gen` (drawn if not given): each field's value passed
    positionally, by keyword, or (where there is a default) not at all."""
    if gen is None:
        gen = draw(treeclasses())
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    passed: dict[str, Any] = {}
    positional_open = True
    params = [f for f in gen.fields if f.init]
    for f in sorted(params, key=lambda f: not f.positional):  # stable: declaration order
        if f.has_default and draw(st.booleans()):
            positional_open = False
            continue
        value = draw(values_for(f))
        passed[f.name] = value
        if f.positional and positional_open and draw(st.booleans()):
            args.append(value)
        else:
            kwargs[f.name] = value
            positional_open = False
    return Construction(gen, tuple(args), kwargs, passed)


@dataclasses.dataclass(frozen=True, eq=False)
class Instance:
    """An instance `obj` of the generated class `gen`."""

    gen: Generated
    obj: Any


def built(construction: Construction) -> Instance:
    """Makes the call `construction` describes."""
    return Instance(construction.gen, construction.build())


def instances(gen: Generated | None = None) -> st.SearchStrategy[Instance]:
    """An instance of a generated treeclass (`gen`, or a drawn one), built by calling
    the class: nested treeclass values are built the same way."""
    return constructions(gen).map(built)
