"""The one rule by which `tc.partition`, `tc.grad` and `tc.value_and_grad` select leaves,
and `tc.partition` / `tc.combine`, equinox's split of a tree in two trees of its structure
(`None` where the other holds the leaf: JAX flattens `None` to nothing) and merge.

A leaf is selected when it is trainable (inexact, under no field declared
`trainable=False`: a flag on the field, which holds through every transform), lies
inside what `where` selects and `filter` accepts it. `where` is always a selector in
`tc.replace_at`'s form, never told apart from a predicate by running it: guessing took
`tc.partition(model, tc.is_inexact_array)` (an equinox habit) for a predicate and
selected BatchNorm statistics in silence; it is refused, pointing to `filter=`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final, TypeVar

import jax
import jax.numpy as jnp
from jax.tree_util import DictKey, GetAttrKey, SequenceKey

from treeclass._core.layout import layout_of
from treeclass._core.show import short_repr
from treeclass._core.walk import ARRAY_TYPES, KeyPath, Visit, array_name, is_array, path_str, walk
from treeclass._paths.record import DICT, NAMEDTUPLE, TREECLASS, Path, follow, record, show

__all__ = ["combine", "halves", "is_inexact_array", "leaf_visits", "listed", "partition", "select"]
__all__ += ["trainable", "why_not"]

_T = TypeVar("_T")

_MSG_SELECTS_NOTHING: Final = """\
`where` selects {paths}, which hold{s} no {trainable}leaf: {leaves}.

Trainable leaves are floating-point (or complex) arrays and Python floats that no field
above them declares trainable=False; select the part of the model to train, e.g.
where=lambda m: m.head"""

_MSG_FILTER: Final = """\
{at}: `where` {did}, as a predicate on leaves does. `where` selects parts of the tree,
as in tc.replace_at (where=lambda m: m.head); pass a predicate on leaves as filter=:

    tc.partition(model, filter=tc.is_inexact_array)
    tc.grad(loss, filter=lambda x: x.ndim == 2)"""

_NOTE_FILTER: Final = "`where` is a selector (lambda m: m.head); a predicate on leaves is filter=."
# What leaves have and treeclasses and containers do not: a `where` that reads one of
# these (and finds no field of that name) is a predicate on leaves.
_LEAF_ONLY: Final = frozenset({"shape", "dtype", "ndim", "size"})
_DTYPED: Final = (*ARRAY_TYPES, jax.ShapeDtypeStruct)


@functools.cache
def _inexact_dtype(dtype: Any) -> bool:
    # Cached: `jnp.issubdtype` walks numpy's type hierarchy on every call, and a model
    # holds a handful of dtypes, so the cache is small and never stale.
    return bool(jnp.issubdtype(dtype, jnp.inexact))


def is_inexact_array(x: object) -> bool:
    """True for floating-point and complex arrays: a predicate on leaves, for `filter=`
    (`tc.partition(model, filter=tc.is_inexact_array)`).

    **Arguments**

    - `x`: any pytree leaf.

    **Returns**

    True for a `jax.Array` (tracers included), `numpy.ndarray` or numpy scalar of a
    floating (bfloat16 and float8 included) or complex dtype; False for integer, bool
    and PRNG-key arrays and for what is not an array (Python numbers included).

    **Example**

    >>> tc.is_inexact_array(jnp.ones(3, jnp.bfloat16)), tc.is_inexact_array(jnp.arange(3))
    (True, False)
    >>> tc.is_inexact_array(jax.random.key(0)), tc.is_inexact_array(1.0)
    (False, False)
    """
    return isinstance(x, ARRAY_TYPES) and _inexact_dtype(x.dtype)


def leaf_visits(tree: Any) -> list[Visit]:
    """`walk()`'s visits of the leaves of `tree`, in `jax.tree.leaves` order."""
    return [v for v in walk(tree) if v.kind == "leaf"]


def trainable(v: Visit) -> bool:
    """Whether a leaf visit is a trainable leaf: inexact (a `jax.ShapeDtypeStruct` as
    `jax.eval_shape` gives counts by its dtype), under no `trainable=False`."""
    if type(v.value) is float or type(v.value) is complex:
        return v.trainable
    return v.trainable and isinstance(v.value, _DTYPED) and _inexact_dtype(v.value.dtype)


def why_not(v: Visit) -> str:
    """`f32[16], under trainable=False`: what a leaf is and why it is not trainable
    (`trainable` if it is)."""
    if trainable(v):
        return "trainable"
    what = array_name(v.value.dtype, v.value.shape) if is_array(v.value) else type(v.value).__name__
    return f"{what}, {'not floating-point' if v.trainable else 'under trainable=False'}"


def listed(visits: list[Visit], root: str, limit: int = 4) -> str:
    """`Net.w (trainable), Net.step (i32[], not floating-point), and 3 more`."""
    shown = [f"{path_str(root, v.path)} ({why_not(v)})" for v in visits]
    more = [f"and {len(shown) - limit} more"] if len(shown) > limit else []
    return ", ".join(shown[:limit] + more) or "none"


def _starts(tree: Any, where: Callable[[Any], Any], root: str) -> tuple[list[Path], list[KeyPath]]:
    """The paths `where` reads and the key paths where their leaves' paths start; the
    pointer to `filter=` where `where` is a predicate on leaves."""
    returned: list[Any] = []

    def spy(node: Any) -> Any:
        returned.append(out := where(node))
        return out

    paths: list[Path] = []
    try:
        recorded = record(spy, root)
        paths = recorded if isinstance(recorded, list) else [recorded]
        parents = [follow(tree, path, root)[0] for path in paths]
    except Exception as error:
        # Never run again to find out: it returned what is not nodes of the tree, or it
        # read (in a path, or in its code when it failed before returning: `x.ndim == 2`)
        # what only leaves have: a name no treeclass or NamedTuple in the tree has as a
        # field (`lambda m: (m.shape, m.haed)` on a model with a field `shape` is a typo).
        code = getattr(getattr(where, "__code__", None), "co_names", ())
        names = [k for p in paths for k, item in p if not item] if paths else code
        nodes = [v.value for v in walk(tree) if v.kind == "node"]
        fields = {n for x in nodes for n in getattr(type(x), "_fields", ()) or _names(x)}
        read = sorted(_LEAF_ONLY.intersection(names).difference(fields))
        if returned and not paths:
            did = f"returned {short_repr(returned[0], 40)}"
        elif read:
            did = f"reads .{read[0]}, which only leaves have"
        else:
            if not paths:  # raised by `where` or by the recorder: `where` ran as a selector
                error.add_note(_NOTE_FILTER)
            raise
        raise TypeError(_MSG_FILTER.format(at=root, did=did)) from error
    # The key entry that JAX's `tree_flatten_with_path` gives each step's child.
    entry = {DICT: DictKey, NAMEDTUPLE: GetAttrKey, TREECLASS: GetAttrKey}
    return paths, [tuple(entry.get(kind, SequenceKey)(key) for _, kind, key in p) for p in parents]


def _names(node: Any) -> tuple[str, ...]:
    """The field names of a treeclass instance; () for anything else."""
    layout = layout_of(type(node))
    return layout.names if layout is not None else ()


def select(
    tree: Any,
    visits: list[Visit],
    where: Callable[[Any], Any] | None,
    filter: Callable[[Any], Any] | None,  # noqa: A002 - the public keyword's name (SPEC §10)
    *,
    only_trainable: bool,
) -> list[bool]:
    """For each leaf visit of `tree`, whether it is trainable (unless `only_trainable=False`),
    inside what `where` selects, and accepted by `filter` (asked of those leaves only);
    `ValueError` naming the selection where `where` holds none."""
    chosen = [trainable(v) for v in visits] if only_trainable else [True] * len(visits)
    if where is not None:
        root = type(tree).__name__
        paths, starts = _starts(tree, where, root)
        inside = [any(v.path[: len(p)] == p for p in starts) for v in visits]
        chosen = [c and i for c, i in zip(chosen, inside, strict=True)]
        if not any(chosen):
            under = [v for i, v in zip(inside, visits, strict=True) if i]
            empty = "no leaves at all (a static field, or None)" if paths else "none"
            leaves = listed(under, root) if under else empty
            shown = ", ".join(show(root, path) for path in paths) or "nothing (an empty tuple)"
            s, kind = ("s" if len(paths) == 1 else ""), ("trainable " if only_trainable else "")
            msg = _MSG_SELECTS_NOTHING.format(paths=shown, s=s, trainable=kind, leaves=leaves)
            raise ValueError(msg)
    if filter is not None:
        chosen = [c and bool(filter(v.value)) for c, v in zip(chosen, visits, strict=True)]
    return chosen


def partition(
    tree: _T,
    where: Callable[[_T], Any] | None = None,
    *,
    filter: Callable[[Any], bool] | None = None,  # noqa: A002 - the public keyword's name (SPEC §10)
    only_trainable: bool = True,
) -> tuple[_T, _T]:
    """Splits `tree`'s leaves in two: those that are trainable, lie inside what `where`
    selects and that `filter` accepts, and the rest. `tc.grad` selects by the same rule,
    so an optimizer's state built on the first half fits its gradients.

    **Arguments**

    - `tree`: any pytree, such as a treeclass model.
    - `where`: a selector in `tc.replace_at`'s form (`lambda m: m.head`, or a tuple of
      reads: `lambda m: (m.encoder, m.head.w)`). Default: the whole tree.
    - `filter`: a predicate on leaves (`tc.is_inexact_array`, `lambda x: x.ndim == 2`),
      asked of the leaves the other two conditions keep. Default: every leaf.
    - `only_trainable`: `False` drops the first condition (floating-point leaves under
      no field declared `trainable=False`): `tc.partition(tree, filter=pred,
      only_trainable=False)` is `eqx.partition(tree, pred)`.

    **Returns**

    `(selected, rest)`: two pytrees of `tree`'s structure and type (statics included),
    `None` where the other holds the leaf. `tc.combine(selected, rest)` is `tree` again.

    **Raises**

    For `where`: `tc.replace_at`'s errors naming the path (a read with no node, a
    computation, a slice, a call); `TypeError` pointing to `filter=` for a predicate on
    leaves; `ValueError` naming the selection when it holds no leaf to select.

    **Example**

    >>> class Model(tc.TreeClass):
    ...     w: jax.Array
    ...     step: jax.Array
    ...     act: str = tc.static(default="relu")
    >>> params, rest = tc.partition(Model(jnp.ones(2), jnp.array(0)))
    >>> params, rest
    (Model(w=f32[2], step=None, act='relu'), Model(w=None, step=i32[], act='relu'))
    >>> class Net(tc.TreeClass):
    ...     encoder: Model
    ...     head: Model
    >>> net = Net(Model(jnp.ones(2), jnp.array(0)), Model(jnp.ones(3), jnp.array(0)))
    >>> head, _ = tc.partition(net, lambda n: n.head)
    >>> head.encoder.w, head.head.w.shape
    (None, (3,))
    >>> ints, _ = tc.partition(net, filter=lambda x: x.dtype == jnp.int32, only_trainable=False)
    >>> ints.encoder.step is net.encoder.step, ints.encoder.w
    (True, None)
    """
    visits = leaf_visits(tree)
    return halves(tree, visits, select(tree, visits, where, filter, only_trainable=only_trainable))


def halves(tree: _T, visits: list[Visit], chosen: list[bool]) -> tuple[_T, _T]:
    """`(selected, rest)`: `tree` with `None` at the leaves not `chosen`, and at those."""
    treedef: Any = jax.tree.structure(tree)  # a PyTreeDef: jaxlib ships no stubs
    pairs = [(v.value, None) if c else (None, v.value) for v, c in zip(visits, chosen, strict=True)]
    return treedef.unflatten([p[0] for p in pairs]), treedef.unflatten([p[1] for p in pairs])


def combine(*trees: _T) -> _T:
    """Merges trees of one structure, as `tc.partition` makes them: at each leaf, the
    first tree's leaf that is not `None` wins.

    **Arguments**

    - `*trees`: one or more pytrees of one structure (statics from the first tree).

    **Returns**

    One tree of that structure; `None` where every tree holds `None`.

    **Raises**

    `TypeError` without trees; JAX's `ValueError` when the structures differ.

    **Example**

    >>> params, rest = tc.partition((jnp.ones(2), jnp.arange(2)))
    >>> params, rest
    ((Array([1., 1.], dtype=float32), None), (None, Array([0, 1], dtype=int32)))
    >>> tc.combine(params, rest)
    (Array([1., 1.], dtype=float32), Array([0, 1], dtype=int32))
    """
    if not trees:
        msg = "combine() takes at least one tree, e.g. tc.combine(*tc.partition(model))."
        raise TypeError(msg)

    # `None` is a leaf in the first tree, so the others are read up to its structure and
    # a leaf of theirs may stand where it holds `None`.
    def first(*xs: Any) -> Any:
        return next((x for x in xs if x is not None), None)

    return jax.tree.map(first, *trees, is_leaf=lambda x: x is None)  # type: ignore[no-any-return]
