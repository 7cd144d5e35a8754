"""`replace()`, generated with one keyword per field: converters and checks run on changed
values only; a hand-written `__init__` is not run again (it may take other arguments). A dict
merge was measured slower for small classes (benchmarks/RESULTS.md, "Design measurements")."""

import dataclasses
import functools
import inspect
from typing import Any, Final, TypeVar

from treeclass._core.codegen import UNCHANGED, finish, static_check_line, store
from treeclass._core.layout import Layout, instance_layout

_T = TypeVar("_T")

# dataclasses.replace() refuses every init=False field; here only the silent case is
# refused: a value that __post_init__ then overwrites (`C(1.0).replace(y=5.0).y == 2.0`).
_MSG_OVERWRITTEN: Final = (
    "{cls}.{name} is an init=False field that __post_init__ sets, so {cls}.replace({name}=...) "
    "would be overwritten. Change the fields it is derived from instead."
)
_MSG_INITVAR: Final = (
    "InitVar {name!r} has no default, so {cls}.replace() needs it: "
    "obj.replace({name}=...). __post_init__ runs on every replace."
)


def source(layout: Layout) -> str:
    names = [*layout.names, *(f.name for f in layout.initvars)]
    keyword = [f"{n}=_tc_UNCHANGED" for n in names]
    params = ", ".join(["_tc_self", "/", *(["*", *keyword] if keyword else []), "**_tc_unknown"])
    body = [f"if _tc_unknown: raise _tc_unknown_field_error(_tc_cls, _tc_unknown, {names!r})"]
    if layout.user_init is None:
        # A decorator wrapped around `__init__` after the class was made (`@beartype`,
        # `@jaxtyped(typechecker=...)`) checks what `__init__` gets: replace goes through it.
        passed = ", ".join(f"{n!r}: {n}" for n in names)
        through = f"return _tc_through_init(_tc_self, {{{passed}}})"
        body.append(f"if _tc_cls.__init__ is not _tc_own_init: {through}")
    derived = [f.name for f in layout.fields if not f.init] if layout.post_init else []
    body.extend(f"_tc_passed_{name} = {name} is not _tc_UNCHANGED" for name in derived)
    for name in layout.names:
        body.append(f"if {name} is _tc_UNCHANGED: {name} = _tc_self.{name}")
        on_change: list[str] = []
        if name in layout.converters:
            on_change.append(f"{name} = _tc_conv_{name}({name})")
        if name in layout.static and not layout.post_init:  # else finish checks them
            on_change.append(static_check_line(name, skip_default=False))
        if on_change:
            body += ["else:", *(f"    {line}" for line in on_change)]
        if name in derived:  # finish() reads the fields back into these locals
            body.append(f"_tc_given_{name} = {name}")
    for f in layout.initvars:
        if f.default is not dataclasses.MISSING:
            body.append(f"if {f.name} is _tc_UNCHANGED: {f.name} = _tc_dflt_{f.name}")
        else:
            msg = _MSG_INITVAR.format(cls=layout.cls.__name__, name=f.name)
            body.append(f"if {f.name} is _tc_UNCHANGED: raise _tc_ValueError({msg!r})")
    body += [
        "_tc_new = _tc_object_new(_tc_cls)",
        store("_tc_new", layout.names),
        *finish(layout, "_tc_new", read_back=False),
    ]
    for name in derived:
        msg = _MSG_OVERWRITTEN.format(cls=layout.cls.__name__, name=name)
        overwritten = f"_tc_passed_{name} and {name} is not _tc_given_{name}"
        body.append(f"if {overwritten}: raise _tc_ValueError({msg!r})")
    body.append("return _tc_new")
    return f"def replace({params}):\n" + "".join(f"    {line}\n" for line in body)


_MSG_THROUGH_INIT_FIELD: Final = (
    "{cls}.{name} is an init=False field, and {cls}.__init__ is wrapped (by a checker such as "
    "beartype or jaxtyping), so {cls}.replace() builds the copy through it, as "
    "dataclasses.replace() does: __init__ takes no {name}. Change the fields it is derived from."
)


def through_init(layout: Layout, obj: Any, passed: dict[str, Any]) -> Any:
    """`replace()` as `dataclasses.replace()` builds it, by calling the class, for a class whose
    `__init__` a decorator wrapped after it was made: the wrapper's checks run on every field."""
    for f in layout.fields:
        if not f.init and passed[f.name] is not UNCHANGED:
            raise ValueError(_MSG_THROUGH_INIT_FIELD.format(cls=layout.cls.__name__, name=f.name))
    kwargs: dict[str, Any] = {}
    for f in layout.params:
        value = passed[f.name]
        if value is not UNCHANGED:
            kwargs[f.name] = value
        elif f in layout.fields:
            kwargs[f.name] = getattr(obj, f.name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(_MSG_INITVAR.format(cls=layout.cls.__name__, name=f.name))
    return layout.cls(**kwargs)


def install(layout: Layout, ns: dict[str, Any]) -> Any:
    """The generated `replace` from `ns`, with its docstring and signature."""
    fn = ns["replace"]
    ns["_tc_through_init"] = functools.partial(through_init, layout)
    fn.__doc__ = _REPLACE_DOC.format(cls=layout.cls.__name__, names=", ".join(layout.names))
    fn.__annotations__ = {f.name: f.type for f in (*layout.fields, *layout.initvars)}
    # Shown: `self` first (unless a field takes that name), without `**_tc_unknown`.
    sig = inspect.signature(fn)
    first, *rest = list(sig.parameters.values())[:-1]
    if all(p.name != "self" for p in rest):
        first = first.replace(name="self")
    fn.__signature__ = sig.replace(parameters=[first, *rest])
    return fn


_REPLACE_DOC = """Returns a new {cls} with the given fields changed; the others are shared.

Fields: {names}. Converters and static checks run on the changed values, then
`__post_init__` if the class has one (also when the class writes its own `__init__`,
which is not run again)."""


def replace(obj: _T, /, **changes: Any) -> _T:
    """Returns a copy of `obj` with `changes`, as `obj.replace(**changes)` and `copy.replace` do.

    **Arguments**

    - `obj`: a treeclass instance.
    - `**changes`: new values for fields (static ones too), by name.

    **Returns**

    A new instance of `type(obj)`, unchanged fields shared. Converters run on the changed
    values, then `__post_init__` (not a hand-written `__init__`): derived fields follow.

    **Raises**

    `TypeError` for a name that is not a field (naming the closest) or a non-treeclass
    `obj`; whatever a converter, static check or `__post_init__` raises on the new values.

    **Example**

    >>> @tc.treeclass
    ... class Counter:
    ...     count: jax.Array
    ...     step: int = tc.static(default=1)
    >>> c = Counter(jnp.array(0))
    >>> int(tc.replace(c, count=c.count + 1).count), int(c.count)
    (1, 0)
    >>> tc.replace(c, cuont=1)
    Traceback (most recent call last):
    TypeError: Counter.replace() got an unexpected field 'cuont'. Did you mean 'count'?
    Valid fields: count, step.
    """
    if instance_layout(obj) is None:
        msg = (
            f"treeclass.replace() takes a treeclass instance; got {type(obj).__name__}. "
            "For another dataclass use dataclasses.replace()."
        )
        raise TypeError(msg)
    # The class's own generated method (checkers cannot see it on `_T`).
    new: _T = vars(type(obj))["replace"](obj, **changes)
    return new
