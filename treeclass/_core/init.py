"""The generated `__init__`: the user-facing construction path.

It is the only place (with `replace`) where converters, `__post_init__` and the static
checks run. JAX never calls it: unflatten (`flatten.py`) fills the instance directly.

For a class

    @tc.treeclass
    class Neuron:
        v: jax.Array
        tau: float = tc.static(default=20.0)

it generates (see `inspect.getsource(Neuron.__init__)`):

    def __init__(_tc_self, v, tau=_tc_dflt_tau):
        if _tc_type(_tc_self) is not _tc_cls: _tc_subclass_check(_tc_self)
        if _tc_type(tau) not in _tc_TRUSTED and tau is not _tc_dflt_tau: _tc_check(_tc_cls, 'tau', tau)
        _tc_d = _tc_self.__dict__
        _tc_d['v'] = v
        _tc_d['tau'] = tau
        _tc_d['__tc_flat__'] = ((v, ), (tau, ))

Writing `__dict__` directly rather than `object.__setattr__` per field (what a frozen
dataclass does) is what makes construction cheap.

Why no "Did you mean 'tau'?" for `Neuron(v, taux=1.0)`, as `replace()` gives? Python
rejects the keyword while binding the arguments, before any of our code runs, and no
frame of ours is there to catch it without a metaclass or a wrapper call on every
construction. Catching it ourselves (every parameter defaulting to a sentinel, plus
`**_tc_unknown`) made every construction measurably slower (benchmarks/RESULTS.md,
"Design measurements"); Python 3.13 adds the hint itself at no cost.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, cast

from treeclass._core import checks
from treeclass._core.codegen import field_annotations, flat_expr, static_check_line
from treeclass._core.layout import FLAT, Layout, layout_of

__all__ = ["finalize_source", "helpers", "init_source", "install"]


def _subclass_check(self: object) -> None:
    cls = type(self)
    if layout_of(cls) is None:
        base = next(c for c in cls.__mro__ if layout_of(c) is not None)
        msg = checks.MSG_UNDECORATED_SUBCLASS.format(sub=cls.__name__, base=base.__name__)
        raise TypeError(msg)


def _not_set(layout: Layout, name: str) -> None:
    template = checks.MSG_NOT_SET if layout.user_init is None else checks.MSG_NOT_SET_BY_INIT
    raise TypeError(template.format(cls=layout.cls.__name__, name=name))


def _complete(layout: Layout, self: object) -> None:
    """After a hand-written `__init__`: run the converters on the values it set, and
    give the fields it left unset their defaults (equinox does the same)."""
    d = self.__dict__
    for f in layout.fields:
        if f.name not in d:
            if f.default is not dataclasses.MISSING:
                d[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                d[f.name] = f.default_factory()
            else:
                continue  # finalize names it
        if f.name in layout.converters:
            d[f.name] = layout.converters[f.name](d[f.name])


def helpers(layout: Layout) -> dict[str, Any]:
    """The functions the generated `__init__` and `_tc_finalize` call."""
    return {
        "_tc_subclass_check": _subclass_check,
        "_tc_not_set": functools.partial(_not_set, layout),
    }


def finalize_source(layout: Layout) -> str:
    """`_tc_finalize(self)`: checks the statics and caches the flat form by reading the
    fields back. Used after user code (`__post_init__`, a hand-written `__init__`) may
    have set fields with `object.__setattr__`."""
    lines = ["def _tc_finalize(_tc_self):", "    _tc_d = _tc_self.__dict__"]
    for name in layout.static:
        lines.append(f"    {name} = _tc_d.get({name!r}, _tc_MISSING)")
        lines.append(f"    if {name} is not _tc_MISSING:")
        lines.append(f"        {static_check_line(name, skip_default=False)}")
    lines.append("    try:")
    lines.append(f"        _tc_d[{FLAT!r}] = {flat_expr(layout, lambda n: f'_tc_d[{n!r}]')}")
    lines.append("    except _tc_KeyError as _tc_e:")
    lines.append("        _tc_not_set(_tc_e.args[0])")
    return "".join(f"{line}\n" for line in lines)


def _parameters(layout: Layout) -> list[dataclasses.Field[Any]]:
    """The `__init__` parameters in declaration order, InitVars included."""
    real = {f.name for f in layout.fields}
    # Checkers do not know `__dataclass_fields__` (set by dataclasses at runtime); it
    # holds the InitVar pseudo-fields that `dataclasses.fields()` leaves out.
    all_fields = cast("dict[str, dataclasses.Field[Any]]", vars(layout.cls)["__dataclass_fields__"])
    return [f for f in all_fields.values() if f.init and (f.name in real or f in layout.initvars)]


def _param_list(params: list[dataclasses.Field[Any]]) -> str:
    def param(f: dataclasses.Field[Any]) -> str:
        if f.default is not dataclasses.MISSING:
            return f"{f.name}=_tc_dflt_{f.name}"
        if f.default_factory is not dataclasses.MISSING:
            return f"{f.name}=_tc_FACTORY"
        return f.name

    positional = [param(f) for f in params if not f.kw_only]
    keyword = [param(f) for f in params if f.kw_only]
    return ", ".join(["_tc_self", *positional, *(["*", *keyword] if keyword else [])])


def init_source(layout: Layout) -> str:
    """The generated `__init__`."""
    body = ["if _tc_type(_tc_self) is not _tc_cls: _tc_subclass_check(_tc_self)"]
    assigned: list[str] = []
    for f in (*layout.fields, *layout.initvars):
        has_factory = f.default_factory is not dataclasses.MISSING
        if f.init:
            if has_factory:
                body.append(f"if {f.name} is _tc_FACTORY: {f.name} = _tc_factory_{f.name}()")
        elif f in layout.initvars:
            continue
        elif has_factory:
            body.append(f"{f.name} = _tc_factory_{f.name}()")
        elif f.default is not dataclasses.MISSING:
            body.append(f"{f.name} = _tc_dflt_{f.name}")
        else:
            continue  # init=False without a default: __post_init__ must set it
        if f in layout.initvars:
            continue
        if f.name in layout.converters:
            body.append(f"{f.name} = _tc_conv_{f.name}({f.name})")
        if layout.init_sets_every_field and f.name in layout.static:
            skip_default = f.default is not dataclasses.MISSING and f.name not in layout.converters
            body.append(static_check_line(f.name, skip_default=skip_default))
        assigned.append(f.name)
    body.append("_tc_d = _tc_self.__dict__")
    body.extend(f"_tc_d[{name!r}] = {name}" for name in assigned)
    if layout.init_sets_every_field:
        body.append(f"_tc_d[{FLAT!r}] = {flat_expr(layout, lambda n: n)}")
    else:
        if layout.post_init:
            args = ", ".join(f.name for f in layout.initvars)
            body.append(f"_tc_self.__post_init__({args})")
        body.append("_tc_finalize(_tc_self)")
    return f"def __init__({_param_list(_parameters(layout))}):\n" + "".join(f"    {line}\n" for line in body)


def install(layout: Layout, ns: dict[str, Any]) -> Callable[..., None]:
    """The class's `__init__`: the generated one from `ns`, or the hand-written one
    wrapped so that defaults, converters, checks and the flatten cache follow it."""
    if layout.user_init is not None:
        return _wrap_user_init(layout, layout.user_init, ns["_tc_finalize"])
    init: Any = ns["__init__"]
    # What `inspect.signature(Cls)` shows, as for a dataclass: `(v: jax.Array) -> None`.
    init.__annotations__ = {**field_annotations(_parameters(layout)), "return": None}
    return cast("Callable[..., None]", init)


def _wrap_user_init(
    layout: Layout, user_init: Callable[..., None], finalize: Callable[[Any], None]
) -> Callable[..., None]:
    # A hand-written __init__ sets fields with object.__setattr__ in any order; the
    # defaults, converters, checks and the flatten cache come after it, once it is done.
    @functools.wraps(user_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        user_init(self, *args, **kwargs)
        _complete(layout, self)
        finalize(self)

    return __init__
