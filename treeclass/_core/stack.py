"""`tc.stack()`, `tc.unstack()`: instances of one structure as one whose leaves carry a leading
axis (as `jax.vmap(init)(keys)` returns), and back. Not `jax.tree.map(jnp.stack)`: where
instances differ it names no field; here they are walked side by side, naming the field."""

from collections.abc import Sequence
from itertools import zip_longest
from typing import Any, Final, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from treeclass._core.show import describe, short_repr
from treeclass._core.tree import equal
from treeclass._core.walk import PYTHON_SCALARS, Visit, array_name, is_array, path_str, walk

T = TypeVar("T")

_MSG_EMPTY: Final = "tc.stack() needs at least one instance to stack; it got an empty sequence."
_MSG_STATIC: Final = """\
tc.stack(): instances[0] and instances[{i}] differ in the static field {where}: {a} and {b}.
A stack holds one copy of each static field (it is part of the structure, not a leaf), \
so every instance needs the same value. Build them alike, e.g. \
`tc.replace_at(instances[{i}], lambda x: x{path}, {a})`, or make the field dynamic if it \
should vary per instance."""
_MSG_CONFIG: Final = """\
tc.stack(): instances[0] and instances[{i}] differ in {where}: {a} and {b}. It is \
configuration (a leaf of another library's node that is not an array, such as an equinox \
layer's dropout rate), which a stack holds once, as a static field: build every instance \
with the same value."""
_MSG_LEAF: Final = """\
tc.stack(): instances[0] and instances[{i}] differ in the {what} of {where}: {a} and {b}.
Stacked leaves need one shape and dtype: build every instance with the same sizes \
(`jax.vmap(init)(keys)` does)."""
_MSG_STRUCTURE: Final = """\
tc.stack(): instances[0] and instances[{i}] differ in structure at {where}: {a} and {b}.
Only instances of one structure (same classes, containers and statics) stack."""
_MSG_NOT_ARRAY: Final = """\
tc.stack(): {where} holds {found}, which cannot be stacked: only arrays and Python \
numbers become a stacked leaf. Declare the field static (`tc.Static[...]`) if it is \
configuration."""
_MSG_NOTHING: Final = """\
tc.unstack(): {root} has no array leaves, so the number of instances it stacks is unknown."""
_MSG_SCALAR: Final = """\
tc.unstack(): {where} is {found}, with no leading axis to unstack along; \
a stack made by tc.stack() or jax.vmap(init) has one on every leaf."""
_MSG_LENGTH: Final = """\
tc.unstack(): {where} has a leading axis of {b}, but {first} has {a}: every leaf of a \
stack has the same leading axis."""


def stack(instances: Sequence[T]) -> T:
    """Stacks instances of one structure into one, each leaf along a new leading axis, ready
    for `jax.vmap` or `jax.lax.scan`. Static fields are kept once, so must be equal; no user
    code runs (the stack is rebuilt as JAX rebuilds pytrees).

    **Arguments**

    - `instances`: a non-empty sequence of pytrees of one structure, leaves arrays or numbers.

    **Returns**

    One pytree of that structure, each leaf `jnp.stack` of theirs (`np.stack` for numpy ones).

    **Raises**

    - `ValueError`: `instances` is empty, or two differ in a static field, a leaf's
      shape or dtype, or structure (naming the field and both values).
    - `TypeError`: a leaf is neither an array nor a Python number.

    **Example**

    >>> class Linear(tc.TreeClass):
    ...     w: jax.Array
    ...     act: tc.Static[str] = "relu"
    >>> layers = [Linear(jnp.full(3, float(i))) for i in range(4)]
    >>> tc.stack(layers)
    Linear(w=f32[4,3], act='relu')
    >>> tc.stack([layers[0], Linear(jnp.zeros(3), act="gelu")])
    Traceback (most recent call last):
    ValueError: tc.stack(): instances[0] and instances[1] differ in the static field
    Linear.act: 'relu' and 'gelu'...
    """
    if len(instances) == 0:
        raise ValueError(_MSG_EMPTY)
    first, *rest = instances
    treedef: Any = jax.tree.structure(first)  # a PyTreeDef, whose == mypy cannot see
    visits = [v for v in walk(first) if v.kind == "leaf"]  # in JAX's order
    leaves = [v.value for v in visits]
    root = type(first).__name__
    # A leaf its owner makes configuration (an equinox layer's dropout rate) is kept once,
    # as a static field is: it must be equal in every instance, and is never stacked.
    config = [v.config for v in visits]
    for v in visits:
        if not v.config and not (is_array(v.value) or type(v.value) in PYTHON_SCALARS):
            raise TypeError(_MSG_NOT_ARRAY.format(where=_where(v, root), found=describe(v.value)))
    specs = list(map(_spec, leaves))
    rows = [leaves]
    for i, other in enumerate(rest, start=1):
        other_leaves, other_def = jax.tree.flatten(other)
        # Leaf counts that differ are a structure that differs: the treedef check sees it.
        held_pairs = zip(leaves, other_leaves, config, strict=False)
        same_config = all(equal(a, b) for a, b, held in held_pairs if held)
        if other_def != treedef or specs != list(map(_spec, other_leaves)) or not same_config:
            _explain(first, other, i)  # raises, naming the field
        rows.append(other_leaves)
    columns = zip(*rows, strict=True)
    stacked_leaves = [
        col[0] if held else _stack(col) for col, held in zip(columns, config, strict=True)
    ]
    stacked: T = jax.tree.unflatten(treedef, stacked_leaves)
    return stacked


def unstack(stacked: T) -> list[T]:
    """Splits a stack along the leading axis of its leaves: `tc.stack()` undone.

    **Arguments**

    - `stacked`: a pytree whose leaves share a leading axis (`tc.stack()`, `jax.vmap(init)(keys)`).

    **Returns**

    A list of pytrees of `stacked`'s structure, the `i`-th holding each leaf's `i`-th slice.

    **Raises**

    `ValueError`: no leaves, a leaf without a leading axis, or leading axes differ (naming it).

    **Example**

    >>> class Linear(tc.TreeClass):
    ...     w: jax.Array
    ...     b: jax.Array
    >>> [m.w.shape for m in tc.unstack(Linear(jnp.zeros((3, 2)), jnp.zeros((3, 2))))]
    [(2,), (2,), (2,)]
    >>> tc.unstack(Linear(jnp.zeros((3, 2)), jnp.zeros((4, 2))))
    Traceback (most recent call last):
    ValueError: tc.unstack(): Linear.b has a leading axis of 4, but Linear.w has 3: ...
    """
    leaf_visits = [v for v in walk(stacked) if v.kind == "leaf"]
    visits = [v for v in leaf_visits if not v.config]  # configuration was kept once: not split
    root = type(stacked).__name__
    if not visits:
        raise ValueError(_MSG_NOTHING.format(root=root))
    for v in visits:
        if np.ndim(v.value) == 0:
            found = f"a 0-d array ({_spec(v.value)})" if is_array(v.value) else describe(v.value)
            raise ValueError(_MSG_SCALAR.format(where=_where(v, root), found=found))
        n, length = np.shape(visits[0].value)[0], np.shape(v.value)[0]
        if length != n:
            first = _where(visits[0], root)
            raise ValueError(_MSG_LENGTH.format(where=_where(v, root), a=n, b=length, first=first))
    leaves, treedef = jax.tree.flatten(stacked)
    n = np.shape(visits[0].value)[0]
    # One split per leaf, not n indexings; configuration is the same in every instance.
    slices = [
        [leaf] * n if v.config else list(leaf) for leaf, v in zip(leaves, leaf_visits, strict=True)
    ]
    return [jax.tree.unflatten(treedef, [s[i] for s in slices]) for i in range(n)]


def _stack(column: tuple[Any, ...]) -> Any:
    """numpy leaves stack as numpy (keeping float64); all else as a jax.Array."""
    if all(isinstance(x, np.ndarray | np.generic) for x in column):
        return np.stack(column)
    return jnp.stack(column)


def _spec(x: Any) -> str:
    """`f32[3]` for an array, `float` for a Python number: what must match to stack."""
    return array_name(x.dtype, x.shape) if is_array(x) else type(x).__name__


def _where(v: Visit, root: str) -> str:
    """`Block.w (at Model.blocks[1].w)`: the field, and the path when it says more."""
    at = path_str(root, v.path)
    return at if v.field in ("", at) else f"{v.field} (at {at})"


def _explain(first: Any, other: Any, i: int) -> None:
    """Raises the error that names the first place where `other` differs from `first`."""
    root = type(first).__name__
    seen: tuple[dict[Any, Any], dict[Any, Any]] = ({}, {})  # values by path, per walk
    for a, b in zip_longest(walk(first), walk(other)):
        for v, values in zip((a, b), seen, strict=True):
            if v is not None:
                values[v.path] = v.value
        if (
            a is None
            or b is None
            or (a.path, a.kind) != (b.path, b.kind)
            or (a.kind == "node" and type(a.value) is not type(b.value))
        ):
            # Where they differ (leaf types may): the node both name, or the deeper one's parent.
            paths = sorted((v.path for v in (a, b) if v is not None), key=len)
            at = paths[0] if len(paths) == 2 and paths[0] == paths[1] else paths[-1][:-1]
            shown = [short_repr(values[at]) for values in seen]
            msg = _MSG_STRUCTURE.format(i=i, where=path_str(root, at), a=shown[0], b=shown[1])
            raise ValueError(msg)
        where = _where(a, root)
        if (a.config or a.kind == "static") and not equal(a.value, b.value):
            both = {"i": i, "a": short_repr(a.value), "b": short_repr(b.value)}
            if a.config:
                raise ValueError(_MSG_CONFIG.format(where=path_str(root, a.path), **both))
            path = jax.tree_util.keystr(a.path)
            raise ValueError(_MSG_STATIC.format(where=where, path=path, **both))
        specs = [_spec(a.value), _spec(b.value)]
        if a.kind == "leaf" and specs[0] != specs[1]:
            what = "shape" if specs[0].split("[")[0] == specs[1].split("[")[0] else "dtype"
            raise ValueError(_MSG_LEAF.format(i=i, what=what, where=where, a=specs[0], b=specs[1]))
    # The walks agree but JAX's treedefs do not: another library's node's metadata.
    shown = [str(jax.tree.structure(first)), str(jax.tree.structure(other))]
    raise ValueError(_MSG_STRUCTURE.format(i=i, where=root, a=shown[0], b=shown[1]))
