"""The tuple protocol a converted NamedTuple keeps, written into the class.

A NamedTuple's users unpack it (`m, P = state`), index it (`state[0]`), iterate it,
take its `len` and call `_replace` / `_asdict` / `_make` / `_fields`; parsmooth does so
about a hundred times. A treeclass has none of these, so the tool writes them into the
converted class as plain methods (chex's `mappable_dataclass` is the precedent), and
those uses no longer block the conversion. What a treeclass cannot keep still blocks
it (`_tuples.py`): `isinstance(x, tuple)`, `==` against a tuple, `+` / `*`, a hash as a
tuple's (a dict key, a set member), NumPy calls.

The methods are generated as source text (the class's own fields, in order), so the
converted code imports nothing new and reads as what it is.
"""

from __future__ import annotations

__all__ = ["HEAD", "KEPT", "tuple_protocol"]

# What the generated code gives a converted NamedTuple (and the docs list).
KEPT = ("__iter__", "__getitem__", "__len__", "_fields", "_replace", "_asdict", "_make")


def tuple_protocol(fields: list[str], defined: set[str], indent: str = "    ") -> list[str]:
    """The methods of KEPT for a class with `fields` (in order), less those the class
    body `defined` already: the source text of each, a class-body statement at top
    level (the rewrite indents it)."""
    values = _tuple([f"self.{f}" for f in fields])
    items = ", ".join(f'"{f}": self.{f}' for f in fields)
    names = _tuple([f'"{f}"' for f in fields])
    i = indent
    methods = {
        "__iter__": f"def __iter__(self):\n{i}return iter({values})\n",
        "__getitem__": f"def __getitem__(self, index):\n{i}return {values}[index]\n",
        "__len__": f"def __len__(self):\n{i}return {len(fields)}\n",
        "_fields": f"_fields = {names}\n",
        "_replace": f"def _replace(self, **changes):\n{i}return self.replace(**changes)\n",
        "_asdict": f"def _asdict(self):\n{i}return {{{items}}}\n",
        "_make": f"@classmethod\ndef _make(cls, iterable):\n{i}return cls(*iterable)\n",
    }
    return [code for name, code in methods.items() if name not in defined]


# The comment above the generated methods.
HEAD = (
    "# The NamedTuple's tuple protocol (unpacking, indexing, iteration, len, _replace,",
    "# _fields, _asdict, _make), kept by treeclass.migrate: remove what no code uses.",
)


def _tuple(items: list[str]) -> str:
    """A tuple display: `(a, b)`, `(a,)`, `()`."""
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
