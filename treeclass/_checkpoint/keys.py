"""How a checkpoint names what it walks: the root that starts every path in messages
(`Model`), each child's state-dict key (`layers.0.w`, also the name of its file member),
and which children are configuration, left out of state dicts and compared in files. And its
errors: `CheckpointError`, whose message starts with such a path (or names a damaged file),
and the `TypeError` of a public function given the wrong kind of argument."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from treeclass._core.show import short_repr
from treeclass._core.walk import KeyPath, Rule, children, is_config


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


def state_key(path: KeyPath) -> str:
    """The dotted state-dict key of a key path (`layers.0.w`), also a file member's name."""
    return ".".join(jax.tree_util.keystr((entry,), simple=True) for entry in path)


def keyed(x: Any, where: Callable[[], str]) -> list[tuple[Any, str, Any]] | None:
    """`x`'s children as `(key entry, state-dict key, child)`; None for a leaf.

    `where()` names `x` in the `ValueError` for two keys of one string form (`1` and `"1"`),
    which a state dict could not tell apart; it is called only then."""
    pairs = children(x)
    if pairs is None:
        return None
    keys = [state_key((entry,)) for entry, _ in pairs]  # w, 0, key
    if len(set(keys)) != len(keys):
        dupes = ", ".join(map(repr, sorted({k for k in keys if keys.count(k) > 1})))
        msg = (
            f"{where()}: the keys of this {type(x).__name__} have the same string form "
            f"({dupes}), so a state dict cannot tell them apart. Use keys whose str() differ."
        )
        raise ValueError(msg)
    return [(entry, key, child) for key, (entry, child) in zip(keys, pairs, strict=True)]


def check_root(x: Any, fn: str, arg: str) -> str:
    """The name that starts every path in messages (`Model`); `TypeError` for a non-container.

    `fn` and `arg` name the public function and its argument in that error."""
    shown = ""
    if isinstance(x, type):
        shown = f"the class {x.__name__}; pass an instance, {x.__name__}(...)"
    elif x is not None and keyed(x, lambda: type(x).__name__) is not None:
        return type(x).__name__
    takes = f"a treeclass instance (or a list, tuple or dict of them) as `{arg}`"
    raise wrong_argument(takes, fn, x, shown)


def config_child(rule: Rule, child: Any) -> bool:
    """A leaf its owner's `rule` makes configuration (an equinox layer's bool or function):
    left out of state dicts (taken from the template, as statics are), compared in files."""
    return child is not None and children(child) is None and is_config(rule, child)
