"""`save()` and `load()`: an ordinary `.npz` with a `.npy` member per array leaf, named
by its state-dict path (`layers.0.w.npy`), and `__treeclass__.npy`, the JSON manifest
(`describe`: structure, dtypes, shapes, weak types, static values). `load()` checks the
template against the manifest (`FileSource`, in `_serialization.restore`) before it
reads an array, then reads exactly the bytes the template expects (`Reader`): a damaged
or hostile file can neither run code nor make us allocate more. Writes are atomic.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import re
import secrets
import types
import zipfile
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any, Final, NoReturn, TypeVar, cast

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core
import jax.numpy as jnp
import numpy as np

from treeclass._layout import layout_of
from treeclass._repr import short_repr
from treeclass._serialization import (
    SCALARS,
    CheckpointError,
    Path,
    Source,
    arraylike,
    check_root,
    dotted,
    dtype_name,
    is_key,
    keyed,
    kind,
    restore,
    scalar_fits,
    wrong_argument,
)

_T = TypeVar("_T")
MANIFEST: Final = "__treeclass__"
_FORMAT: Final = "treeclass.npz"
_VERSION: Final = 1

_MSG_UNSTORABLE: Final = """\
{where} holds {what}, which a checkpoint cannot store.

Checkpoints hold arrays (jax.Array, numpy.ndarray) of numeric or bool dtype, typed PRNG
keys, and Python bool, int, float and complex values. Make the field static if it is
configuration:

    {field}: {type} = tc.static(...)

or store it as an array (jnp.asarray(...)) if it is data."""

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

SCALAR_STORED: Final = {bool: np.bool_, int: np.int64, float: np.float64, complex: np.complex128}
"""The dtype a Python scalar leaf is written as; the manifest says `python float`."""
SCALAR_NAMES: Final = {f"python {t.__name__}": t for t in SCALAR_STORED}


def stored_dtype(dtype: np.dtype[Any]) -> np.dtype[Any] | None:
    """The dtype an array of `dtype` is written as (native byte order); None if a
    checkpoint cannot hold it. A `.npy` header cannot name ml_dtypes (bfloat16, float8,
    int4: `np.save` writes `|V2`), so they are raw bits, the name in the manifest."""
    if dtype.names is not None or dtype.subdtype is not None:
        return None
    if dtype.isbuiltin == 2:  # a user-defined dtype: ml_dtypes'
        return np.dtype(f"u{dtype.itemsize}") if dtype.itemsize in (1, 2, 4, 8) else None
    return np.dtype(f"{dtype.kind}{dtype.itemsize}") if dtype.kind in "biufc" else None


def leaf_record(x: Any, where: str, field: str) -> tuple[str, tuple[int, ...], bool]:
    """`(dtype name, shape, weak_type)` of a leaf a checkpoint can hold (`python float`
    for a Python float); `TypeError` naming the field for any other leaf."""
    if type(x) in SCALARS:
        return f"python {type(x).__name__}", (), False
    if is_key(x):
        return dtype_name(x.dtype), tuple(x.shape), False
    if arraylike(x):
        if stored_dtype(np.dtype(x.dtype)) is not None:
            return dtype_name(x.dtype), tuple(x.shape), bool(getattr(x, "weak_type", False))
        what = f"an array of dtype {np.dtype(x.dtype)}"
    else:
        what = f"a {type(x).__name__} ({short_repr(x)})"
    msg = _MSG_UNSTORABLE.format(where=where, what=what, field=field, type=type(x).__name__)
    raise TypeError(msg)


def stored_like(template: Any) -> tuple[np.dtype[Any], tuple[int, ...]]:
    """The dtype and shape of the member holding a leaf like `template` (one that
    `leaf_record` accepted); a typed key's are its key data's."""
    if type(template) in SCALARS:
        return np.dtype(SCALAR_STORED[type(template)]), ()
    if is_key(template):
        data = jax.eval_shape(jax.random.key_data, template)
        return np.dtype(data.dtype), tuple(data.shape)
    stored = stored_dtype(np.dtype(template.dtype))
    assert stored is not None  # leaf_record() accepted the template's dtype
    return stored, tuple(template.shape)


def encode_leaf(x: Any, where: str) -> np.ndarray[Any, Any]:
    """The array `save()` writes for the leaf `x`, in its stored dtype."""
    if isinstance(x, jax.core.Tracer):
        msg = f"{where} is a tracer: treeclass.save() cannot run inside jax.jit or vmap."
        raise TypeError(msg)
    if isinstance(x, jax.ShapeDtypeStruct):
        msg = f"{where} is a jax.ShapeDtypeStruct, which has no values. Save a concrete instance."
        raise TypeError(msg)
    if type(x) in SCALARS:
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


# Newer jax rebuilds a key from its dtype, also an abstract template's
# (`jax.eval_shape`); the floor (jax 0.7) takes only `impl=`, which `key_impl()` reads
# from a concrete key, and an abstract key's dtype holds as `_impl`.
_WRAP_TAKES_DTYPE: Final = "dtype" in inspect.signature(jax.random.wrap_key_data).parameters


def _wrap_key_data(data: jax.Array, template: Any) -> jax.Array:
    if _WRAP_TAKES_DTYPE:
        key: jax.Array = jax.random.wrap_key_data(data, dtype=template.dtype)
        return key
    is_concrete = isinstance(template, jax.Array)
    impl = jax.random.key_impl(template) if is_concrete else template.dtype._impl
    key = jax.random.wrap_key_data(data, impl=impl)
    return key


def decode_leaf(template: Any, stored: np.ndarray[Any, Any]) -> Any:
    """`stored` (as read) as a leaf of the template's kind: a Python scalar, numpy, or
    a `jax.Array` with the template's weak type and, where the template was placed
    explicitly (committed, or a ShapeDtypeStruct with a sharding), its sharding."""
    if type(template) in SCALARS:
        return type(template)(stored.item())
    if is_key(template):
        result = _wrap_key_data(jnp.asarray(stored), template)
    else:
        dtype = np.dtype(template.dtype)
        array = stored.astype(dtype) if stored.dtype.kind == dtype.kind else stored.view(dtype)
        if isinstance(template, np.ndarray | np.generic):
            return array if isinstance(template, np.ndarray) else array[()]
        result = jnp.asarray(array)
        if getattr(template, "weak_type", False):
            # JAX has no public "make this weakly typed"; a weak scalar (from a Python
            # number) keeps its weak type when broadcast and scattered into.
            base = jnp.asarray({"f": 0.0, "i": 0, "c": 0j}.get(result.dtype.kind, False))
            if base.dtype == result.dtype and base.weak_type:  # only default dtypes are weak
                result = jnp.broadcast_to(base, result.shape).at[...].set(result)
    if isinstance(template, jax.core.Tracer):  # load() under jit: no placement to copy
        return result
    explicit = isinstance(template, jax.ShapeDtypeStruct) or getattr(template, "committed", False)
    if explicit and getattr(template, "sharding", None) is not None:
        return jax.device_put(result, template.sharding)
    return result


# Static values: only JSON is stored, and nothing is rebuilt from it: load() takes them
# from the template and compares encodings. A value that is not JSON (a function, a
# dtype, an enum member) is stored as a description, so `act: Callable =
# tc.static(default=jax.nn.relu)` can still be checkpointed, checked as well as described:
# `module.qualname` for functions and classes, else `repr` without memory addresses
# (`<Foo object at 0x7f...>` would never match in another process).
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
    dtype, shape, weak = leaf_record(x, where, path[-1])
    # Shards on other processes' devices (multi-process JAX) cannot be read from here.
    tracer = isinstance(x, jax.core.Tracer)
    if isinstance(x, jax.Array) and not tracer and not x.is_fully_addressable:
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
    """The saved side of `restore()` for a file: manifest entries, arrays read on demand."""

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
                theirs, ours = static[name], encode_static(getattr(template, name))
                if canonical(theirs) != canonical(ours):
                    what = f"static value {show_static(theirs)} in the file, {show_static(ours)}"
                    raise self.error((*path, name), f"{what} in the template")
        return cast("dict[str, Any]", children)

    def leaf(self, template: Any, saved: Any, path: Path) -> Any:
        where = dotted(self.root, path)
        dtype, shape, _ = leaf_record(template, where, path[-1])
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
        scalar = SCALAR_NAMES.get(saved_dtype)
        if scalar is not None and scalar_fits(scalar, template):  # into an eval_shape leaf
            data = self.reader.read(member, (np.dtype(SCALAR_STORED[scalar]), ()), where)
            return decode_leaf(template, data.astype(template.dtype))
        self.compare(path, (tuple(cast("list[int]", saved_shape)), saved_dtype), (shape, dtype))
        return decode_leaf(template, self.reader.read(member, stored_like(template), where))


def write_member(zf: zipfile.ZipFile, name: str, array: np.ndarray[Any, Any]) -> None:
    # What numpy.savez does for each array, minus its pickling of object arrays.
    with zf.open(name + ".npy", mode="w", force_zip64=True) as fp:
        np.lib.format.write_array(fp, array, allow_pickle=False)


def write_atomic(path: str, write_to: Callable[[IO[bytes]], None]) -> None:
    """Writes through `write_to` into a new file beside `path`, then renames it over
    `path`: a failure part-way leaves `path` as it was and no temporary file."""
    directory, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(directory, f".{base}.{secrets.token_hex(4)}.tmp")
    # os.open with 0o666 rather than tempfile.mkstemp: mkstemp makes the file 0o600, and
    # os.replace would carry that mode to the checkpoint; this way the umask applies.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write_to(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    # Make the rename itself durable; not possible on every platform, and not needed
    # for correctness (only for surviving a power cut), so failures are ignored.
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class Reader:
    """Reads the members of an open checkpoint; every failure is a `CheckpointError`."""

    def __init__(self, f: IO[bytes], path: str) -> None:
        self.path = path
        try:
            self.zf = zipfile.ZipFile(f)
        except Exception as e:  # noqa: BLE001 - see fail()
            self.fail("it is not a .npz (zip) file", e)

    def fail(self, what: str, error: Exception | None = None) -> NoReturn:
        """Raises the `CheckpointError` for a damaged file. zipfile and numpy report damage
        as anything (BadZipFile, ValueError, EOFError, OSError, struct.error, RuntimeError
        for a flipped "encrypted" flag, NotImplementedError for a flipped compression
        method, ...), so callers catch one type for it."""
        cause = f" ({type(error).__name__}: {error})" if error is not None else ""
        msg = (
            f"{self.path}: cannot load this checkpoint: {what}{cause}. The file is "
            "damaged, truncated, or was not written by treeclass.save()."
        )
        raise CheckpointError(msg) from error

    def tree(self) -> dict[str, Any]:
        """The manifest's tree, once the manifest is checked to be one."""
        array = self.read(MANIFEST, None, "the manifest")
        if array.dtype.kind != "U" or array.shape != ():
            self.fail(f"{MANIFEST}.npy is not a string")
        try:
            manifest: object = json.loads(str(array[()]))
        except ValueError as e:
            self.fail(f"{MANIFEST}.npy is not valid JSON", e)
        if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
            self.fail(f"{MANIFEST}.npy is not a treeclass manifest")
        version, tree = manifest.get("version"), manifest.get("tree")
        if version != _VERSION:
            msg = (
                f"{self.path}: checkpoint format version {version!r}; this treeclass "
                f"reads version {_VERSION}. Upgrade treeclass to load it."
            )
            raise CheckpointError(msg)
        if not isinstance(tree, dict):
            self.fail(f"{MANIFEST}.npy has no tree")
        return cast("dict[str, Any]", tree)

    def read(
        self, member: str, expect: tuple[np.dtype[Any], tuple[int, ...]] | None, where: str
    ) -> np.ndarray[Any, Any]:
        """The member's array; with `expect`, it must have that dtype (up to byte
        order, returned in native order) and shape, checked before the data is read."""
        name = member + ".npy"
        try:
            info = self.zf.getinfo(name)
        except KeyError:
            self.fail(f"{where}: the file has no member {name!r}")
        try:
            with self.zf.open(info) as fp:
                version = np.lib.format.read_magic(fp)
                if version not in ((1, 0), (2, 0)):
                    self.fail(f"{where}: {name} has .npy version {version}")
                read_header = getattr(np.lib.format, f"read_array_header_{version[0]}_0")
                shape, fortran, dtype = read_header(fp)
                if dtype.hasobject:
                    # What numpy.load(allow_pickle=False) refuses too: the data is a
                    # pickle, and unpickling runs code of the file's choosing.
                    self.fail(f"{where}: {name} holds pickled Python objects, never loaded")
                if expect is not None:
                    want = expect[0].kind, expect[0].itemsize, expect[1]
                    if (dtype.kind, dtype.itemsize, tuple(shape)) != want:
                        found = f"{dtype} {tuple(shape)}"
                        self.fail(f"{where}: {name} holds {found}, not {expect[0]} {expect[1]}")
                size = math.prod(shape) * dtype.itemsize
                if size > info.file_size:
                    self.fail(f"{where}: {name} is shorter than its header says")
                data = fp.read(size)
                # Reading past the end also makes zipfile check the member's CRC.
                if len(data) != size or fp.read(1):
                    self.fail(f"{where}: {name} does not hold {size} bytes")
        except CheckpointError:
            raise
        except Exception as e:  # noqa: BLE001 - see fail()
            self.fail(f"{where}: reading {name} failed", e)
        array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
        return array if expect is None else array.astype(expect[0].newbyteorder("="))


def _fspath(path: object, fn: str) -> str:
    try:
        # Untyped callers pass anything; os.fspath raises TypeError for a non-path.
        return os.fsdecode(os.fspath(cast("str", path)))
    except TypeError:
        takes = "a file path (str or os.PathLike) as `path`"
        raise wrong_argument(takes, fn, path) from None


def save(path: str | os.PathLike[str], obj: Any) -> None:
    """Writes `obj`'s dynamic leaves, structure and static values to a `.npz` file.

    Arrays are members named by their state-dict paths (`layers.0.w`), bfloat16 and
    other dtypes numpy cannot name as raw bits, typed PRNG keys as their key data. The
    file is written under a temporary name, then renamed over `path` (no `.npz` suffix
    is added), so `path` never holds half a checkpoint.

    **Arguments**

    - `path`: the file to write (`str` or `os.PathLike`); replaced if it exists.
    - `obj`: a treeclass instance, or a list, tuple or dict of them.

    **Returns**

    `None`.

    **Raises**

    Before writing anything: `TypeError` naming the field for a leaf a checkpoint
    cannot hold (a string, an object array, a tracer), or if `obj` is not a
    container; `ValueError` if two leaves would share a name; `CheckpointError`,
    showing the orbax calls to use, for an array spread over several processes.
    `OSError` from the file system.

    **Example**

    >>> import os, tempfile
    >>> @tc.treeclass
    ... class Dense:
    ...     w: jax.Array
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "dense.npz")
    >>> tc.save(path, Dense(jnp.ones((2, 3), dtype=jnp.bfloat16)))
    >>> sorted(np.load(path).files)  # an ordinary .npz
    ['__treeclass__', 'w']
    >>> tmp.cleanup()
    """
    path = _fspath(path, "save")
    root = check_root(obj, "save", "obj")
    members: dict[str, tuple[Any, str]] = {}
    tree = describe(obj, root, (), members)  # raises for any bad leaf, before writing

    def write(f: IO[bytes]) -> None:
        # Each leaf is encoded as it is written, so only one is on the host at a time.
        with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, (x, where) in members.items():
                write_member(zf, name, encode_leaf(x, where))
            manifest = {"format": _FORMAT, "version": _VERSION, "root": root, "tree": tree}
            write_member(zf, MANIFEST, np.asarray(json.dumps(manifest, allow_nan=False)))

    write_atomic(path, write)


def load(path: str | os.PathLike[str], template: _T) -> _T:
    """Reads a file written by `save` into the structure of `template`.

    The file's structure, shapes, dtypes and static values are checked against the
    template's before any array is read; nothing in the file is unpickled or run.
    Leaves come back as the template's: a `jax.Array` (or `ShapeDtypeStruct`) gives a
    `jax.Array` with its weak type and explicit sharding, numpy numpy, a Python scalar
    a Python scalar.

    **Arguments**

    - `path`: a file written by `treeclass.save()`.
    - `template`: an instance built like the saved one (its values are not read), or
      `jax.eval_shape` of one.

    **Returns**

    A new instance of `type(template)`; static values are the template's.

    **Raises**

    `CheckpointError` naming the field path for a mismatch, or the file when it is
    damaged, truncated or not a treeclass checkpoint; `OSError` if it cannot be
    opened; `TypeError` for a template that is not a container.

    **Example**

    >>> import os, tempfile
    >>> @tc.treeclass
    ... class Dense:
    ...     w: jax.Array
    ...     act: str = tc.static(default="relu")
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
    with open(path, "rb") as f:
        reader = Reader(f, path)
        with reader.zf:
            return restore(template, reader.tree(), (), FileSource(root, reader))  # type: ignore[no-any-return]
