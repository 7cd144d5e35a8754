"""Shared by the checkpoint tests (test_serialization.py, test_npz.py): models,
bit-exact comparisons, and helpers that pin errors."""

import io
import json
import pathlib
import zipfile
import zlib
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treeclass as tc


@tc.treeclass
class Dense:
    w: jax.Array
    b: jax.Array
    act: str = tc.static("relu")


@tc.treeclass
class Model:
    layers: list[Dense]
    head: Dense
    extras: dict[str, Any]
    optional: jax.Array | None = None
    scale: tc.Static[float] = 1.0


def dense(n_in: int, n_out: int, seed: int = 0, dtype: Any = jnp.float32) -> Dense:
    key = jax.random.key(seed)
    w = jax.random.normal(key, (n_in, n_out)).astype(dtype)
    return Dense(w, jnp.arange(n_out, dtype=dtype))


def model(width: int = 3, depth: int = 2, **kwargs: Any) -> Model:
    layers = [dense(width, width, seed=i) for i in range(depth)]
    extras = {"step": jnp.asarray(7, jnp.int32), "pair": (jnp.ones(2, jnp.bfloat16), None)}
    return Model(layers, dense(width, 1, seed=99), extras, **kwargs)


def same_bits(a: Any, b: Any) -> bool:
    """Leaf equality that tells NaN payloads and -0.0 apart: compares the bytes."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_identical(a: Any, b: Any) -> None:
    """Same treedef (statics included), and leaves of the same kind, dtype, weak type
    and bits."""
    leaves_a, treedef_a = jax.tree.flatten(a)
    leaves_b, treedef_b = jax.tree.flatten(b)
    assert treedef_a == treedef_b
    for x, y in zip(leaves_a, leaves_b, strict=True):
        assert type(y) is type(x) or (isinstance(x, jax.Array) and isinstance(y, jax.Array))
        if isinstance(x, jax.Array):
            assert y.weak_type == x.weak_type
        if isinstance(x, bool | int | float | complex):
            assert repr(y) == repr(x)
        else:
            assert same_bits(x, y)


@pytest.fixture
def path(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "ckpt.npz"


def mismatch(path: pathlib.Path, template: Any, message: str) -> None:
    with pytest.raises(tc.CheckpointError, match=message) as info:
        tc.load(path, template)
    assert isinstance(info.value, ValueError)
    assert "The template must be built like the object that was saved" in str(info.value)


def damaged(path: pathlib.Path, message: str = "") -> None:
    with pytest.raises(
        tc.CheckpointError, match=rf"^{path}: cannot load this checkpoint: {message}"
    ) as info:
        tc.load(path, model())
    assert "The file is damaged, truncated, or was not written by treeclass.save()." in str(
        info.value
    )


def rewrite(path: pathlib.Path, replace: dict[str, Any], *, crc: bool = True) -> None:
    """Rewrites the checkpoint at `path` with some members replaced (numpy arrays, or
    a manifest dict), the way an attacker or a bug would; with `crc`, the manifest's
    CRC-32 of each rewritten array too, so that load() reads the member's header."""
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    for name, value in replace.items():
        if isinstance(value, dict):
            value = np.asarray(json.dumps(value))
        members[name + ".npy"] = npy_bytes(value)

    def fix(entry: Any) -> None:
        if isinstance(entry, dict) and entry.get("leaf") in replace:
            entry["crc32"] = zlib.crc32(members[entry["leaf"] + ".npy"])
        for child in entry.get("children", {}).values() if isinstance(entry, dict) else ():
            fix(child)

    if crc and "__treeclass__" not in replace:
        manifest = json.loads(str(np.load(io.BytesIO(members["__treeclass__.npy"]))))
        fix(manifest["tree"])
        members["__treeclass__.npy"] = npy_bytes(np.asarray(json.dumps(manifest)))
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=True)
    return buf.getvalue()


def manifest_of(path: pathlib.Path) -> dict[str, Any]:
    with np.load(path) as npz:
        return json.loads(str(npz["__treeclass__"]))  # type: ignore[no-any-return]


@tc.treeclass
class Keyed:
    key: jax.Array
    x: jax.Array


def keyed(seed: int = 0, impl: str | None = None, n: int | None = None) -> Keyed:
    key = jax.random.key(seed, impl=impl)
    return Keyed(key if n is None else jax.random.split(key, n), jnp.arange(2.0))


def same_keys(a: jax.Array, b: jax.Array) -> bool:
    return a.dtype == b.dtype and same_bits(jax.random.key_data(a), jax.random.key_data(b))


class Options(NamedTuple):
    """A static whose repr follows string hashing (PYTHONHASHSEED): a frozenset of str
    inside a NamedTuple, and frozensets in nested tuples."""

    names: frozenset[str]
    groups: tuple[tuple[str, frozenset[str]], ...]


@tc.treeclass
class Tuned:
    w: jax.Array
    options: tc.Static[Options]


def tuned() -> Tuned:
    names = frozenset({"relu", "gelu", "tanh", "silu", "elu", "selu", "mish", "swish"})
    groups = (("a", frozenset({"x", "y", "z", "w", "v"})), ("b", frozenset()))
    return Tuned(jnp.arange(3.0), Options(names, groups))
