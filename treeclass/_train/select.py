"""The one rule by which `tc.partition` and `tc.grad` select leaves: trainable, inside what
`where` selects (a selector as in `tc.replace_at`, never guessed a predicate by running it:
guessing selected BatchNorm statistics in silence), accepted by `filter`."""

import functools
import warnings
from collections.abc import Callable
from typing import Any, Final, TypeVar

import jax
import jax.numpy as jnp

from treeclass._core.layout import layout_of
from treeclass._core.show import short_repr
from treeclass._core.walk import ARRAY_TYPES, KeyPath, Visit, array_name, is_array, path_str, walk
from treeclass._paths.record import FIX_SELECT, Path, follow, key_path, record, show

_T = TypeVar("_T")
_Fn = Callable[[Any], Any] | None

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

_MSG_SHARED: Final = """\
{paths} hold one array object ({what}). tc.partition splits it into a leaf at
each path, so gradients and optimizer updates treat them apart and, after one step,
they hold two different arrays: the weights are no longer tied. To tie them, store
the array once and read it at both places (see "Shared weights" in
docs/with-other-libraries.md); to keep two independent arrays, pass a copy (jnp.array(w))."""

_NOTE_FILTER: Final = "`where` is a selector (lambda m: m.head); a predicate on leaves is filter=."
# What leaves have and nodes do not: a `where` reading one (no field of that name) is a predicate.
_LEAF_ONLY: Final = frozenset({"shape", "dtype", "ndim", "size"})
_DTYPED: Final = (*ARRAY_TYPES, jax.ShapeDtypeStruct)


@functools.cache  # `jnp.issubdtype` walks numpy's type hierarchy; a model holds a few dtypes
def _inexact_dtype(dtype: Any) -> bool:
    return bool(jnp.issubdtype(dtype, jnp.inexact))


def is_inexact_array(x: object) -> bool:
    """True for floating-point and complex arrays: a predicate on leaves, for `filter=`.

    **Arguments**

    - `x`: any pytree leaf.

    **Returns**

    True for a JAX or numpy array (or scalar) of a floating or complex dtype.

    **Example**

    >>> [tc.is_inexact_array(x) for x in (jnp.ones(3), jnp.arange(3), jax.random.key(0), 1.0)]
    [True, False, False, False]
    """
    return isinstance(x, ARRAY_TYPES) and _inexact_dtype(x.dtype)


def leaf_visits(tree: Any) -> list[Visit]:
    """`walk()`'s visits of the leaves of `tree`, in `jax.tree.leaves` order."""
    return [v for v in walk(tree) if v.kind == "leaf"]


def trainable(v: Visit) -> bool:
    """Inexact (a `jax.ShapeDtypeStruct` by its dtype), under no `trainable=False`, and data
    by its owner's rule (an equinox layer's float `p` is configuration: never trained)."""
    if type(v.value) is float or type(v.value) is complex:
        return v.trainable and not v.config
    return v.trainable and isinstance(v.value, _DTYPED) and _inexact_dtype(v.value.dtype)


def why_not(v: Visit) -> str:
    """`f32[16], under trainable=False`: what a leaf is and why it is not trainable."""
    if trainable(v):
        return "trainable"
    what = array_name(v.value.dtype, v.value.shape) if is_array(v.value) else type(v.value).__name__
    if v.config:
        return f"{what}, configuration of another library's node"
    return f"{what}, {'not floating-point' if v.trainable else 'under trainable=False'}"


def listed(visits: list[Visit], root: str, limit: int = 4) -> str:
    """`Net.w (trainable), Net.step (i32[], not floating-point), and 3 more`."""
    shown = [f"{path_str(root, v.path)} ({why_not(v)})" for v in visits]
    more = [f"and {len(shown) - limit} more"] if len(shown) > limit else []
    return ", ".join(shown[:limit] + more) or "none"


def _starts(tree: Any, where: Callable[[Any], Any], root: str) -> tuple[list[Path], list[KeyPath]]:
    """The paths `where` reads and the key paths their leaves' paths start with."""
    returned: list[Any] = []

    def spy(node: Any) -> Any:
        returned.append(out := where(node))
        return out

    paths: list[Path] = []
    last: list[Path] = [()]  # the latest path the recorder saw read, also when `where` failed
    try:
        recorded = record(spy, root, replacing=False, last=last)
        paths = recorded if isinstance(recorded, list) else [recorded]
        parents = [follow(tree, path, root, FIX_SELECT)[0] for path in paths]
    except Exception as error:
        # Never run again: a predicate returned what is not nodes, or read a name only leaves
        # have (`x.ndim == 2`) and no node has as a field (else `m.shape` is a field's).
        names = [k for p in (paths or last) for k, item in p if not item]
        types = {type(v.value) for v in walk(tree) if v.kind == "node"}
        fields = {n for t in types for n in getattr(layout_of(t), "names", ())}
        fields |= {n for t in types for n in getattr(t, "_fields", ())}  # a NamedTuple's
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
    return paths, [key_path(p) for p in parents]


def select(
    tree: Any, visits: list[Visit], where: _Fn, keep: _Fn, *, only_trainable: bool
) -> list[bool]:
    """Whether each leaf visit is selected (`keep` is `filter=`); ValueError if `where` has none."""
    # only_trainable=False: every leaf but configuration (an equinox layer's bool): static.
    chosen = [trainable(v) if only_trainable else not v.config for v in visits]
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
    if keep is not None:
        chosen = [c and bool(keep(v.value)) for c, v in zip(chosen, visits, strict=True)]
    return chosen


def partition(
    tree: _T,
    where: Callable[[_T], Any] | None = None,
    *,
    filter: Callable[[Any], bool] | None = None,  # noqa: A002 - the public keyword's name (docs/training.md)
    only_trainable: bool = True,
) -> tuple[_T, _T]:
    """Splits `tree`'s leaves: those trainable, inside what `where` selects and accepted by
    `filter`; and the rest.

    **Arguments**

    - `tree`: any pytree, such as a treeclass model.
    - `where`: a selector as in `tc.replace_at` (`lambda m: (m.encoder, m.head.w)`).
    - `filter`: a predicate on leaves (`tc.is_inexact_array`, `lambda x: x.ndim == 2`).
    - `only_trainable`: `False` drops the first condition (then `filter=pred` is `eqx.partition`).

    **Returns**

    `(selected, rest)`: two pytrees of `tree`'s structure and type, `None` where the other
    holds the leaf; `tc.combine(selected, rest)` is `tree`.

    **Raises**

    For `where`: `tc.replace_at`'s errors naming the path; `TypeError` pointing to `filter=`
    for a predicate on leaves; `ValueError` naming a selection that holds no leaf to select.

    **Example**

    >>> class Model(tc.TreeClass):
    ...     w: jax.Array
    ...     step: jax.Array
    ...     act: str = tc.static(default="relu")
    >>> tc.partition(Model(jnp.ones(2), jnp.array(0)))
    (Model(w=f32[2], step=None, act='relu'), Model(w=None, step=i32[], act='relu'))
    >>> class Net(tc.TreeClass):
    ...     encoder: Model
    ...     head: Model
    >>> net = Net(Model(jnp.ones(2), jnp.array(0)), Model(jnp.ones(3), jnp.array(0)))
    >>> tc.partition(net, lambda n: n.head)[0].encoder.w is None
    True
    """
    visits = leaf_visits(tree)
    _warn_shared(type(tree).__name__, visits)
    return halves(tree, visits, select(tree, visits, where, filter, only_trainable=only_trainable))


class SharedArrayWarning(UserWarning):
    """One array object is held at two paths of a tree, which `tc.partition` unties.

    **Raised by**

    `tc.partition`, for a trainable array passed to two fields (not a field's default).

    **Example**

    >>> import warnings
    >>> class Pair(tc.TreeClass):
    ...     encoder: jax.Array
    ...     decoder: jax.Array
    >>> w = jnp.ones(3)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = tc.partition(Pair(w, w))
    >>> caught[0].category is tc.SharedArrayWarning
    True
    >>> str(caught[0].message).splitlines()[0]
    'Pair.encoder and Pair.decoder hold one array object (f32[3]). tc.partition splits it
    into a leaf at'
    """

    __module__ = "treeclass"  # shown as treeclass.SharedArrayWarning, where users import it


def _warn_shared(root: str, visits: list[Visit]) -> None:
    """Warns of each trainable array at two paths (not a default): others are never updated."""
    paths: dict[int, list[Visit]] = {}
    for v in visits:
        if isinstance(v.value, ARRAY_TYPES) and trainable(v):
            paths.setdefault(id(v.value), []).append(v)
    for shared in paths.values():
        # A field's default is one array every instance shares by design: no warning.
        if len(shared) > 1 and not all(
            v.declared is not None and v.declared.default is v.value for v in shared
        ):
            shown = [path_str(root, v.path) for v in shared]
            at = " and ".join(shown) if len(shown) == 2 else ", ".join(shown)
            what = array_name(shared[0].value.dtype, shared[0].value.shape)  # arrays only
            warnings.warn(_MSG_SHARED.format(paths=at, what=what), SharedArrayWarning, stacklevel=3)


def halves(tree: _T, visits: list[Visit], chosen: list[bool]) -> tuple[_T, _T]:
    """`(selected, rest)`: `tree` with `None` at the leaves not `chosen`, and at those."""
    treedef: Any = jax.tree.structure(tree)  # a PyTreeDef: jaxlib ships no stubs
    pairs = [(v.value, None) if c else (None, v.value) for v, c in zip(visits, chosen, strict=True)]
    return treedef.unflatten([p[0] for p in pairs]), treedef.unflatten([p[1] for p in pairs])


def combine(*trees: _T) -> _T:
    """Merges trees as `tc.partition` makes them: at each leaf, the first that is not `None`.

    **Arguments**

    - `*trees`: one or more pytrees of one structure (statics from the first).

    **Returns**

    One tree of that structure; `None` where every tree holds `None`.

    **Raises**

    `TypeError` without trees; JAX's `ValueError` when the structures differ.

    **Example**

    >>> tc.combine(*tc.partition((jnp.ones(2), jnp.arange(2))))
    (Array([1., 1.], dtype=float32), Array([0, 1], dtype=int32))
    """
    if not trees:
        msg = "combine() takes at least one tree, e.g. tc.combine(*tc.partition(model))."
        raise TypeError(msg)

    # `None` is a leaf in the first tree: the others are read up to its structure.
    def first(*xs: Any) -> Any:
        return next((x for x in xs if x is not None), None)

    return jax.tree.map(first, *trees, is_leaf=lambda x: x is None)  # type: ignore[no-any-return]
