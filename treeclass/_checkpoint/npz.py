"""`save()`, `load()`: the public file functions. `save()` writes an ordinary `.npz` of what
manifest.py encodes, atomically (a temporary renamed over the file); `load()` opens the file as
an `Archive` and restores the template from it through `restore()`, its saved side a
`FileSource`: each member is checked before it is read, nothing is unpickled, nothing is
allocated past what the template holds."""

import contextlib
import json
import os
import secrets
import socket
import zipfile
import zlib
from collections.abc import Callable
from typing import IO, Any, TypeVar, cast

import numpy as np

from treeclass._checkpoint.archive import Archive
from treeclass._checkpoint.manifest import (
    FORMAT,
    MANIFEST,
    VERSION,
    Members,
    encode_leaf,
    manifest_entry,
)
from treeclass._checkpoint.sources import FileSource
from treeclass._checkpoint.state_dict import restore
from treeclass._checkpoint.template import check_root, wrong_argument

_T = TypeVar("_T")


def write_member(zf: zipfile.ZipFile, name: str, array: np.ndarray[Any, Any]) -> int:
    """numpy.savez for one array, never pickling; returns the member's CRC-32 (as stored)."""
    with zf.open(name + ".npy", mode="w", force_zip64=True) as fp:
        np.lib.format.write_array(fp, array, allow_pickle=False)
    return zf.getinfo(name + ".npy").CRC


def write_atomic(path: str, write_to: Callable[[IO[bytes]], None]) -> None:
    """Writes a temporary beside `path`, then renames it over `path`: a failure leaves neither."""
    directory, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(directory, _temporary(directory, base))
    # os.open 0o666, not tempfile.mkstemp's 0o600, which the checkpoint would keep: umask.
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
    with contextlib.suppress(OSError):  # the rename made durable, where the platform can
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _temporary(directory: str, base: str) -> str:
    """`.{base}.{host}.{pid}.{random}.tmp`, once those of killed processes are removed (POSIX
    only: on Windows, `os.kill(pid, 0)` would end the process)."""
    prefix = f".{base}.{zlib.crc32(socket.gethostname().encode()):08x}."
    for name in os.listdir(directory) if os.name == "posix" else ():
        pid = name.removeprefix(prefix).partition(".")[0]
        if name.startswith(prefix) and name.endswith(".tmp") and pid.isdigit():
            with contextlib.suppress(OSError):  # (PermissionError: alive, another user's)
                try:
                    os.kill(int(pid), 0)
                except ProcessLookupError:
                    os.unlink(os.path.join(directory, name))
    return f"{prefix}{os.getpid()}.{secrets.token_hex(4)}.tmp"


def _fspath(path: object, fn: str) -> str:
    """`path` as a `str`; the `TypeError` of the public function `fn` for a non-path."""
    try:  # untyped callers pass anything; os.fspath raises TypeError for a non-path
        return os.fsdecode(os.fspath(cast("str", path)))
    except TypeError:
        takes = "a file path (str or os.PathLike) as `path`"
        raise wrong_argument(takes, fn, path) from None


def save(path: str | os.PathLike[str], obj: Any) -> None:
    """Writes `obj`'s dynamic leaves, structure and static values to a `.npz` file.

    Arrays are members named by their state-dict paths (`layers.0.w`). The file is renamed
    over `path` once written: it never holds half a checkpoint.

    **Arguments**

    - `path`: the file to write (`str` or `os.PathLike`); replaced if it exists.
    - `obj`: a treeclass instance, or a list, tuple or dict of them.

    **Returns**

    `None`.

    **Raises**

    Before writing: `TypeError` naming the field for a leaf a checkpoint cannot hold, or for
    a non-container `obj`; `ValueError` if two leaves would share a name; `CheckpointError`
    for an array spread over processes. `OSError` from the disk.

    **Example**

    >>> import os, tempfile
    >>> class Dense(tc.TreeClass):
    ...     w: jax.Array
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     tc.save(os.path.join(tmp, "dense.npz"), Dense(jnp.ones((2, 3), jnp.bfloat16)))
    ...     sorted(np.load(os.path.join(tmp, "dense.npz")).files)  # an ordinary .npz
    ['__treeclass__', 'w']
    """
    path = _fspath(path, "save")
    root = check_root(obj, "save", "obj")
    members: Members = {}
    tree = manifest_entry(obj, root, (), members)  # raises for any bad leaf, before writing

    def write(f: IO[bytes]) -> None:
        # Each leaf is encoded as it is written, so only one is on the host at a time.
        with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, (x, where, record) in members.items():
                record["crc32"] = write_member(zf, name, encode_leaf(x, where))
            manifest = {"format": FORMAT, "version": VERSION, "root": root, "tree": tree}
            write_member(zf, MANIFEST, np.asarray(json.dumps(manifest, allow_nan=False)))

    write_atomic(path, write)


def load(path: str | os.PathLike[str], template: _T) -> _T:
    """Reads a file written by `save` into the structure of `template`.

    Structure, shapes, dtypes, statics and CRC-32s are checked before an array is used;
    nothing is unpickled. Leaves come back as the template's (a `jax.Array` sharded as it).

    **Arguments**

    - `path`: a file written by `treeclass.save()`.
    - `template`: an instance built like the saved one, or `jax.eval_shape` of one.

    **Returns**

    A new instance of `type(template)`; static values are the template's.

    **Raises**

    `CheckpointError` naming the field path for a mismatch, or the file if it is damaged;
    `OSError` if it cannot be opened; `TypeError` for a template that is not a container.

    **Example**

    >>> import os, tempfile
    >>> class Dense(tc.TreeClass):
    ...     w: jax.Array
    ...     act: str = tc.static(default="relu")
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "dense.npz")
    >>> tc.save(path, Dense(jnp.arange(6.0).reshape(2, 3)))
    >>> tc.load(path, Dense(jnp.zeros((2, 3)))).w.tolist()
    [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    >>> tc.load(path, Dense(jnp.zeros((2, 3)), act="tanh"))
    Traceback (most recent call last):
    treeclass.CheckpointError: Dense.act: static value 'relu' in the file, 'tanh' in the template
    ...
    >>> tmp.cleanup()
    """
    path = _fspath(path, "load")
    root = check_root(template, "load", "template")
    with open(path, "rb") as f:
        archive = Archive(f, path)
        source = FileSource(archive, root)
        return restore(template, archive.tree(), (), source)  # type: ignore[no-any-return]
