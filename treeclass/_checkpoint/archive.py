"""`Archive`, the checkpoint file as `load()` reads it: the open `.npz` (a zip of `.npy`
members), its manifest read and checked to be one, and each member checked against the
dtype, shape and CRC-32 expected of it before its bytes are read. Nothing is unpickled, and
nothing is allocated past what the template holds; every failure is a `CheckpointError`."""

import json
import math
import os
import zipfile
from typing import IO, Any, Final, NoReturn, cast

import numpy as np

from treeclass._checkpoint.manifest import FORMAT, MANIFEST, VERSION, Stored
from treeclass._checkpoint.template import CheckpointError

_HEADER: Final = 8 + 4 + 10_000  # .npy magic, header length, numpy's largest header it reads

_Array = np.ndarray[Any, Any]


class _Capped:
    """A member giving at most `left` bytes, plus one: zipfile inflates all it is asked for,
    so a member whose header claims more than it may hold is cut short, and found out."""

    def __init__(self, fp: IO[bytes], left: int) -> None:
        self.fp, self.left = fp, left + 1

    def read(self, n: int = -1) -> bytes:
        data = self.fp.read(self.left if n < 0 else min(n, self.left))
        self.left -= len(data)
        return data


class Archive:
    """An open checkpoint file, `path` (for messages) read from `f`, which holds every resource:
    the zip over it opens nothing of its own, so closing `f` closes this too."""

    def __init__(self, f: IO[bytes], path: str) -> None:
        self.path = path
        self.size = os.fstat(f.fileno()).st_size  # bounds the manifest's size
        try:
            self.zf = zipfile.ZipFile(f)
        except Exception as e:  # noqa: BLE001 - see fail()
            self.fail("it is not a .npz (zip) file", e)

    def fail(self, what: str, error: Exception | None = None) -> NoReturn:
        """The `CheckpointError` for damage, which zipfile and numpy report as any exception."""
        cause = f" ({type(error).__name__}: {error})" if error is not None else ""
        msg = (
            f"{self.path}: cannot load this checkpoint: {what}{cause}. The file is damaged, "
            "truncated, or was not written by treeclass.save()."
        )
        raise CheckpointError(msg) from error

    def tree(self) -> dict[str, Any]:
        """The manifest's tree (its root entry), once the manifest is checked to be one of this
        format and version."""
        array = self.read(MANIFEST, None, "the manifest")
        try:
            manifest = json.loads(str(array[()])) if array.dtype.kind == "U" else None
        except (ValueError, RecursionError) as e:  # (nested past the parser's depth)
            self.fail(f"{MANIFEST}.npy is not valid JSON", e)
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            self.fail(f"{MANIFEST}.npy is not a treeclass manifest")
        version, tree = manifest.get("version"), manifest.get("tree")
        if version != VERSION:
            msg = (
                f"{self.path}: checkpoint format version {version!r}; this treeclass reads "
                f"version {VERSION}. Load it with the treeclass version that wrote it."
            )
            raise CheckpointError(msg)
        if not isinstance(tree, dict):
            self.fail(f"{MANIFEST}.npy has no tree")
        return cast("dict[str, Any]", tree)

    def read(
        self, member: str, expect: Stored | None, where: str, crc: int | None = None
    ) -> _Array:
        """The array of `member` (`layers.0.w`), as the leaf at `where` reads it.

        `expect`: the stored dtype and shape the template allows, checked from the member's
        header before its bytes are read (None for the manifest, bounded by the file's size);
        `crc`: the manifest's CRC-32, compared with the zip's, which zipfile checks the bytes
        against as they are read to the end."""
        name = member + ".npy"
        try:
            info = self.zf.getinfo(name)
        except KeyError:
            self.fail(f"{where}: the file has no member {name!r}")
        if crc is not None and crc != info.CRC:
            self.fail(f"{where}: {name} is not the array the manifest records (another CRC-32)")
        # At most the bytes this member may hold, whatever its header claims (a zip bomb).
        bound = (
            self.size + 2**20  # the manifest, stored uncompressed
            if expect is None
            else _HEADER + math.prod(expect[1]) * expect[0].itemsize
        )
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
