"""`repr` that summarises arrays as `f32[100,3]`.

It reads only shapes and dtypes, never values, so it never waits for a device (and
works on tracers). A repr that fits in `_WIDTH` characters stays on one line; otherwise
each field goes on its own line, nested treeclasses indented.
"""

from __future__ import annotations

import reprlib
from typing import Any, Final

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core
import jax.numpy as jnp
import numpy as np

from treeclass._layout import LAYOUT

_WIDTH: Final = 88
_SHORT: Final = {"bfloat16": "bf16", "bool": "bool"}
_PREFIX: Final = {"float": "f", "int": "i", "uint": "u", "complex": "c"}


def short_repr(value: object, width: int = 60) -> str:
    """`repr(value)`, cut to `width` characters: for values quoted in error messages."""
    shown = repr(value)
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def dtype_name(dtype: Any) -> str:
    if jnp.issubdtype(dtype, jax.dtypes.extended):
        return str(dtype)  # typed PRNG keys: key<fry>; numpy cannot name them
    name: str = np.dtype(dtype).name
    if name in _SHORT:
        return _SHORT[name]
    for long, short in _PREFIX.items():
        if name.startswith(long) and name[len(long) :].isdigit():
            return short + name[len(long) :]
    return name  # float8_e4m3fn and friends: the full name is clearer


def array_summary(x: Any) -> str:
    summary = f"{dtype_name(x.dtype)}[{','.join(map(str, x.shape))}]"
    if isinstance(x, np.ndarray):
        return summary + "(numpy)"
    if isinstance(x, jax.core.Tracer):
        return summary + "(traced)"
    return summary


def _is_array(x: Any) -> bool:
    return isinstance(x, jax.Array | np.ndarray)


def _items(x: Any) -> tuple[str, str, str, list[tuple[str, Any]]] | None:
    """(open, close, separator, [(label, value)]) for a container, else None."""
    cls = type(x)
    if LAYOUT in cls.__dict__:
        layout = cls.__dict__[LAYOUT]
        shown = [f.name for f in layout.fields if f.repr]
        return f"{cls.__name__}(", ")", "=", [(n, x.__dict__.get(n, "<unset>")) for n in shown]
    if cls is list:
        return "[", "]", "", [("", v) for v in x]
    if cls is tuple:
        return "(", ",)" if len(x) == 1 else ")", "", [("", v) for v in x]
    if cls is dict:
        return "{", "}", ": ", [(repr(k), v) for k, v in x.items()]
    return None


def _repr(x: Any, indent: str, recursion: set[int]) -> str:
    if _is_array(x):
        return array_summary(x)
    parts = _items(x)
    if parts is None:
        return repr(x)
    if id(x) in recursion:
        return "..."
    recursion.add(id(x))
    try:
        opening, closing, sep, items = parts
        inner = indent + "  "
        shown = [(label, _repr(v, inner, recursion)) for label, v in items]
        flat = opening + ", ".join(f"{k}{sep}{v}" for k, v in shown) + closing
        if len(indent) + len(flat) <= _WIDTH and "\n" not in flat:
            return flat
        lines = "".join(f"{inner}{k}{sep}{v},\n" for k, v in shown)
        return f"{opening}\n{lines}{indent}{closing.lstrip(',')}"
    finally:
        recursion.discard(id(x))


@reprlib.recursive_repr()
def tree_repr(self: Any) -> str:
    return _repr(self, "", set())

