"""A checkpoint's JSON manifest (`__treeclass__.npy`: structure, each leaf's dtype, shape,
weak type and CRC-32, static values), how each leaf is stored (`layers.0.w.npy`), and `FileSource`,
which `load()` reads through: each member checked against manifest and template before its bytes."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import math
import os
import re
import zipfile
from collections.abc import Mapping
from typing import IO, Any, Final, NoReturn, cast

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
    config_child,
    dtype_str,
    is_key,
    keyed,
    scalar_fits,
    state_key,
)
from treeclass._core.layout import layout_of
from treeclass._core.show import describe, short_repr
from treeclass._core.walk import PYTHON_SCALARS, KeyPath, Rule, equinox_statics, path_str, rule_of

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
_Array = np.ndarray[Any, Any]
_Expect = Stored | None  # None for the manifest
Members = dict[str, tuple[Any, str, dict[str, Any]]]  # name: (leaf, path, manifest record)


def stored_dtype(dtype: np.dtype[Any]) -> np.dtype[Any] | None:
    """The dtype `dtype` is written as, or None; ml_dtypes (a .npy header cannot name) as bits."""
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


def _name(t: Any) -> str:
    module, qualname = getattr(t, "__module__", "?"), getattr(t, "__qualname__", "?")
    return qualname if module == "builtins" else f"{module}.{qualname}"


def encode_static(value: Any) -> Any:
    """`value` as JSON, alike in each process: sets and dicts sorted, code by name, no addresses."""
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


def node_statics(x: Any) -> dict[str, Any] | None:
    """The static values of a treeclass or an equinox Module (`eqx.field(static=True)`),
    which the manifest records and `load()` compares; None for other nodes."""
    layout = layout_of(x)
    if layout is not None:
        return {n: getattr(x, n) for n in layout.static}
    return equinox_statics(x) or None


def manifest_entry(x: Any, root: str, path: KeyPath, members: Members, rule: Rule = "plain") -> Any:
    """The manifest entry for `x`; its leaves go into `members` (`save()` adds their `crc32`).
    `rule`: the rule of `x`'s owner; configuration is written as a static value."""
    where = path_str(root, path)
    pairs = None if x is None else keyed(x, lambda: where)
    if pairs is not None:
        entry: dict[str, Any] = {"type": type(x).__qualname__}
        statics = node_statics(x)
        if statics is not None:
            entry["static"] = {n: encode_static(v) for n, v in statics.items()}
        inner = rule_of(x, rule)
        entry["children"] = {
            k: {"config": encode_static(c)}
            if config_child(inner, c)
            else manifest_entry(c, root, (*path, e), members, inner)
            for e, k, c in pairs
        }
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


_HEADER = 8 + 4 + 10_000  # .npy magic, header length, numpy's largest header it reads


class _Capped:
    """A member giving at most `left` bytes, plus one: zipfile inflates all it is asked for."""

    def __init__(self, fp: IO[bytes], left: int) -> None:
        self.fp, self.left = fp, left + 1

    def read(self, n: int = -1) -> bytes:
        data = self.fp.read(self.left if n < 0 else min(n, self.left))
        self.left -= len(data)
        return data


class FileSource(Source):
    """The saved side of `restore()` for an open file; its every failure is a `CheckpointError`."""

    name = "file"
    holds_config = True  # configuration is written as a static value, compared on load

    def __init__(self, f: IO[bytes], path: str, root: str) -> None:
        super().__init__(root)
        self.path, self.size = path, os.fstat(f.fileno()).st_size
        try:
            self.zf = zipfile.ZipFile(f)
        except Exception as e:  # noqa: BLE001 - see fail()
            self.fail("it is not a .npz (zip) file", e)

    def fail(self, what: str, error: Exception | None = None) -> NoReturn:
        """The `CheckpointError` for damage, which zipfile and numpy report as any exception."""
        cause = f" ({type(error).__name__}: {error})" if error is not None else ""
        msg = f"{self.path}: cannot load this checkpoint: {what}{cause}. The file is damaged, "
        msg += "truncated, or was not written by treeclass.save()."
        raise CheckpointError(msg) from error

    def tree(self) -> dict[str, Any]:
        """The manifest's tree, once the manifest is checked to be one."""
        array = self.read(MANIFEST, None, "the manifest")
        try:
            manifest = json.loads(str(array[()])) if array.dtype.kind == "U" else None
        except (ValueError, RecursionError) as e:  # (nested past the parser's depth)
            self.fail(f"{MANIFEST}.npy is not valid JSON", e)
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            self.fail(f"{MANIFEST}.npy is not a treeclass manifest")
        version, tree = manifest.get("version"), manifest.get("tree")
        if version != VERSION:
            msg = f"{self.path}: checkpoint format version {version!r}; this treeclass reads "
            msg += f"version {VERSION}. Load it with the treeclass version that wrote it."
            raise CheckpointError(msg)
        if not isinstance(tree, dict):
            self.fail(f"{MANIFEST}.npy has no tree")
        return cast("dict[str, Any]", tree)

    def read(self, member: str, expect: _Expect, where: str, crc: int | None = None) -> _Array:
        """The member's array; `expect`ed dtype and shape checked before reading, `crc` by zipfile."""
        name = member + ".npy"
        try:
            info = self.zf.getinfo(name)
        except KeyError:
            self.fail(f"{where}: the file has no member {name!r}")
        if crc is not None and crc != info.CRC:
            self.fail(f"{where}: {name} is not the array the manifest records (another CRC-32)")
        # At most the bytes this member may hold, whatever its header claims (a zip bomb).
        bound = self.size + 2**20  # the manifest, stored uncompressed
        if expect is not None:
            bound = _HEADER + math.prod(expect[1]) * expect[0].itemsize
        try:
            with self.zf.open(info) as member_fp:
                fp = _Capped(member_fp, bound)
                version = np.lib.format.read_magic(fp)
                if version not in ((1, 0), (2, 0)):
                    self.fail(f"{where}: {name} has .npy version {version}")
                read_header = getattr(np.lib.format, f"read_array_header_{version[0]}_0")
                shape, fortran, dtype = read_header(fp)
                if dtype.hasobject:  # a pickle: unpickling runs code of the file's choosing
                    self.fail(f"{where}: {name} holds pickled Python objects, never loaded")
                found = dtype.kind, dtype.itemsize, tuple(shape)
                if expect is not None and found != (expect[0].kind, expect[0].itemsize, expect[1]):
                    what = f"holds {dtype} {found[2]}, not {expect[0]} {expect[1]}"
                    self.fail(f"{where}: {name} {what}")
                size = math.prod(shape) * dtype.itemsize
                data = fp.read(size)  # no more than the member holds
                # Reading to the end makes zipfile check the bytes against the CRC.
                if len(data) != size or fp.read(1):
                    self.fail(f"{where}: {name} does not hold {size} bytes")
        except CheckpointError:
            raise
        except Exception as e:  # noqa: BLE001 - see fail()
            self.fail(f"{where}: reading {name} failed", e)
        array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
        return array if expect is None else array.astype(expect[0].newbyteorder("="))

    def malformed(self, path: KeyPath) -> NoReturn:
        self.fail(f"its manifest is malformed at {path_str(self.root, path)}")

    def show(self, saved: Any) -> str:
        if isinstance(saved, dict):  # a manifest entry: a leaf record or a container
            entry = cast("dict[str, Any]", saved)
            if "config" in entry:
                return f"the configuration {show_static(entry['config'])}"
            return "an array" if "leaf" in entry else f"a {entry.get('type', 'container')}"
        return describe(saved, shape=False)

    def config(self, path: KeyPath, template: Any, saved: Any) -> Any:
        """The template's configuration leaf, once equal to the file's."""
        if isinstance(saved, dict) and "leaf" in saved and type(template) in PYTHON_SCALARS:
            # Written before configuration was (a Python number stored as a leaf): read back.
            theirs = encode_static(self.leaf(template, saved, path))
        elif not isinstance(saved, dict) or "config" not in saved:
            raise self.mismatch(path, template, saved)
        else:
            theirs = cast("dict[str, Any]", saved)["config"]
        ours = encode_static(template)
        if canonical(theirs) != canonical(ours):
            what = f"{show_static(theirs)} in the file, {show_static(ours)} in the template"
            raise self.error(path, f"configuration {what}")
        return template

    def children(self, template: Any, saved: Any, path: KeyPath) -> Mapping[str, Any]:
        if not isinstance(saved, dict) or "leaf" in saved:
            raise self.mismatch(path, template, saved)
        entry = cast("dict[str, Any]", saved)
        children, static = entry.get("children"), entry.get("static", {})
        if not isinstance(children, dict) or not isinstance(static, dict):
            self.malformed(path)
        static = cast("dict[str, Any]", static)
        statics = node_statics(template)
        # An equinox Module's statics are compared where the file has them (written since).
        if statics is not None and (layout_of(template) is not None or "static" in entry):
            names, mine = sorted(static), sorted(statics)
            if names != mine:
                raise self.error(path, f"static fields {names} in the file, {mine} in the template")
            for name, value in statics.items():
                theirs, ours = static[name], encode_static(value)
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
            return as_template(template, self.fill(path, value, template))
        if type(template) in PYTHON_SCALARS and saved_shape == [] and scalar is None:
            # A 0-d array of the number's kind, as from_state_dict takes (stores give them).
            with contextlib.suppress(TypeError):  # a key's, an ml_dtype's or a damaged name
                if np.dtype(saved_dtype).kind in SCALAR_KINDS[type(template)]:
                    dtype, stored = saved_dtype, (np.dtype(saved_dtype), ())
        self.compare(path, (tuple(cast("list[int]", saved_shape)), saved_dtype), (shape, dtype))
        array = self.read(member, stored, where, crc)  # raw bits for ml_dtypes, key data for keys
        if not is_key(template) and type(template) not in PYTHON_SCALARS:
            same = array.dtype.kind == np.dtype(template.dtype).kind
            array = array.astype(template.dtype, copy=False) if same else array.view(template.dtype)
        return as_template(template, array)
