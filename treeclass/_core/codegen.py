"""Each class's generated sources, compiled once in one namespace under one `linecache` name.
The code reaches everything through `_tc_` names, so a field may be called `type` or `self`.

Every construction (`__init__`, `replace`, unflatten, a hand-written `__init__`'s end) gives the
instance its store in one step: a new dict of the fields, set as its `__dict__` (`store()`).
Writing the fields one by one into the instance's own `__dict__` would be cheaper, but on
Python 3.11 and 3.12 it turns the instance's inline values into a dict that CPython's fast
attribute read cannot use (every later `obj.w` 3-5x slower); `object.__setattr__` per field keeps
the read fast but doubles construction. A new dict, set as `__dict__` in one
`object.__setattr__`, keeps both (benchmarks/RESULTS.md, "Design measurements")."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import linecache
import types
from collections.abc import Callable
from typing import Any, Final

from treeclass._core import checks
from treeclass._core.fields import Sentinel
from treeclass._core.layout import BUILDING, Layout, layout_of

FACTORY: Final = Sentinel("<factory>")  # `__init__`'s default: call the default_factory
UNCHANGED: Final = Sentinel("<unchanged>")  # `replace()`'s default: keep the current value

# A counter per qualname keeps apart the linecache entries of two classes with one qualname.
_counters: dict[str, itertools.count[int]] = {}


def subclass_check(self: object) -> bool:
    """Refuses an undecorated subclass; True while a subclass's own `__init__` runs."""
    cls = type(self)
    if layout_of(cls) is None:
        base = next(c for c in cls.__mro__ if layout_of(c) is not None)
        msg = checks.MSG_UNDECORATED_SUBCLASS.format(sub=cls.__name__, base=base.__name__)
        raise TypeError(msg)
    return id(self) in BUILDING


def _not_set(layout: Layout, name: str) -> None:
    template = checks.MSG_NOT_SET if layout.user_init is None else checks.MSG_NOT_SET_BY_INIT
    raise TypeError(template.format(cls=layout.cls.__name__, name=name))


_MSG_DELETED: Final = """\
{cls}.{name} is not set: it was deleted from the instance's __dict__, so JAX, ==, hash and
repr find it missing too. Build a changed copy instead of changing the instance:

    obj = obj.replace({name}=...)"""


def deleted(layout: Layout, obj: object, error: AttributeError) -> None:
    """Raises for a field deleted from a built instance (`object.__delattr__`,
    `del vars(obj)[name]`), which every reader of the store then misses."""
    if error.obj is not obj or error.name not in layout.names:
        raise error  # raised by another attribute's code (a property): not ours to explain
    msg = _MSG_DELETED.format(cls=layout.cls.__name__, name=error.name)
    raise AttributeError(msg, name=error.name, obj=obj) from None


def compile_class(layout: Layout, sources: list[str]) -> dict[str, Any]:
    """Compiles `sources` in one namespace (returned) holding all they call."""
    source = "\n".join(sources)
    base = f"{layout.cls.__module__}.{layout.cls.__qualname__}"
    n = next(_counters.setdefault(base, itertools.count(1)))
    filename = f"<treeclass {base}>" if n == 1 else f"<treeclass {base}-{n}>"
    code = compile(source, filename, "exec")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns: dict[str, Any] = {
        "_tc_cls": layout.cls,
        "_tc_FACTORY": FACTORY,
        "_tc_UNCHANGED": UNCHANGED,
        "_tc_TRUSTED": checks.TRUSTED_STATIC_TYPES,
        "_tc_check": checks.check_static,
        "_tc_type": type,
        "_tc_AttributeError": AttributeError,
        "_tc_KeyError": KeyError,
        "_tc_object_new": object.__new__,
        "_tc_set": object.__setattr__,
        "_tc_setdict": dict_setter(layout.cls),
        "_tc_ValueError": ValueError,
        "_tc_subclass_check": subclass_check,
        "_tc_not_set": functools.partial(_not_set, layout),
        "_tc_deleted": functools.partial(deleted, layout),
        "_tc_unknown_field_error": checks.unknown_field_error,
    }
    for f in (*layout.fields, *layout.initvars):
        ns[f"_tc_dflt_{f.name}"] = f.default
        ns[f"_tc_factory_{f.name}"] = f.default_factory
    ns.update({f"_tc_conv_{name}": conv for name, conv in layout.converters.items()})
    ns.update({f"_tc_check_init_{i}": check for i, check in enumerate(layout.check_inits)})
    exec(code, ns)  # noqa: S102 - our own generated source, shown above
    for value in ns.values():
        if getattr(value, "__code__", None) is not None and value.__code__.co_filename == filename:
            value.__qualname__ = f"{layout.cls.__qualname__}.{value.__name__}"
            value.__module__ = layout.cls.__module__
    return ns


def fields_dict(names: tuple[str, ...] | list[str]) -> str:
    """Source of the dict of the locals `names`, by name: an instance's store."""
    return f"{{{', '.join(f'{n!r}: {n}' for n in names)}}}"


def store(obj: str, names: tuple[str, ...] | list[str]) -> str:
    """The one line that gives `obj` its store: the locals `names`, as its new `__dict__`."""
    return f"_tc_set({obj}, '__dict__', {fields_dict(names)})"


def dict_setter(cls: type) -> Callable[[object, dict[str, Any]], None]:
    """What `obj.__dict__ = d` calls, without the class's refusing `__setattr__`."""
    # The first class of the MRO that gave instances a `__dict__` holds its descriptor.
    slot = next(
        attr
        for k in cls.__mro__
        if isinstance(attr := vars(k).get("__dict__"), types.GetSetDescriptorType)
    )
    setter: Callable[[object, dict[str, Any]], None] = slot.__set__
    return setter


def finish(layout: Layout, obj: str, *, read_back: bool) -> list[str]:
    """The end of every construction as source: `__post_init__`, then the fields it may have
    set read back (one not set is an error naming it) and the statics checked, then
    `__check_init__`. `read_back`: any field without a default may be unset yet."""
    lines: list[str] = []
    if layout.post_init:
        lines.append(f"{obj}.__post_init__({', '.join(f.name for f in layout.initvars)})")
    if read_back or layout.post_init:
        read = [
            f.name
            for f in layout.fields
            if f.name in layout.static
            or not f.init
            or (read_back and f.default is f.default_factory is dataclasses.MISSING)
        ]
        if read:
            values = ", ".join(f"{obj}.{n}" for n in read)
            lines += [
                f"try: {', '.join(read)}, = {values},",
                "except _tc_AttributeError as _tc_e: _tc_not_set(_tc_e.name)",
            ]
        lines.extend(static_check_line(name, skip_default=False) for name in layout.static)
    # `__check_init__`s run on the finished instance (it may flatten it); never in unflatten.
    lines.extend(f"_tc_check_init_{i}({obj})" for i in range(len(layout.check_inits)))
    return lines


def static_check_line(name: str, *, skip_default: bool) -> str:
    """Source that checks the static local `name`; trusted types skip the call."""
    cond = f"_tc_type({name}) not in _tc_TRUSTED"
    if skip_default:  # the default was checked once, when the class was decorated
        cond += f" and {name} is not _tc_dflt_{name}"
    return f"if {cond}: _tc_check(_tc_cls, {name!r}, {name})"
