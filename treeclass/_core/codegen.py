"""The seam for the generated class code: sentinels, the namespace, compiling, linecache.

Each class gets one generated "module": the source of its `__init__` (`init.py`),
`replace` (`replace.py`) and unflatten (`flatten.py`), concatenated, compiled once
under one `linecache` filename, and executed in one namespace built here, once, from
the layout. Generated code reaches everything (builtins included) through `_tc_`
names, which no field may take, so a field may be called `type`, `object` or `self`.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import linecache
from collections.abc import Mapping
from typing import Any, Final

from treeclass._core import checks
from treeclass._core.layout import FLAT, Layout

__all__ = ["FACTORY", "UNCHANGED", "Sentinel", "compile_class", "field_annotations",
           "finish", "namespace", "static_check_line", "with_self"]


class Sentinel:
    """A parameter default that stands for "not passed". Its repr is what
    `inspect.signature` shows, so it reads like the dataclass's `<factory>`."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


FACTORY: Final = Sentinel("<factory>")
"""`__init__`'s default for a field with a `default_factory`: call the factory."""
UNCHANGED: Final = Sentinel("<unchanged>")
"""`replace()`'s default for every field: keep the current value."""

# A class defined in a function called twice has one qualname for two classes; a
# counter per qualname keeps their linecache entries (and so getsource) apart.
_counters: dict[str, itertools.count[int]] = {}


def _filename(cls: type) -> str:
    base = f"{cls.__module__}.{cls.__qualname__}"
    n = next(_counters.setdefault(base, itertools.count(1)))
    return f"<treeclass {base}>" if n == 1 else f"<treeclass {base}-{n}>"


def namespace(layout: Layout, helpers: Mapping[str, Any]) -> dict[str, Any]:
    """The globals of one class's generated code: the class, sentinels, checks,
    builtins under `_tc_` names, each field's default, factory and converter, and the
    `helpers` that `_init`/`_replace` pass in."""
    ns: dict[str, Any] = {
        "_tc_cls": layout.cls,
        "_tc_FACTORY": FACTORY,
        "_tc_UNCHANGED": UNCHANGED,
        "_tc_MISSING": dataclasses.MISSING,
        "_tc_TRUSTED": checks.TRUSTED_STATIC_TYPES,
        "_tc_check": checks.check_static,
        "_tc_type": type,
        "_tc_KeyError": KeyError,
        "_tc_object_new": object.__new__,
        **helpers,
    }
    for f in (*layout.fields, *layout.initvars):
        ns[f"_tc_dflt_{f.name}"] = f.default
        ns[f"_tc_factory_{f.name}"] = f.default_factory
    for name, conv in layout.converters.items():
        ns[f"_tc_conv_{name}"] = conv
    for i, check_init in enumerate(layout.check_inits):
        ns[f"_tc_check_init_{i}"] = check_init
    return ns


def compile_class(layout: Layout, sources: list[str], helpers: Mapping[str, Any]) -> dict[str, Any]:
    """Compiles the generated `sources` of one class in one namespace and returns it.

    Each function gets the class's qualname (`Neuron.__init__`), so tracebacks and
    Python's own argument errors name the class; the source is registered with
    `linecache`, so `inspect.getsource` and debuggers show it."""
    source = "\n".join(sources)
    filename = _filename(layout.cls)
    code = compile(source, filename, "exec")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = namespace(layout, helpers)
    exec(code, ns)  # noqa: S102 - our own generated source, shown above
    for value in ns.values():
        if getattr(value, "__code__", None) is not None and value.__code__.co_filename == filename:
            value.__qualname__ = f"{layout.cls.__qualname__}.{value.__name__}"
            value.__module__ = layout.cls.__module__
    return ns


def finish(layout: Layout, obj: str, *, read_back: bool, check_statics: bool) -> list[str]:
    """The end of every construction route (`__init__`, a hand-written `__init__`'s
    `_tc_finalize`, `replace`), as source lines: the one place that runs `__post_init__`
    and caches the flat form. On entry each field's value is in a local of its name and
    in `_tc_d`, the dict of `obj`, except where `read_back` says user code set them.

    `__post_init__` (if any) may change fields, so after it, or with `read_back`, the
    values are read back from `_tc_d` (a field still unset is named) and every static
    is checked; else only where `check_statics` (the caller checked the values it had)."""
    lines: list[str] = []
    if layout.post_init:
        lines.append(f"{obj}.__post_init__({', '.join(f.name for f in layout.initvars)})")
    if (read_back or layout.post_init) and layout.names:
        lines.append("try:")
        lines.append(f"    {', '.join(layout.names)}, = {', '.join(f'_tc_d[{n!r}]' for n in layout.names)},")
        lines.append("except _tc_KeyError as _tc_e:")
        lines.append("    _tc_not_set(_tc_e.args[0])")
        check_statics = True
    if check_statics:
        lines.extend(static_check_line(name, skip_default=False) for name in layout.static)
    children, statics = ("".join(f"{n}, " for n in names) for names in (layout.dynamic, layout.static))
    lines.append(f"_tc_d[{FLAT!r}] = (({children}), ({statics}))")
    # Every `__check_init__` of the MRO, base first, on the finished instance (it may
    # flatten it); never in unflatten, which is not a construction.
    lines.extend(f"_tc_check_init_{i}({obj})" for i in range(len(layout.check_inits)))
    return lines


def static_check_line(name: str, *, skip_default: bool) -> str:
    """Source that checks the static value in the local `name`; values of trusted types
    (int, str, ...) skip the call with one set lookup."""
    cond = f"_tc_type({name}) not in _tc_TRUSTED"
    if skip_default:
        # The default was checked once, when the class was decorated.
        cond += f" and {name} is not _tc_dflt_{name}"
    return f"if {cond}: _tc_check(_tc_cls, {name!r}, {name})"


def with_self(sig: inspect.Signature, *, drop_last: bool = False) -> inspect.Signature:
    """`sig` with its first parameter shown as `self` (unless a field takes that name),
    and without the last (`**_tc_unknown`) if `drop_last`."""
    params = list(sig.parameters.values())
    first, rest = params[0], params[1:-1] if drop_last else params[1:]
    if all(p.name != "self" for p in rest):
        first = first.replace(name="self")
    return sig.replace(parameters=[first, *rest])


def field_annotations(fields: list[dataclasses.Field[Any]]) -> dict[str, Any]:
    """The parameter annotations of a generated function, as the dataclass declares
    them (strings stay strings, as in a dataclass's own `__init__`)."""
    return {f.name: f.type for f in fields}
