"""The words of `RESULTS.md`: the method, the targets, the peer comparison, the "what
this means" paragraphs with this run's numbers filled in, and the document itself."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.core import JIT_BATCH_SCALE, Result, Row
from benchmarks.endtoend import Example
from benchmarks.report import markdown_table, wrap
from benchmarks.targets import AHEAD_OF_PEERS, Check

# What the contenders hold and how the baselines are built, stated once for the report.
METHOD_NOTES = """\
- **Class under test**: 8 dynamic fields holding float32 arrays of shape (4,) and 2
  static fields (`n: int`, `name: str`).
- **Baseline (x tuple = 1.00)**: a raw tuple of the 8 arrays. A tuple's treedef has no
  place for statics (an `int` child would be a leaf, a `str` child makes jit fail), so
  the tuple, NamedTuple, dict and chex contenders carry the 8 arrays only and the
  statics live outside them. Construction of the tuple is a Python function
  `make_tuple(a0, ..., a7, n, name)` called with the same 10 keyword arguments as the
  classes, returning the 8-tuple; its replace is a function `replace_tuple(t, a3)`
  building a new tuple with element 3 changed. NamedTuple and dict are built from the 8
  array keywords only.
- **Statements are inlined** into a compiled timing loop (as `timeit` does): no wrapper
  call is added to what is measured.
- **Interleaved rounds**: each round times one batch of every contender back to back
  (who goes first rotates); ratios are taken within a round, so machine drift cancels.
  "x tuple" is the median of the per-round ratios. The garbage collector is off while
  timing and collects every 64 rounds. Statements that take milliseconds (tree.map
  over 1000 instances, the scan) run fewer rounds; each table says how many.
- **jit**: every jitted function is compiled and run twice before timing. Calls are not
  blocked one by one (dispatch is what the caller pays), but each batch blocks on its
  last output so no contender leaves work running into another's batch. Same treatment
  for every contender. JAX's CPU async dispatch is left on (the default): on 2 cores the
  XLA worker thread competes with the caller, so per-call times are bimodal (see the
  IQR) while per-round ratios stay stable.
- **lax.scan carry**: a jitted 1000-step `lax.scan` whose carry is the instance, the
  body `jax.tree.map(lambda a: a * 0.5 + 1.0, carry)` for every contender. Compile time
  is `jax.jit(scan_fn).lower(obj).compile()` after `jax.clear_caches()`, one compile
  per round per contender after an untimed warm-up; the steady call is the compiled
  function, timed as the dispatch rows.
- **Jitted methods**: 200 instances with different array values go through each
  library's idiomatic jitted method or function; the function body increments a
  counter, which runs only while JAX traces, so "traces" counts traces for the 200
  instances. The time is one more call on the first instance, against
  `jax.jit(f)(tuple)` of the same body.
- **Method access**: `obj.method` without the call, against a plain class's plain
  method.
- **100 nodes**: a root holding a tuple of 99 layers with two (4,) arrays each (198
  leaves), against the same structure as nested tuples.
- **Examples**: `benchmarks/pln.py` and `benchmarks/neurons.py` through their own
  `run()` (whole compiled programs, interleaved; their quick modes under `--quick`).
"""


def targets_markdown(checks: Sequence[Check]) -> str:
    return "\n".join(f"- {c.verdict}: {c.text()}" for c in checks if not c.key.startswith("ahead"))


def peer_table(checks: Sequence[Check], *, markdown: bool) -> str:
    """treeclass / peer, per round, one row per measurement of `AHEAD_OF_PEERS`."""
    ahead = [c for c in checks if c.key.startswith("ahead_")]
    if not ahead:
        return "(no peers measured)"
    peers = list(dict.fromkeys(c.row for c in ahead))
    rows = [["treeclass / peer", *peers]]
    for key in AHEAD_OF_PEERS:
        cells = {c.row: c for c in ahead if c.key == f"ahead_{key}"}
        if not cells:
            continue
        rows.append(
            [key.replace("_", " ")]
            + [f"{cells[p].value:.3f} {cells[p].verdict}" if p in cells else "n/a" for p in peers]
        )
    if markdown:
        lines = ["| " + " | ".join(r) + " |" for r in rows]
        lines.insert(1, "|" + "---|" * len(rows[0]))
        return "\n".join(lines).replace(" MISS", " **MISS**")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def peer_verdict(checks: Sequence[Check]) -> str:
    ahead = [c for c in checks if c.key.startswith("ahead_")]
    behind = [c for c in ahead if not c.passed]
    if not ahead:
        return "No peer comparison in this run."
    if not behind:
        return (
            f"treeclass is ahead of every peer on dispatch, round trip, construction and "
            f"replace: all {len(ahead)} per-round ratios treeclass / peer are below 1."
        )
    listed = "; ".join(
        f"{c.row} on {c.key.removeprefix('ahead_').replace('_', ' ')} ({c.value:.3f})"
        for c in behind
    )
    return (
        f"treeclass is ahead in {len(ahead) - len(behind)} of {len(ahead)} comparisons; "
        f"not ahead of {listed} (see Misses)."
    )


def meaning(results: Sequence[Result], checks: Sequence[Check]) -> str:
    """The "what this means" paragraphs, with this run's numbers filled in."""
    by_key = {r.measurement.key: r for r in results}

    def row(key: str, name: str) -> Row | None:
        r = by_key.get(key)
        return r.row(name) if r else None

    def ratio(key: str, name: str) -> str:
        found = row(key, name)
        return f"{found.stats.ratio:.2f}x" if found else "n/a"

    def us(key: str, name: str, scale: float = 1e6, unit: str = "µs") -> str:
        found = row(key, name)
        return f"{found.stats.median * scale:.2f} {unit}" if found else "n/a"

    def traces(name: str) -> str:
        found = row("jit_methods", name)
        return str(found.traces) if found else "n/a"

    def check(key: str) -> str:
        found = next((c for c in checks if c.key == key), None)
        return f"{found.value:.2f}x" if found else "n/a"

    tc, post, a, b = (
        "treeclass",
        "treeclass + __post_init__",
        "(a) C++ dataclass node",
        "(b) Python callbacks",
    )
    eqx_m, trap = "equinox: @eqx.filter_jit method", "plain class: jax.jit(static_argnums=0) method"
    return wrap(
        [
            f"""Inside `jit` a treeclass instance costs about what a raw tuple costs: for 8
            fields, dispatch is {ratio("dispatch", tc)} and the round trip
            {ratio("round_trip", tc)} of the tuple's. For a 100-node tree, dispatch is
            {ratio("nested_dispatch", tc)} and the round trip {ratio("nested_round_trip", tc)}:
            each class node costs JAX more than a tuple node to flatten (a callback instead
            of an in-place walk) and, on the way out, a Python call to rebuild (see Misses).
            With leaves this cheap, those per-node costs are a visible share of the call.""",
            f"""As a `lax.scan` carry the container disappears into the compiled loop: a
            1000-step scan compiles in {us("scan_compile", tc, 1e3, "ms")}
            ({ratio("scan_compile", tc)} of the tuple carry; 100 nodes
            {ratio("nested_scan_compile", tc)}) and a steady call costs
            {ratio("scan_run", tc)} of the tuple's (100 nodes {ratio("nested_scan_run", tc)}).""",
            f"""A `@tc.jit` method traced {traces("treeclass: @tc.jit method")} time(s) for
            200 instances (the `jax.jit(static_argnums=0)` method of the tutorial:
            {traces(trap)}) and a call costs {check("tc_jit_call")} of `jax.jit(f)(obj)` on
            the same function, {ratio("jit_methods", "treeclass: @tc.jit method")} of
            `jax.jit(f)(tuple)`; equinox's `@eqx.filter_jit` method costs
            {ratio("jit_methods", eqx_m)}. Reaching the method, `obj.total`, costs
            {us("method_access", "treeclass: @tc.jit method")} like any bound method
            ({us("method_access", "plain class: plain method")}); equinox's filter_jit
            method {us("method_access", "equinox: @eqx.filter_jit method")}.""",
            f"""Flatten reads the tuple cached at construction ({ratio("flatten", tc)} of the
            tuple; the rejected C++ dataclass node (a) {ratio("flatten", a)}, Python
            callbacks without the cache (b) {ratio("flatten", b)}). Unflatten runs no user
            code and costs {ratio("unflatten", tc)}, against {ratio("unflatten", a)} for
            design (a), which rebuilds through `cls(**kw)` and so would run `__post_init__`
            on tracers. `jax.tree.map` over a list of 1000 instances takes
            {us("tree_map_list", tc, 1e3, "ms")} ({ratio("tree_map_list", tc)} of 1000
            tuples).""",
            f"""The price is paid outside `jit`, per Python-level object built: construction
            {us("construct", tc)} ({ratio("construct", tc)}; {us("construct", b)} for the
            same generated `__init__` without static checks and cache,
            {us("construct", "tuple")} for the tuple function), {ratio("construct", post)}
            with a `__post_init__` hook, and `replace` {ratio("replace", tc)} of rebuilding
            a tuple. These are a few hundred nanoseconds per object: they matter in Python
            loops that build many small instances, not in compiled code.
            {peer_verdict(checks)}""",
        ]
    )


def examples_markdown(examples: Sequence[Example]) -> str:
    if not examples:
        return "Not run (`--no-examples`)."
    return "\n\n".join(
        f"`{e.name}` ({e.seconds:.0f} s):\n\n```text\n{e.table}\n```" for e in examples
    )


def results_markdown(
    results: Sequence[Result],
    checks: Sequence[Check],
    examples: Sequence[Example],
    info: dict[str, str],
    *,
    command: str,
    mode: str,
    rounds: int,
    batch_s: float,
    runtime_s: float,
    skipped: Sequence[str],
    misses_md: str,
    loop_ns: float,
) -> str:
    machine_lines = "\n".join(f"- **{k}**: {v}" for k, v in info.items())
    skipped_md = "\n".join(f"- {s}" for s in skipped) or "- none"
    header = wrap(
        [
            f"""Generated by `{command}` ({mode} mode: {rounds} interleaved rounds, fewer
            for the millisecond-long statements, batches of ~{batch_s * 1e3:.1f} ms,
            {JIT_BATCH_SCALE:.0f}x longer for jit calls; the whole run took
            {runtime_s:.0f} s; the timing loop itself costs {loop_ns:.0f} ns per call,
            included in every number). Only ratios measured in the same run mean
            anything: absolute times on this shared machine drift between runs."""
        ]
    )
    peers_intro = wrap(
        [
            f"""Median over rounds of treeclass / peer, measured in the same rounds (below
            1: treeclass is faster). {peer_verdict(checks)}"""
        ]
    )
    return f"""\
# treeclass benchmarks

{header}

## Machine

{machine_lines}

Peers skipped:
{skipped_md}

## Method

{METHOD_NOTES}
## Targets

{targets_markdown(checks)}

### treeclass against every peer

{peers_intro}

{peer_table(checks, markdown=True)}

## What this means

{meaning(results, checks)}

## Misses

{misses_md}

## Results

Median µs per call, interquartile range over rounds, and the median per-round ratio to
the first row (the raw tuple unless the column says otherwise), with its IQR.
{markdown_table(results, checks)}

## Example benchmarks

{examples_markdown(examples)}
"""
