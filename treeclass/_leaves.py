"""What a checkpoint leaf is: which leaves a file can hold (`meta`), the array
`save()` writes for one (`data`), and the leaf `load()` gives back for a template's
leaf (`like`): a Python scalar for a Python scalar, numpy for numpy, else a jax.Array.
A typed PRNG key is stored as its key data (`uint32`), its dtype (`key<fry>`, which
names the implementation) in the manifest, and wrapped again on load.
"""

from __future__ import annotations

from typing import Any, Final

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core
import jax.numpy as jnp
import numpy as np

from treeclass import _npz
from treeclass._repr import short_repr

_MSG_BAD_LEAF: Final = """\
{where} holds {what}, which a checkpoint cannot store.

Checkpoints hold arrays (jax.Array, numpy.ndarray) of numeric or bool dtype, and Python
bool, int, float and complex values. Make the field static if it is configuration:

    {field}: {type} = tc.static(...)

or store it as an array (jnp.asarray(...)) if it is data."""

_ARRAYS: Final = (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct)


def is_array(x: object) -> bool:
    # A plain bool, not a TypeGuard: narrowing `Any` to the numpy generics would make
    # every later `.shape` partially unknown to the type checker.
    return isinstance(x, _ARRAYS)


def is_key(x: Any) -> bool:
    """True for a typed PRNG key array (`jax.random.key`), or a template of one."""
    return is_array(x) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def dtype_name(dtype: Any) -> str:
    """The dtype as the manifest and messages name it: numpy's name (`float32`,
    `bfloat16`), or JAX's for a typed PRNG key (`key<fry>`), which numpy cannot name."""
    if jnp.issubdtype(dtype, jax.dtypes.prng_key):
        return str(dtype)
    return str(np.dtype(dtype).name)


def key_data_shape(template: Any) -> tuple[int, ...]:
    """The shape of `jax.random.key_data` of a key array like `template`: its shape
    plus the implementation's (`(2,)` for threefry, `(4,)` for rbg)."""
    return tuple(jax.eval_shape(jax.random.key_data, template).shape)


def fully_addressable(x: Any) -> bool:
    """False for a `jax.Array` with shards on other processes' devices (multi-process
    JAX), whose values this process cannot read."""
    if not isinstance(x, jax.Array) or isinstance(x, jax.core.Tracer):
        return True
    return bool(x.is_fully_addressable)


def meta(x: Any, where: str, field: str) -> tuple[str, tuple[int, ...], bool]:
    """`(dtype name, shape, weak_type)` of a leaf a checkpoint can hold; `TypeError`
    naming the field otherwise. A Python scalar's dtype is `python float` etc."""
    kind = _npz.scalar_kind(x)
    if kind is not None:
        return _npz.scalar_name(kind), (), False
    if is_key(x):
        return dtype_name(x.dtype), tuple(x.shape), False
    if is_array(x):
        dtype = np.dtype(x.dtype)
        if _npz.stored_dtype(dtype) is not None:
            return dtype.name, tuple(x.shape), bool(getattr(x, "weak_type", False))
        what = f"an array of dtype {dtype}"
    else:
        what = f"a {type(x).__name__} ({short_repr(x)})"
    msg = _MSG_BAD_LEAF.format(where=where, what=what, field=field, type=type(x).__name__)
    raise TypeError(msg)


def data(x: Any, where: str) -> np.ndarray[Any, Any]:
    """The array `save()` writes for the leaf `x`, in its stored dtype."""
    if isinstance(x, jax.core.Tracer):
        msg = f"{where} is a tracer: treeclass.save() cannot run inside jax.jit or vmap."
        raise TypeError(msg)
    if isinstance(x, jax.ShapeDtypeStruct):
        msg = f"{where} is a jax.ShapeDtypeStruct, which has no values. Save a concrete instance."
        raise TypeError(msg)
    kind = _npz.scalar_kind(x)
    if kind is not None:
        try:
            return np.asarray(x, dtype=_npz.scalar_dtype(kind))
        except OverflowError:
            msg = f"{where} holds the int {x}, which does not fit in int64. Store it as an array."
            raise TypeError(msg) from None
    if is_key(x):
        return np.asarray(jax.random.key_data(x))  # the implementation is in the manifest
    return _npz.to_stored(np.asarray(x))  # device -> host; bfloat16 etc. as raw bits


def scalar_fits(kind: type, template: Any) -> bool:
    """A Python scalar of type `kind` may fill an array leaf of the template if that is
    what JAX makes of it: shape `()` and the canonical dtype (float32 for a float,
    unless x64 is on). `jax.eval_shape` turns scalar leaves into such arrays."""
    canonical = jax.dtypes.canonicalize_dtype(_npz.scalar_dtype(kind))
    return is_array(template) and tuple(template.shape) == () and template.dtype == canonical


def _weak(x: jax.Array) -> jax.Array:
    # JAX has no public "make this array weakly typed". Weak scalars come from Python
    # numbers, and broadcasting them and scattering into them keeps the weak type.
    base = jnp.asarray({"f": 0.0, "i": 0, "c": 0j}.get(x.dtype.kind, False))
    if base.dtype != x.dtype or not base.weak_type:
        return x  # only the default dtypes have weak variants
    return jnp.broadcast_to(base, x.shape).at[...].set(x)


def like(template: Any, stored: np.ndarray[Any, Any]) -> Any:
    """`stored` (read from a file, in its stored dtype) as a leaf of the template's
    kind: a Python scalar for a Python scalar, numpy for numpy, else a `jax.Array` with
    the template's weak type and, where the template is placed explicitly (a committed
    array, or a ShapeDtypeStruct with a sharding), its sharding."""
    kind = _npz.scalar_kind(template)
    if kind is not None:
        return kind(stored.item())
    if is_key(template):
        result = jax.random.wrap_key_data(jnp.asarray(stored), dtype=template.dtype)
    else:
        array = _npz.from_stored(stored, np.dtype(template.dtype))
        if isinstance(template, np.ndarray):
            return array
        if isinstance(template, np.generic):
            return array[()]
        result = jnp.asarray(array)
        if getattr(template, "weak_type", False):
            result = _weak(result)
    if isinstance(template, jax.core.Tracer):  # load() under jit: no placement to copy
        return result
    sharding = getattr(template, "sharding", None)
    explicit = isinstance(template, jax.ShapeDtypeStruct) or getattr(template, "committed", False)
    if sharding is not None and explicit:
        return jax.device_put(result, sharding)
    return result
