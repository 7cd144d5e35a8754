"""`walk(tree)`: every node, leaf and static value of any pytree, with its key path,
`Class.field` and the rule it falls under (`rule_of`, `is_config`: the owner rule);
`path_str` (`MLP.layers[1].w`), `is_array` and the `f32[100,3]` names."""

import collections
import dataclasses
import re
import sys
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


# The owner rule. A leaf keeps the rules of its owner, the nearest node above it that is
# a treeclass, an equinox Module, or another library's node (tuples, lists, dicts and
# NamedTuples are no owners: they pass their owner's rule down). Under a treeclass, a
# leaf is data (a Python float in a dynamic field is trained). Under an equinox Module,
# every leaf that is not an array is configuration, as equinox's filtered transforms
# treat it: `eqx.nn.Dropout(p=0.1)` keeps p = 0.1 under AdamW only if nothing trains it,
# and `eqx.nn.BatchNorm`'s `axis_name` str cannot be traced. Under another library's
# node (flax.struct, chex, register_dataclass), leaves are what plain JAX makes of
# them, and a function is configuration, held in the treedef. Every operation asks
# `is_config` (through `Visit.config` or `rule_of`): tc.jit, grad, partition,
# apply_updates, summary, state dicts, save and load.
Rule = Literal["plain", "treeclass", "equinox", "other"]
_CONTAINERS: Final = (tuple, list, dict, collections.OrderedDict, collections.defaultdict)


def is_equinox_module(x: object) -> bool:
    """An `equinox.Module` instance; equinox is never imported here (it is no dependency)."""
    eqx = sys.modules.get("equinox")
    return eqx is not None and isinstance(x, eqx.Module)


def rule_of(node: Any, outer: Rule) -> Rule:
    """The rule the leaves right below `node` fall under, `outer` being the rule above it."""
    if instance_layout(node) is not None:
        return "treeclass"
    if is_equinox_module(node):
        return "equinox"
    if (
        node is None
        or type(node) in _CONTAINERS
        or (isinstance(node, tuple) and hasattr(type(node), "_fields"))  # a NamedTuple
    ):
        return outer
    return "other"


def is_config(rule: Rule, leaf: Any) -> bool:
    """Whether `leaf`, under its owner's `rule`, is static configuration, never data."""
    if rule == "equinox":  # equinox's own test, `eqx.is_array` (a template's stand-in too)
        return not isinstance(leaf, (*ARRAY_TYPES, jax.ShapeDtypeStruct))
    if rule == "other":  # a function: nothing JAX could trace
        return (
            callable(leaf)
            and not isinstance(leaf, ARRAY_TYPES)
            and type(leaf) not in PYTHON_SCALARS
        )
    return False


def equinox_statics(x: Any) -> dict[str, Any]:
    """An equinox Module's static fields (`eqx.field(static=True)`), which JAX's flatten
    keeps in the treedef; `{}` for anything else."""
    if not is_equinox_module(x):
        return {}
    fields = dataclasses.fields(x)
    return {f.name: getattr(x, f.name) for f in fields if f.metadata.get("static", False)}


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
    rule: Rule = "plain"  # the rule of the value's owner (see `rule_of`)
    declared: dataclasses.Field[Any] | None = None  # the field `name` of `owner`, as declared

    @property
    def config(self) -> bool:
        """A leaf its owner's rule makes static configuration (an equinox layer's bool)."""
        return self.kind == "leaf" and is_config(self.rule, self.value)

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
    rule: Rule = "plain",
    declared: dataclasses.Field[Any] | None = None,
) -> Iterator[Visit]:
    """Every node, leaf and static value of `tree`, lazily, parents first, leaves in JAX's order."""
    layout = instance_layout(tree)
    if layout is not None:
        yield Visit(path, tree, owner, name, "node", trainable, rule, declared)
        cls = type(tree)
        dynamic, static = layout.flatten(tree)  # what JAX's flatten returns
        values = dict(zip((*layout.dynamic, *layout.static), (*dynamic, *static), strict=True))
        for f in layout.fields:
            field_path = (*path, jax.tree_util.GetAttrKey(f.name))
            if f.name in layout.static:
                yield Visit(
                    field_path, values[f.name], cls, f.name, "static", False, "treeclass", f
                )
            else:
                trained = trainable and f.name not in layout.frozen
                yield from walk(values[f.name], field_path, cls, f.name, trained, "treeclass", f)
        return
    below = children(tree)
    yield Visit(
        path, tree, owner, name, "leaf" if below is None else "node", trainable, rule, declared
    )
    inner = rule if below is None else rule_of(tree, rule)
    for key, child in below or ():
        yield from walk(child, (*path, key), owner, name, trainable, inner, declared)
