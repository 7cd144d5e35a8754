"""`summary()`: a table of what a model holds, one row per leaf and static field (or per
subtree at `depth`, as `nnx.tabulate`). It reads shapes and dtypes, never values."""

import html
import math
from typing import Any, Final

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from treeclass._core.show import short_repr
from treeclass._core.walk import Visit, dtype_name, is_array, path_str, walk
from treeclass._train.select import trainable

_COLUMNS: Final = ("path", "kind", "dtype", "shape", "count", "bytes")


class Summary(str):
    """The text of `tc.summary()`, shown as the table it is by a REPL and a notebook."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(str(self))}</pre>"

    def __treescope_repr__(self, path: str | None, subtree_renderer: object) -> object:
        """One line a row, folding to `<summary>`: treescope cannot lay out a multi-line repr."""
        from treescope import rendering_parts as parts

        rows = parts.siblings(*[parts.text(line + "\n") for line in self.splitlines()])
        folded = parts.fold_condition(expanded=rows, collapsed=parts.text("<summary>"))
        return parts.build_custom_foldable_tree_node(
            contents=folded, path=path, expand_state=parts.ExpandState.EXPANDED
        )


def _size(n: float) -> str:
    """`48.2 kB`: bytes in decimal units, as `du -h --si` shows them."""
    for unit in ("B", "kB", "MB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def _leaf(v: Visit) -> tuple[str, str, int, int, str]:
    """(dtype, shape, count, bytes, sharding) of a leaf."""
    x = v.value
    if is_array(x) or isinstance(x, jax.ShapeDtypeStruct):
        count = math.prod(x.shape)
        itemsize = 0 if jnp.issubdtype(x.dtype, jax.dtypes.extended) else np.dtype(x.dtype).itemsize
        if itemsize == 0:  # a typed PRNG key: its key data's bytes
            itemsize = math.prod(jax.eval_shape(jax.random.key_data, x).shape[x.ndim :]) * 4
        # A NamedSharding's spec as the docs write it (its str differs by jax version).
        sharding = getattr(x, "sharding", None)
        spec = ", ".join(map(repr, sharding.spec)) if isinstance(sharding, NamedSharding) else None
        placed, shape = "" if spec is None else f"P({spec})", f"[{','.join(map(str, x.shape))}]"
        return dtype_name(x.dtype), shape, count, count * itemsize, placed
    if isinstance(x, bool | int | float | complex):  # a Python number: JAX makes it a scalar
        dtype = jax.dtypes.canonicalize_dtype(type(x))
        return type(x).__name__, "[]", 1, np.dtype(dtype).itemsize, ""
    return type(x).__name__, "", 0, 0, ""


def _static(value: Any) -> str:
    """A static value as a row shows it; a function by its name (its repr has an address)."""
    name = getattr(value, "__qualname__", None)
    if callable(value) and not isinstance(value, type) and isinstance(name, str):
        return f"<function {name}>"
    return short_repr(value, 40)


def _fold(at: str, node: Any, below: list[tuple[bool, int, int]]) -> tuple[str, ...]:
    """The row of a subtree folded at `depth`."""
    kinds = {is_param for is_param, _, _ in below}
    kind = "trainable" if kinds == {True} else "non-trainable" if kinds == {False} else "static"
    if len(kinds) == 2:
        kind = f"mixed ({sum(count for is_param, count, _ in below if is_param):,} trainable)"
    count, nbytes = sum(c for _, c, _ in below), sum(b for _, _, b in below)
    return (at, kind, type(node).__name__, "", f"{count:,}", _size(nbytes), "")


def summary(tree: Any, depth: int | None = None) -> str:
    """Returns a table of what `tree` holds: one row per leaf and static field.

    **Arguments**

    - `tree`: any pytree (`jax.ShapeDtypeStruct` leaves too: `jax.eval_shape(init)`).
    - `depth`: `None` expands everything; `k` folds each subtree at depth `k` (the root is 0).

    **Returns**

    A `str` shown as a table: one row per path (kind, dtype, shape, count, bytes and a
    `NamedSharding`'s spec), then the totals.

    **Raises**

    `ValueError` for a `depth` that is not `None` or an int >= 0.

    **Example**

    >>> class Stats(tc.TreeClass):
    ...     mean: jax.Array
    >>> class Layer(tc.TreeClass):
    ...     w: jax.Array
    ...     stats: Stats = tc.field(trainable=False)
    ...     step: jax.Array = tc.field(default_factory=lambda: jnp.array(0))
    ...     act: tc.Static[str] = "relu"
    >>> layer = Layer(jnp.ones((3, 4)), Stats(jnp.zeros(4)))
    >>> tc.summary(layer)
    path              kind           dtype  shape  count  bytes
    Layer.w           trainable      f32    [3,4]     12   48 B
    Layer.stats.mean  non-trainable  f32    [4]        4   16 B
    Layer.step        non-trainable  i32    []         1    4 B
    Layer.act         static         'relu'
    trainable: 12 parameters, 48 B; non-trainable: 5 elements, 20 B
    >>> tc.summary({"layer": layer}, depth=1)
    path            kind                  dtype  shape  count  bytes
    dict['layer']   mixed (12 trainable)  Layer            17   68 B
    trainable: 12 parameters, 48 B; non-trainable: 5 elements, 20 B
    """
    if depth is not None and (type(depth) is not int or depth < 0):
        msg = (
            f"summary(depth={depth!r}): depth is None (every row) or an int >= 0, "
            "e.g. tc.summary(model, depth=1)."
        )
        raise ValueError(msg)
    root = type(tree).__name__
    rows: list[Any] = []  # a row (a tuple), or a folded subtree to sum up (a list)
    totals = {True: [0, 0], False: [0, 0]}  # trainable? -> [count, bytes]
    for v in walk(tree):
        at = path_str(root, v.path)
        folded = depth is not None and len(v.path) > depth  # into the row of `rows[-1]`
        if depth is not None and len(v.path) == depth and v.kind == "node":
            rows.append([at, v.value, [], 0])  # `walk` visits its subtree next
        elif (v.kind == "static" or v.config) and folded:
            rows[-1][3] += 1
        elif v.kind == "static" or v.config:  # configuration: an equinox layer's bool, too
            rows.append((at, "static", _static(v.value), "", "", "", ""))
        elif v.kind == "leaf":
            dtype, shape, count, nbytes, sharding = _leaf(v)
            is_param = trainable(v)
            totals[is_param][0] += count
            totals[is_param][1] += nbytes
            if folded:
                rows[-1][2].append((is_param, count, nbytes))
            else:
                kind = "trainable" if is_param else "non-trainable"
                rows.append((at, kind, dtype, shape, f"{count:,}", _size(nbytes), sharding))
    # A subtree of neither leaves nor statics (None, an empty tuple) has no row.
    rows = [_fold(*row[:3]) if isinstance(row, list) else row for row in rows if row[2] or row[3]]
    columns = (*_COLUMNS, "sharding") if any(row[6] for row in rows) else _COLUMNS
    table = [columns, *(row[: len(columns)] for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    just = [str.rjust if name in ("count", "bytes") else str.ljust for name in columns]
    lines = [
        "  ".join(j(c, w) for c, w, j in zip(row, widths, just, strict=True)).rstrip()
        for row in table
    ]
    (params, param_bytes), (state, state_bytes) = totals[True], totals[False]
    trained = f"trainable: {params:,} parameters, {_size(param_bytes)}"
    total = f"{trained}; non-trainable: {state:,} elements, {_size(state_bytes)}"
    return Summary("\n".join([*lines, total]))
