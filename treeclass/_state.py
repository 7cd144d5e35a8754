"""Walking a pytree one level at a time, and restoring a template from saved data.

`restore()` walks the template and the saved tree side by side, so that every mismatch
is reported at its field path (`Model.layers.0.w: shape (1, 3) in the file, (2, 3) in
the template`). A `Source` says how to read the saved side: `Source` reads a state dict,
`FileSource` a checkpoint's manifest, with the arrays read on demand. `describe()`
builds that manifest for `save()`.

Keys are those of JAX's own flatten with paths (rather than special cases for
treeclass, list, tuple and dict), so every pytree node gets the keys that
`jax.tree_util.keystr` shows, namedtuples and other libraries' nodes included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn, cast

import jax
import numpy as np

from treeclass import _leaves, _npz
from treeclass._layout import LAYOUT
from treeclass._npz import CheckpointError
from treeclass._repr import short_repr

Path = tuple[str, ...]

_MSG_NOT_A_TREE: Final = (
    "treeclass.{fn}() takes a treeclass instance (or a list, tuple or dict of them) as "
    "`{arg}`; got {found}."
)

_MSG_FIX: Final = """

The template must be built like the object that was saved: the same fields, shapes,
dtypes and static values. Build it with the saved configuration, e.g. Model(...) or
jax.eval_shape(lambda: Model(...)), and restore into that."""


def _key(key: Any) -> str:
    if isinstance(key, jax.tree_util.GetAttrKey):
        return str(key.name)
    if isinstance(key, jax.tree_util.SequenceKey):
        return str(key.idx)
    if isinstance(key, jax.tree_util.DictKey | jax.tree_util.FlattenedIndexKey):
        return str(key.key)
    return str(key)


def split(x: Any, where: Callable[[], str]) -> tuple[list[tuple[str, Any]], Any] | None:
    """One level of the pytree `x`: its `(key, child)` pairs and the treedef that
    rebuilds it from the children; None if `x` is a leaf. (None and empty containers
    are nodes with no children.)"""
    pairs, treedef = jax.tree_util.tree_flatten_with_path(x, is_leaf=lambda y: y is not x)
    if len(pairs) == 1 and pairs[0][0] == ():
        return None
    keyed = [(_key(path[0]), child) for path, child in pairs]
    keys = [k for k, _ in keyed]
    if len(set(keys)) != len(keys):
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        msg = (
            f"{where()}: the keys of this {type(x).__name__} have the same string form "
            f"({', '.join(map(repr, dupes))}), so a state dict cannot tell them apart. "
            "Use keys whose str() differ."
        )
        raise ValueError(msg)
    return keyed, cast(Any, treedef)


def check_root(x: Any, fn: str, arg: str) -> str:
    """The name that starts every path in messages (`Model`); raises `TypeError` when
    `x` is not a container (a leaf, None, or a class instead of an instance)."""
    if isinstance(x, type):
        found = f"the class {x.__name__}; pass an instance, {x.__name__}(...)"
    elif x is None or split(x, lambda: type(x).__name__) is None:
        found = f"{type(x).__name__} {short_repr(x)}"
    else:
        return type(x).__name__
    raise TypeError(_MSG_NOT_A_TREE.format(fn=fn, arg=arg, found=found))


def dotted(root: str, path: Path) -> str:
    return ".".join((root, *path))


_MSG_NOT_ADDRESSABLE: Final = """\
{where} is a jax.Array spread over several processes (not fully addressable from this one).
treeclass.save() writes one file from one process and cannot gather it. Save and restore
sharded models with orbax, calling it from every process:

    import orbax.checkpoint as ocp
    ocp.StandardCheckpointer().save(path, obj)
    # Restore onto the same shardings: a target of shapes, dtypes and shardings.
    abstract = jax.eval_shape(lambda: obj)
    target = jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
        abstract, tc.shardings(abstract, mesh))
    obj = ocp.StandardCheckpointer().restore(path, target)"""

_MSG_KEYS: Final = """\
{saved} in the {name}, {template} in the template. Typed PRNG keys
(jax.random.key) and raw uint32 keys (jax.random.PRNGKey) are different leaves; make
the template hold what was saved, or convert the saved key:
jax.random.wrap_key_data(raw) makes a typed key, jax.random.key_data(key) a raw one"""


def _key_kind(dtype: str) -> str:
    return f"a typed PRNG key ({dtype})" if dtype.startswith("key<") else f"a {dtype} array"


def _kind(x: object) -> str:
    """`x` in a message: `None`, `a dict`, `an array`, `a float`, `a Model`."""
    if x is None:
        return "None"
    if isinstance(x, Mapping):
        return "a dict"
    return "an array" if _leaves.is_array(x) else f"a {type(x).__name__}"


class Source:
    """The saved side when it is a state dict; `FileSource` reads a manifest."""

    name = "state dict"

    def __init__(self, root: str) -> None:
        self.root = root

    def error(self, path: Path, what: str) -> CheckpointError:
        return CheckpointError(f"{dotted(self.root, path)}: {what}{_MSG_FIX}")

    def mismatch(self, path: Path, template: Any, saved: Any) -> CheckpointError:
        what = f"{_kind(template)} in the template, {_kind(saved)} in the {self.name}"
        return self.error(path, what)

    def compare(self, path: Path, what: str, saved: object, template: object) -> None:
        if saved != template:
            raise self.error(path, f"{what} {saved} in the {self.name}, {template} in the template")

    def compare_arrays(
        self, path: Path, saved: tuple[tuple[int, ...], str], template: tuple[tuple[int, ...], str]
    ) -> None:
        """Checks an array leaf's `(shape, dtype name)` against the template's."""
        keys = saved[1].startswith("key<"), template[1].startswith("key<")
        if keys[0] != keys[1]:
            # Compared as shape and dtype this would read `shape (2,) ..., ()`, which
            # hides what differs: a raw uint32 key on one side, a typed key on the other.
            raise self.error(path, _MSG_KEYS.format(
                saved=_key_kind(saved[1]), template=_key_kind(template[1]), name=self.name
            ))
        self.compare(path, "shape", saved[0], template[0])
        self.compare(path, "dtype", saved[1], template[1])

    def children(self, template: Any, saved: Any, path: Path) -> Mapping[str, Any]:
        if type(saved) in (list, tuple):
            # What orbax restores without a target: sequences as lists, not {"0": ...}.
            return {str(i): item for i, item in enumerate(saved)}
        if not isinstance(saved, Mapping):
            raise self.mismatch(path, template, saved)
        return saved

    def leaf(self, template: Any, saved: Any, path: Path) -> Any:
        if isinstance(saved, Mapping) or saved is None:
            raise self.mismatch(path, template, saved)
        kind = _npz.scalar_kind(saved)
        scalar_ok = kind is not None and _leaves.scalar_fits(kind, template)
        if _leaves.is_array(template) and not scalar_ok:
            if not _leaves.is_array(saved):
                raise self.mismatch(path, template, saved)
            self.compare_arrays(
                path,
                (tuple(saved.shape), _leaves.dtype_name(saved.dtype)),
                (tuple(template.shape), _leaves.dtype_name(template.dtype)),
            )
        return saved


def restore(template: Any, saved: Any, path: Path, source: Source) -> Any:
    if template is None:
        if saved is not None:
            raise source.mismatch(path, template, saved)
        return None
    node = split(template, lambda: dotted(source.root, path))
    if node is None:
        return source.leaf(template, saved, path)
    pairs, treedef = node
    children = source.children(template, saved, path)
    expected = [k for k, _ in pairs]
    missing = [k for k in expected if k not in children]
    unexpected = [k for k in children if k not in set(expected)]
    if missing or unexpected:
        parts: list[str] = []
        if missing:
            parts.append(f"missing from the {source.name}: {', '.join(map(repr, missing))}")
        if unexpected:
            listed = ", ".join(map(repr, unexpected))
            parts.append(f"in the {source.name} but not the template: {listed}")
        raise source.error(path, f"structure differs ({'; '.join(parts)})")
    return treedef.unflatten([restore(c, children[k], (*path, k), source) for k, c in pairs])


class FileSource(Source):
    """The saved side when it is a file: manifest entries, arrays read on demand."""

    name = "file"

    def __init__(self, root: str, reader: _npz.Reader) -> None:
        super().__init__(root)
        self.reader = reader

    def malformed(self, path: Path) -> NoReturn:
        self.reader.fail(f"its manifest is malformed at {dotted(self.root, path)}")

    def mismatch(self, path: Path, template: Any, saved: Any) -> CheckpointError:
        shown = _kind(saved)
        if isinstance(saved, dict):  # a manifest entry: a leaf record or a container
            entry = cast("dict[str, Any]", saved)
            shown = "an array" if "leaf" in entry else f"a {entry.get('type', 'container')}"
        return self.error(path, f"{_kind(template)} in the template, {shown} in the file")

    def children(self, template: Any, saved: Any, path: Path) -> Mapping[str, Any]:
        if not isinstance(saved, dict) or "leaf" in saved:
            raise self.mismatch(path, template, saved)
        entry = cast("dict[str, Any]", saved)
        children, static = entry.get("children"), entry.get("static", {})
        if not isinstance(children, dict) or not isinstance(static, dict):
            self.malformed(path)
        static = cast("dict[str, Any]", static)
        layout = type(template).__dict__.get(LAYOUT)
        if layout is not None:
            names, mine = sorted(static), sorted(layout.static)
            if names != mine:
                raise self.error(path, f"static fields {names} in the file, {mine} in the template")
            for name in layout.static:
                theirs, ours = static[name], _npz.encode_static(getattr(template, name))
                if _npz.canonical(theirs) != _npz.canonical(ours):
                    shown = _npz.show_static(theirs), _npz.show_static(ours)
                    what = f"{shown[0]} in the file, {shown[1]} in the template"
                    raise self.error((*path, name), f"static value {what}")
        return cast("dict[str, Any]", children)

    def leaf(self, template: Any, saved: Any, path: Path) -> Any:
        where = dotted(self.root, path)
        dtype, shape, _ = _leaves.meta(template, where, path[-1])
        if not isinstance(saved, dict) or "leaf" not in saved:
            raise self.mismatch(path, template, saved)
        entry = cast("dict[str, Any]", saved)
        member, saved_dtype, saved_shape = entry.get("leaf"), entry.get("dtype"), entry.get("shape")
        if not (
            isinstance(member, str)
            and isinstance(saved_dtype, str)
            and isinstance(saved_shape, list)
            and all(type(n) is int and n >= 0 for n in cast("list[object]", saved_shape))
        ):
            self.malformed(path)
        kind = _npz.SCALAR_NAMES.get(saved_dtype)
        if kind is not None and _leaves.scalar_fits(kind, template):
            data = self.reader.array(member, _npz.scalar_dtype(kind), (), where)
            return _leaves.like(template, data.astype(template.dtype))
        self.compare_arrays(path, (tuple(cast("list[int]", saved_shape)), saved_dtype), (shape, dtype))
        kind = _npz.scalar_kind(template)
        stored: np.dtype[Any] | None
        if _leaves.is_key(template):
            stored, shape = np.dtype(np.uint32), _leaves.key_data_shape(template)
        elif kind is not None:
            stored = _npz.scalar_dtype(kind)
        else:
            stored = _npz.stored_dtype(np.dtype(template.dtype))
        assert stored is not None  # meta() accepted the template's dtype
        return _leaves.like(template, self.reader.array(member, stored, shape, where))


def describe(x: Any, root: str, path: Path, members: dict[str, tuple[Any, str]]) -> Any:
    """The manifest entry for `x` (see `_npz`); collects the leaves to write."""
    where = dotted(root, path)
    if x is None:
        return None
    node = split(x, lambda: where)
    if node is None:
        dtype, shape, weak = _leaves.meta(x, where, path[-1])
        if not _leaves.fully_addressable(x):
            raise CheckpointError(_MSG_NOT_ADDRESSABLE.format(where=where))
        member = ".".join(path)
        if member in members or member == _npz.MANIFEST:
            msg = (
                f"{where}: two leaves (or a leaf and the manifest) would be stored as "
                f"{member}.npy in the file; rename a dict key."
            )
            raise ValueError(msg)
        members[member] = (x, where)
        record = {"leaf": member, "dtype": dtype, "shape": list(shape), "weak_type": weak}
        if _leaves.is_key(x):  # for readers of the file; load() compares the dtype
            record["impl"] = str(jax.random.key_impl(x))
        return record
    entry: dict[str, Any] = {"type": type(x).__qualname__}
    layout = type(x).__dict__.get(LAYOUT)
    if layout is not None:
        entry["static"] = {name: _npz.encode_static(getattr(x, name)) for name in layout.static}
    entry["children"] = {k: describe(c, root, (*path, k), members) for k, c in node[0]}
    return entry
