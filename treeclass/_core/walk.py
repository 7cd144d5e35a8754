"""`walk(tree)`: every node, leaf and static value of any pytree, with its key path and
`Class.field`; `path_str` (`MLP.layers[1].w`), `is_array` and the `f32[100,3]` names."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from treeclass._core.layout import instance_layout

KeyPath = tuple[Any, ...]  # jax.tree_util key entries: GetAttrKey, SequenceKey, DictKey

ARRAY_TYPES: Final = (jax.Array, np.ndarray, np.generic)
PYTHON_SCALARS: Final = (bool, int, float, complex)  # weakly typed scalars to JAX


def path_str(root: str, path: KeyPath) -> str:
    """`MLP.layers[1].w`, a place as messages write it: `root` (a class or argument), `path`."""
    return root + jax.tree_util.keystr(path)


def is_array(x: object) -> bool:
    """`jax.Array` (tracers too), numpy arrays and scalars; not Python numbers, ShapeDtypeStruct."""
    # Not a TypeGuard: narrowing `Any` to numpy generics makes later `.shape` partially unknown.
    return isinstance(x, ARRAY_TYPES)


def dtype_name(dtype: Any) -> str:
    """`f32`, `i8`, `u16`, `c64`, `bf16`, `bool`; `key<fry>` for typed PRNG keys."""
    if jnp.issubdtype(dtype, jax.dtypes.extended):
        return str(dtype)  # typed PRNG keys: key<fry>; numpy cannot name them
    name: str = np.dtype(dtype).name
    if name == "bfloat16":
        return "bf16"
    bits = re.fullmatch(r"(?:float|u?int|complex)(\d+)", name)  # the first letter and the bits
    return (
        name[0] + bits[1] if bits else name
    )  # float8_e4m3fn and friends: the full name is clearer


def array_name(dtype: Any, shape: tuple[int, ...], weak: bool = False) -> str:
    """`f32[100,3]`; `f32[]{weak}` for a weakly typed scalar (from a Python number)."""
    return f"{dtype_name(dtype)}[{','.join(map(str, shape))}]" + ("{weak}" if weak else "")


def node_def(x: Any) -> Any:
    """The treedef of `x`'s node, children as leaves: rebuilds `x` as JAX does (no `__init__`)."""
    return jax.tree.structure(x, is_leaf=lambda y: y is not x)


def children(x: Any) -> list[tuple[Any, Any]] | None:
    """`x`'s `(key entry, child)` pairs in flatten order, one level; None for a leaf."""
    if isinstance(x, jax.Array) or type(x) is np.ndarray or type(x) in PYTHON_SCALARS:
        return None
    if x is None:
        return []
    if type(x) is tuple or type(x) is list:
        return [(jax.tree_util.SequenceKey(i), child) for i, child in enumerate(x)]
    # Every value below x counts as a leaf, so JAX flattens exactly one level.
    pairs, _ = jax.tree_util.tree_flatten_with_path(x, is_leaf=lambda y: y is not x)
    if len(pairs) == 1 and pairs[0][0] == ():
        return None
    return [(path[0], child) for path, child in pairs]


class Visit(NamedTuple):
    """One value met by `walk()`."""

    path: KeyPath
    value: Any
    owner: type | None  # the innermost treeclass whose field holds `value`; None outside any
    name: str | None
    kind: Literal["node", "leaf", "static"]  # "node": a treeclass or container
    trainable: bool  # False at and below a field declared `trainable=False`

    @property
    def field(self) -> str:
        """`Class.field` of the field that holds the value (`""` outside any)."""
        return "" if self.owner is None else f"{self.owner.__name__}.{self.name}"


def walk(
    tree: Any,
    path: KeyPath = (),
    owner: type | None = None,
    name: str | None = None,
    trainable: bool = True,
) -> Iterator[Visit]:
    """Every node, leaf and static value of `tree`, lazily, parents first, leaves in JAX's order."""
    layout = instance_layout(tree)
    if layout is not None:
        yield Visit(path, tree, owner, name, "node", trainable)
        cls = type(tree)
        dynamic, static = layout.flatten(tree)  # what JAX's flatten returns
        values = dict(zip((*layout.dynamic, *layout.static), (*dynamic, *static), strict=True))
        for field in layout.names:
            field_path = (*path, jax.tree_util.GetAttrKey(field))
            if field in layout.static:
                yield Visit(field_path, values[field], cls, field, "static", False)
            else:
                trained = trainable and field not in layout.frozen
                yield from walk(values[field], field_path, cls, field, trained)
        return
    below = children(tree)
    yield Visit(path, tree, owner, name, "leaf" if below is None else "node", trainable)
    for key, child in below or ():
        yield from walk(child, (*path, key), owner, name, trainable)
