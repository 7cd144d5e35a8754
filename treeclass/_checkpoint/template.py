"""The template as every checkpoint module reads it: the root that starts each path in
messages (`Model`), each child's state-dict key (`layers.0.w`, also its file member's name),
the children that are configuration (left out of state dicts, compared in files), what a leaf
is (an array, a typed PRNG key, a Python number) and its dtype's name; `as_template()`, a
restored value made the template's kind of leaf (what `from_state_dict()` and `load()`
return). And the errors: `CheckpointError` (a checkpoint that does not fit its template, a
damaged file), the `TypeError` of a public function given the wrong kind of argument."""

from collections.abc import Callable
from typing import Any, Final

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core
import jax.numpy as jnp
import numpy as np

from treeclass._core.show import short_repr
from treeclass._core.walk import PYTHON_SCALARS, KeyPath, Rule, children, is_array, is_config


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


# The dtype kinds of the 0-d arrays taken for a Python number of each type: some stores give
# a number back as such an array.
SCALAR_KINDS: Final = {bool: "b", int: "iu", float: "f", complex: "c"}


def arraylike(x: object) -> bool:
    """An array, or a template's stand-in for one (`jax.ShapeDtypeStruct`)."""
    return is_array(x) or isinstance(x, jax.ShapeDtypeStruct)


def is_key(x: Any) -> bool:
    """A typed PRNG key array (`jax.random.key`), or a template of one."""
    return arraylike(x) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def dtype_str(dtype: Any) -> str:
    """numpy's name for `dtype` (`bfloat16`), or JAX's for a typed PRNG key (`key<fry>`)."""
    if jnp.issubdtype(dtype, jax.dtypes.prng_key):
        return str(dtype)
    return str(np.dtype(dtype).name)


def scalar_fits(kind: type, template: Any) -> bool:
    """The template's leaf is what `jax.eval_shape` makes of a Python `kind` number."""
    canonical = jax.dtypes.canonicalize_dtype(kind)
    return arraylike(template) and tuple(template.shape) == () and template.dtype == canonical


def fits(value: Any, dtype: Any) -> bool:
    """`value`, a number, converts to `dtype` without wrapping or overflowing to inf."""
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            converted = np.asarray(value).astype(dtype)
        except OverflowError:  # numpy's for a Python int past int64
            return False
    if converted.dtype.kind in "biu":
        return bool(converted == value)
    # A float or complex fits unless a finite part became inf or nan: compare each part,
    # real and imaginary, converted with given.
    for part in (np.real, np.imag):
        converted_part, given_part = part([converted, value])
        if not np.isfinite(converted_part) and np.isfinite(given_part):
            return False
    return True


def as_template(template: Any, value: Any) -> Any:
    """`value` as a leaf of the template's kind: a `jax.Array` with its weak type and sharding.

    A Python number stays that type of number, a numpy array a writeable numpy copy, and a
    jax array that already has the template's weak type is returned as it is, not copied."""
    if isinstance(value, jax.core.Tracer):  # from_state_dict under jit: nothing to convert
        return value
    if type(value) is type(template) and not isinstance(template, jax.Array):
        return value  # a Python number, a numpy array, or a str or function (checked by type)
    if type(template) in PYTHON_SCALARS:
        return type(template)(np.asarray(value).item())
    if not arraylike(template):
        return value  # a str or function in a dynamic field: the source checked its type
    if isinstance(template, np.ndarray | np.generic):
        array = np.array(value, dtype=template.dtype)  # a writeable copy, on the host
        return array if isinstance(template, np.ndarray) else array[()]
    weak = bool(getattr(template, "weak_type", False))
    if isinstance(value, jax.Array) and bool(getattr(value, "weak_type", False)) == weak:
        return value  # a jax key, or an array of the same weak type: shared, not copied
    if is_key(template):
        result = jax.random.wrap_key_data(jnp.asarray(value), impl=_key_impl(template))
    else:
        result = jnp.asarray(value, template.dtype)  # strongly typed
        if weak:
            result = _weakly_typed(result)
    if isinstance(template, jax.core.Tracer):  # load() under jit: no placement to copy
        return result
    explicit = isinstance(template, jax.ShapeDtypeStruct) or getattr(template, "committed", False)
    if explicit and getattr(template, "sharding", None) is not None:
        return jax.device_put(result, template.sharding)
    return result


def _key_impl(template: Any) -> Any:
    """The PRNG implementation of a key template, read by tracing: a `ShapeDtypeStruct`
    has no values to ask `jax.random.key_impl`, but a traced stand-in does."""
    found: list[Any] = []
    jax.eval_shape(lambda key: found.append(jax.random.key_impl(key)), template)
    return found[0]


def _weakly_typed(result: jax.Array) -> jax.Array:
    """`result` with a weak type, where its dtype is a default one (only those are weak):
    a weakly typed zero of that kind, broadcast to its shape, with its values set in."""
    base = jnp.asarray({"f": 0.0, "i": 0, "c": 0j}.get(result.dtype.kind, False))
    if base.dtype != result.dtype:
        return result
    return jnp.broadcast_to(base, result.shape).at[...].set(result)
