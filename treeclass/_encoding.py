"""The bytes of a checkpoint: a leaf as a `.npy` member (`leaf_record`, `encode_leaf`,
`decode_leaf`), and the `.npz` (zip) that holds the members and the manifest, written
atomically and read by a `Reader` that checks each `.npy` header before it reads
exactly the bytes the template expects: a damaged or hostile file can neither run
code nor make us allocate more than the template's arrays. `_npz.py` writes and
checks the manifest, and puts these together into `save()` and `load()`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import zipfile
from collections.abc import Callable
from typing import IO, Any, Final, NoReturn, cast

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core
import jax.numpy as jnp
import numpy as np

from treeclass._repr import short_repr
from treeclass._serialization import SCALARS, CheckpointError, arraylike, dtype_name, is_key

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

# ---------------------------------------------------------------------------------------
# One leaf: its manifest record, the array written for it, the leaf read back.

SCALAR_STORED: Final = {
    bool: np.dtype(np.bool_),
    int: np.dtype(np.int64),
    float: np.dtype(np.float64),
    complex: np.dtype(np.complex128),
}
"""The dtype a Python scalar leaf is written as; its manifest dtype is `python float`."""
SCALAR_NAMES: Final = {f"python {t.__name__}": t for t in SCALAR_STORED}


def stored_dtype(dtype: np.dtype[Any]) -> np.dtype[Any] | None:
    """The dtype an array of `dtype` is written as; None if a checkpoint cannot hold it.

    The dtypes JAX adds through ml_dtypes (bfloat16, float8_*, int4) are not numpy
    builtins, and a `.npy` header cannot name them (`np.save` writes bfloat16 as `|V2`,
    raw void): they are written as raw bits (`uint16` for bfloat16), the real name in
    the manifest. numpy's own numeric dtypes are written as they are, in native order."""
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
    """The dtype and shape of the member that holds a leaf like `template` (one that
    `leaf_record` accepted): a typed key's is its key data's."""
    if type(template) in SCALARS:
        return SCALAR_STORED[type(template)], ()
    if is_key(template):
        data = jax.eval_shape(jax.random.key_data, template)
        return np.dtype(data.dtype), tuple(data.shape)
    stored = stored_dtype(np.dtype(template.dtype))
    assert stored is not None  # leaf_record() accepted the template's dtype
    return stored, tuple(template.shape)


def encode_leaf(x: Any, where: str) -> np.ndarray[Any, Any]:
    """The array `save()` writes for the leaf `x`: in its stored dtype (ml_dtypes as
    raw bits), a typed key as its key data (the manifest names the implementation)."""
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


def _weak(x: jax.Array) -> jax.Array:
    # JAX has no public "make this array weakly typed". Weak scalars come from Python
    # numbers, and broadcasting them and scattering into them keeps the weak type.
    base = jnp.asarray({"f": 0.0, "i": 0, "c": 0j}.get(x.dtype.kind, False))
    if base.dtype != x.dtype or not base.weak_type:
        return x  # only the default dtypes have weak variants
    return jnp.broadcast_to(base, x.shape).at[...].set(x)


def decode_leaf(template: Any, stored: np.ndarray[Any, Any]) -> Any:
    """`stored` (as read, in its stored dtype) as a leaf of the template's kind: a
    Python scalar for a Python scalar, numpy for numpy, else a `jax.Array` with the
    template's weak type and, where the template was placed explicitly (a committed
    array, or a ShapeDtypeStruct with a sharding), its sharding."""
    if type(template) in SCALARS:
        return type(template)(stored.item())
    if is_key(template):
        result = jax.random.wrap_key_data(jnp.asarray(stored), dtype=template.dtype)
    else:
        dtype = np.dtype(template.dtype)
        array = stored.astype(dtype) if stored.dtype.kind == dtype.kind else stored.view(dtype)
        if isinstance(template, np.ndarray | np.generic):
            return array if isinstance(template, np.ndarray) else array[()]
        result = jnp.asarray(array)
        if getattr(template, "weak_type", False):
            result = _weak(result)
    if isinstance(template, jax.core.Tracer):  # load() under jit: no placement to copy
        return result
    explicit = isinstance(template, jax.ShapeDtypeStruct) or getattr(template, "committed", False)
    if explicit and getattr(template, "sharding", None) is not None:
        return jax.device_put(result, template.sharding)
    return result


# ---------------------------------------------------------------------------------------
# The zip: written atomically, read without pickle.


def write(f: IO[bytes], root: str, tree: Any, members: dict[str, tuple[Any, str]]) -> None:
    """Writes the zip: each leaf's array (encoded as it is written, so only one is on
    the host at a time), then the manifest."""
    with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, (x, where) in members.items():
            write_member(zf, name, encode_leaf(x, where))
        manifest = {"format": _FORMAT, "version": _VERSION, "root": root, "tree": tree}
        write_member(zf, MANIFEST, np.asarray(json.dumps(manifest, allow_nan=False)))


def write_member(zf: zipfile.ZipFile, name: str, array: np.ndarray[Any, Any]) -> None:
    # What numpy.savez does for each array, minus its pickling of object arrays.
    with zf.open(name + ".npy", mode="w", force_zip64=True) as fp:
        np.lib.format.write_array(fp, array, allow_pickle=False)


def write_atomic(path: str, write_to: Callable[[IO[bytes]], None]) -> None:
    """Writes through `write_to` into a new file beside `path`, then renames it over
    `path`. A crash or an exception part-way leaves `path` as it was (the old
    checkpoint, or nothing) and no temporary file behind: readers never see half a
    checkpoint."""
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
    """Reads members of an open checkpoint; every failure is a `CheckpointError`."""

    def __init__(self, f: IO[bytes], path: str) -> None:
        self.path = path
        try:
            self.zf = zipfile.ZipFile(f)
        except Exception as e:  # noqa: BLE001 - see fail()
            self.fail("it is not a .npz (zip) file", e)

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.zf.close()

    def fail(self, what: str, error: Exception | None = None) -> NoReturn:
        """Raises the `CheckpointError` for a damaged file.

        zipfile and numpy report damage as BadZipFile, ValueError, EOFError, OSError,
        struct.error, NotImplementedError (a flipped compression method), RuntimeError
        (a flipped "encrypted" flag), ...: whatever reading the file raises means the
        file is damaged, and callers catch one type for it."""
        cause = f" ({type(error).__name__}: {error})" if error is not None else ""
        msg = (
            f"{self.path}: cannot load this checkpoint: {what}{cause}. The file is "
            "damaged, truncated, or was not written by treeclass.save()."
        )
        raise CheckpointError(msg) from error

    def tree(self) -> dict[str, Any]:
        """The manifest's tree, once the manifest is checked to be one."""
        array = self._read(MANIFEST, None, "the manifest")
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

    def array(
        self, member: str, dtype: np.dtype[Any], shape: tuple[int, ...], where: str
    ) -> np.ndarray[Any, Any]:
        """The member's array, which must have `dtype` (up to byte order) and `shape`."""
        return self._read(member, (dtype, shape), where).astype(dtype.newbyteorder("="))

    def _read(
        self, member: str, expect: tuple[np.dtype[Any], tuple[int, ...]] | None, where: str
    ) -> np.ndarray[Any, Any]:
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
        return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
