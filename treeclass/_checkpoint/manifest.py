"""A checkpoint's JSON manifest (`__treeclass__.npy`: structure, each leaf's dtype, shape,
weak type and CRC-32, static values) and how each leaf is stored (`layers.0.w.npy`). `load()`
checks it against the template (`FileSource`) before it reads the bytes the template expects."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn, cast

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core
import numpy as np
from jax.tree_util import GetAttrKey

from treeclass._checkpoint.state_dict import (
    SCALAR_KINDS,
    CheckpointError,
    Source,
    arraylike,
    as_template,
    dtype_str,
    is_key,
    keyed,
    scalar_fits,
    state_key,
)
from treeclass._core.layout import layout_of
from treeclass._core.show import describe, short_repr
from treeclass._core.walk import PYTHON_SCALARS, KeyPath, path_str

MANIFEST: Final = "__treeclass__"
FORMAT: Final = "treeclass.npz"
VERSION: Final = 1

_MSG_UNSTORABLE: Final = """\
{where} holds {what}, which a checkpoint cannot store. It holds arrays of numeric or
bool dtype, typed PRNG keys and Python numbers: make the field static if it is
configuration, `{field}: tc.Static[{type}]`, or an array (jnp.asarray(...)) if it is data."""

_MSG_SPREAD: Final = """\
{where} is a jax.Array spread over several processes (not fully addressable from this one).
treeclass.save() writes one file from one process and cannot gather it. Save and restore
sharded models with orbax, calling it from every process:

    import orbax.checkpoint as ocp
    with ocp.StandardCheckpointer() as checkpointer:  # leaving it waits for the write
        checkpointer.save(path, obj)
    # Restore onto the same shardings: a target of shapes, dtypes and shardings.
    shardings = tc.shardings(obj, mesh)
    target = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), obj, shardings)
    with ocp.StandardCheckpointer() as checkpointer:
        obj = checkpointer.restore(path, target)"""

# How a Python number is written; the manifest says `python float`.
SCALAR_STORED: Final = {bool: np.bool_, int: np.int64, float: np.float64, complex: np.complex128}
SCALAR_NAMES: Final = {f"python {t.__name__}": t for t in SCALAR_STORED}
_ADDRESS: Final = re.compile(r" at 0x[0-9a-fA-F]+")  # in a repr: `<Foo object at 0x7f...>`

Stored = tuple[np.dtype[Any], tuple[int, ...]]  # a member's dtype and shape
Members = dict[str, tuple[Any, str, dict[str, Any]]]  # name: (leaf, path, manifest record)
Read = Callable[[str, Stored, str, int], np.ndarray[Any, Any]]  # npz.py's Reader.read


def stored_dtype(dtype: np.dtype[Any]) -> np.dtype[Any] | None:
    """The dtype `dtype` is written as, or None. A `.npy` header cannot name ml_dtypes
    (bfloat16: `np.save` writes `|V2`), so they are raw bits, named in the manifest."""
    if dtype.names is not None or dtype.subdtype is not None:
        return None
    if dtype.isbuiltin == 2:  # a user-defined dtype: ml_dtypes'
        return np.dtype(f"u{dtype.itemsize}") if dtype.itemsize in (1, 2, 4, 8) else None
    return np.dtype(f"{dtype.kind}{dtype.itemsize}") if dtype.kind in "biufc" else None


def leaf_record(x: Any, where: str, field: str) -> tuple[str, tuple[int, ...], bool, Stored]:
    """`(dtype name, shape, weak_type, stored)` of a leaf; `TypeError` if unstorable."""
    if type(x) in PYTHON_SCALARS:
        return f"python {type(x).__name__}", (), False, (np.dtype(SCALAR_STORED[type(x)]), ())
    if is_key(x):
        data = jax.eval_shape(jax.random.key_data, x)
        return dtype_str(x.dtype), tuple(x.shape), False, (np.dtype(data.dtype), data.shape)
    stored = stored_dtype(np.dtype(x.dtype)) if arraylike(x) else None
    if stored is not None:
        weak = bool(getattr(x, "weak_type", False))
        return dtype_str(x.dtype), tuple(x.shape), weak, (stored, tuple(x.shape))
    what = f"an array of dtype {np.dtype(x.dtype)}" if arraylike(x) else f"a {type(x).__name__}"
    what += "" if arraylike(x) else f" ({short_repr(x)})"
    msg = _MSG_UNSTORABLE.format(where=where, what=what, field=field, type=type(x).__name__)
    raise TypeError(msg)


def encode_leaf(x: Any, where: str) -> np.ndarray[Any, Any]:
    """The array `save()` writes for the leaf `x`, in its stored dtype."""
    if isinstance(x, jax.core.Tracer):
        msg = f"{where} is a tracer: treeclass.save() cannot run inside jax.jit or vmap."
        raise TypeError(msg)
    if isinstance(x, jax.ShapeDtypeStruct):
        msg = f"{where} is a jax.ShapeDtypeStruct, which has no values. Save a concrete instance."
        raise TypeError(msg)
    if type(x) in PYTHON_SCALARS:
        try:
            return np.asarray(x, dtype=SCALAR_STORED[type(x)])
        except OverflowError:
            msg = f"{where} holds the int {x}, which does not fit in int64. Store it as an array."
            raise TypeError(msg) from None
    array = np.asarray(jax.random.key_data(x) if is_key(x) else x)  # device -> host
    stored = stored_dtype(array.dtype)
    assert stored is not None  # leaf_record() accepted it
    if stored.kind == array.dtype.kind:
        return array.astype(stored, copy=False)
    return np.asarray(array, order="C").view(stored)  # (ascontiguousarray makes 0-d 1-d)


def decode_leaf(template: Any, stored: np.ndarray[Any, Any]) -> Any:
    """`stored` (raw bits for ml_dtypes, key data for keys) as a leaf of the template's kind."""
    if not is_key(template) and type(template) not in PYTHON_SCALARS:
        dtype = np.dtype(template.dtype)
        same = stored.dtype.kind == dtype.kind
        stored = stored.astype(dtype, copy=False) if same else stored.view(dtype)
    return as_template(template, stored)


def _name(t: Any) -> str:
    module, qualname = getattr(t, "__module__", "?"), getattr(t, "__qualname__", "?")
    return qualname if module == "builtins" else f"{module}.{qualname}"


def encode_static(value: Any) -> Any:
    """`value` as JSON, the same in every process: sets and dicts sorted (a repr follows
    PYTHONHASHSEED), functions, classes and enum members by name, else a repr sans addresses."""
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, enum.Enum):  # by name, as jax.export finds it (not by its repr)
        return {"repr": f"{_name(type(value))}.{value.name}"}
    if isinstance(value, tuple | list | set | frozenset | dict):
        items = [encode_static(v) for v in (value.items() if isinstance(value, dict) else value)]
        if type(value) is tuple:
            return items
        if isinstance(value, set | frozenset | dict):
            items.sort(key=canonical)
        return {_name(type(value)): items}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: encode_static(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {_name(type(value)): fields}
    if callable(value) and hasattr(value, "__qualname__") and hasattr(value, "__module__"):
        return {"repr": _name(value)}
    return {"repr": _ADDRESS.sub("", repr(value))}


def canonical(encoded: Any) -> str:
    return json.dumps(encoded, sort_keys=True)


def show_static(encoded: Any, depth: int = 0) -> str:
    """An encoded static value as the user wrote it (near enough), for messages."""
    if depth > 20:  # a damaged file's can be nested past the recursion limit
        return "..."
    one = isinstance(encoded, dict) and len(encoded) == 1  # a tagged value
    tag, inner = next(iter(encoded.items())) if one else ("", encoded)
    if isinstance(inner, list):
        items = ", ".join(show_static(item, depth + 1) for item in cast("list[object]", inner))
        return f"{tag}({{{items}}})" if "set" in tag else f"{tag}({items}{',' * (len(inner) == 1)})"
    if tag in ("repr", "float"):
        return str(inner)
    return canonical(encoded) if isinstance(encoded, dict) else repr(encoded)


def manifest_entry(x: Any, root: str, path: KeyPath, members: Members) -> Any:
    """The manifest entry for `x`; its leaves go into `members` (`save()` adds their `crc32`)."""
    where = path_str(root, path)
    pairs = None if x is None else keyed(x, lambda: where)
    if pairs is not None:
        entry: dict[str, Any] = {"type": type(x).__qualname__}
        layout = layout_of(x)
        if layout is not None:
            entry["static"] = {n: encode_static(getattr(x, n)) for n in layout.static}
        entry["children"] = {k: manifest_entry(c, root, (*path, e), members) for e, k, c in pairs}
        return entry
    if x is None:
        return None
    dtype, shape, weak, _ = leaf_record(x, where, state_key(path[-1:]))
    concrete = isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer)
    if concrete and not x.is_fully_addressable:
        raise CheckpointError(_MSG_SPREAD.format(where=where))  # shards on other processes
    member = state_key(path)
    if member in members or member == MANIFEST:
        msg = f"{where}: two leaves (or a leaf and the manifest) would be stored as {member}.npy"
        msg += " in the file; rename a dict key."
        raise ValueError(msg)
    record = {"leaf": member, "dtype": dtype, "shape": list(shape), "weak_type": weak}
    members[member] = (x, where, record)
    return record


class FileSource(Source):
    """The saved side of `restore()` for a file: manifest entries, arrays read on demand."""

    name = "file"

    def __init__(self, root: str, read: Read, fail: Callable[[str], NoReturn]) -> None:
        super().__init__(root)
        self.read, self.fail = read, fail

    def malformed(self, path: KeyPath) -> NoReturn:
        self.fail(f"its manifest is malformed at {path_str(self.root, path)}")

    def show(self, saved: Any) -> str:
        if isinstance(saved, dict):  # a manifest entry: a leaf record or a container
            entry = cast("dict[str, Any]", saved)
            return "an array" if "leaf" in entry else f"a {entry.get('type', 'container')}"
        return describe(saved, shape=False)

    def children(self, template: Any, saved: Any, path: KeyPath) -> Mapping[str, Any]:
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
                theirs, ours = static[name], encode_static(getattr(template, name))
                if canonical(theirs) != canonical(ours):
                    what = f"static value {show_static(theirs)} in the file, {show_static(ours)}"
                    raise self.error((*path, GetAttrKey(name)), f"{what} in the template")
        return cast("dict[str, Any]", children)

    def leaf(self, template: Any, saved: Any, path: KeyPath) -> Any:
        where = path_str(self.root, path)
        dtype, shape, _, stored = leaf_record(template, where, state_key(path[-1:]))
        if not isinstance(saved, dict) or "leaf" not in saved:
            raise self.mismatch(path, template, saved)
        member = state_key(path)
        saved_dtype, saved_shape, crc = map(saved.get, ("dtype", "shape", "crc32"))
        if not (
            saved.get("leaf") == member  # not another leaf's record, CRC-32 and all
            and isinstance(saved_dtype, str)
            and type(crc) is int
            and isinstance(saved_shape, list)
            and all(type(n) is int and n >= 0 for n in cast("list[object]", saved_shape))
        ):
            self.malformed(path)
        scalar = SCALAR_NAMES.get(saved_dtype)
        if scalar is not None and scalar_fits(scalar, template):  # into an eval_shape leaf
            value = self.read(member, (np.dtype(SCALAR_STORED[scalar]), ()), where, crc).item()
            value = self.fill(path, value, template)
            return as_template(template, np.asarray(value, template.dtype))
        if type(template) in PYTHON_SCALARS and saved_shape == [] and scalar is None:
            # A 0-d array of the number's kind, as from_state_dict takes (stores give them).
            with contextlib.suppress(TypeError):  # a key's, an ml_dtype's or a damaged name
                if np.dtype(saved_dtype).kind in SCALAR_KINDS[type(template)]:
                    dtype, stored = saved_dtype, (np.dtype(saved_dtype), ())
        self.compare(path, (tuple(cast("list[int]", saved_shape)), saved_dtype), (shape, dtype))
        return decode_leaf(template, self.read(member, stored, where, crc))
