"""The generated `__init__`, or the wrapper of a hand-written `__init__` and its `_tc_finalize`.
No "Did you mean 'tau'?" for `Neuron(v, taux=1.0)`: catching the keyword slowed every
construction (benchmarks/RESULTS.md, "Design measurements"); Python 3.13 adds the hint."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any, cast

from treeclass._core.codegen import finish, static_check_line, subclass_check
from treeclass._core.layout import INIT, Layout


def finalize_source(layout: Layout) -> str:
    """`_tc_finalize(self)`, after a hand-written `__init__` (plain defaults are set already)."""
    lines = ["_tc_d = _tc_self.__dict__"]
    for f in layout.fields:
        n = f.name
        if f.default_factory is not dataclasses.MISSING:
            lines.append(f"if {n!r} not in _tc_d: _tc_d[{n!r}] = _tc_factory_{n}()")
        if n in layout.converters:
            lines.append(f"if {n!r} in _tc_d: _tc_d[{n!r}] = _tc_conv_{n}(_tc_d[{n!r}])")
    # An InitVar the __init__ assigned (`self.scale = ...`) goes to __post_init__.
    lines += [f"{f.name} = _tc_d.pop({f.name!r}, _tc_dflt_{f.name})" for f in layout.initvars]
    lines += finish(layout, "_tc_self", read_back=True)
    return "def _tc_finalize(_tc_self):\n" + "".join(f"    {line}\n" for line in lines)


def _param(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        return f"{f.name}=_tc_dflt_{f.name}"
    return f.name if f.default_factory is dataclasses.MISSING else f"{f.name}=_tc_FACTORY"


def init_source(layout: Layout) -> str:
    """The generated `__init__`; from a subclass's own `__init__` it only stores the values."""
    body = ["_tc_nested = _tc_type(_tc_self) is not _tc_cls and _tc_subclass_check(_tc_self)"]
    assigned: list[str] = []
    checked: list[str] = []  # converters and static checks: skipped when nested
    body += [
        f"if {f.name} is _tc_FACTORY: {f.name} = _tc_factory_{f.name}()"
        for f in layout.initvars
        if f.default_factory is not dataclasses.MISSING
    ]
    for f in layout.fields:
        has_factory = f.default_factory is not dataclasses.MISSING
        if f.init:
            if has_factory:
                body.append(f"if {f.name} is _tc_FACTORY: {f.name} = _tc_factory_{f.name}()")
        elif has_factory:
            body.append(f"{f.name} = _tc_factory_{f.name}()")
        elif f.default is not dataclasses.MISSING:
            body.append(f"{f.name} = _tc_dflt_{f.name}")
        elif layout.post_init:
            continue  # init=False without a default: __post_init__ must set it
        else:
            body.append(f"_tc_not_set({f.name!r})")
            continue
        if f.name in layout.converters:
            checked.append(f"{f.name} = _tc_conv_{f.name}({f.name})")
        if f.name in layout.static and not layout.post_init:  # else finish checks them
            skip_default = f.default is not dataclasses.MISSING and f.name not in layout.converters
            checked.append(static_check_line(f.name, skip_default=skip_default))
        assigned.append(f.name)
    if checked:
        body += ["if not _tc_nested:", *(f"    {line}" for line in checked)]
    body.append("_tc_d = _tc_self.__dict__")
    body.extend(f"_tc_d[{name!r}] = {name}" for name in assigned)
    body.append("if _tc_nested: return")
    body += finish(layout, "_tc_self", read_back=False)
    positional = [_param(f) for f in layout.params if not f.kw_only]
    keyword = [_param(f) for f in layout.params if f.kw_only]
    params = ", ".join(["_tc_self", *positional, *(["*", *keyword] if keyword else [])])
    return f"def __init__({params}):\n" + "".join(f"    {line}\n" for line in body)


def install(layout: Layout, ns: dict[str, Any]) -> Callable[..., None]:
    """The generated `__init__` from `ns`, or the hand-written one, wrapped."""
    if layout.user_init is not None:
        return _wrap_user_init(layout, layout.user_init, ns["_tc_finalize"])
    init: Any = ns["__init__"]
    # What `inspect.signature(Cls)` shows, as for a dataclass: `(v: jax.Array) -> None`.
    init.__annotations__ = {f.name: _resolved(layout.cls, f) for f in layout.params} | {
        "return": None
    }
    return cast("Callable[..., None]", init)


def _resolved(cls: type, f: dataclasses.Field[Any]) -> Any:
    """`f.type`, a string evaluated in its class's module (for jaxtyping, beartype), else as is."""
    if not isinstance(f.type, str):
        return f.type
    owner = next((k for k in cls.__mro__ if f.name in inspect.get_annotations(k)), cls)
    module = sys.modules.get(owner.__module__)
    try:
        return eval(f.type, vars(module) if module else {})  # noqa: S307 - the class's annotation
    except Exception:  # noqa: BLE001 - a name defined later, a syntax error: left as written
        return f.type


def _wrap_user_init(
    layout: Layout, user_init: Callable[..., None], finalize: Callable[[Any], None]
) -> Callable[..., None]:
    """The hand-written `__init__`, run with this instance (only) open to `self.w = ...`."""
    cls, post_init = layout.cls, layout.post_init
    names = frozenset((*layout.names, *(f.name for f in layout.initvars)))
    # The plain defaults, which `__init__` may read (as dataclasses' class attributes).
    start = {INIT: names} | {
        f.name: f.default for f in layout.fields if f.default is not dataclasses.MISSING
    }
    initvars = tuple(f.name for f in layout.initvars)

    @functools.wraps(user_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        d = self.__dict__
        if INIT in d:  # super().__init__(...) inside a subclass's own __init__
            user_init(self, *args, **kwargs)
            return
        if type(self) is not cls:
            subclass_check(self)
        d |= start  # `|=`, not d.update(): no method call, 40 ns less
        if post_init:
            # `self.__post_init__()` in `__init__` waits for the end (once, after the
            # converters): an instance attribute hides the method; its InitVars are kept.
            d["__post_init__"] = lambda *a, **kw: d.update(zip(initvars, a, strict=False), **kw)
        try:
            user_init(self, *args, **kwargs)
        finally:
            del d[INIT]
            if post_init:
                d.pop("__post_init__", None)
        finalize(self)

    return __init__
