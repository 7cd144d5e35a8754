"""The tuple protocol a converted NamedTuple keeps, written into the class.

A NamedTuple's users unpack it (`m, P = state`), index it (`state[0]`), iterate it,
take its `len` and call `_replace` / `_asdict` / `_make` / `_fields`; parsmooth does so
about a hundred times. A treeclass has none of these, so the tool writes them into the
converted class as plain methods (chex's `mappable_dataclass` is the precedent), and
those uses no longer block the conversion. What a treeclass cannot keep still blocks
it (`_tuples.py`): `isinstance(x, tuple)`, `==` against a tuple, `+` / `*`, a hash as a
tuple's (a dict key, a set member), NumPy calls.

The methods are generated as source text (the class's own fields, in order), annotated
so that pyright and mypy in strict mode read the converted code as cleanly as the
NamedTuple; the rewrite imports the few typing names they read (`imports`).
"""

from __future__ import annotations

__all__ = ["HEAD", "KEPT", "imports", "tuple_protocol"]

# What the generated code gives a converted NamedTuple (and the docs list).
KEPT = ("__iter__", "__getitem__", "__len__", "_fields", "_replace", "_asdict", "_make")

# The names each generated method's annotations read, by the module they are imported
# from: the rewrite imports those the module lacks (`_imports.fix_imports`).
_NEEDS = {
    "__iter__": {"collections.abc": "Iterator"},
    "__getitem__": {"typing": "Any"},
    "__len__": {},
    "_fields": {"typing": "ClassVar"},
    "_replace": {"typing": "Any"},
    "_asdict": {"typing": "Any"},
    "_make": {"typing": "Any", "collections.abc": "Iterable"},
}


def tuple_protocol(
    cls: str, fields: list[tuple[str, str]], defined: set[str], indent: str = "    "
) -> list[str]:
    """The methods of KEPT for class `cls` with `fields` (name, annotation source, in
    order), less those the class body `defined` already: the source text of each, a
    class-body statement at top level (the rewrite indents it).

    They are annotated so that strict type checkers read the converted code as they read
    the NamedTuple: iteration gives the fields' type where every field has the same
    annotation (`Any` otherwise: unpacking a tuple of mixed types gives each position its
    own type, which one iterator type cannot say), `len` an int, `_replace` and `_make`
    the class. `__getitem__` returns `Any`: a NamedTuple's index or slice gives a field
    or a tuple, which one plain method cannot say either."""
    values = _tuple([f"self.{name}" for name, _ in fields])
    items = ", ".join(f'"{name}": self.{name}' for name, _ in fields)
    names = _tuple([f'"{name}"' for name, _ in fields])
    annotations = {annotation for _, annotation in fields}
    item = annotations.pop() if len(annotations) == 1 else "Any"
    i = indent
    methods = {
        "__iter__": f"def __iter__(self) -> Iterator[{item}]:\n{i}return iter({values})\n",
        "__getitem__": (
            f"def __getitem__(self, index: int | slice) -> Any:\n{i}return {values}[index]\n"
        ),
        "__len__": f"def __len__(self) -> int:\n{i}return {len(fields)}\n",
        "_fields": f"_fields: ClassVar[tuple[str, ...]] = {names}\n",
        "_replace": (
            f'def _replace(self, **changes: Any) -> "{cls}":\n{i}return self.replace(**changes)\n'
        ),
        "_asdict": f"def _asdict(self) -> dict[str, Any]:\n{i}return {{{items}}}\n",
        "_make": (
            f'@classmethod\ndef _make(cls, iterable: Iterable[Any]) -> "{cls}":\n'
            f"{i}return cls(*iterable)\n"
        ),
    }
    return [code for name, code in methods.items() if name not in defined]


def imports(fields: list[tuple[str, str]], defined: set[str]) -> dict[str, set[str]]:
    """What the methods `tuple_protocol` writes import: module -> names."""
    out: dict[str, set[str]] = {}
    for method in KEPT:
        if method in defined:
            continue
        for module, name in _NEEDS[method].items():
            out.setdefault(module, set()).add(name)
    if "__iter__" not in defined and len({a for _, a in fields}) != 1:
        out.setdefault("typing", set()).add("Any")  # `Iterator[Any]` for mixed fields
    return out


# The comment above the generated methods.
HEAD = (
    "# The NamedTuple's tuple protocol (unpacking, indexing, iteration, len, _replace,",
    "# _fields, _asdict, _make), kept by treeclass.migrate: remove what no code uses.",
)


def _tuple(items: list[str]) -> str:
    """A tuple display: `(a, b)`, `(a,)`, `()`."""
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
