"""Why a target was missed: each missed measurement is split into pieces that are timed
in one interleaved run (a "ladder": each rung adds one piece to the previous one), plus
the functions one call enters, recorded with `sys.setprofile` (`_ladder.py`).

This module explains the pytree-level costs (unflatten, construction, replace, what
the pytree adds to a jit call); `breakdown_calls.py` the call-level ones (the scan
carry, `@tc.jit` methods, method access, the peers, the examples). `EXPLAINERS` maps
each check key (`targets.Check.key`) to its explainer.

Only the misses of a run are broken down, so `RESULTS.md` explains exactly what it
reports. Where a piece has to be isolated, the ladders build their own tiny classes
(an unflatten callback that only allocates, an `__init__` that does nothing).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from benchmarks import _ladder, breakdown_calls, contenders, nested
from benchmarks.core import first_leaf, identity
from benchmarks.targets import AHEAD_OF_PEERS, Check

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


def _unflatten_rung(label: str, obj: Any) -> _ladder.Rung:
    leaves, treedef = jax.tree_util.tree_flatten(obj)
    return _ladder.Rung(label, "treedef.unflatten(leaves)", {"treedef": treedef, "leaves": leaves})


def _unflatten(rounds: int, batch_s: float) -> str:
    kw = contenders.all_kwargs()
    new = object.__new__
    floor = "+ the instance __dict__ (empty)"
    ladder = _ladder.ladder(
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
    return _ladder.section(
        "unflatten",
        f"One treeclass unflatten enters {_ladder.python_calls(lambda: treedef.unflatten(leaves))}.",
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

    def rung(label: str, new: Callable[..., Any]) -> _ladder.Rung:
        return _ladder.Rung(label, "new(**kw)", {"new": new, "kw": kw})

    empty, plain, post = (
        "a class whose __init__ does nothing",
        "+ static checks and the flat tuple = treeclass",
        "+ __post_init__ and the read-back",
    )
    ladder = _ladder.ladder(
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
    return _ladder.section(
        "construction",
        f"""`Plain(**kw)` enters {_ladder.python_calls(lambda: contenders.Plain(**kw))}; with a
        hook, `WithPostInit(**kw)` enters
        {_ladder.python_calls(lambda: contenders.WithPostInit(**kw))}.""",
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
    names = list(kw)

    # The rungs rebuild treeclass's generated replace (treeclass/_replace.py) piece by
    # piece: one keyword parameter per field, then allocation, then the stores.
    params = ", ".join(f"{n}=_M" for n in names)
    fills = "".join(f"    if {n} is _M: {n} = d[{n!r}]\n" for n in names)
    stores = "".join(f"    nd[{n!r}] = {n}\n" for n in names)
    source = (
        f"def bind_only(self, /, *, {params}, **unknown):\n    return self\n"
        f"def alloc(self, /, *, {params}, **unknown):\n"
        "    obj = new(cls)\n    obj.__dict__\n    return obj\n"
        f"def fill(self, /, *, {params}, **unknown):\n    d = self.__dict__\n{fills}"
        f"    obj = new(cls)\n    nd = obj.__dict__\n{stores}    return obj\n"
    )
    ns: dict[str, Any] = {"_M": object(), "new": object.__new__, "cls": cls}
    exec(source, ns)  # noqa: S102 - our own source, above

    def rung(label: str, fn: Callable[..., Any], obj: Any) -> _ladder.Rung:
        return _ladder.Rung(label, "fn(obj, a3=x)", {"fn": fn, "obj": obj, "x": x})

    alloc_label, fill_label = (
        "+ object.__new__ and the instance __dict__",
        "+ read the unchanged fields, store all fields",
    )
    plain = "treeclass replace"
    plain_obj = contenders.Plain(**kw)
    ladder = _ladder.ladder(
        [
            _ladder.Rung(
                "replace_tuple(t, x) (a Python function)",
                "replace_tuple(obj, x)",
                {
                    "replace_tuple": contenders.replace_tuple,
                    "obj": contenders.make_tuple(**kw),
                    "x": x,
                },
            ),
            rung(f"a function with {len(names)} keyword parameters, returning self",
                 ns["bind_only"], cls(**kw)),
            rung(alloc_label, ns["alloc"], cls(**kw)),
            rung(fill_label, ns["fill"], cls(**kw)),
            _ladder.Rung(plain, "obj.replace(a3=x)", {"obj": plain_obj, "x": x}),
            _ladder.Rung(
                "treeclass + __post_init__ replace",
                "obj.replace(a3=x)",
                {"obj": contenders.WithPostInit(**kw), "x": x},
            ),
        ],
        rounds,
        batch_s,
    )
    return _ladder.section(
        "replace",
        f"`obj.replace(a3=x)` enters {_ladder.python_calls(lambda: plain_obj.replace(a3=x))}.",
        ladder,
        [
            f"""The tuple baseline builds an 8-tuple in one Python call. A `replace` that
            returns a new instance with a `__dict__` first allocates the object and its
            dict: {ladder.ratio(alloc_label):.2f}x the tuple before a single field is
            stored, so 2.5 is out of reach for any `__dict__`-based class (NamedTuple's
            `_replace` and the peers' `replace` are slower still, see Results). Reading
            the unchanged fields from the old instance and storing all of them brings it
            to {ladder.ratio(fill_label):.2f}x; treeclass then adds
            {ladder.delta_ns(plain, fill_label):.0f} ns, mostly building the cached flat
            tuple `(children, statics)` that makes every later flatten a C-level read.
            A dict merge instead of the per-field reads was measured slower for classes
            of up to about 12 fields (treeclass/_replace.py)."""
        ],
    )


# --- jit: what the pytree adds to a call -----------------------------------------


def _eight(fun: Callable[[Any], Any], title: str) -> Callable[[int, float], str]:
    def explain(rounds: int, batch_s: float) -> str:
        kw = contenders.all_kwargs()
        cases = [
            ("tuple", contenders.make_tuple(**kw)),
            ("treeclass", contenders.Plain(**kw)),
            ("(a) C++ dataclass node", contenders.DataclassNode(**kw)),
        ]
        ladder = _ladder.jit_ladder(cases, fun, rounds, batch_s)
        return _ladder.section(
            title,
            "The pieces, in one interleaved run:",
            ladder,
            [
                f"""In this run the treeclass call costs
                {ladder.ns("treeclass: jit call") / ladder.ns("tuple: jit call"):.3f}x the
                tuple's. The pytree's share of a call is flattening the 8 input leaves
                (JAX calls the registered flatten, a C-level `attrgetter` of the tuple
                cached at construction, where a tuple is walked in place), comparing
                the treedef with the cached one, and rebuilding the output.""",
                _ladder.jit_why(ladder, "tuple", "treeclass"),
            ],
            ratios=False,
        )

    return explain


def _nested(fun: Callable[[Any], Any], title: str) -> Callable[[int, float], str]:
    def explain(rounds: int, batch_s: float) -> str:
        cases = [(t.name, t.tree) for t in nested.trees()]
        ladder = _ladder.jit_ladder(cases, fun, rounds, batch_s)
        base = cases[0][0]

        def per_node(piece: str) -> str:
            return ", ".join(
                f"{name} {ladder.delta_ns(f'{name}: {piece}', f'{base}: {piece}') / 100:+.0f} ns"
                for name, _ in cases[1:]
            )

        why = [
            _ladder.jit_why(ladder, base, "treeclass"),
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
        return _ladder.section(
            title, "The pieces, in one interleaved run:", ladder, why, ratios=False
        )

    return explain


Explainer = Callable[[Sequence[Check], int, float], str]
"""`(missed checks of one key, rounds, batch seconds) -> Markdown section`."""


def _pytree(explainer: Callable[[int, float], str]) -> Explainer:
    return lambda checks, rounds, batch_s: explainer(rounds, batch_s)


EXPLAINERS: dict[str, Explainer] = {
    "unflatten": _pytree(_unflatten),
    "construct": _pytree(_construct),
    "replace": _pytree(_replace),
    "dispatch": _pytree(_eight(first_leaf, "jit dispatch, 8 fields")),
    "round_trip": _pytree(_eight(identity, "jit round trip, 8 fields")),
    "nested_dispatch": _pytree(_nested(first_leaf, "jit dispatch, 100 nodes")),
    "nested_round_trip": _pytree(_nested(identity, "jit round trip, 100 nodes")),
    "scan_run": breakdown_calls.scan_run,
    "nested_scan_run": breakdown_calls.scan_run,
    "tc_jit_call": breakdown_calls.tc_jit_call,
    "method_access": breakdown_calls.method_access,
    "traces": breakdown_calls.traces,
    **{f"ahead_{key}": breakdown_calls.ahead for key in AHEAD_OF_PEERS},
    "pln": breakdown_calls.pln,
    "neurons": breakdown_calls.neurons,
}


def explain(missed: Sequence[Check], *, rounds: int, batch_s: float) -> str:
    """Markdown: the list of misses, then one breakdown per key missed."""
    lines = [f"- {c.text()}" for c in missed]
    by_key: dict[str, list[Check]] = {}
    for c in missed:
        by_key.setdefault(c.key, []).append(c)
    sections = [EXPLAINERS[key](checks, rounds, batch_s) for key, checks in by_key.items()]
    return "\n\n".join(["\n".join(lines), *sections])
