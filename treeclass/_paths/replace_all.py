"""`replace_all()`: one change for every treeclass in a tree that has the field, such as an
inference-mode switch (`eqx.nn.inference_mode`, nnx's `.eval()`), where setting each flag
by path misses one in silence."""

from __future__ import annotations

from typing import Any, Final, TypeVar

from treeclass._core.checks import closest
from treeclass._core.layout import instance_layout
from treeclass._core.walk import children, node_def

_T = TypeVar("_T")

_MSG_NO_FIELD: Final = """\
replace_all(): no treeclass in this {root} has a field {names}{hint}

replace_all() replaces a field in every treeclass that has one, at any depth; the fields
of the treeclasses in this tree: {fields}."""


def replace_all(tree: _T, /, **changes: Any) -> _T:
    """Returns a copy of `tree` in which every treeclass with a field of a given name holds it.

    **Arguments**

    - `tree`: a treeclass instance, or any pytree holding them, at any depth.
    - `**changes`: field names and their new values.

    **Returns**

    An object of `tree`'s type: each treeclass with one of the fields rebuilt once with
    `replace()`, each node above it rebuilt with its own type, the rest shared with `tree`.

    **Raises**

    `TypeError` naming each field no treeclass in `tree` has; whatever `replace()` raises.

    **Example**

    >>> class Dropout(tc.TreeClass):
    ...     rate: tc.Static[float] = 0.1
    ...     inference: tc.Static[bool] = False
    >>> class Block(tc.TreeClass):
    ...     w: jax.Array
    ...     drop: Dropout = Dropout()
    >>> model = (Block(jnp.ones(2)), {"head": Block(jnp.ones(3))})
    >>> evaluating = tc.replace_all(model, inference=True)
    >>> evaluating[0].drop.inference, evaluating[1]["head"].drop.inference
    (True, True)
    >>> evaluating[0].w is model[0].w
    True
    >>> tc.replace_all(model, inferance=True)
    Traceback (most recent call last):
    TypeError: replace_all(): no treeclass in this tuple has a field 'inferance', did you mean 'inference'?
    ...
    """
    seen: set[str] = set()  # the fields of the treeclasses met
    new: _T = _rebuild(tree, changes, seen)
    missing = [name for name in changes if name not in seen]
    if missing:
        close = closest(missing[0], sorted(seen)) if len(missing) == 1 else None
        msg = _MSG_NO_FIELD.format(
            root=type(tree).__name__,
            names=", ".join(map(repr, missing)),
            hint=f", did you mean {close!r}?" if close else ".",
            fields=", ".join(sorted(seen)) or "none (it holds no treeclass)",
        )
        raise TypeError(msg)
    return new


def _rebuild(x: Any, changes: dict[str, Any], seen: set[str]) -> Any:
    """`x` with `changes` made in every treeclass at or below it; `x` itself if none."""
    layout = instance_layout(x)
    if layout is not None:
        seen.update(layout.names)
        new = {name: value for name, value in changes.items() if name in layout.names}
        for name in layout.names:  # static fields too: a static treeclass has fields
            if name not in new:
                old = getattr(x, name)
                if (sub := _rebuild(old, changes, seen)) is not old:
                    new[name] = sub
        return x.replace(**new) if new else x
    pairs = children(x)
    if not pairs:
        return x
    subs = [_rebuild(child, changes, seen) for _, child in pairs]
    if all(sub is child for sub, (_, child) in zip(subs, pairs, strict=True)):
        return x
    if isinstance(x, dict):  # by key: JAX's unflatten would sort a dict's keys
        return x | {entry.key: sub for (entry, _), sub in zip(pairs, subs, strict=True)}
    return node_def(x).unflatten(subs)  # a tuple, list, NamedTuple, another library's node
