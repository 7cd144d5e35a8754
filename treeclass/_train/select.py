"""Which leaves of a model are its trainable parameters, and the one rule by which
`tc.partition`, `tc.grad`, `tc.value_and_grad` (and `tc.summary`'s kinds) select leaves.

A leaf is trainable when it is inexact (a floating-point or complex array, or a Python
float or complex, which JAX differentiates as it differentiates a float argument) and
no field above it, at any depth, is declared `trainable=False`. That flag lives on the
field, so it needs no variable type, index object or filter at the call site, and it
holds for every instance of the class through every transform: `jit`, `vmap`, `scan`,
`replace`, checkpoints.

A leaf is selected when it is trainable (unless `only_trainable=False`), lies inside
what `where` selects, and `filter(leaf)` is true. `where` is always a selector in
`tc.replace_at`'s form, recorded and followed by `treeclass/_paths/record.py`, and never
told apart from a predicate by running it: equinox-style code that passes a predicate
positionally (`tc.partition(model, tc.is_inexact_array)`) is refused with the pointer
to `filter=`, where guessing would select BatchNorm statistics in silence.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

import jax
import jax.numpy as jnp
from jax.tree_util import DictKey, GetAttrKey, SequenceKey

from treeclass._core.show import short_repr
from treeclass._core.walk import ARRAY_TYPES, KeyPath, Visit, array_name, is_array, path_str, walk
from treeclass._paths.record import DICT, NAMEDTUPLE, TREECLASS, Path, follow, record, show

__all__ = ["is_inexact_array", "leaf_visits", "nothing_trainable", "select", "trainable", "why_not"]

_MSG_NOTHING: Final = """\
{what} has nothing to differentiate: none of its leaves is trainable.

Trainable leaves are floating-point (or complex) arrays and Python floats that no field
above them declares trainable=False. Its leaves: {leaves}.

Store the parameters as float arrays (jnp.asarray(x, jnp.float32)), or, if nothing here
should be trained, call the loss without tc.grad."""

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

_NOTE_FILTER: Final = (
    "`where` is a selector (where=lambda m: m.head); pass a predicate on leaves as filter=."
)

# What leaves have and treeclasses and containers do not: a `where` that reads one of
# these (and finds no field of that name) is a predicate on leaves.
_LEAF_ONLY: Final = frozenset({"shape", "dtype", "ndim", "size"})


@functools.cache
def _inexact_dtype(dtype: Any) -> bool:
    # Cached: `jnp.issubdtype` walks numpy's type hierarchy on every call, and a model
    # holds a handful of dtypes, so the cache is small and never stale.
    return bool(jnp.issubdtype(dtype, jnp.inexact))


def is_inexact_array(x: object) -> bool:
    """True for floating-point and complex arrays: the array leaves that can be trainable
    parameters (`tc.grad` also differentiates Python floats, and nothing under a field
    declared `trainable=False`). Pass it as `filter=`: `tc.partition(model,
    filter=tc.is_inexact_array)`.

    **Arguments**

    - `x`: any pytree leaf.

    **Returns**

    True for a `jax.Array` (tracers included), `numpy.ndarray` or numpy scalar whose
    dtype is floating (bfloat16 and float8 included) or complex; False for integer,
    boolean and PRNG-key arrays, and for anything that is not an array (Python
    numbers included: they have no dtype until JAX gives them one).

    **Example**

    >>> tc.is_inexact_array(jnp.ones(3)), tc.is_inexact_array(jnp.ones(3, jnp.bfloat16))
    (True, True)
    >>> tc.is_inexact_array(jnp.arange(3)), tc.is_inexact_array(jax.random.key(0))
    (False, False)
    >>> tc.is_inexact_array(1.0)
    False
    """
    return isinstance(x, ARRAY_TYPES) and _inexact_dtype(x.dtype)


def leaf_visits(tree: Any) -> list[Visit]:
    """`walk()`'s visits of the leaves of `tree`, in `jax.tree.leaves` order."""
    return [v for v in walk(tree) if v.kind == "leaf"]


def trainable(v: Visit) -> bool:
    """Whether a leaf visit is a trainable leaf: inexact (a `jax.ShapeDtypeStruct` as
    `jax.eval_shape` gives counts by its dtype), under no `trainable=False`."""
    x = v.value
    if type(x) is float or type(x) is complex:
        return v.trainable
    if isinstance(x, jax.ShapeDtypeStruct):
        return v.trainable and _inexact_dtype(x.dtype)
    return v.trainable and is_inexact_array(x)


def why_not(v: Visit) -> str:
    """`f32[16], under trainable=False`: what a leaf is and why it is not trainable."""
    what = array_name(v.value.dtype, v.value.shape) if is_array(v.value) else type(v.value).__name__
    return f"{what}, {'under trainable=False' if not v.trainable else 'not floating-point'}"


def _listed(visits: list[Visit], root: str, limit: int = 4) -> str:
    shown = [
        f"{path_str(root, v.path)} ({why_not(v) if not trainable(v) else 'trainable'})"
        for v in visits[:limit]
    ]
    if len(visits) > limit:
        shown.append(f"and {len(visits) - limit} more")
    return ", ".join(shown) if shown else "none"


def nothing_trainable(tree: Any, visits: list[Visit], *, narrowed: bool) -> TypeError:
    """The error of `tc.grad` for a first argument with no selected leaf (none that
    `where=` and `filter=` keep, when `narrowed`)."""
    root = type(tree).__name__
    what = f"{root}, narrowed by `where`/`filter`," if narrowed else root
    return TypeError(_MSG_NOTHING.format(what=what, leaves=_listed(visits, root)))


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
        # what only leaves have.
        code = getattr(getattr(where, "__code__", None), "co_names", ())
        read = sorted(
            _LEAF_ONLY.intersection(k for p in paths for k, item in p if not item)
            if paths
            else _LEAF_ONLY.intersection(code)
        )
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


def select(
    tree: Any,
    visits: list[Visit],
    where: Callable[[Any], Any] | None,
    filter: Callable[[Any], Any] | None,  # noqa: A002 - the public keyword's name (SPEC §10)
    *,
    only_trainable: bool,
) -> list[bool]:
    """For each leaf visit of `tree`, whether the one rule selects it: trainable
    (unless `only_trainable=False`), inside what `where` selects, and `filter` true (asked
    of those leaves only). `ValueError` naming the selection where `where` holds none."""
    chosen = [trainable(v) for v in visits] if only_trainable else [True] * len(visits)
    if where is not None:
        root = type(tree).__name__
        paths, starts = _starts(tree, where, root)
        inside = [any(v.path[: len(p)] == p for p in starts) for v in visits]
        chosen = [c and i for c, i in zip(chosen, inside, strict=True)]
        if not any(chosen):
            under = [v for i, v in zip(inside, visits, strict=True) if i]
            leaves = _listed(under, root) if under else "no leaves at all (a static field, or None)"
            shown = ", ".join(show(root, path) for path in paths)
            s, kind = ("s" if len(paths) == 1 else ""), ("trainable " if only_trainable else "")
            raise ValueError(
                _MSG_SELECTS_NOTHING.format(paths=shown, s=s, trainable=kind, leaves=leaves)
            )
    if filter is not None:
        chosen = [c and bool(filter(v.value)) for c, v in zip(chosen, visits, strict=True)]
    return chosen
