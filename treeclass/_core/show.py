"""`repr` summarising arrays as `f32[100,3]` (it never waits for a device); `describe()`."""

import array
import collections
import dataclasses
import threading
from collections import UserString
from collections.abc import Mapping, Sequence
from typing import Any, Final

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core
import numpy as np

from treeclass._core.fields import Sentinel
from treeclass._core.layout import instance_layout
from treeclass._core.walk import array_name, is_array

_WIDTH: Final = 88


def short_repr(value: object, width: int = 60) -> str:
    """`repr(value)`, cut to `width` characters: for values quoted in error messages."""
    shown = repr(value)
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def describe(value: object, *, shape: bool = True) -> str:
    """What a value is, for messages: `None`, `a str`, `a jax.Array of shape (3,)`."""
    if value is None:
        return "None"
    cls = type(value)
    name = "jax.Array" if isinstance(value, jax.Array) else cls.__name__
    if cls.__module__ == "numpy":
        name = f"numpy.{name}"
    elif cls is jax.ShapeDtypeStruct:
        name = "jax.ShapeDtypeStruct"
    found = getattr(value, "shape", None) if shape else None
    article = "an" if name[0] in "aeiouAEIOU" else "a"
    return f"{article} {name}" + ("" if found is None else f" of shape {found}")


_UNSET: Final = Sentinel("<unset>")  # a field not set yet (a repr inside `__post_init__`)


# Sequences shown by their own repr: they hold no arrays (text, bytes, typed numbers), and
# a range may be vast.
_OWN_REPR: Final = (str, bytes, bytearray, memoryview, range, array.array, UserString)


def _items(mapping: Mapping[Any, Any]) -> list[tuple[str, Any]]:
    """A mapping's `(label, value)`s: a key is shown as values are (a numpy scalar summarised)."""
    return [(_repr(k, "", set()), v) for k, v in mapping.items()]


def _dataclass_repr(cls: type) -> bool:
    """Whether `cls` is a dataclass printed by the `__repr__` that `dataclasses` wrote, which
    shows each field's own repr, a full array's values included: `FS(w=Array([1., ...]))`.
    A class that writes its own `__repr__` keeps it. dataclasses compiles that `__repr__`
    inside its `__create_fn__` and wraps it against recursion; the function wrapped keeps
    that qualified name on every Python (tests/core/test_repr.py holds it)."""
    if not dataclasses.is_dataclass(cls):
        return False
    written = getattr(cls.__repr__, "__wrapped__", None)
    return "__create_fn__.<locals>.__repr__" in getattr(written, "__qualname__", "")


def _parts(x: Any) -> tuple[str, str, str, list[tuple[str, Any]]] | None:
    """(open, close, separator, [(label, value)]) of a container in its own order, else None.

    Containers keep the form of their own repr, arrays summarised inside:
    `OrderedDict({'a': f32[3]})` (on every Python, as 3.12 prints it),
    `defaultdict(<class 'list'>, {...})`, `deque([...], maxlen=2)`; any other Mapping or
    Sequence as `Name({...})` or `Name([...])`.
    """
    cls = type(x)
    layout = instance_layout(x)
    # A treeclass; flax.struct, register_dataclass: dataclasses' repr, arrays summarised.
    if layout is not None or _dataclass_repr(cls):
        fields = dataclasses.fields(x) if layout is None else layout.fields
        shown = [f.name for f in fields if f.repr]
        return f"{cls.__name__}(", ")", "=", [(n, getattr(x, n, _UNSET)) for n in shown]
    if cls is list:
        return "[", "]", "", [("", v) for v in x]
    names: tuple[str, ...] | None = getattr(cls, "_fields", None)
    if names is not None and issubclass(cls, tuple):  # a NamedTuple
        return f"{cls.__name__}(", ")", "=", list(zip(names, x, strict=True))
    if cls is tuple:
        return "(", ",)" if len(x) == 1 else ")", "", [("", v) for v in x]
    if cls is dict:
        return "{", "}", ": ", _items(x)
    if isinstance(x, collections.defaultdict):
        opening = f"{cls.__name__}({x.default_factory!r}, {{"
        return opening, "})", ": ", _items(x)
    if isinstance(x, Mapping):  # OrderedDict, and any other
        return f"{cls.__name__}({{", "})", ": ", _items(x)
    if isinstance(x, collections.deque):
        maxlen = "" if x.maxlen is None else f", maxlen={x.maxlen}"
        return f"{cls.__name__}([", f"]{maxlen})", "", [("", v) for v in x]
    if isinstance(x, Sequence) and not isinstance(x, _OWN_REPR):
        return f"{cls.__name__}([", "])", "", [("", v) for v in x]
    return None


def _repr(x: Any, indent: str, recursion: set[int]) -> str:
    # `recursion`: the containers being shown (a list that holds itself prints `[...]`).
    if is_array(x):
        numpy = isinstance(x, np.ndarray | np.generic)
        tag = "(numpy)" if numpy else "(traced)" if isinstance(x, jax.core.Tracer) else ""
        return array_name(x.dtype, x.shape) + tag
    parts = _parts(x)
    if parts is None:  # another library's node (an eqx.nn.Linear) may print several lines
        return repr(x).replace("\n", "\n" + indent)
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


_showing = threading.local()  # ids of the instances this thread's tree_repr calls are showing


def tree_repr(self: Any) -> str:
    # Not `reprlib.recursive_repr`: rich takes a reprlib `__repr__` for dataclasses' own and
    # prints full arrays. A static whose __repr__ shows this instance again sees `showing`.
    showing: set[int] = _showing.__dict__.setdefault("ids", set())
    if id(self) in showing:
        return "..."
    showing.add(id(self))
    try:
        return _repr(self, "", set())
    finally:
        showing.discard(id(self))


def treescope_repr(self: Any, path: str | None, subtree_renderer: Any) -> Any:
    """`__treescope_repr__`: the constructor form, statics marked `# static`; treescope calls it."""
    from treescope import rendering_parts as parts

    layout = instance_layout(self)
    assert layout is not None  # installed on treeclasses only
    names = [f.name for f in layout.fields if f.repr]
    lines = []
    between = parts.siblings(",", parts.fold_condition(collapsed=parts.text(" ")))
    last = parts.fold_condition(expanded=parts.text(","))
    for i, name in enumerate(names):
        child = None if path is None else f"{path}.{name}"
        value = subtree_renderer(self.__dict__.get(name, _UNSET), path=child)
        comma = between if i < len(names) - 1 else last
        static = "  # static" if name in layout.static else ""
        mark = parts.fold_condition(expanded=parts.comment_color(parts.text(static)))
        field = parts.siblings_with_annotations(f"{name}=", value)
        lines.append(parts.build_full_line_with_annotations(field, comma, mark))
    # `<MLP(...)>` in roundtrip mode where `MLP(**fields)` would not rebuild the instance.
    exact = layout.user_init is None and all(f.init for f in layout.fields)
    around = ("", "") if exact else ("<", ">")
    return parts.build_foldable_tree_node_from_children(
        prefix=parts.siblings(
            parts.roundtrip_condition(roundtrip=parts.text(around[0])),
            parts.maybe_qualified_type_name(type(self)),
            "(",
        ),
        children=lines,
        suffix=parts.siblings(")", parts.roundtrip_condition(roundtrip=parts.text(around[1]))),
        path=path,
    )
