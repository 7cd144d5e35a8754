"""The generated `__init__`, or the wrapper of a hand-written `__init__` and its `_tc_finalize`.
No "Did you mean 'tau'?" for `Neuron(v, taux=1.0)`: catching the keyword slowed every
construction (benchmarks/RESULTS.md, "Design measurements"); Python 3.13 adds the hint."""

import dataclasses
import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any, cast

from treeclass._core.codegen import finish, static_check_line, store, subclass_check
from treeclass._core.layout import BUILDING, Layout


def finalize_source(layout: Layout) -> str:
    """`_tc_finalize(self)`, after a hand-written `__init__`: each field as it set it, else its
    default or the factory's, converted, in a new dict that becomes the instance's store."""
    # `__init__` wrote into the instance's own `__dict__` (`_setattr`): read it once, by key.
    lines = ["_tc_od = _tc_self.__dict__", "_tc_d = {}"]
    for f in layout.fields:
        n = f.name
        if f.default is not dataclasses.MISSING:
            lines.append(f"_tc_d[{n!r}] = _tc_od[{n!r}] if {n!r} in _tc_od else _tc_dflt_{n}")
            continue
        if f.default_factory is not dataclasses.MISSING:
            unset = f"_tc_d[{n!r}] = _tc_factory_{n}()"
        else:  # __post_init__ may set it yet; finish() reads every field back
            unset = "pass" if layout.post_init else f"_tc_not_set({n!r})"
        lines += [f"try: _tc_d[{n!r}] = _tc_od[{n!r}]", f"except _tc_KeyError: {unset}"]
    lines += [
        f"if {n!r} in _tc_d: _tc_d[{n!r}] = _tc_conv_{n}(_tc_d[{n!r}])" for n in layout.converters
    ]
    # An InitVar the __init__ assigned (`self.scale = ...`) goes to __post_init__, else its
    # default; the new store drops it.
    lines += [f"{f.name} = _tc_od.get({f.name!r}, _tc_dflt_{f.name})" for f in layout.initvars]
    lines += ["_tc_set(_tc_self, '__dict__', _tc_d)", *finish(layout, "_tc_self", read_back=True)]
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
    # Inside a subclass's own `__init__` (`super().__init__(...)`): stored one by one, beside
    # what that `__init__` set; its end builds the store.
    body += [
        "if _tc_nested:",
        *(f"    _tc_set(_tc_self, {n!r}, {n})" for n in assigned),
        "    return",
    ]
    body += [store("_tc_self", assigned), *finish(layout, "_tc_self", read_back=False)]
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
    initvars = tuple(f.name for f in layout.initvars)

    @functools.wraps(user_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        key = id(self)
        if key in BUILDING:  # super().__init__(...) inside a subclass's own __init__
            user_init(self, *args, **kwargs)
            return
        if type(self) is not cls:
            subclass_check(self)
        BUILDING[key] = names
        if post_init:
            # `self.__post_init__()` in `__init__` waits for the end (once, after the
            # converters): an instance attribute hides the method; its InitVars are kept.
            def wait(*a: Any, **kw: Any) -> None:
                for name, value in (*zip(initvars, a, strict=False), *kw.items()):
                    object.__setattr__(self, name, value)

            object.__setattr__(self, "__post_init__", wait)
        try:
            user_init(self, *args, **kwargs)
        finally:
            del BUILDING[key]
        finalize(self)  # its new store drops the waiting `__post_init__`

    return __init__
