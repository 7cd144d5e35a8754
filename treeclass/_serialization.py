"""Checkpointing: state dicts (`to_state_dict`, `from_state_dict`) and `.npz` files
(`save`, `load`).

A state dict is the pytree with every container made a dict with string keys, as in
`flax.serialization`: a treeclass becomes `{field: ...}` over its dynamic fields, a
list or tuple `{"0": ..., "1": ...}`, a dict `{str(key): ...}`; `None` stays `None`
and leaves stay as they are. Static values are not in it: restoring takes them from a
*template*, an instance built like the saved one (`Model(...)`, or `jax.eval_shape` of
its constructor). A file adds a manifest of the structure, dtypes, shapes and static
values (`_npz.py`), and `load()` checks the template against it before reading arrays.

The pieces: `_state.py` walks the template and the saved tree side by side, so every
mismatch is reported at its field path; `_leaves.py` says which leaves a file holds
and how they come back; `_npz.py` is the file format.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import IO, Any, TypeVar, cast

from treeclass import _leaves, _npz, _state
from treeclass._npz import CheckpointError as CheckpointError
from treeclass._repr import short_repr

_T = TypeVar("_T")


def _fspath(path: object, fn: str) -> str:
    try:
        # Untyped callers pass anything; os.fspath raises TypeError for a non-path.
        return os.fsdecode(os.fspath(cast("str", path)))
    except TypeError:
        msg = (
            f"treeclass.{fn}() takes a file path (str or os.PathLike) as `path`; got "
            f"{type(path).__name__} {short_repr(path)}."
        )
        raise TypeError(msg) from None


# ---------------------------------------------------------------------------------------
# The public functions.


def to_state_dict(obj: Any) -> dict[str, Any]:
    """Returns the state of `obj`: nested dicts keyed by field names, holding the
    dynamic leaves as they are.

    Nested treeclasses become nested dicts; a list or tuple becomes `{"0": ..., "1":
    ...}` and a dict `{str(key): ...}`, as in `flax.serialization`; `None` stays
    `None`. Static fields are left out: `from_state_dict` takes them from its template.

    **Arguments**

    - `obj`: a treeclass instance, or a list, tuple or dict of them (any pytree whose
      root is a container).

    **Returns**

    A `dict` with `str` keys. Its leaves are `obj`'s leaves themselves, not copies.

    **Raises**

    `TypeError` if `obj` is a leaf, `None` or a class; `ValueError` if two keys of a
    dict have the same `str()` (`1` and `"1"`).

    **Example**

    >>> @tc.treeclass
    ... class Dense:
    ...     w: jax.Array
    ...     b: jax.Array
    ...     act: str = tc.static("relu")
    >>> @tc.treeclass
    ... class MLP:
    ...     layers: list
    >>> mlp = MLP([Dense(jnp.ones((2, 3)), jnp.zeros(3)), Dense(jnp.ones((3, 1)), jnp.zeros(1))])
    >>> state = tc.to_state_dict(mlp)
    >>> sorted(state["layers"]), sorted(state["layers"]["1"])
    (['0', '1'], ['b', 'w'])
    >>> state["layers"]["0"]["w"] is mlp.layers[0].w
    True
    """
    root = _state.check_root(obj, "to_state_dict", "obj")

    def state(x: Any, path: _state.Path) -> Any:
        node = None if x is None else _state.split(x, lambda: _state.dotted(root, path))
        if node is None:
            return x
        return {k: state(child, (*path, k)) for k, child in node[0]}

    return state(obj, ())  # type: ignore[no-any-return]


def from_state_dict(template: _T, state: Mapping[str, Any]) -> _T:
    """Returns `template` with its dynamic leaves replaced by those of `state`.

    The inverse of `to_state_dict`. The structure (every key), and the shape and dtype
    of every array leaf, must match the template's; static values and container types
    come from the template. Leaves are used as they are, not converted. A list where
    the template has a list or tuple is accepted too (orbax restores sequences so).

    **Arguments**

    - `template`: an instance built like the one the state came from.
    - `state`: a state dict, as `to_state_dict` returns (or flax or orbax restore).

    **Returns**

    An instance of `type(template)`, rebuilt the way JAX rebuilds pytrees: no
    `__init__`, converter or `__post_init__` runs.

    **Raises**

    `CheckpointError` (a `ValueError`) naming the field path when a key is missing or
    unexpected, or a shape or dtype differs; `TypeError` if `template` is not a
    container or `state` is not a mapping.

    **Example**

    >>> @tc.treeclass
    ... class Neuron:
    ...     v: jax.Array
    ...     tau: float = tc.static(20.0)
    >>> n = tc.from_state_dict(Neuron(jnp.zeros(3)), {"v": jnp.ones(3)})
    >>> n.v.tolist(), n.tau
    ([1.0, 1.0, 1.0], 20.0)
    >>> tc.from_state_dict(Neuron(jnp.zeros(3)), {"v": jnp.ones(4)})
    Traceback (most recent call last):
    treeclass.CheckpointError: Neuron.v: shape (4,) in the state dict, (3,) in the template
    ...
    """
    root = _state.check_root(template, "from_state_dict", "template")
    if not isinstance(state, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance] - untyped callers
        msg = (
            "treeclass.from_state_dict() takes the state as a dict, as to_state_dict() "
            f"returns; got {type(state).__name__} {short_repr(state)}."
        )
        raise TypeError(msg)
    return _state.restore(template, state, (), _state.Source(root))  # type: ignore[no-any-return]


def save(path: str | os.PathLike[str], obj: Any) -> None:
    """Writes `obj`'s dynamic leaves, structure and static values to a `.npz` file.

    Each array is stored under its state-dict path (`layers.0.w`); the manifest
    (`__treeclass__`, JSON) records the structure, dtypes, shapes and static values.
    Dtypes numpy cannot name (bfloat16, float8, int4) are stored as raw bits. The file
    is written beside `path` under a temporary name, then renamed over it, so `path`
    never holds half a checkpoint. No `.npz` suffix is added to `path`.

    **Arguments**

    - `path`: the file to write (`str` or `os.PathLike`); replaced if it exists.
    - `obj`: a treeclass instance, or a list, tuple or dict of them.

    **Returns**

    `None`.

    **Raises**

    `TypeError` naming the field for a leaf a checkpoint cannot hold (a string, an
    object array, a tracer), or if `obj` is not a container; `ValueError` if two
    leaves would share a name; `CheckpointError` naming the field, and showing the
    orbax calls to use, for an array spread over several processes (not fully
    addressable); `OSError` from the file system. Nothing is written when it raises.

    **Example**

    >>> import os, tempfile
    >>> @tc.treeclass
    ... class Dense:
    ...     w: jax.Array
    ...     act: str = tc.static("relu")
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "dense.npz")
    >>> tc.save(path, Dense(jnp.arange(6.0, dtype=jnp.bfloat16).reshape(2, 3)))
    >>> sorted(np.load(path).files)  # an ordinary .npz
    ['__treeclass__', 'w']
    >>> tmp.cleanup()
    """
    path = _fspath(path, "save")
    root = _state.check_root(obj, "save", "obj")
    members: dict[str, tuple[Any, str]] = {}
    tree = _state.describe(obj, root, (), members)
    manifest = {"format": _npz.FORMAT, "version": _npz.VERSION, "root": root, "tree": tree}

    def write_to(f: IO[bytes]) -> None:
        arrays = ((name, lambda x=x, w=w: _leaves.data(x, w)) for name, (x, w) in members.items())
        _npz.write(f, manifest, arrays)

    _npz.write_atomic(path, write_to)


def load(path: str | os.PathLike[str], template: _T) -> _T:
    """Reads a file written by `save` into the structure of `template`.

    The file's structure, shapes, dtypes and static values are checked against the
    template's before any array is read. Leaves come back as the template's are: a
    `jax.Array` (or `jax.ShapeDtypeStruct`) leaf gives a `jax.Array` with the
    template's weak type and, if placed explicitly, its sharding; a numpy leaf gives
    numpy; a Python scalar gives a Python scalar. Static values come from the template.
    Nothing in the file is unpickled or executed.

    **Arguments**

    - `path`: a file written by `treeclass.save()`.
    - `template`: an instance built like the saved one (its values are not read), or
      `jax.eval_shape` of one.

    **Returns**

    A new instance of `type(template)` holding the file's arrays.

    **Raises**

    `CheckpointError` (a `ValueError`) naming the field path for a mismatch, or the
    file when it is damaged, truncated or not a treeclass checkpoint; `OSError` if it
    cannot be opened; `TypeError` for a template that is not a container.

    **Example**

    >>> import os, tempfile
    >>> @tc.treeclass
    ... class Dense:
    ...     w: jax.Array
    ...     act: str = tc.static("relu")
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
    root = _state.check_root(template, "load", "template")
    with open(path, "rb") as f, _npz.Reader(f, path) as reader:
        tree = reader.manifest()["tree"]
        return _state.restore(template, tree, (), _state.FileSource(root, reader))  # type: ignore[no-any-return]
