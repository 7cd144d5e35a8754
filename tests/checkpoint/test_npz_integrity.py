"""What `tc.load` trusts in a checkpoint file (treeclass/_checkpoint/npz.py,
manifest.py): arrays are bound to the manifest by their CRC-32, static values are
encoded the same in every process, and a save killed midway leaves the old file and no
temporary behind. A small fuzz of `tc.load` (benchmarks/fuzz_checkpoints.py) runs here;
`python -m benchmarks --only fuzz` runs the large one."""

import json
import os
import pathlib
import signal
import struct
import subprocess
import sys
import tracemalloc
import zipfile
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest
from checkpoints import damaged, manifest_of, model, npy_bytes, path, rewrite, tuned
from fresh_process import run_fresh

import treeclass as tc

__all__ = ["path"]  # the fixture, imported for pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


# ---------------------------------------------------------------------------------------
# Arrays bound to the manifest.


def test_member_rewritten_in_a_valid_zip_is_refused(path: pathlib.Path):
    m = model()
    tc.save(path, m)
    # Same shape and dtype, other values, and a zip whose own CRC-32 fits them.
    rewrite(path, {"head.w": np.asarray(m.head.w) + 1}, crc=False)
    damaged(
        path,
        r"Model\.head\.w: head\.w\.npy is not the array the manifest records \(another CRC-32\)",
    )


def test_members_swapped_are_refused(path: pathlib.Path):
    tc.save(path, model())
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    a, b = members["layers.0.w.npy"], members["layers.1.w.npy"]  # both float32 (3, 3)
    members["layers.0.w.npy"], members["layers.1.w.npy"] = b, a
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    damaged(path, r"Model\.layers\[0\]\.w: layers\.0\.w\.npy is not the array the manifest records")


def test_manifest_records_swapped_are_refused(path: pathlib.Path):
    tc.save(path, model())
    manifest = manifest_of(path)
    layers = manifest["tree"]["children"]["layers"]["children"]
    first, second = layers["0"]["children"], layers["1"]["children"]
    first["w"], second["w"] = second["w"], first["w"]  # each record with its own CRC-32
    rewrite(path, {"__treeclass__": manifest})
    damaged(path, r"its manifest is malformed at Model\.layers\[0\]\.w")


@pytest.mark.parametrize("member", ["__treeclass__", "head.w"])
@pytest.mark.parametrize("claim", ["header length", "shape"])
def test_a_zip_bomb_is_refused_before_it_inflates(path: pathlib.Path, member: str, claim: str):
    # A member that inflates to 256 MiB from ~250 KiB of deflate, whose .npy header
    # claims that many bytes (as its header's length, or as the array's shape).
    tc.save(path, model())
    manifest = manifest_of(path)
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    size = 2**28
    header = b"{'descr': '|u1', 'fortran_order': False, 'shape': (%d,), }" % size
    header += b" " * (-(len(header) + 13) % 64) + b"\n"
    head = struct.pack("<I", size) if claim == "header length" else struct.pack("<I", len(header))
    head = b"\x93NUMPY\x02\x00" + head + (header if claim == "shape" else b"")
    bomb = zipfile.ZipInfo(member + ".npy")
    bomb.compress_type = zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            if name == bomb.filename:
                with zf.open(bomb, "w", force_zip64=True) as fp:
                    fp.write(head)
                    for _ in range(size >> 20):
                        fp.write(bytes(2**20))
            elif name != "__treeclass__.npy":
                zf.writestr(name, data)
        if member != "__treeclass__":  # the manifest records the bomb's CRC-32
            manifest["tree"]["children"]["head"]["children"]["w"]["crc32"] = zf.getinfo(
                bomb.filename
            ).CRC
            zf.writestr("__treeclass__.npy", npy_bytes(np.asarray(json.dumps(manifest))))
    tracemalloc.start()
    try:
        damaged(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**24  # 16 MiB; inflating the member would take 256 MiB


def test_manifest_without_checksums_is_refused(path: pathlib.Path):
    tc.save(path, model())
    manifest = manifest_of(path)
    del manifest["tree"]["children"]["head"]["children"]["b"]["crc32"]
    rewrite(path, {"__treeclass__": manifest})
    damaged(path, r"its manifest is malformed at Model\.head\.b")


# ---------------------------------------------------------------------------------------
# Static values encoded the same in every process.


def test_statics_load_under_another_hash_seed(path: pathlib.Path):
    """A frozenset's repr follows string hashing: the file's encoding must not."""
    save = f"import treeclass as tc, checkpoints; tc.save({str(path)!r}, checkpoints.tuned())"
    load = f"import treeclass as tc, checkpoints as c; assert tc.load({str(path)!r}, c.tuned()) == c.tuned()"
    run_fresh(save, TESTS, env={"PYTHONHASHSEED": "1"})
    encoded = manifest_of(path)["tree"]["static"]["options"]
    assert encoded == {
        "checkpoints.Options": [
            {"frozenset": ["elu", "gelu", "mish", "relu", "selu", "silu", "swish", "tanh"]},
            [["a", {"frozenset": ["v", "w", "x", "y", "z"]}], ["b", {"frozenset": []}]],
        ]
    }
    for seed in (2, 3):
        run_fresh(load, TESTS, env={"PYTHONHASHSEED": str(seed)})
    assert tc.load(path, tuned()) == tuned()  # this process's seed too


# ---------------------------------------------------------------------------------------
# A save killed midway.

KILLED_SAVE = """
import sys, time
import treeclass as tc, checkpoints
from treeclass._checkpoint import npz
real = npz.write_member
def stall(zf, name, array):
    crc = real(zf, name, array)
    print("writing", flush=True)
    time.sleep(600)
    return crc
npz.write_member = stall
tc.save(sys.argv[1], checkpoints.model(scale=2.0))
"""


@pytest.mark.skipif(os.name != "posix", reason="temporaries are cleaned on POSIX only")
def test_save_killed_midway_leaves_no_temporary_after_the_next_save(path: pathlib.Path):
    tc.save(path, model())
    before = path.read_bytes()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}"}
    command = [sys.executable, "-c", KILLED_SAVE, str(path)]
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "writing\n"  # one member written
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
    (stale,) = (p for p in path.parent.iterdir() if p.name.endswith(".tmp"))
    assert stale.name.startswith(f".{path.name}.")
    assert path.read_bytes() == before  # the old checkpoint, intact
    tc.save(path, model(scale=3.0))
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # the stale one removed
    assert tc.load(path, model(scale=3.0)).scale == 3.0
    # A temporary of a live process (this one), and one of another host, are left alone.
    live = path.parent / stale.name.replace(f".{child.pid}.", f".{os.getpid()}.")
    other_host = path.parent / f".{path.name}.00000000.{child.pid}.0.tmp"
    assert live != stale
    live.write_bytes(b"")
    other_host.write_bytes(b"")
    tc.save(path, model())
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(
        [path.name, live.name, other_host.name]
    )


# ---------------------------------------------------------------------------------------
# The fuzz, small.


def test_damaged_files_are_refused_or_load_exactly(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import fuzz_checkpoints

    counts = fuzz_checkpoints.fuzz(20, seed=1)
    assert set(counts) == set(fuzz_checkpoints.KINDS)
    for kind, outcomes in counts.items():
        assert set(outcomes) <= {"refused", "exact"}, (kind, outcomes)
        assert outcomes["refused"] > 0, kind
    assert counts["rewrite"]["refused"] == 20  # new bytes: never loaded
    assert counts["swap"]["refused"] == 20


def test_fuzz_tells_exact_from_another_model():
    """The fuzz's comparison sees a changed value, dtype, weak type or static."""
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.fuzz_checkpoints import identical, net
    finally:
        sys.path.remove(str(ROOT))
    a = net(0)
    assert identical(a, net(0))
    changed: list[Any] = [
        net(1),
        a.replace(lr=float(a.lr) + 1e-9),
        a.replace(state={**a.state, "count": a.state["count"].astype(jnp.int16)}),
        a.replace(state={**a.state, "count": jnp.asarray(int(a.state["count"]))}),  # weak
        a.replace(blocks=[a.blocks[0].replace(act=frozenset()), *a.blocks[1:]]),
    ]
    for other in changed:
        assert not identical(a, other)
