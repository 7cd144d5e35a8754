"""Why a call-level target was missed: the scan carry, `@tc.jit` methods, method
access, "ahead of every peer", and the example benchmarks. Each explainer takes the
missed checks of its key and returns a Markdown section (`breakdown.EXPLAINERS`).

The pytree-level explainers (unflatten, construction, replace, jit dispatch and round
trip) are in `breakdown.py`; the timing tools in `_ladder.py`.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from benchmarks import _ladder, contenders, methods, nested, peers, scan
from benchmarks.core import first_leaf, identity
from benchmarks.report import wrap
from benchmarks.targets import TRACE_INSTANCES, Check

INTRO = "The pieces, in one interleaved run:"


def _jit_rung(label: str, fun: Any, obj: Any) -> _ladder.Rung:
    f = jax.jit(fun)
    for _ in range(2):
        jax.block_until_ready(f(obj))
    return _ladder.Rung(label, "f(obj)", {"f": f, "obj": obj}, jax.block_until_ready)


def _program_diff(a: list[str], b: list[str], names: tuple[str, str]) -> str:
    """One sentence: whether two compiled programs are the same, else how they differ."""
    if a == b:
        return f"the same XLA program ({len(a)} instructions, up to parameter names)"
    ca = collections.Counter(map(scan.opcode, a))
    cb = collections.Counter(map(scan.opcode, b))
    diff = ", ".join(
        f"`{op}` {ca[op]} vs {cb[op]}" for op in sorted(set(ca) | set(cb)) if ca[op] != cb[op]
    )
    return f"different XLA programs: {names[0]} {len(a)} instructions, {names[1]} {len(b)}" + (
        f" ({diff})" if diff else " (the same operations, in another order)"
    )


# --- lax.scan: the steady call ----------------------------------------------------


def scan_run(checks: Sequence[Check], rounds: int, batch_s: float) -> str:
    is_nested = checks[0].key.startswith("nested")
    if is_nested:
        cases = [(t.name, t.tree) for t in nested.trees()[:2]]
    else:
        kw = contenders.all_kwargs()
        cases = [("tuple", contenders.make_tuple(**kw)), ("treeclass", contenders.Plain(**kw))]
    (base, base_obj), (tc, tc_obj) = cases
    rungs = []
    for label, obj in cases:
        rungs.append(_jit_rung(f"{label}: scan call", scan.scan_fn, obj))
        rungs.append(_jit_rung(f"{label}: round trip call (jit of identity)", identity, obj))
    ladder = _ladder.ladder(rungs, rounds, batch_s)
    program = _program_diff(scan.hlo_ops(base_obj), scan.hlo_ops(tc_obj), (base, tc))
    d_scan = ladder.delta_ns(f"{tc}: scan call", f"{base}: scan call")
    d_trip = ladder.delta_ns(
        f"{tc}: round trip call (jit of identity)", f"{base}: round trip call (jit of identity)"
    )
    return _ladder.section(
        f"lax.scan steady call, {'100 nodes' if is_nested else '8 fields'}",
        INTRO,
        ladder,
        [
            "In the main run: " + "; ".join(c.text() for c in checks) + ".",
            f"""Both carries compile to {program}, so the loop itself costs the same. Per
            call, {tc} minus {base}: scan call {d_scan:+.0f} ns; a jitted identity on the
            same carry (flatten in, unflatten out, nothing else) {d_trip:+.0f} ns. What the
            scan call adds beyond the tuple is the container's cost at the call boundary,
            broken down under jit round trip; the loop body runs in XLA either way.""",
        ],
        ratios=False,
    )


# --- @tc.jit methods --------------------------------------------------------------


def tc_jit_call(checks: Sequence[Check], rounds: int, batch_s: float) -> str:
    kw = contenders.all_kwargs()
    fun = methods._make_total()
    obj = methods.treeclass_model(fun)(**kw)
    jf = jax.jit(fun)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return jf(*args, **kwargs)
        except TypeError:  # tc.jit's handler runs only when the call raises
            raise

    sync = jax.block_until_ready
    for _ in range(2):
        sync(obj.total())
        sync(wrapped(obj))
    plain, wrap_label, method = (
        "jax.jit(f)(obj)",
        "a Python function calling it (*args, **kwargs, try)",
        "@tc.jit method: obj.total()",
    )
    ladder = _ladder.ladder(
        [
            _ladder.Rung(plain, "f(obj)", {"f": jf, "obj": obj}, sync),
            _ladder.Rung(wrap_label, "f(obj)", {"f": wrapped, "obj": obj}, sync),
            _ladder.Rung(method, "obj.total()", {"obj": obj}, sync),
        ],
        rounds,
        batch_s,
    )
    frames = _ladder.python_frames(lambda: obj.total())
    return _ladder.section(
        "@tc.jit method call",
        f"""`obj.total()` enters {_ladder.python_calls(lambda: obj.total())}
        ({frames} Python frame(s); `jax.jit(f)(obj)` opens
        {_ladder.python_frames(lambda: jf(obj))}).""",
        ladder,
        [
            f"""A `@tc.jit` method is a plain Python function around the `jax.jit` object:
            binding it is free (see method access), and each call opens one Python frame
            that forwards `*args, **kwargs` inside a `try`. That frame costs
            {ladder.delta_ns(wrap_label, plain):+.0f} ns here; the method call costs
            {ladder.delta_ns(method, plain):+.0f} ns over `jax.jit(f)(obj)`."""
        ],
    )


def method_access(checks: Sequence[Check], rounds: int, batch_s: float) -> str:
    cases = {c.name: c for c in methods.access_cases()}
    rungs = [_ladder.Rung(c.name, c.stmt, c.namespace) for c in cases.values()]
    ladder = _ladder.ladder(rungs, rounds, batch_s)
    tc_obj = cases["treeclass: @tc.jit method"].namespace["obj"]
    return _ladder.section(
        "method access",
        f"`obj.total` for a `@tc.jit` method enters {_ladder.python_calls(lambda: tc_obj.total)}.",
        ladder,
        [
            """A `@tc.jit` method is a plain function in the class dict, so `obj.total`
            is bound by the C function descriptor, as any method; a slow access means
            the machine was slow in those rounds (compare the plain-method rows)."""
        ],
    )


def traces(checks: Sequence[Check], rounds: int, batch_s: float) -> str:
    model = methods.treeclass_model(methods._make_total())
    kw = contenders.all_kwargs()
    n = TRACE_INSTANCES
    for i in range(n):
        jax.block_until_ready(model(**{**kw, "a0": jnp.full((4,), float(i))}).total())
    log = model.total.trace_log
    listed = "\n".join(f"- {r}" for r in log.reasons) or "- (no retrace this time)"
    return (
        wrap(
            [
                f"""**traces.** Again, {n} instances of a class defined afresh: {log.count}
                trace(s). treeclass records why each retrace happened
                (`Model.total.trace_log.reasons`, what changed since the closest earlier
                trace):"""
            ]
        )
        + "\n\n"
        + listed
    )


# --- treeclass against the peers --------------------------------------------------


def _peer_objects(names: Sequence[str]) -> list[tuple[str, contenders.Contender]]:
    found = {c.name: c for c in peers.peers()[0]}
    return [(n, found[n]) for n in names if n in found]


HOW_PEERS_FLATTEN = {
    "flax.struct.dataclass": "JAX's C++ dataclass node (`register_dataclass`), also no Python frame",
    "equinox.Module": "a generated Python flatten function: one Python frame",
    "chex.dataclass": "Python flatten callbacks",
    "jax_dataclasses": "Python flatten callbacks",
}


def ahead(checks: Sequence[Check], rounds: int, batch_s: float) -> str:
    key = checks[0].key.removeprefix("ahead_")
    kw = contenders.all_kwargs()
    tc = contenders.Contender("treeclass", "treeclass", contenders.Plain, kw, "obj.replace(a3=x)")
    losers = _peer_objects([c.row for c in checks])
    if key in ("dispatch", "round_trip"):
        fun = first_leaf if key == "dispatch" else identity
        cases = [
            ("tuple", contenders.make_tuple(**kw)),
            ("treeclass", tc.instance()),
            *((name, c.instance()) for name, c in losers),
        ]
        ladder = _ladder.jit_ladder(cases, fun, rounds, batch_s)
        why = []
        for c in checks:
            d_call = ladder.delta_ns("treeclass: jit call", f"{c.row}: jit call")
            d_flat = ladder.delta_ns("treeclass: tree_flatten", f"{c.row}: tree_flatten")
            lo, hi = c.spread or (c.value, c.value)
            why.append(
                f"""In the main run, treeclass / {c.row} was {c.value:.3f} per round (IQR
                {lo:.2f}-{hi:.2f}). In this run, treeclass minus {c.row}: jit call
                {d_call:+.0f} ns, of which flattening the input {d_flat:+.0f} ns. What a
                pytree adds to this call is flattening its 8 leaves and JAX comparing the
                treedef with the cached one. treeclass flattens without a Python frame (a
                C-level `attrgetter` of the tuple cached at construction); {c.row}
                flattens through {HOW_PEERS_FLATTEN.get(c.row, "its own registration")}.
                Where neither runs Python code the two calls cost the same, and the sign of
                a difference of a few percent is noise."""
            )
        why += [_ladder.jit_why(ladder, "treeclass", name) for name, _ in losers]
        return _ladder.section(
            f"treeclass against the peers, {key.replace('_', ' ')}",
            INTRO,
            ladder,
            why,
            ratios=False,
        )
    x = jnp.ones((4,), jnp.float32)
    rungs, calls = [], []
    for name, c in [("treeclass", tc), *losers]:
        if key == "construct":
            stmt, ns = "new(**kw)", {"new": c.new, "kw": c.kwargs}
        else:
            stmt, ns = c.replace, {**c.namespace, "obj": c.instance(), "x": x}
        rungs.append(_ladder.Rung(name, stmt, ns))
        call = eval(f"lambda: {stmt}", ns)  # noqa: S307 - our own statements
        calls.append(f"{name}: {_ladder.python_calls(call)}")
    ladder = _ladder.ladder(rungs, rounds, batch_s)
    return _ladder.section(
        f"treeclass against the peers, {key}",
        INTRO,
        ladder,
        ["What one call enters: " + "; ".join(calls) + "."],
    )


# --- the example benchmarks -------------------------------------------------------


def _iqr_sentence(c: Check) -> str:
    lo, hi = c.spread or (c.value, c.value)
    inside = lo <= c.limit
    return f"The run-time ratio is {c.value:.3f} (IQR {lo:.3f}-{hi:.3f} over the rounds); " + (
        f"the lower quartile is within the {c.limit} target, so the rounds disagree: "
        "more rounds (the default mode) narrow it."
        if inside
        else f"even the lower quartile is above the {c.limit} target."
    )


def pln(checks: Sequence[Check], rounds: int, batch_s: float) -> str:
    from benchmarks import pln as bench

    module = bench._example()
    data = module.simulate(200, 20, 2, seed=0)
    programs = {}
    for v in module.VERSIONS:
        if v.name in ("treeclass", module.BASELINE):
            lowered = v.fit.lower(v.init(data), steps=50, learning_rate=1.0)
            programs[v.name] = scan.instructions(lowered.compile())
    program = _program_diff(
        programs["treeclass"], programs[module.BASELINE], ("treeclass", module.BASELINE)
    )
    return wrap(
        [
            f"""**PLN fit.** {_iqr_sentence(checks[0])} The two versions compile to
            {program}. The container costs only at the boundary of the one compiled call
            (microseconds against a run of milliseconds); a difference in the program is
            XLA compiling the container's order of the same math differently."""
        ]
    )


def neurons(checks: Sequence[Check], rounds: int, batch_s: float) -> str:
    from benchmarks import neurons as bench

    nm = bench._example()
    tree_run, plain_run = bench._versions(nm)
    model = nm.LIF.create(100)
    current = jnp.linspace(15.0, 40.0, 100)
    ts = jnp.arange(100, dtype=jnp.float32) * bench.DT
    program = _program_diff(
        scan.instructions(tree_run.lower(model, current, ts).compile()),
        scan.instructions(plain_run.lower(model.V, model.spike, current, ts).compile()),
        ("treeclass", "plain arrays"),
    )
    return wrap(
        [
            f"""**LIF population.** {_iqr_sentence(checks[0])} The two versions compile
            to {program}."""
        ]
    )
