"""The errors of the checkpoint functions: `CheckpointError`, for a checkpoint that does not
fit its template or a damaged file, and the `TypeError` of a public function given the wrong
kind of argument."""

from __future__ import annotations

from treeclass._core.show import short_repr


class CheckpointError(ValueError):
    """A checkpoint does not fit its template (the message starts with the field path,
    `Model.layers[0].w: ...`), or its file is damaged; a `ValueError`.

    **Example**

    >>> class Dense(tc.TreeClass):
    ...     w: jax.Array
    >>> tc.from_state_dict(Dense(jnp.ones(3)), {"w": jnp.ones(2)})
    Traceback (most recent call last):
    treeclass.CheckpointError: Dense.w: shape (2,) in the state dict, (3,) in the template
    ...
    """

    __module__ = "treeclass"  # shown as treeclass.CheckpointError, where users import it


def wrong_argument(takes: str, fn: str, found: object, shown: str = "") -> TypeError:
    """The `TypeError` of the public function `fn` given `found` where it `takes` another kind
    of argument; `shown` replaces the default description of `found` (its type and repr)."""
    shown = shown or f"{type(found).__name__} {short_repr(found)}"
    return TypeError(f"treeclass.{fn}() takes {takes}; got {shown}.")
