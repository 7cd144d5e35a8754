"""A fuzz of `treeclass.load()`: corrupted checkpoints are refused or load exactly.

A model holding every kind of leaf a checkpoint stores (float32 arrays of one shape,
so that swapped members pass the shape checks, bfloat16, int32, a typed PRNG key,
Python numbers, None, a static frozenset) is saved once; each case then damages the
file one way and loads it into a template built with other values:

- `flip`: 1 to 3 bytes XORed anywhere; `truncate`: cut at a random length;
- `rewrite`: one array member's data rewritten, same header, in a valid zip (the
  zip's CRC-32 recomputed); `swap`: two members' contents exchanged, names kept;
  `rename`: a member renamed (to another member's name, or a new one);
- `manifest`: one edit of the JSON manifest (a value changed, deleted, or replaced by
  another value of the manifest), in a valid zip.

Every outcome must be a `treeclass.CheckpointError` ("refused") or the saved model,
leaf for leaf (dtype, weak type, bits: "exact"); "another model" or any other
exception is a defect. `python -m benchmarks --only fuzz` (1000 files per kind, 100
with --quick); tests/checkpoint/test_npz_integrity.py runs 20 per kind.
"""

from __future__ import annotations

import io
import json
import random
import tempfile
import warnings
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import treeclass as tc
from benchmarks._table import Table

KINDS = ("flip", "truncate", "rewrite", "swap", "rename", "manifest")
OUTCOMES = ("refused", "exact", "another model", "other exception")


@tc.treeclass
class Block:
    w: jax.Array
    b: jax.Array
    act: tc.Static[frozenset[str]] = frozenset({"relu", "gelu", "tanh"})


@tc.treeclass
class Net:
    blocks: list[Block]
    state: dict[str, Any]
    lr: float
    step: int
    extra: jax.Array | None = None


def net(seed: int) -> Net:
    keys = jax.random.split(jax.random.key(seed), 4)
    blocks = [Block(jax.random.normal(k, (4, 4)), jax.random.normal(k, (4,))) for k in keys[:3]]
    state = {
        "ema": jax.random.normal(keys[3], (4, 4)),
        "half": jnp.arange(4, dtype=jnp.bfloat16) + seed,
        "count": jnp.asarray(seed + 7, jnp.int32),
        "key": keys[3],
    }
    return Net(blocks, state, 0.1 * (seed + 1), seed + 3)


def identical(a: Any, b: Any) -> bool:
    """Same treedef (statics included), leaf types, dtypes, weak types and bits."""
    (la, ta), (lb, tb) = jax.tree.flatten(a), jax.tree.flatten(b)
    if ta != tb:
        return False
    for x, y in zip(la, lb, strict=True):
        if type(x) is not type(y) and not (isinstance(x, jax.Array) and isinstance(y, jax.Array)):
            return False
        if isinstance(x, jax.Array) and x.dtype != y.dtype:
            return False
        if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        elif isinstance(x, jax.Array) and x.weak_type != y.weak_type:
            return False
        if np.asarray(x).tobytes() != np.asarray(y).tobytes():
            return False
    return True


def _members(raw: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _zip(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w") as zf:
        warnings.simplefilter("ignore")  # zipfile's "Duplicate name" for renames
        for name, data in members:
            zf.writestr(name, data)
    return buf.getvalue()


def _edit_manifest(manifest: Any, rng: random.Random) -> None:
    """One edit at a random place of the JSON: a value changed, deleted, or replaced
    by another value found in the manifest."""
    places: list[tuple[Any, Any]] = []

    def collect(node: Any) -> None:
        items = (
            node.items()
            if isinstance(node, dict)
            else enumerate(node)
            if isinstance(node, list)
            else ()
        )
        for key, value in items:
            places.append((node, key))
            collect(value)

    collect(manifest)
    node, key = rng.choice(places)
    value, action = node[key], rng.randrange(3)
    if action == 0 and isinstance(node, dict):
        del node[key]
    elif action == 1:
        node[key] = _other(places, rng)
    elif isinstance(value, bool):
        node[key] = not value
    elif isinstance(value, int | float):
        node[key] = value + rng.choice((-1, 1, 2**31))
    elif isinstance(value, str):
        at = rng.randrange(len(value) + 1)
        node[key] = value[:at] + rng.choice("0123456789.abcxyz_[]") + value[at + 1 :]
    else:
        node[key] = None


def _other(places: list[tuple[Any, Any]], rng: random.Random) -> Any:
    node, key = rng.choice(places)
    return json.loads(json.dumps(node[key]))


def mutate(kind: str, raw: bytes, rng: random.Random) -> bytes:
    """`raw`, a checkpoint's bytes, damaged one way (see the module docstring)."""
    if kind == "flip":
        data = bytearray(raw)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= rng.randint(1, 255)
        return bytes(data)
    if kind == "truncate":
        return raw[: rng.randrange(len(raw))]
    members = _members(raw)
    arrays = [name for name in members if name != "__treeclass__.npy"]
    items = list(members.items())
    if kind == "rewrite":
        name = rng.choice(arrays)
        header_end = len(members[name]) - len(np.load(io.BytesIO(members[name])).tobytes())
        payload = bytes(rng.randrange(256) for _ in range(len(members[name]) - header_end))
        members[name] = members[name][:header_end] + payload
        return _zip(list(members.items()))
    if kind == "swap":
        a, b = rng.sample(arrays, 2)
        members[a], members[b] = members[b], members[a]
        return _zip(list(members.items()))
    if kind == "rename":
        at = rng.randrange(len(items))
        new = rng.choice([*members, "x.npy", items[at][0].replace(".", "_", 1)])
        items[at] = (new, items[at][1])
        return _zip(items)
    assert kind == "manifest"
    manifest = json.loads(str(np.load(io.BytesIO(members["__treeclass__.npy"]))))
    _edit_manifest(manifest, rng)
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.asarray(json.dumps(manifest)), allow_pickle=False)
    members["__treeclass__.npy"] = buf.getvalue()
    return _zip(list(members.items()))


def outcome(path: Path, saved: Any, template: Any) -> str:
    try:
        restored = tc.load(path, template)
    except tc.CheckpointError:
        return "refused"
    except Exception:  # noqa: BLE001 - counted: a defect
        return "other exception"
    return "exact" if identical(restored, saved) else "another model"


def fuzz(n: int, seed: int = 0) -> dict[str, Counter[str]]:
    """`n` damaged files of each kind, loaded; the outcomes counted per kind."""
    rng = random.Random(seed)  # noqa: S311 - a fuzz, replayed by its seed
    saved, template = net(0), net(1)
    counts: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "net.npz"
        tc.save(path, saved)
        raw = path.read_bytes()
        for kind in KINDS:
            for _ in range(n):
                path.write_bytes(mutate(kind, raw, rng))
                counts[kind][outcome(path, saved, template)] += 1
    return counts


def table(counts: dict[str, Counter[str]], n: int, seed: int) -> Table:
    rows = tuple((kind, *(str(c[o]) for o in OUTCOMES)) for kind, c in counts.items())
    total = tuple(str(sum(c[o] for c in counts.values())) for o in OUTCOMES)
    note = (
        f"{n} damaged files per kind (seed {seed}); 'another model' and 'other exception' must be 0"
    )
    return Table(
        "treeclass.load() of damaged checkpoints",
        ("damage", *OUTCOMES),
        (*rows, ("all", *total)),
        note,
    )


def run(quick: bool) -> list[Table]:
    n = 100 if quick else 1000
    return [table(fuzz(n), n, 0)]
