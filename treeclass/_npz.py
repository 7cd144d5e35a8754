"""The checkpoint file: how `save()` writes a `.npz` and how `load()` reads it back.

The file is an ordinary `.npz` (a zip of `.npy` members) that `numpy.load` opens:

    layers.0.w.npy       one member per array leaf, named by its state-dict path
    layers.0.b.npy
    __treeclass__.npy    a 0-d string array: the JSON manifest

The manifest records the tree's structure, each leaf's dtype, shape and weak type, and
every static value, so that `load()` can check a template against the file before it
reads a single array. Reading never goes through pickle: each member's `.npy` header is
parsed and checked (an object dtype is refused at that point) and then exactly the
bytes the template expects are read, so a damaged or hostile file can neither run code
nor make us allocate more than the template's arrays.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import types
import zipfile
from collections.abc import Callable, Iterable
from typing import IO, Any, Final, NoReturn, cast

import numpy as np

MANIFEST: Final = "__treeclass__"
FORMAT: Final = "treeclass.npz"
VERSION: Final = 1

_SCALARS: Final = {
    bool: np.dtype(np.bool_),
    int: np.dtype(np.int64),
    float: np.dtype(np.float64),
    complex: np.dtype(np.complex128),
}


class CheckpointError(ValueError):
    """A checkpoint does not fit its template (structure, shape, dtype or a static
    value differs), or its file is damaged or not a treeclass checkpoint.

    The message starts with the field path (`Model.layers.0.w: ...`) or the file.

    **Raised by**

    `treeclass.load()` and `treeclass.from_state_dict()`. It is a `ValueError`, so
    code that catches that keeps working.

    **Example**

    >>> @tc.treeclass
    ... class Dense:
    ...     w: jax.Array
    >>> state = tc.to_state_dict(Dense(jnp.ones((2, 2))))
    >>> try:
    ...     tc.from_state_dict(Dense(jnp.ones((3, 3))), state)
    ... except tc.CheckpointError as e:
    ...     print(str(e).splitlines()[0])
    Dense.w: shape (2, 2) in the state dict, (3, 3) in the template
    """


# Shown as `treeclass.CheckpointError` in tracebacks, where users catch it from.
CheckpointError.__module__ = "treeclass"


def stored_dtype(dtype: np.dtype[Any]) -> np.dtype[Any] | None:
    """The dtype an array of `dtype` is written as, or None if a checkpoint cannot
    hold it.

    numpy's own numeric dtypes are written as they are (in native byte order). The
    dtypes JAX adds through ml_dtypes (bfloat16, float8_*, int4, ...) are not numpy
    builtins, and a `.npy` header cannot name them: `np.save` writes a bfloat16 array
    as `|V2`, raw void, and reads back bytes. Those are written as their raw bits
    (`uint16` for bfloat16), with the real dtype name in the manifest, and viewed back.
    """
    if dtype.names is not None or dtype.subdtype is not None:
        return None
    if dtype.isbuiltin == 2:  # a user-defined dtype: ml_dtypes'
        return np.dtype(f"u{dtype.itemsize}") if dtype.itemsize in (1, 2, 4, 8) else None
    if dtype.kind in "biufc":
        return np.dtype(f"{dtype.kind}{dtype.itemsize}")
    return None


def to_stored(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """`array` in its `stored_dtype`: the same values, or for ml_dtypes the raw bits."""
    stored = stored_dtype(array.dtype)
    assert stored is not None  # callers check stored_dtype first
    if stored.kind == array.dtype.kind:
        return array.astype(stored, copy=False)
    return np.asarray(array, order="C").view(stored)  # (ascontiguousarray makes 0-d 1-d)


def from_stored(array: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """The inverse of `to_stored`: `array` (in `dtype`'s stored dtype) as `dtype`."""
    if array.dtype.kind == dtype.kind:
        return array.astype(dtype, copy=False)
    return array.view(dtype)


def scalar_dtype(kind: type) -> np.dtype[Any]:
    """The dtype a Python `bool`, `int`, `float` or `complex` leaf is written as."""
    return _SCALARS[kind]


def scalar_kind(x: object) -> type | None:
    """`bool`, `int`, `float` or `complex` if `x` is exactly one (not a subclass such
    as an `IntEnum`, or a numpy scalar), else None."""
    kind = type(x)
    return kind if kind in _SCALARS else None


def scalar_name(kind: type) -> str:
    """The dtype name the manifest gives a Python scalar leaf: `python float`."""
    return f"python {kind.__name__}"


SCALAR_NAMES: Final = {scalar_name(kind): kind for kind in _SCALARS}


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
        if type(value) is tuple:
            return items
        # repr order depends on string hashing, which differs between processes.
        return {"frozenset": sorted(items, key=canonical)}
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
            return "frozenset({" + ", ".join(show_static(i) for i in inner) + "})"
    if encoded is None or isinstance(encoded, bool | int | float | str):
        return repr(encoded)
    return canonical(encoded)


# ---------------------------------------------------------------------------------------
# Writing.


def write(
    f: IO[bytes],
    manifest: dict[str, Any],
    members: Iterable[tuple[str, Callable[[], np.ndarray[Any, Any]]]],
) -> None:
    """Writes the zip: each member's array (made when it is written, so only one is on
    the host at a time), then the manifest."""
    with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, make in members:
            write_member(zf, name, make())
        text = json.dumps(manifest, allow_nan=False)
        write_member(zf, MANIFEST, np.asarray(text))


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


# ---------------------------------------------------------------------------------------
# Reading.


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

    def manifest(self) -> dict[str, Any]:
        array = self._read(MANIFEST, expect=None, where="the manifest")
        if array.dtype.kind != "U" or array.shape != ():
            self.fail(f"{MANIFEST}.npy is not a string")
        try:
            manifest: object = json.loads(str(array[()]))
        except ValueError as e:
            self.fail(f"{MANIFEST}.npy is not valid JSON", e)
        if not isinstance(manifest, dict):
            self.fail(f"{MANIFEST}.npy is not a treeclass manifest")
        manifest = cast("dict[str, Any]", manifest)
        if manifest.get("format") != FORMAT:
            self.fail(f"{MANIFEST}.npy is not a treeclass manifest")
        version = manifest.get("version")
        if version != VERSION:
            msg = (
                f"{self.path}: checkpoint format version {version!r}; this treeclass "
                f"reads version {VERSION}. Upgrade treeclass to load it."
            )
            raise CheckpointError(msg)
        if not isinstance(manifest.get("tree"), dict):
            self.fail(f"{MANIFEST}.npy has no tree")
        return manifest

    def array(
        self, member: str, dtype: np.dtype[Any], shape: tuple[int, ...], where: str
    ) -> np.ndarray[Any, Any]:
        """The member's array, which must have `dtype` (up to byte order) and `shape`."""
        return self._read(member, expect=(dtype, shape), where=where)

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
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
                elif version == (2, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
                else:
                    self.fail(f"{where}: {name} has .npy version {version}")
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
