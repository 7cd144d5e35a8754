"""`replace()`: a new instance with some fields changed and the rest shared.

The common case, changing dynamic fields that have no converter, is two C-level dict
merges and the new flatten cache; everything else (unknown names, converters, static
checks, InitVars) goes through `_apply`. `__post_init__` (whole-object validation)
runs on every replace. For `Neuron` (see `_init.py`) the generated code is

    def replace(_tc_self, /, **_tc_changes):
        _tc_new = _tc_object_new(_tc_cls)
        _tc_d = _tc_new.__dict__
        _tc_d.update(_tc_self.__dict__)
        if _tc_changes.keys() <= _tc_plain:
            _tc_d.update(_tc_changes)
        else:
            _tc_apply(_tc_layout, _tc_d, _tc_changes)
        _tc_d['__tc_flat__'] = ((_tc_d['v'], ), (_tc_d['tau'], ))
        return _tc_new

Generating one keyword parameter per field instead (`def replace(self, *, v=MISSING,
...)`) was measured 1.7x slower for an 8-field class: each missing field costs a
default binding, a comparison and a store, where the merge copies them all in C.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Final, TypeVar

from treeclass import _checks
from treeclass._layout import FLAT, LAYOUT, Layout, compile_function, flat_expr

_T = TypeVar("_T")

_MSG_INITVAR: Final = (
    "InitVar {name!r} has no default, so {cls}.replace() needs it: "
    "obj.replace({name}=...). __post_init__ runs on every replace."
)


def _apply(layout: Layout, new: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """Writes `changes` into the new instance's dict, running converters and static
    checks; returns the InitVar values among them."""
    initvar_names = {f.name for f in layout.initvars}
    unknown = [k for k in changes if k not in new and k not in initvar_names]
    if unknown:
        raise _checks.unknown_field_error(layout.cls, unknown, [*layout.names, *initvar_names])
    initvars: dict[str, Any] = {}
    for name, value in changes.items():
        if name in initvar_names:
            initvars[name] = value
            continue
        converter = layout.converters.get(name)
        if converter is not None:
            value = converter(value)
        if layout.simple and name in layout.static:
            _checks.check_static(layout.cls, name, value)  # else finalize checks them all
        new[name] = value
    return initvars


def _initvar_args(layout: Layout, given: dict[str, Any]) -> tuple[Any, ...]:
    args: list[Any] = []
    for f in layout.initvars:
        if f.name in given:
            args.append(given[f.name])
        elif f.default is not dataclasses.MISSING:
            args.append(f.default)
        else:
            raise ValueError(_MSG_INITVAR.format(cls=layout.cls.__name__, name=f.name))
    return tuple(args)


def make_replace(layout: Layout, ns: dict[str, Any]) -> Callable[..., Any]:
    ns.update(
        _tc_object_new=object.__new__,
        _tc_apply=_apply,
        _tc_initvar_args=_initvar_args,
        _tc_layout=layout,
        _tc_plain=frozenset(n for n in layout.dynamic if n not in layout.converters),
    )
    run_post_init = layout.post_init and layout.user_init is None
    wants_initvars = run_post_init and bool(layout.initvars)
    apply = "_tc_apply(_tc_layout, _tc_d, _tc_changes)"
    body = [
        "_tc_new = _tc_object_new(_tc_cls)",
        "_tc_d = _tc_new.__dict__",
        "_tc_d.update(_tc_self.__dict__)",
        *(["_tc_iv = {}"] if wants_initvars else []),
        "if _tc_changes.keys() <= _tc_plain:",
        "    _tc_d.update(_tc_changes)",
        "else:",
        f"    _tc_iv = {apply}" if wants_initvars else f"    {apply}",
    ]
    if layout.simple:
        body.append(f"_tc_d[{FLAT!r}] = {flat_expr(layout, lambda n: f'_tc_d[{n!r}]')}")
    else:
        if run_post_init:
            args = "*_tc_initvar_args(_tc_layout, _tc_iv)" if wants_initvars else ""
            body.append(f"_tc_new.__post_init__({args})")
        body.append("_tc_finalize(_tc_new)")
    body.append("return _tc_new")
    source = "def replace(_tc_self, /, **_tc_changes):\n" + "".join(f"    {line}\n" for line in body)
    fn = compile_function(source, "replace", layout.cls, ns)
    fn.__doc__ = _REPLACE_DOC.format(cls=layout.cls.__name__, names=", ".join(layout.names))
    return fn  # type: ignore[no-any-return]


_REPLACE_DOC = """Returns a new {cls} with the given fields changed; the others are shared.

Fields: {names}. Converters and static checks run on the changed values, then
`__post_init__` if the class has one."""


def replace(obj: _T, /, **changes: Any) -> _T:
    """Returns a copy of the treeclass instance `obj` with `changes` applied.

    The function form of `obj.replace(**changes)`; also what `copy.replace` calls.

    **Arguments**

    - `obj`: a treeclass instance.
    - `**changes`: new values for fields, by name. Static fields may change too (the
      result then has a different treedef).

    **Returns**

    A new instance of `type(obj)`. Unchanged fields are the same objects, not copies.

    **Raises**

    `TypeError` for a name that is not a field (naming the closest one) or when `obj`
    is not a treeclass instance; whatever a converter, static check or `__post_init__`
    raises on the new values.

    **Example**

    >>> @tc.treeclass
    ... class Counter:
    ...     count: jax.Array
    ...     step: int = tc.static(1)
    >>> c = Counter(jnp.array(0))
    >>> c2 = tc.replace(c, count=c.count + c.step)
    >>> int(c2.count), int(c.count), c2.step
    (1, 0, 1)
    >>> tc.replace(c, cuont=1)
    Traceback (most recent call last):
    TypeError: Counter.replace() got an unexpected field 'cuont'. Did you mean 'count'?
    Valid fields: count, step.
    """
    layout: Layout | None = type(obj).__dict__.get(LAYOUT)
    if layout is None:
        msg = (
            f"treeclass.replace() takes a treeclass instance; got {type(obj).__name__}. "
            "For another dataclass use dataclasses.replace()."
        )
        raise TypeError(msg)
    # @treeclass installs `replace` at runtime, where checkers cannot see it.
    return type(obj).replace(obj, **changes)  # type: ignore[attr-defined, no-any-return]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
