"""The generated `__init__`: the user-facing construction path.

It is the only place (with `replace`) where converters, `__post_init__` and the static
checks run. JAX never calls it: unflatten (`_flatten.py`) fills the instance directly.

For a class

    @tc.treeclass
    class Neuron:
        v: jax.Array
        tau: float = tc.static(20.0)

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
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, cast

from treeclass import _checks
from treeclass._layout import FLAT, LAYOUT, Layout, compile_function, flat_expr

_FACTORY = object()  # the parameter default that means "call the default_factory"


def _subclass_check(self: object) -> None:
    cls = type(self)
    if LAYOUT not in cls.__dict__:
        base = next(c for c in cls.__mro__ if LAYOUT in c.__dict__)
        msg = _checks.MSG_UNDECORATED_SUBCLASS.format(sub=cls.__name__, base=base.__name__)
        raise TypeError(msg)


def _not_set(cls: type, name: str) -> None:
    raise TypeError(_checks.MSG_NOT_SET.format(cls=cls.__name__, name=name))


def namespace(layout: Layout) -> dict[str, Any]:
    """The globals shared by the generated `__init__`, finalize and `replace`."""
    ns: dict[str, Any] = {
        "_tc_cls": layout.cls,
        "_tc_FACTORY": _FACTORY,
        "_tc_TRUSTED": _checks.TRUSTED_STATIC_TYPES,
        "_tc_check": _checks.check_static,
        "_tc_subclass_check": _subclass_check,
        "_tc_not_set": _not_set,
        "_tc_MISSING": dataclasses.MISSING,
        "_tc_type": type,
        "_tc_KeyError": KeyError,
    }
    for f in (*layout.fields, *layout.initvars):
        ns[f"_tc_dflt_{f.name}"] = f.default
        ns[f"_tc_factory_{f.name}"] = f.default_factory
    for name, conv in layout.converters.items():
        ns[f"_tc_conv_{name}"] = conv
    return ns


def static_check_line(name: str, *, skip_default: bool) -> str:
    # Builtins are reached through _tc_ names: a field may be called `type`.
    cond = f"_tc_type({name}) not in _tc_TRUSTED"
    if skip_default:
        # The default was checked once, when the class was decorated.
        cond += f" and {name} is not _tc_dflt_{name}"
    return f"if {cond}: _tc_check(_tc_cls, {name!r}, {name})"


def make_finalize(layout: Layout, ns: dict[str, Any]) -> Callable[[Any], None]:
    """Generates `_tc_finalize(self)`: checks the statics and caches the flat form by
    reading the fields back. Used after user code (`__post_init__`, a hand-written
    `__init__`) may have set fields with `object.__setattr__`."""
    lines = ["def _tc_finalize(_tc_self):", "    _tc_d = _tc_self.__dict__"]
    for name in layout.static:
        lines.append(f"    {name} = _tc_d.get({name!r}, _tc_MISSING)")
        lines.append(f"    if {name} is not _tc_MISSING:")
        lines.append(f"        {static_check_line(name, skip_default=False)}")
    lines.append("    try:")
    lines.append(f"        _tc_d[{FLAT!r}] = {flat_expr(layout, lambda n: f'_tc_d[{n!r}]')}")
    lines.append("    except _tc_KeyError as _tc_e:")
    lines.append("        _tc_not_set(_tc_cls, _tc_e.args[0])")
    return compile_function("\n".join(lines) + "\n", "_tc_finalize", layout.cls, ns)  # type: ignore[no-any-return]


def _params(layout: Layout) -> str:
    real = {f.name for f in layout.fields}
    # Checkers do not know `__dataclass_fields__` (set by dataclasses at runtime); it
    # holds the InitVar pseudo-fields that `dataclasses.fields()` leaves out.
    all_fields = cast("dict[str, dataclasses.Field[Any]]", layout.cls.__dataclass_fields__)  # type: ignore[attr-defined]
    declared = [
        f
        for f in all_fields.values()
        if f.init and (f.name in real or f in layout.initvars)
    ]

    def param(f: dataclasses.Field[Any]) -> str:
        if f.default is not dataclasses.MISSING:
            return f"{f.name}=_tc_dflt_{f.name}"
        if f.default_factory is not dataclasses.MISSING:
            return f"{f.name}=_tc_FACTORY"
        return f.name

    positional = [param(f) for f in declared if not f.kw_only]
    keyword = [param(f) for f in declared if f.kw_only]
    return ", ".join(["_tc_self", *positional, *(["*", *keyword] if keyword else [])])


def make_init(layout: Layout, ns: dict[str, Any]) -> Callable[..., None]:
    if layout.user_init is not None:
        return _wrap_user_init(layout.user_init, ns["_tc_finalize"])
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
        if layout.simple and f.name in layout.static:
            skip_default = f.default is not dataclasses.MISSING and f.name not in layout.converters
            body.append(static_check_line(f.name, skip_default=skip_default))
        assigned.append(f.name)
    body.append("_tc_d = _tc_self.__dict__")
    body.extend(f"_tc_d[{name!r}] = {name}" for name in assigned)
    if layout.simple:
        body.append(f"_tc_d[{FLAT!r}] = {flat_expr(layout, lambda n: n)}")
    else:
        if layout.post_init:
            args = ", ".join(f.name for f in layout.initvars)
            body.append(f"_tc_self.__post_init__({args})")
        body.append("_tc_finalize(_tc_self)")
    source = f"def __init__({_params(layout)}):\n" + "".join(f"    {line}\n" for line in body)
    return compile_function(source, "__init__", layout.cls, ns)  # type: ignore[no-any-return]


def _wrap_user_init(
    user_init: Callable[..., None], finalize: Callable[[Any], None]
) -> Callable[..., None]:
    # A hand-written __init__ sets fields with object.__setattr__ in any order; the
    # checks and the flatten cache come after it, once every field is set.
    @functools.wraps(user_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        user_init(self, *args, **kwargs)
        finalize(self)

    return __init__
