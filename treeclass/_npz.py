"""`save()` and `load()`: the checkpoint file, an ordinary `.npz` that `numpy.load` opens.

    layers.0.w.npy       one member per array leaf, named by its state-dict path
    __treeclass__.npy    a 0-d string array: the JSON manifest

The manifest (written by `describe`) records the structure, each leaf's dtype, shape
and weak type, and every static value as JSON, so that `load()` checks the template
against the file (`FileSource`, in `_serialization.restore`'s walk) before it reads a
single array. The members' bytes, and reading them without pickle: `_encoding.py`.
"""

from __future__ import annotations

import json
import math
import os
import re
import types
from collections.abc import Iterable, Mapping
from typing import Any, Final, NoReturn, TypeVar, cast

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core

from treeclass import _encoding
from treeclass._encoding import MANIFEST, Reader
from treeclass._repr import short_repr
from treeclass._serialization import (
    CheckpointError,
    Path,
    Source,
    check_root,
    dotted,
    is_key,
    keyed,
    kind,
    restore,
    scalar_fits,
)
from treeclass._walk import layout_of

_T = TypeVar("_T")

_MSG_SPREAD: Final = """\
{where} is a jax.Array spread over several processes (not fully addressable from this one).
treeclass.save() writes one file from one process and cannot gather it. Save and restore
sharded models with orbax, calling it from every process:

    import orbax.checkpoint as ocp
    with ocp.StandardCheckpointer() as checkpointer:  # leaving it waits for the write
        checkpointer.save(path, obj)
    # Restore onto the same shardings: a target of shapes, dtypes and shardings.
    target = jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
        obj, tc.shardings(obj, mesh))
    with ocp.StandardCheckpointer() as checkpointer:
        obj = checkpointer.restore(path, target)"""


def fully_addressable(x: Any) -> bool:
    """False for a `jax.Array` with shards on other processes' devices (multi-process
    JAX): this process cannot read its values."""
    if not isinstance(x, jax.Array) or isinstance(x, jax.core.Tracer):
        return True
    return bool(x.is_fully_addressable)


# ---------------------------------------------------------------------------------------
# Static values in the manifest.
#
# Only JSON is stored and nothing is ever rebuilt from it: load() takes the static values
# from the template and compares encodings. A value that is not JSON (a function, a
# dtype, an enum member) is stored as a description, so a model with
# `act: Callable = tc.static(jax.nn.relu)` can still be checkpointed, and its check is
# as good as the description: `module.qualname` for functions and classes, else `repr`
# with memory addresses removed (`<Foo object at 0x7f...>` would never match in
# another process).

_ADDRESS: Final = re.compile(r" at 0x[0-9a-fA-F]+")


def encode_static(value: object) -> Any:
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if type(value) in (tuple, frozenset):
        items = [encode_static(item) for item in cast("Iterable[object]", value)]
        # A frozenset's repr order depends on string hashing, which differs by process.
        return items if type(value) is tuple else {"frozenset": sorted(items, key=canonical)}
    if isinstance(value, types.FunctionType | types.BuiltinFunctionType | type) or (
        callable(value) and hasattr(value, "__qualname__") and hasattr(value, "__module__")
    ):
        module, qualname = getattr(value, "__module__", "?"), getattr(value, "__qualname__", "?")
        return {"repr": f"{module}.{qualname}"}
    return {"repr": _ADDRESS.sub("", repr(value))}


def canonical(encoded: Any) -> str:
    return json.dumps(encoded, sort_keys=True)


def show_static(encoded: Any) -> str:
    """An encoded static value as the user wrote it (near enough), for messages."""
    if isinstance(encoded, list):
        items = [show_static(item) for item in encoded]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(encoded, dict) and len(encoded) == 1:
        ((tag, inner),) = encoded.items()
        if tag in ("repr", "float") and isinstance(inner, str):
            return inner
        if tag == "frozenset" and isinstance(inner, list):
            return "frozenset({" + ", ".join(map(show_static, inner)) + "})"
    if encoded is None or isinstance(encoded, bool | int | float | str):
        return repr(encoded)
    return canonical(encoded)


# ---------------------------------------------------------------------------------------
# The manifest: written by describe(), read back by FileSource.


def describe(x: Any, root: str, path: Path, members: dict[str, tuple[Any, str]]) -> Any:
    """The manifest entry for `x`; collects the leaves to write into `members`."""
    where = dotted(root, path)
    pairs = None if x is None else keyed(x, lambda: where)
    if pairs is not None:
        entry: dict[str, Any] = {"type": type(x).__qualname__}
        layout = layout_of(x)
        if layout is not None:
            entry["static"] = {n: encode_static(getattr(x, n)) for n in layout.static}
        entry["children"] = {k: describe(c, root, (*path, k), members) for k, c in pairs}
        return entry
    if x is None:
        return None
    dtype, shape, weak = _encoding.leaf_record(x, where, path[-1])
    if not fully_addressable(x):
        raise CheckpointError(_MSG_SPREAD.format(where=where))
    member = ".".join(path)
    if member in members or member == MANIFEST:
        msg = (
            f"{where}: two leaves (or a leaf and the manifest) would be stored as "
            f"{member}.npy in the file; rename a dict key."
        )
        raise ValueError(msg)
    members[member] = (x, where)
    record = {"leaf": member, "dtype": dtype, "shape": list(shape), "weak_type": weak}
    if is_key(x):  # for readers of the file; load() compares the dtype
        record["impl"] = str(jax.random.key_impl(x))
    return record


class FileSource(Source):
    """The saved side of `restore()` when it is a file: manifest entries, with arrays
    read on demand."""

    name = "file"

    def __init__(self, root: str, reader: Reader) -> None:
        super().__init__(root)
        self.reader = reader

    def malformed(self, path: Path) -> NoReturn:
        self.reader.fail(f"its manifest is malformed at {dotted(self.root, path)}")

    def show(self, saved: Any) -> str:
        if isinstance(saved, dict):  # a manifest entry: a leaf record or a container
            entry = cast("dict[str, Any]", saved)
            return "an array" if "leaf" in entry else f"a {entry.get('type', 'container')}"
        return kind(saved)

    def children(self, template: Any, saved: Any, path: Path) -> Mapping[str, Any]:
        if not isinstance(saved, dict) or "leaf" in saved:
            raise self.mismatch(path, template, saved)
        entry = cast("dict[str, Any]", saved)
        children, static = entry.get("children"), entry.get("static", {})
        if not isinstance(children, dict) or not isinstance(static, dict):
            self.malformed(path)
        static = cast("dict[str, Any]", static)
        layout = layout_of(template)
        if layout is not None:
            names, mine = sorted(static), sorted(layout.static)
            if names != mine:
                raise self.error(path, f"static fields {names} in the file, {mine} in the template")
            for name in layout.static:
                theirs = static[name]
                ours = encode_static(getattr(template, name))
                if canonical(theirs) != canonical(ours):
                    shown = show_static(theirs), show_static(ours)
                    what = f"static value {shown[0]} in the file, {shown[1]} in the template"
                    raise self.error((*path, name), what)
        return cast("dict[str, Any]", children)

    def leaf(self, template: Any, saved: Any, path: Path) -> Any:
        where = dotted(self.root, path)
        dtype, shape, _ = _encoding.leaf_record(template, where, path[-1])
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
        scalar = _encoding.SCALAR_NAMES.get(saved_dtype)
        if scalar is not None and scalar_fits(scalar, template):  # into an eval_shape leaf
            data = self.reader.array(member, _encoding.SCALAR_STORED[scalar], (), where)
            return _encoding.decode_leaf(template, data.astype(template.dtype))
        self.compare(path, (tuple(cast("list[int]", saved_shape)), saved_dtype), (shape, dtype))
        stored, shape = _encoding.stored_like(template)
        return _encoding.decode_leaf(template, self.reader.array(member, stored, shape, where))


# ---------------------------------------------------------------------------------------
# The public functions.


def _fspath(path: object, fn: str) -> str:
    try:
        # Untyped callers pass anything; os.fspath raises TypeError for a non-path.
        return os.fsdecode(os.fspath(cast("str", path)))
    except TypeError:
        msg = (
            f"treeclass.{fn}() takes a file path (str or os.PathLike) as `path`; got "
            f"{type(path).__name__} {short_repr(path)}."
        )
        raise TypeError(msg) from None


def save(path: str | os.PathLike[str], obj: Any) -> None:
    """Writes `obj`'s dynamic leaves, structure and static values to a `.npz` file.

    Each array is stored under its state-dict path (`layers.0.w`); the manifest
    (`__treeclass__`, JSON) records the structure, dtypes, shapes and static values.
    Dtypes numpy cannot name (bfloat16, float8, int4) are stored as raw bits, typed
    PRNG keys as their key data. The file is written beside `path` under a temporary
    name, then renamed over it, so `path` never holds half a checkpoint. No `.npz`
    suffix is added to `path`.

    **Arguments**

    - `path`: the file to write (`str` or `os.PathLike`); replaced if it exists.
    - `obj`: a treeclass instance, or a list, tuple or dict of them.

    **Returns**

    `None`.

    **Raises**

    `TypeError` naming the field for a leaf a checkpoint cannot hold (a string, an
    object array, a tracer), or if `obj` is not a container; `ValueError` if two
    leaves would share a name; `CheckpointError` naming the field, and showing the
    orbax calls to use, for an array spread over several processes (not fully
    addressable); `OSError` from the file system. Nothing is written when it raises.

    **Example**

    >>> import os, tempfile
    >>> @tc.treeclass
    ... class Dense:
    ...     w: jax.Array
    ...     act: str = tc.static("relu")
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "dense.npz")
    >>> tc.save(path, Dense(jnp.arange(6.0, dtype=jnp.bfloat16).reshape(2, 3)))
    >>> sorted(np.load(path).files)  # an ordinary .npz
    ['__treeclass__', 'w']
    >>> tmp.cleanup()
    """
    path = _fspath(path, "save")
    root = check_root(obj, "save", "obj")
    members: dict[str, tuple[Any, str]] = {}
    tree = describe(obj, root, (), members)  # raises for any bad leaf, before writing
    _encoding.write_atomic(path, lambda f: _encoding.write(f, root, tree, members))


def load(path: str | os.PathLike[str], template: _T) -> _T:
    """Reads a file written by `save` into the structure of `template`.

    The file's structure, shapes, dtypes and static values are checked against the
    template's before any array is read. Leaves come back as the template's are: a
    `jax.Array` (or `jax.ShapeDtypeStruct`) leaf gives a `jax.Array` with the
    template's weak type and, if placed explicitly, its sharding; a numpy leaf gives
    numpy; a Python scalar gives a Python scalar. Static values come from the template.
    Nothing in the file is unpickled or executed.

    **Arguments**

    - `path`: a file written by `treeclass.save()`.
    - `template`: an instance built like the saved one (its values are not read), or
      `jax.eval_shape` of one.

    **Returns**

    A new instance of `type(template)` holding the file's arrays.

    **Raises**

    `CheckpointError` (a `ValueError`) naming the field path for a mismatch, or the
    file when it is damaged, truncated or not a treeclass checkpoint; `OSError` if it
    cannot be opened; `TypeError` for a template that is not a container.

    **Example**

    >>> import os, tempfile
    >>> @tc.treeclass
    ... class Dense:
    ...     w: jax.Array
    ...     act: str = tc.static("relu")
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "dense.npz")
    >>> layer = Dense(jnp.arange(6.0).reshape(2, 3))
    >>> tc.save(path, layer)
    >>> tc.load(path, Dense(jnp.zeros((2, 3)))) == layer
    True
    >>> tc.load(path, Dense(jnp.zeros((1, 3))))
    Traceback (most recent call last):
    treeclass.CheckpointError: Dense.w: shape (2, 3) in the file, (1, 3) in the template
    ...
    >>> tc.load(path, Dense(jnp.zeros((2, 3)), act="tanh"))
    Traceback (most recent call last):
    treeclass.CheckpointError: Dense.act: static value 'relu' in the file, 'tanh' in the template
    ...
    >>> tmp.cleanup()
    """
    path = _fspath(path, "load")
    root = check_root(template, "load", "template")
    with open(path, "rb") as f, Reader(f, path) as reader:
        return restore(template, reader.tree(), (), FileSource(root, reader))  # type: ignore[no-any-return]
