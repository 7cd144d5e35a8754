"""State dicts (nested dicts with string keys, as in flax), `CheckpointError`, and `restore()`,
which fills a template from a state dict or a file, reporting each mismatch at its field path."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeVar

import jax
import jax.core  # imported by jax too; named here so type checkers see jax.core
import jax.numpy as jnp
import numpy as np

from treeclass._core.show import describe, short_repr
from treeclass._core.walk import (
    PYTHON_SCALARS,
    KeyPath,
    Rule,
    children,
    is_array,
    is_config,
    node_def,
    path_str,
    rule_of,
)

_T = TypeVar("_T")

_MSG_FIX: Final = """

The template must be built like the object that was saved: the same fields, shapes,
dtypes and static values. Build it with the saved configuration, e.g. Model(...) or
jax.eval_shape(lambda: Model(...)), and restore into that."""

_MSG_FITS: Final = """\
the {kind} {value!r} in the {source} does not fit {dtype}, the template's dtype
(it would {become}). Restore into a template built concretely, Model(...), which holds
a Python {kind} here, not into jax.eval_shape(lambda: Model(...)), which makes it {dtype}"""

SCALAR_KINDS: Final = {bool: "b", int: "iu", float: "f", complex: "c"}  # 0-d arrays taken for them

_MSG_KEYS: Final = """\
{saved} in the {source}, {template} in the template. Typed PRNG keys
(jax.random.key) and raw uint32 keys (jax.random.PRNGKey) are different leaves; make
the template hold what was saved, or convert the saved key:
jax.random.wrap_key_data(raw) makes a typed key, jax.random.key_data(key) a raw one"""


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
    """The `TypeError` of a public function given the wrong kind of argument."""
    shown = shown or f"{type(found).__name__} {short_repr(found)}"
    return TypeError(f"treeclass.{fn}() takes {takes}; got {shown}.")


def arraylike(x: object) -> bool:
    """An array, or a template's stand-in for one (`jax.ShapeDtypeStruct`)."""
    return is_array(x) or isinstance(x, jax.ShapeDtypeStruct)


def is_key(x: Any) -> bool:
    """A typed PRNG key array (`jax.random.key`), or a template of one."""
    return arraylike(x) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def dtype_str(dtype: Any) -> str:
    """numpy's name for `dtype` (`bfloat16`), or JAX's for a typed PRNG key (`key<fry>`)."""
    return str(dtype if jnp.issubdtype(dtype, jax.dtypes.prng_key) else np.dtype(dtype).name)


def scalar_fits(kind: type, template: Any) -> bool:
    """The template's leaf is what `jax.eval_shape` makes of a Python `kind` number."""
    canonical = jax.dtypes.canonicalize_dtype(kind)
    return arraylike(template) and tuple(template.shape) == () and template.dtype == canonical


def fits(value: Any, dtype: Any) -> bool:
    """`value`, a number, converts to `dtype` without wrapping or overflowing to inf."""
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            x = np.asarray(value).astype(dtype)
        except OverflowError:  # numpy's for a Python int past int64
            return False
    if x.dtype.kind in "biu":
        return bool(x == value)
    parts = np.real([x, value]), np.imag([x, value])  # (converted, given), each part
    return all(np.isfinite(p[0]) or not np.isfinite(p[1]) for p in parts)


def as_template(template: Any, value: Any) -> Any:
    """`value` as a leaf of the template's kind: a `jax.Array` with its weak type and sharding."""
    if isinstance(value, jax.core.Tracer):  # from_state_dict under jit: nothing to convert
        return value
    if type(template) not in PYTHON_SCALARS and not arraylike(template):
        return value  # a str or function in a dynamic field: `leaf()` checked its type
    if type(template) in PYTHON_SCALARS:
        return value if type(value) is type(template) else type(template)(np.asarray(value).item())
    if isinstance(template, np.ndarray | np.generic):
        if type(value) is type(template):
            return value
        array = np.array(value, dtype=template.dtype)  # a writeable copy, on the host
        return array if isinstance(template, np.ndarray) else array[()]
    weak = bool(getattr(template, "weak_type", False))
    if isinstance(value, jax.Array) and bool(getattr(value, "weak_type", False)) == weak:
        return value  # a jax key, or an array of the same weak type: shared, not copied
    if is_key(template):  # its PRNG implementation read by tracing (a ShapeDtypeStruct's too)
        found: list[Any] = []
        jax.eval_shape(lambda key: found.append(jax.random.key_impl(key)), template)
        result = jax.random.wrap_key_data(jnp.asarray(value), impl=found[0])
    else:
        result = jnp.asarray(value, template.dtype)  # strongly typed
        base = jnp.asarray({"f": 0.0, "i": 0, "c": 0j}.get(result.dtype.kind, False))
        if weak and base.dtype == result.dtype:  # only default dtypes are weak
            result = jnp.broadcast_to(base, result.shape).at[...].set(result)
    if isinstance(template, jax.core.Tracer):  # load() under jit: no placement to copy
        return result
    explicit = isinstance(template, jax.ShapeDtypeStruct) or getattr(template, "committed", False)
    if explicit and getattr(template, "sharding", None) is not None:
        return jax.device_put(result, template.sharding)
    return result


def config_child(rule: Rule, child: Any) -> bool:
    """A leaf its owner's `rule` makes configuration (an equinox layer's bool or function):
    left out of state dicts (taken from the template, as statics are), compared in files."""
    return child is not None and children(child) is None and is_config(rule, child)


def state_key(path: KeyPath) -> str:
    """The dotted state-dict key of a key path (`layers.0.w`), also a file member's name."""
    return ".".join(jax.tree_util.keystr((entry,), simple=True) for entry in path)


def keyed(x: Any, where: Callable[[], str]) -> list[tuple[Any, str, Any]] | None:
    """`x`'s children as `(key entry, state-dict key, child)`; None for a leaf."""
    pairs = children(x)
    if pairs is None:
        return None
    keys = [state_key((entry,)) for entry, _ in pairs]  # w, 0, key
    if len(set(keys)) != len(keys):
        dupes = ", ".join(map(repr, sorted({k for k in keys if keys.count(k) > 1})))
        msg = f"{where()}: the keys of this {type(x).__name__} have the same string form "
        msg += f"({dupes}), so a state dict cannot tell them apart. Use keys whose str() differ."
        raise ValueError(msg)
    return [(entry, k, child) for k, (entry, child) in zip(keys, pairs, strict=True)]


def check_root(x: Any, fn: str, arg: str) -> str:
    """The name that starts every path in messages (`Model`); `TypeError` for a non-container."""
    shown = ""
    if isinstance(x, type):
        shown = f"the class {x.__name__}; pass an instance, {x.__name__}(...)"
    elif x is not None and keyed(x, lambda: type(x).__name__) is not None:
        return type(x).__name__
    takes = f"a treeclass instance (or a list, tuple or dict of them) as `{arg}`"
    raise wrong_argument(takes, fn, x, shown)


ShapeDtype = tuple[tuple[int, ...], str]  # an array leaf's shape and dtype name


class Source:
    """The saved side of `restore()`: a state dict."""

    name = "state dict"
    holds_config = False  # a state dict leaves configuration out, as it leaves statics out

    def __init__(self, root: str) -> None:
        self.root = root

    def config(self, path: KeyPath, template: Any, saved: Any) -> Any:
        """The configuration leaf restored at `path`: the template's."""
        return template

    def error(self, path: KeyPath, what: str) -> CheckpointError:
        return CheckpointError(f"{path_str(self.root, path)}: {what}{_MSG_FIX}")

    def show(self, saved: Any) -> str:
        return describe(saved, shape=False)

    def mismatch(self, path: KeyPath, template: Any, saved: Any) -> CheckpointError:
        what = f"{describe(template, shape=False)} in the template, {self.show(saved)} in the {self.name}"
        return self.error(path, what)

    def compare(self, path: KeyPath, saved: ShapeDtype, template: ShapeDtype) -> None:
        if saved[1].startswith("key<") != template[1].startswith("key<"):  # not `shape (2,)`
            were, are = (
                f"a typed PRNG key ({d})" if d.startswith("key<") else f"a {d} array"
                for d in (saved[1], template[1])
            )
            raise self.error(path, _MSG_KEYS.format(saved=were, template=are, source=self.name))
        for what, found, ours in zip(("shape", "dtype"), saved, template, strict=True):
            if found != ours:
                raise self.error(path, f"{what} {found} in the {self.name}, {ours} in the template")

    def children(self, template: Any, saved: Any, path: KeyPath) -> Mapping[str, Any]:
        if type(saved) in (list, tuple):  # orbax restores sequences as lists without a target
            return {str(i): item for i, item in enumerate(saved)}
        if not isinstance(saved, Mapping):
            raise self.mismatch(path, template, saved)
        return saved

    def fill(self, path: KeyPath, value: Any, template: Any) -> Any:
        """`value`, a number, for an eval_shape leaf: refused where it does not fit."""
        if not fits(value, template.dtype):
            kind, dtype = type(value).__name__, dtype_str(template.dtype)
            become = "wrap around" if kind == "int" else "become inf"
            what = dict(kind=kind, value=value, source=self.name, dtype=dtype, become=become)
            raise self.error(path, _MSG_FITS.format(**what))
        return value

    def leaf(self, template: Any, saved: Any, path: KeyPath) -> Any:
        if type(saved) in PYTHON_SCALARS and scalar_fits(type(saved), template):
            return as_template(template, self.fill(path, saved, template))
        if arraylike(template):
            if type(saved) in PYTHON_SCALARS:  # named as a file's manifest names it
                theirs: ShapeDtype = ((), f"python {type(saved).__name__}")
            elif arraylike(saved):
                theirs = (tuple(saved.shape), dtype_str(saved.dtype))
            else:
                raise self.mismatch(path, template, saved)
            self.compare(path, theirs, (tuple(template.shape), dtype_str(template.dtype)))
        elif type(saved) is not type(template) and not (
            # A Python number comes back from some stores as a 0-d array of its kind.
            type(template) in PYTHON_SCALARS
            and arraylike(saved)
            and not is_key(saved)
            and saved.shape == ()
            and np.dtype(saved.dtype).kind in SCALAR_KINDS[type(template)]
        ):
            raise self.mismatch(path, template, saved)
        return as_template(template, saved)


def differences(expected: list[str], given: Iterable[str], source: str) -> str | None:
    """What differs between the template's keys and the saved ones; None if nothing."""
    missing, known = [k for k in expected if k not in given], set(expected)
    unexpected = [k for k in given if k not in known]  # (one set: a file may hold many)
    parts = [f"missing from the {source}: {', '.join(map(repr, missing))}"] if missing else []
    if unexpected:
        parts.append(f"in the {source} but not the template: {', '.join(map(repr, unexpected))}")
    return f"structure differs ({'; '.join(parts)})" if parts else None


def restore(template: Any, saved: Any, path: KeyPath, source: Source, rule: Rule = "plain") -> Any:
    """`template` with its leaves from `saved`, rebuilt as JAX does (no user code runs);
    `rule`: the rule of the template's owner (`walk.rule_of`)."""
    if template is None:
        if saved is not None:
            raise source.mismatch(path, template, saved)
        return None
    pairs = keyed(template, lambda: path_str(source.root, path))
    if pairs is None:
        return source.leaf(template, saved, path)
    inner = rule_of(template, rule)
    config = [config_child(inner, child) for _, _, child in pairs]
    given = source.children(template, saved, path)
    keys = [k for (_, k, _), c in zip(pairs, config, strict=True) if source.holds_config or not c]
    differ = differences(keys, given, source.name)
    if differ is not None:
        raise source.error(path, differ)
    values = [
        source.config((*path, entry), child, given.get(k))
        if c
        else restore(child, given[k], (*path, entry), source, inner)
        for (entry, k, child), c in zip(pairs, config, strict=True)
    ]
    return jax.tree.unflatten(node_def(template), values)


def to_state_dict(obj: Any) -> dict[str, Any]:
    """Returns the state of `obj`: nested dicts of its dynamic leaves, as they are.

    A treeclass becomes `{field: ...}`, a list or tuple `{"0": ...}`, a dict `{str(key): ...}`
    (as in `flax.serialization`), `None` stays `None`; statics are left out, and so is the
    configuration inside an equinox Module (every leaf not an array, as equinox has it).

    **Arguments**

    - `obj`: a treeclass instance, or a list, tuple or dict of them.

    **Returns**

    A `dict` with `str` keys, holding `obj`'s leaves themselves, not copies.

    **Raises**

    `TypeError` if `obj` is a leaf, `None` or a class; `ValueError` if two keys of a dict
    have the same `str()` (`1` and `"1"`).

    **Example**

    >>> class Dense(tc.TreeClass):
    ...     w: jax.Array
    ...     act: str = tc.static(default="relu")
    >>> mlp = [Dense(jnp.ones((2, 3))), Dense(jnp.ones((3, 1)))]
    >>> state = tc.to_state_dict(mlp)
    >>> list(state), list(state["1"]), state["0"]["w"] is mlp[0].w
    (['0', '1'], ['w'], True)
    """
    root = check_root(obj, "to_state_dict", "obj")

    def state(x: Any, path: KeyPath, rule: Rule) -> Any:
        pairs = None if x is None else keyed(x, lambda: path_str(root, path))
        if pairs is None:
            return x
        inner = rule_of(x, rule)
        return {
            k: state(child, (*path, e), inner)
            for e, k, child in pairs
            if not config_child(inner, child)
        }

    return state(obj, (), "plain")  # type: ignore[no-any-return]


def from_state_dict(template: _T, state: Mapping[str, Any]) -> _T:
    """Returns `template` with its dynamic leaves replaced by those of `state`.

    The inverse of `to_state_dict`: every key, and every leaf's kind, shape and dtype must
    match the template's, whose statics are kept. A list may stand for a tuple (orbax).

    **Arguments**

    - `template`: an instance built like the one the state came from.
    - `state`: a state dict, as `to_state_dict` (or flax, or orbax) returns.

    **Returns**

    An instance of `type(template)`; no `__init__`, converter or `__post_init__` runs.

    **Raises**

    `CheckpointError` naming the field path for any mismatch; `TypeError` if `template` is
    not a container or `state` not a mapping.

    **Example**

    >>> class Neuron(tc.TreeClass):
    ...     v: jax.Array
    ...     tau: float = tc.static(default=20.0)
    >>> tc.from_state_dict(Neuron(jnp.zeros(3)), {"v": jnp.ones(3)}).v.tolist()
    [1.0, 1.0, 1.0]
    """
    root = check_root(template, "from_state_dict", "template")
    if not isinstance(state, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance] - untyped callers
        takes = "the state as a dict, as to_state_dict() returns"
        raise wrong_argument(takes, "from_state_dict", state)
    return restore(template, state, (), Source(root))  # type: ignore[no-any-return]
