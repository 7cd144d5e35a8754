"""The bytes (treeclass/_encoding.py): a damaged, truncated or hostile file is a
`CheckpointError` naming the file, never another exception and never wrong values;
loading never unpickles; `save` is atomic.
"""

import json
import os
import pathlib
import pickle
import zipfile
from typing import Any

import numpy as np
import pytest
from checkpoints import assert_identical, damaged, manifest_of, model, path, rewrite
from hypothesis import given, settings
from hypothesis import strategies as st

import treeclass as tc
from treeclass import _encoding

__all__ = ["path"]  # the fixture, imported for pytest


# ---------------------------------------------------------------------------------------
# Damaged files.


def test_truncated_file_rejected(path: pathlib.Path):
    tc.save(path, model())
    data = path.read_bytes()
    for size in (0, 1, 10, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:size])
        damaged(path, r"it is not a \.npz \(zip\) file \(BadZipFile")


def test_flipped_data_byte_fails_the_crc(path: pathlib.Path):
    m = model()
    tc.save(path, m)
    data = bytearray(path.read_bytes())
    at = bytes(data).index(np.asarray(m.head.w).tobytes())  # the head.w member's payload
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    damaged(path, r"Model\.head\.w: reading head\.w\.npy failed \(BadZipFile: Bad CRC-32")


def test_not_a_checkpoint_rejected(path: pathlib.Path):
    path.write_bytes(b"not a zip file at all")
    damaged(path, r"it is not a \.npz \(zip\) file")
    np.save(path.with_suffix(".npy"), np.zeros(3))
    path.with_suffix(".npy").rename(path)
    damaged(path, r"it is not a \.npz")
    np.savez(path, **{"layers.0.w": np.zeros((3, 3))})  # a plain npz: no manifest
    damaged(path, r"the manifest: the file has no member '__treeclass__\.npy'")


def test_tampered_manifest_rejected(path: pathlib.Path):
    tc.save(path, model())
    good = manifest_of(path)
    rewrite(path, {"__treeclass__": np.asarray("{not json")})
    damaged(path, r"__treeclass__\.npy is not valid JSON")
    rewrite(path, {"__treeclass__": np.zeros(3)})
    damaged(path, r"__treeclass__\.npy is not a string")
    rewrite(path, {"__treeclass__": {**good, "format": "other"}})
    damaged(path, r"__treeclass__\.npy is not a treeclass manifest")
    rewrite(path, {"__treeclass__": {**good, "tree": None}})
    damaged(path, r"__treeclass__\.npy has no tree")
    broken = json.loads(json.dumps(good))
    broken["tree"]["children"]["head"]["children"]["w"]["shape"] = "three"
    rewrite(path, {"__treeclass__": broken})
    damaged(path, r"its manifest is malformed at Model\.head\.w")
    rewrite(path, {"__treeclass__": {**good, "version": 2}})
    with pytest.raises(
        tc.CheckpointError,
        match=r"checkpoint format version 2; this treeclass reads version 1\. Upgrade treeclass",
    ):
        tc.load(path, model())


def test_member_that_disagrees_with_the_manifest_rejected(path: pathlib.Path):
    tc.save(path, model())
    rewrite(path, {"head.w": np.zeros((3, 2), np.float32)})
    damaged(path, r"Model\.head\.w: head\.w\.npy holds float32 \(3, 2\), not float32 \(3, 1\)")
    rewrite(path, {"head.w": np.zeros((3, 1), np.int32)})
    damaged(path, r"Model\.head\.w: head\.w\.npy holds int32 \(3, 1\), not float32 \(3, 1\)")


@given(st.data())
@settings(max_examples=30)
def test_any_corruption_is_an_error_or_harmless(tmp_path_factory: Any, data: st.DataObject):
    """Flipping or truncating bytes anywhere gives a `CheckpointError`, or (a byte the
    reader never checks, such as a local header's copy of the CRC) the original back:
    never another exception, never wrong values."""
    path = tmp_path_factory.mktemp("corrupt") / "m.npz"
    m = model()
    tc.save(path, m)
    raw = bytearray(path.read_bytes())
    if data.draw(st.booleans(), label="truncate"):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1), label="size")]
    else:
        for _ in range(data.draw(st.integers(1, 3), label="flips")):
            at = data.draw(st.integers(0, len(raw) - 1), label="at")
            raw[at] ^= data.draw(st.integers(1, 255), label="mask")
    path.write_bytes(bytes(raw))
    try:
        restored = tc.load(path, model())
    except tc.CheckpointError:
        return
    assert_identical(restored, m)


# ---------------------------------------------------------------------------------------
# Atomic save.


def test_failed_save_keeps_the_old_file(path: pathlib.Path, monkeypatch: pytest.MonkeyPatch):
    tc.save(path, model(scale=1.0))
    before = path.read_bytes()
    written: list[str] = []
    real = _encoding.write_member

    def fail_on_third(zf: zipfile.ZipFile, name: str, array: np.ndarray) -> None:
        if len(written) == 2:
            msg = "disk full"
            raise OSError(msg)
        written.append(name)
        real(zf, name, array)

    monkeypatch.setattr(_encoding, "write_member", fail_on_third)
    with pytest.raises(OSError, match="disk full"):
        tc.save(path, model(scale=2.0))
    assert path.read_bytes() == before  # the old checkpoint, intact
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left
    assert tc.load(path, model(scale=1.0)).scale == 1.0


def test_interrupted_first_save_leaves_no_file(path: pathlib.Path, monkeypatch: pytest.MonkeyPatch):
    def interrupt(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_encoding, "write_member", interrupt)
    with pytest.raises(KeyboardInterrupt):
        tc.save(path, model())
    assert list(path.parent.iterdir()) == []


def test_save_replaces_by_rename(path: pathlib.Path, monkeypatch: pytest.MonkeyPatch):
    renames: list[tuple[str, str]] = []
    real = os.replace

    def spy(src: str, dst: str) -> None:
        renames.append((src, dst))
        assert os.path.getsize(src) > 0  # complete before it becomes visible
        real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    tc.save(path, model())
    ((src, dst),) = renames
    assert os.path.dirname(src) == str(path.parent)  # same directory: rename is atomic
    assert dst == str(path)


# ---------------------------------------------------------------------------------------
# Loading never executes anything from the file.


class Payload:
    """Unpickling this creates the directory `marker`: code that runs on load."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (self.marker,))


def test_pickled_member_is_never_unpickled(path: pathlib.Path, tmp_path: pathlib.Path):
    marker = tmp_path / "pwned"
    evil = np.array([Payload(str(marker))], dtype=object)
    tc.save(path, model())
    # The control: this file does run code when something unpickles it.
    control = tmp_path / "control.npz"
    np.savez(control, x=np.array([Payload(str(tmp_path / "control-ran"))], dtype=object))
    np.load(control, allow_pickle=True)["x"]
    assert (tmp_path / "control-ran").exists()

    rewrite(path, {"head.w": evil})
    damaged(path, r"Model\.head\.w: head\.w\.npy holds pickled Python objects, never loaded")
    rewrite(path, {"__treeclass__": evil})
    damaged(path, r"the manifest: __treeclass__\.npy holds pickled Python objects")
    path.write_bytes(pickle.dumps(Payload(str(marker))))
    damaged(path, r"it is not a \.npz")
    assert not marker.exists()
