"""The checkpoint format: what a manifest holds (`__treeclass__.npy`: the structure, each
leaf's dtype, shape, weak type and CRC-32, static values and configuration in a canonical
form), and how each leaf is stored as a member (`layers.0.w.npy`): raw bits for ml_dtypes
such as bfloat16, key data for typed PRNG keys, Python numbers at 64 bits.

`save()` writes what `manifest_entry()` and `encode_leaf()` return; `load()` compares the
manifest with its template through the same functions (`leaf_record()`, `encode_static()`),
so both sides of a checkpoint agree by construction."""

import dataclasses
import enum
import json
import math
import re
from typing import Any, Final, cast

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core
import numpy as np

from treeclass._checkpoint.template import (
    CheckpointError,
    arraylike,
    config_child,
    dtype_str,
    is_key,
    keyed,
    state_key,
)
from treeclass._core.layout import layout_of
from treeclass._core.show import short_repr
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
    target = jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), obj, shardings
    )
    with ocp.StandardCheckpointer() as checkpointer:
        obj = checkpointer.restore(path, target)"""

# How a Python number is written; the manifest says `python float`.
SCALAR_STORED: Final = {bool: np.bool_, int: np.int64, float: np.float64, complex: np.complex128}
SCALAR_NAMES: Final = {f"python {t.__name__}": t for t in SCALAR_STORED}
_ADDRESS: Final = re.compile(r" at 0x[0-9a-fA-F]+")  # in a repr: `<Foo object at 0x7f...>`

Stored = tuple[np.dtype[Any], tuple[int, ...]]  # a member's dtype and shape
# What save() writes, by member name: (leaf, its path in messages, its manifest record).
Members = dict[str, tuple[Any, str, dict[str, Any]]]


def stored_dtype(dtype: np.dtype[Any]) -> np.dtype[Any] | None:
    """The dtype `dtype` is written as, or None; ml_dtypes (a .npy header cannot name) as bits."""
    if dtype.names is not None or dtype.subdtype is not None:
        return None
    if dtype.isbuiltin == 2:  # a user-defined dtype: ml_dtypes'
        return np.dtype(f"u{dtype.itemsize}") if dtype.itemsize in (1, 2, 4, 8) else None
    return np.dtype(f"{dtype.kind}{dtype.itemsize}") if dtype.kind in "biufc" else None


def leaf_record(x: Any, where: str, field: str) -> tuple[str, tuple[int, ...], bool, Stored]:
    """`(dtype name, shape, weak_type, stored)` of a leaf, as the manifest records it, and the
    dtype and shape of its member; `TypeError` naming `where` and `field` if unstorable.

    `save()` asks it of each leaf, `load()` of each template leaf: what the template would
    have written is what the file must hold."""
    if type(x) in PYTHON_SCALARS:
        return f"python {type(x).__name__}", (), False, (np.dtype(SCALAR_STORED[type(x)]), ())
    if is_key(x):
        data = jax.eval_shape(jax.random.key_data, x)
        return dtype_str(x.dtype), tuple(x.shape), False, (np.dtype(data.dtype), data.shape)
    stored = stored_dtype(np.dtype(x.dtype)) if arraylike(x) else None
    if stored is not None:
        weak = bool(getattr(x, "weak_type", False))
        return dtype_str(x.dtype), tuple(x.shape), weak, (stored, tuple(x.shape))
    what = (
        f"an array of dtype {np.dtype(x.dtype)}"
        if arraylike(x)
        else f"a {type(x).__name__} ({short_repr(x)})"
    )
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
    """`module.qualname` of a class or function, by which a static value names it (`qualname`
    alone for builtins: `frozenset`)."""
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
    """An encoded static value as one string, its dict keys sorted: two static values are the
    same where these are equal (and sets and dicts sort their items by it)."""
    return json.dumps(encoded, sort_keys=True)


def show_static(encoded: Any, depth: int = 0) -> str:
    """An encoded static value as the user wrote it (near enough), for messages."""
    if depth > 20:  # a damaged file's can be nested past the recursion limit
        return "..."
    tagged = isinstance(encoded, dict) and len(encoded) == 1  # {"frozenset": [...]}
    tag, inner = next(iter(encoded.items())) if tagged else ("", encoded)
    if isinstance(inner, list):
        items = ", ".join(show_static(item, depth + 1) for item in cast("list[object]", inner))
        if "set" in tag:
            return f"{tag}({{{items}}})"  # frozenset({1, 2})
        one_tuple = "," if len(inner) == 1 else ""  # (1,)
        return f"{tag}({items}{one_tuple})"
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

    A node's entry is `{"type", "static"?, "children"}`, a leaf's its record (`{"leaf": member
    name, "dtype", "shape", "weak_type"}`), `None` stays `None`. `rule`: the rule of `x`'s
    owner (`walk.rule_of`); a child it makes configuration is written as `{"config": value}`
    in the canonical form of statics. Raises before anything is written, for any leaf a
    checkpoint cannot hold."""
    where = path_str(root, path)
    pairs = None if x is None else keyed(x, lambda: where)
    if pairs is not None:
        entry: dict[str, Any] = {"type": type(x).__qualname__}
        statics = node_statics(x)
        if statics is not None:
            entry["static"] = {n: encode_static(v) for n, v in statics.items()}
        inner = rule_of(x, rule)
        entry["children"] = {
            key: {"config": encode_static(child)}
            if config_child(inner, child)
            else manifest_entry(child, root, (*path, entry_key), members, inner)
            for entry_key, key, child in pairs
        }
        return entry
    if x is None:
        return None
    field = state_key(path[-1:])  # the last key, which a fix in a message names
    dtype, shape, weak, _ = leaf_record(x, where, field)
    concrete = isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer)
    if concrete and not x.is_fully_addressable:
        raise CheckpointError(_MSG_SPREAD.format(where=where))  # shards on other processes
    member = state_key(path)
    if member in members or member == MANIFEST:
        msg = (
            f"{where}: two leaves (or a leaf and the manifest) would be stored as {member}.npy"
            " in the file; rename a dict key."
        )
        raise ValueError(msg)
    record = {"leaf": member, "dtype": dtype, "shape": list(shape), "weak_type": weak}
    members[member] = (x, where, record)
    return record
