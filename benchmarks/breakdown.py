"""Why a target was missed: each missed measurement is split into pieces that are timed
in one interleaved run (a "ladder": each rung adds one piece to the previous one), plus
the functions one call enters, recorded with `sys.setprofile`.

Only the misses of a run are broken down, so `RESULTS.md` explains exactly what it
reports. Where a piece has to be isolated, the ladders build their own tiny classes
(an unflatten callback that only allocates, an `__init__` that does nothing).
"""

from __future__ import annotations

import dataclasses
import operator
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from benchmarks import _timing, contenders, nested
from benchmarks.core import JIT_BATCH_SCALE, Result, Row, first_leaf, identity
from benchmarks.report import wrap


def python_calls(fn: Callable[[], Any]) -> str:
    """The functions one call of `fn` enters, in order: Python frames by name, and
    C functions called from Python code as `name()`."""
    seen: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            seen.append(frame.f_code.co_qualname)
        elif event == "c_call":
            seen.append(f"{getattr(arg, '__qualname__', repr(arg))}()")

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    entered = [s for s in seen[1:] if s != "setprofile()"]  # seen[0] is fn itself
    return " → ".join(f"`{s}`" for s in entered)


@dataclasses.dataclass(frozen=True)
class Rung:
    label: str
    stmt: str
    namespace: dict[str, Any]
    sync: Callable[[Any], Any] | None = None
    """Given for jit calls, which then also get `JIT_BATCH_SCALE` times longer batches."""


@dataclasses.dataclass(frozen=True)
class Ladder:
    """Interleaved timings of some rungs, by label."""

    labels: tuple[str, ...]
    stats: dict[str, _timing.Stats]

    def ns(self, label: str) -> float:
        return self.stats[label].median * 1e9

    def ratio(self, label: str) -> float:
        return self.stats[label].ratio

    def delta_ns(self, a: str, b: str) -> float:
        """Median over rounds of (a - b): what a adds to b, with drift cancelled."""
        pairs = zip(self.stats[a].samples, self.stats[b].samples, strict=True)
        return statistics.median(x - y for x, y in pairs) * 1e9

    def table(self, *, ratios: bool = True) -> str:
        if not ratios:
            rows = [f"| {k} | {self.ns(k):.0f} |" for k in self.labels]
            return "\n".join(["| piece | ns per call |", "|---|---|", *rows])
        rows = [f"| {k} | {self.ns(k):.0f} | {self.ratio(k):.2f} |" for k in self.labels]
        return "\n".join(["| piece | ns per call | x first row |", "|---|---|---|", *rows])


def _ladder(rungs: Sequence[Rung], rounds: int, batch_s: float) -> Ladder:
    """Times the rungs interleaved, with the first one as the ratio baseline."""
    benches = {r.label: _timing.compile_loop(r.stmt, r.namespace, r.sync) for r in rungs}
    batches = {r.label: batch_s * (JIT_BATCH_SCALE if r.sync else 1.0) for r in rungs}
    stats = _timing.interleaved(benches, baseline=rungs[0].label, rounds=rounds, batch_s=batches)
    return Ladder(tuple(benches), stats)


def _section(
    title: str, intro: str, ladder: Ladder, why: Sequence[str], *, ratios: bool = True
) -> str:
    head = wrap([f"**{title}.** {intro}"])
    return f"{head}\n\n{ladder.table(ratios=ratios)}\n\n{wrap(why)}"


# --- unflatten --------------------------------------------------------------------


def _callback_node(name: str, make_unflatten: Callable[[type], Callable[[Any, Any], Any]]) -> Any:
    """An instance of a new class that flattens to the 8+2 fields and unflattens with
    `make_unflatten(cls)`: isolates one piece of an unflatten callback."""
    cls = type(name, (), {})
    jax.tree_util.register_pytree_node(cls, operator.attrgetter("flat"), make_unflatten(cls))
    obj = object.__new__(cls)
    kw = contenders.all_kwargs()
    obj.flat = (tuple(kw[n] for n in contenders.ARRAYS), (kw["n"], kw["name"]))
    return obj


def _unflatten_rung(label: str, obj: Any) -> Rung:
    leaves, treedef = jax.tree_util.tree_flatten(obj)
    return Rung(label, "treedef.unflatten(leaves)", {"treedef": treedef, "leaves": leaves})


def _unflatten(rounds: int, batch_s: float) -> str:
    kw = contenders.all_kwargs()
    new = object.__new__
    floor = "+ the instance __dict__ (empty)"
    ladder = _ladder(
        [
            _unflatten_rung("tuple (C++ builds it)", contenders.make_tuple(**kw)),
            _unflatten_rung(
                "a Python callback returning its children",
                _callback_node("Bare", lambda cls: lambda aux, children: children),
            ),
            _unflatten_rung(
                "+ object.__new__(cls)",
                _callback_node("Alloc", lambda cls: lambda aux, children: new(cls)),
            ),
            _unflatten_rung(
                floor,
                _callback_node("AllocDict", lambda cls: lambda aux, children: new(cls).__dict__),
            ),
            _unflatten_rung("+ 10 field writes = design (b)", contenders.CallbackNode(**kw)),
            _unflatten_rung("+ the flat-tuple write = treeclass", contenders.Plain(**kw)),
        ],
        rounds,
        batch_s,
    )
    leaves, treedef = jax.tree_util.tree_flatten(contenders.Plain(**kw))
    return _section(
        "unflatten",
        f"One treeclass unflatten enters {python_calls(lambda: treedef.unflatten(leaves))}.",
        ladder,
        [
            f"""A tuple is rebuilt entirely in C++. Any unflatten that returns a Python object
        with an instance `__dict__` pays the call from C++ into Python, `object.__new__`
        and the dict before it stores one field: {ladder.ratio(floor):.2f}x the tuple here,
        already above the 2.0 target. Storing the fields is the next
        {ladder.ratio("+ 10 field writes = design (b)") - ladder.ratio(floor):.2f}x (one
        dict write per field, as in every `__dict__`-based design); the flat-tuple cache
        that makes flatten cheap adds one more write."""
        ],
    )


# --- construction -----------------------------------------------------------------


class _EmptyInit:
    def __init__(
        self,
        a0: Any,
        a1: Any,
        a2: Any,
        a3: Any,
        a4: Any,
        a5: Any,
        a6: Any,
        a7: Any,
        n: int,
        name: str,
    ) -> None:
        pass


def _construct(rounds: int, batch_s: float) -> str:
    kw = contenders.all_kwargs()

    def rung(label: str, new: Callable[..., Any]) -> Rung:
        return Rung(label, "new(**kw)", {"new": new, "kw": kw})

    empty, plain, post = (
        "a class whose __init__ does nothing",
        "+ static checks and the flat tuple = treeclass",
        "+ __post_init__ and the read-back",
    )
    ladder = _ladder(
        [
            rung("make_tuple(**kw) (a Python function)", contenders.make_tuple),
            rung(empty, _EmptyInit),
            rung("+ __init__ writes 10 fields to __dict__ (design b)", contenders.CallbackNode),
            rung(plain, contenders.Plain),
            rung(post, contenders.WithPostInit),
        ],
        rounds,
        batch_s,
    )
    return _section(
        "construction",
        f"""`Plain(**kw)` enters {python_calls(lambda: contenders.Plain(**kw))}; with a
        hook, `WithPostInit(**kw)` enters
        {python_calls(lambda: contenders.WithPostInit(**kw))}.""",
        ladder,
        [
            f"""`cls(**kw)` goes through `type.__call__`, which packs the keywords into a dict,
        allocates the instance and then calls `__init__`: {ladder.ratio(empty):.2f}x the
        tuple function for an `__init__` that does nothing. The hook adds
        {ladder.delta_ns(post, plain):.0f} ns: its own Python call, then reading every
        field back from the instance dict to check the statics and build the flat tuple
        (the hook may have set or replaced fields with `object.__setattr__`, so the
        locals of `__init__` cannot be trusted any more)."""
        ],
    )


# --- replace ----------------------------------------------------------------------


def _replace(rounds: int, batch_s: float) -> str:
    kw = contenders.all_kwargs()
    x = jnp.ones((4,), jnp.float32)
    cls = contenders.CallbackNode
    new = object.__new__

    def call_only(self: Any, /, **changes: Any) -> Any:
        return self

    def alloc(self: Any, /, **changes: Any) -> Any:
        obj = new(cls)
        obj.__dict__  # noqa: B018 - materialising the dict is the piece measured
        return obj

    def merge(self: Any, /, **changes: Any) -> Any:
        obj = new(cls)
        d = obj.__dict__
        d.update(self.__dict__)
        d.update(changes)
        return obj

    def rung(label: str, fn: Callable[..., Any], obj: Any) -> Rung:
        return Rung(label, "fn(obj, a3=x)", {"fn": fn, "obj": obj, "x": x})

    alloc_label, merge_label = (
        "+ object.__new__ and the instance __dict__",
        "+ merge the old dict and the changes",
    )
    plain = "treeclass replace"
    plain_obj = contenders.Plain(**kw)
    ladder = _ladder(
        [
            Rung(
                "replace_tuple(t, x) (a Python function)",
                "replace_tuple(obj, x)",
                {
                    "replace_tuple": contenders.replace_tuple,
                    "obj": contenders.make_tuple(**kw),
                    "x": x,
                },
            ),
            rung("a function taking **changes, returning self", call_only, cls(**kw)),
            rung(alloc_label, alloc, cls(**kw)),
            rung(merge_label, merge, cls(**kw)),
            Rung(plain, "obj.replace(a3=x)", {"obj": plain_obj, "x": x}),
            Rung(
                "treeclass + __post_init__ replace",
                "obj.replace(a3=x)",
                {"obj": contenders.WithPostInit(**kw), "x": x},
            ),
        ],
        rounds,
        batch_s,
    )
    return _section(
        "replace",
        f"`obj.replace(a3=x)` enters {python_calls(lambda: plain_obj.replace(a3=x))}.",
        ladder,
        [
            f"""The tuple baseline builds an 8-tuple in one Python call. A `replace` that
            returns a new instance with a `__dict__` first allocates the object and its
            dict: {ladder.ratio(alloc_label):.2f}x the tuple before a single field is
            stored, so 2.5 is out of reach for any `__dict__`-based class (NamedTuple's
            `_replace` and the peers' `replace` are slower still, see Results). Copying
            the fields in (two C-level `dict.update` calls) brings it to
            {ladder.ratio(merge_label):.2f}x; treeclass then adds
            {ladder.delta_ns(plain, merge_label):.0f} ns: the test that every changed name
            is a plain dynamic field (`keys() <= ...`) and rebuilding the flat tuple from
            the new dict."""
        ],
    )


# --- jit: what the pytree adds to a call -----------------------------------------


def _jit_ladder(
    cases: Sequence[tuple[str, Any]], fun: Callable[[Any], Any], rounds: int, batch_s: float
) -> Ladder:
    """For each case: the jit call, flattening the input, unflattening the output."""
    calls, flattens, unflattens = [], [], []
    for label, obj in cases:
        f = jax.jit(fun)
        for _ in range(2):
            jax.block_until_ready(f(obj))
        calls.append(
            Rung(f"{label}: jit call", "f(obj)", {"f": f, "obj": obj}, jax.block_until_ready)
        )
        flattens.append(
            Rung(
                f"{label}: tree_flatten",
                "flatten(obj)",
                {"flatten": jax.tree_util.tree_flatten, "obj": obj},
            )
        )
        leaves, treedef = jax.tree_util.tree_flatten(fun(obj))
        unflattens.append(
            Rung(
                f"{label}: unflatten of the output",
                "treedef.unflatten(leaves)",
                {"treedef": treedef, "leaves": leaves},
            )
        )
    return _ladder([*calls, *flattens, *unflattens], rounds, batch_s)


def _jit_why(ladder: Ladder, base: str, other: str) -> str:
    def delta(piece: str) -> float:
        return ladder.delta_ns(f"{other}: {piece}", f"{base}: {piece}")

    return f"""Per call, {other} minus {base} (median of per-round differences): jit call
    {delta("jit call"):+.0f} ns, of which flattening the input accounts for
    {delta("tree_flatten"):+.0f} ns and unflattening the output for
    {delta("unflatten of the output"):+.0f} ns; the remainder is JAX comparing the new
    treedef with the cached one (an `==` on each custom node's aux data) and noise,
    which for calls this long is of the same order."""


def _eight(fun: Callable[[Any], Any], title: str) -> Callable[[int, float], str]:
    def explain(rounds: int, batch_s: float) -> str:
        kw = contenders.all_kwargs()
        cases = [
            ("tuple", contenders.make_tuple(**kw)),
            ("treeclass", contenders.Plain(**kw)),
            ("(a) C++ dataclass node", contenders.DataclassNode(**kw)),
        ]
        ladder = _jit_ladder(cases, fun, rounds, batch_s)
        return _section(
            title,
            "The pieces, in one interleaved run:",
            ladder,
            [_jit_why(ladder, "tuple", "treeclass")],
            ratios=False,
        )

    return explain


def _nested(fun: Callable[[Any], Any], title: str) -> Callable[[int, float], str]:
    def explain(rounds: int, batch_s: float) -> str:
        cases = [(t.name, t.tree) for t in nested.trees()]
        ladder = _jit_ladder(cases, fun, rounds, batch_s)
        base = cases[0][0]

        def per_node(piece: str) -> str:
            return ", ".join(
                f"{name} {ladder.delta_ns(f'{name}: {piece}', f'{base}: {piece}') / 100:+.0f} ns"
                for name, _ in cases[1:]
            )

        why = [
            _jit_why(ladder, base, "treeclass"),
            f"""Flattening, per class node, costs this much more than a tuple node:
            {per_node("tree_flatten")}. For a node registered with callbacks, JAX's C++
            flattener calls the flatten callback (for treeclass the C-level `attrgetter`:
            no Python frame), checks that the result is a `(children, aux)` pair and walks
            `children` through the generic iterator protocol, where a tuple node is walked
            in place. The C++ dataclass node (a) reads the attributes itself, so it
            flattens faster per node; but it rebuilds through `cls(**kw)`, which runs user
            code: the design treeclass rejects.""",
        ]
        if fun is identity:
            why.append(
                f"""Rebuilding the output, per class node, costs this much more than a tuple
                node: {per_node("unflatten of the output")}: one Python call that allocates
                an object and its `__dict__` per node (see unflatten), whatever the design."""
            )
        why.append(
            """These per-node costs are fixed per call (tens of µs for 100 nodes), so they
            show when the jitted function does almost nothing, as here; a step that does
            real work amortises them."""
        )
        return _section(title, "The pieces, in one interleaved run:", ladder, why, ratios=False)

    return explain


EXPLAINERS: dict[str, Callable[[int, float], str]] = {
    "unflatten": _unflatten,
    "construct": _construct,
    "replace": _replace,
    "dispatch": _eight(first_leaf, "jit dispatch, 8 fields"),
    "round_trip": _eight(identity, "jit round trip, 8 fields"),
    "nested_dispatch": _nested(first_leaf, "jit dispatch, 100 nodes"),
    "nested_round_trip": _nested(identity, "jit round trip, 100 nodes"),
}


def explain(missed: Sequence[tuple[Result, Row]], *, rounds: int, batch_s: float) -> str:
    """Markdown: the list of misses, then one breakdown per missed measurement."""
    lines = [
        f"- {row.name}, {r.measurement.title}: {row.stats.ratio:.2f}x tuple "
        f"(target <= {r.measurement.target:.2f})"
        for r, row in missed
    ]
    keys = list(dict.fromkeys(r.measurement.key for r, _ in missed))
    return "\n\n".join(["\n".join(lines), *(EXPLAINERS[key](rounds, batch_s) for key in keys)])
