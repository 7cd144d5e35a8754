"""Pytree registration for one class: flatten, flatten with keys, unflatten.

Why not `jax.tree_util.register_dataclass`? Its C++ node flattens without Python, but
rebuilds with `cls(**fields)`, which runs `__init__` and so `__post_init__` and the
converters, on tracers, `None` or `object()` leaves:

    @dataclasses.dataclass(frozen=True)
    class Positive:
        x: jax.Array
        def __post_init__(self):
            if (self.x < 0).any(): raise ValueError   # fails on a tracer inside jit

and the keyword call makes its unflatten about 10x a tuple's (14x for a frozen
dataclass, benchmarks/RESULTS.md). Instead:

- flatten is `operator.attrgetter("__tc_flat__")`: construction (and unflatten) caches
  `(children, statics)` on the immutable instance, so JAX's flatten is one C-level
  attribute read and no Python frame. For 8 array + 2 static fields that measured
  1.41x a tuple's flatten against 1.47x for the C++ dataclass node; per node, though,
  jaxlib spends ~200 ns more on a callback-registered node than on a tuple (checking
  the returned pair, iterating the children generically) against ~70 ns for the C++
  node, so trees of many small nodes flatten slower than with it;
- unflatten is generated per class: it allocates with `object.__new__` and writes the
  instance `__dict__`, so no user code can run, by construction.

For the class in `_init.py` the generated unflatten is

    def _tc_unflatten(_tc_aux, _tc_children, _tc_new=object.__new__, _tc_cls=_tc_cls):
        _tc_self = _tc_new(_tc_cls)
        _tc_d = _tc_self.__dict__
        _tc_d['v'], = _tc_children
        _tc_d['tau'], = _tc_aux
        _tc_d['__tc_flat__'] = (_tc_children, _tc_aux)
        return _tc_self

`benchmarks/` measures these choices against `register_dataclass` and the rest.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import jax

from treeclass._layout import FLAT, Layout, compile_function


def _targets(names: tuple[str, ...]) -> str:
    return "".join(f"_tc_d[{n!r}], " for n in names)


def make_unflatten(layout: Layout, ns: dict[str, Any]) -> Callable[[Any, Any], Any]:
    lines = [
        "def _tc_unflatten(_tc_aux, _tc_children, _tc_new=object.__new__, _tc_cls=_tc_cls):",
        "    _tc_self = _tc_new(_tc_cls)",
        "    _tc_d = _tc_self.__dict__",
    ]
    if layout.dynamic:
        lines.append(f"    {_targets(layout.dynamic)}= _tc_children")
    if layout.static:
        lines.append(f"    {_targets(layout.static)}= _tc_aux")
    lines.append(f"    _tc_d[{FLAT!r}] = (_tc_children, _tc_aux)")
    lines.append("    return _tc_self")
    return compile_function("\n".join(lines) + "\n", "_tc_unflatten", layout.cls, ns)  # type: ignore[no-any-return]


def register(layout: Layout, ns: dict[str, Any]) -> None:
    keys = tuple(jax.tree_util.GetAttrKey(name) for name in layout.dynamic)

    def flatten_with_keys(obj: Any) -> tuple[tuple[tuple[Any, Any], ...], tuple[Any, ...]]:
        children, aux = getattr(obj, FLAT)
        return tuple(zip(keys, children, strict=True)), aux

    jax.tree_util.register_pytree_with_keys(
        layout.cls,
        flatten_with_keys,
        make_unflatten(layout, ns),
        flatten_func=operator.attrgetter(FLAT),
    )
