"""treeclass against the reference model (tests/reference.py), one check per public
operation. Each check takes a `Case` (tests/class_strategies.py), builds its module and
instance with treeclass and with the model, and raises `Disagreement` (an
AssertionError whose message starts with a short kind and ends with the case's source)
where the two differ. tests/core/test_reference.py runs each over hypothesis' cases;
`python -m benchmarks --only reference` runs them over many random ones and counts the
kinds.
"""

from __future__ import annotations

import collections
import copy
import pickle
import re
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import cloudpickle
import jax
import jax.numpy as jnp
import reference as ref
from class_source import EVENTS, build_module, real_value
from class_strategies import STATIC_VALUES, Case, ClassDecl

import treeclass as tc


class Disagreement(AssertionError):
    def __init__(self, kind: str, detail: str, case: Case) -> None:
        super().__init__(f"{kind}: {detail}\n{case!r}")
        self.kind = kind


def kind_of(error: BaseException) -> str:
    """A name for an exception that groups the same defect across generated names."""
    return f"{type(error).__name__}: {normalise(str(error))}"


def normalise(message: str) -> str:
    """The first line of `message`, generated class and field names made generic."""
    first = (message.strip().splitlines() or [""])[0]
    first = re.sub(r"\bGen\d+\b", "GenN", first)
    first = re.sub(r"\bMixed\d+\b", "MixedN", first)
    first = re.sub(r"\b_?[a-h]\d\b", "f", first)
    first = re.sub(r"\brefgen_\d+\b", "refgen_N", first)
    return re.sub(r" at 0x[0-9a-f]+", "", first)[:90]


class Built:
    """A case's module, its instance made by treeclass and by the model, and the events
    each construction logged."""

    def __init__(self, case: Case) -> None:
        self.case = case
        try:
            module = build_module(case.module)
        except Exception as e:
            kind = f"class statement raised {kind_of(e)}"
            raise Disagreement(kind, "", case) from e
        self.ns = module.__dict__
        self.classes = {c.name: c for c in case.module.classes}
        self.obj = self.make()
        self.events = list(EVENTS)
        kwargs = {k: ref.value(v, self.ns) for k, v in case.call.kwargs}
        self.ref, self.ref_events = ref.construct(case.module.target, kwargs, self.ns)

    def make(self) -> Any:
        case = self.case
        try:
            kwargs = {k: real_value(v, self.ns) for k, v in case.call.kwargs}
            EVENTS.clear()
            return self.ns[case.module.target.name](**kwargs)
        except Exception as e:
            kind = f"construction raised {kind_of(e)}"
            raise Disagreement(kind, "", case) from e

    def fail(self, kind: str, detail: str = "") -> NoReturn:
        raise Disagreement(kind, detail, self.case)

    def real(self, v: Any) -> Any:
        return real_value(v, self.ns)

    def model(self, v: Any) -> Any:
        return ref.value(v, self.ns)

    # -- comparing ---------------------------------------------------------------------

    def statics_of(self, obj: Any, decl: ClassDecl, prefix: str = "") -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for f in decl.fields:
            v = getattr(obj, f.name)
            if f.static:
                out.append((f"{prefix}.{f.name}", v))
            elif type(v).__name__ in self.classes:
                out += self.statics_of(v, self.classes[type(v).__name__], f"{prefix}.{f.name}")
        return out

    def same(
        self,
        what: str,
        obj: Any,
        model: ref.RefObj,
        leaf: Callable[[Any], Any] = lambda x: x,
        weak: bool = True,
    ) -> None:
        """`obj` has the model's leaves (mapped by `leaf`), key paths and statics."""
        if type(obj) is not self.ns[model.decl.name]:
            self.fail(f"{what}: type", f"{type(obj)} is not {model.decl.name}")
        flat, _ = jax.tree_util.tree_flatten_with_path(obj)
        paths = [jax.tree_util.keystr(p) for p, _ in flat]
        expected = ref.flatten(model)
        if paths != [p for p, _, _ in expected]:
            statics = {p for p, _ in ref.statics(model)}
            extra = {p for p in paths if p.split("[")[0] not in statics} - {
                p for p, _, _ in expected
            }
            where = "a static field flattened as a leaf" if not extra else "key paths"
            self.fail(f"{what}: {where}", f"{paths} != {[p for p, _, _ in expected]}")
        for (path, got), (_, want, _) in zip(flat, expected, strict=True):
            diff = ref.leaf_diff(got, leaf(want), weak)
            if diff:
                self.fail(f"{what}: leaf", f"{jax.tree_util.keystr(path)}: {diff}")
        got_s, want_s = self.statics_of(obj, model.decl), ref.statics(model)
        if [(p, type(v), v) for p, v in got_s] != [(p, type(v), v) for p, v in want_s]:
            self.fail(f"{what}: static values", f"{got_s} != {want_s}")

    def same_events(self, what: str, got: list[str], want: list[str]) -> None:
        if collections.Counter(got) != collections.Counter(want):
            extra = collections.Counter(got) - collections.Counter(want)
            missing = collections.Counter(want) - collections.Counter(got)
            # Group by hook (convert / post_init / check_init / init), not by name.
            hooks = sorted(
                {
                    f"{e.split()[0]} {'extra' if e in extra else 'missing'}"
                    for e in [*extra, *missing]
                }
            )
            self.fail(f"{what}: calls ({', '.join(hooks)})", f"ran {got}, model {want}")
        checks = [e for e in got if e.startswith("check_init")]
        if checks != [e for e in want if e.startswith("check_init")]:
            self.fail(f"{what}: __check_init__ order", f"{checks}")


def traced(x: Any) -> Any:
    """What a leaf becomes through a jit boundary, by JAX's own rule."""
    return jax.jit(lambda y: y)(x)


_identity = jax.jit(lambda m: m)


def _where(path: tuple[str, ...]) -> Callable[[Any], Any]:
    return eval(f"lambda m: m.{'.'.join(path)}")  # a selector, as a user writes one


# -- the checks --------------------------------------------------------------------------


def check_leaves_and_key_paths(case: Case) -> None:
    b = Built(case)
    b.same("leaves", b.obj, b.ref)


def check_treedef_statics(case: Case) -> None:
    b = Built(case)
    leaves, treedef = jax.tree.flatten(b.obj)
    EVENTS.clear()
    rebuilt = jax.tree.unflatten(treedef, leaves)
    if EVENTS:
        b.fail("unflatten ran user code", f"{EVENTS}")
    b.same("unflatten", rebuilt, b.ref)
    for f in case.module.target.fields:
        if f.static and not f.derived:
            convert = (lambda v: v + 1) if f.converter else (lambda v: v)
            other = next(
                v for v in STATIC_VALUES[f.kind] if convert(eval(v)) != b.ref.values[f.name]
            )
            changed = b.obj.replace(**{f.name: eval(other)})
            if jax.tree.structure(changed) == treedef:
                b.fail("treedef: unchanged by a static change", f"{f.name}={other}")
            return


def check_attribute_is_leaf(case: Case) -> None:
    b = Built(case)
    flat = [(jax.tree_util.keystr(p), x) for p, x in jax.tree_util.tree_flatten_with_path(b.obj)[0]]
    for f in case.module.target.fields:
        if f.static:
            continue
        own = jax.tree_util.tree_flatten_with_path(getattr(b.obj, f.name))[0]
        mine = [(f".{f.name}{jax.tree_util.keystr(p)}", x) for p, x in own]
        theirs = [
            (p, x)
            for p, x in flat
            if p == f".{f.name}" or p.startswith((f".{f.name}.", f".{f.name}["))
        ]
        if [p for p, _ in mine] != [p for p, _ in theirs] or any(
            x is not y for (_, x), (_, y) in zip(mine, theirs, strict=True)
        ):
            b.fail("attribute is not the leaf", f"{mine} != {theirs}")
    if case.set_field is None:
        return
    new = b.real(case.set_value)
    try:
        object.__setattr__(b.obj, case.set_field, new)
    except Exception as e:  # noqa: BLE001 (any exception here is a disagreement, reported)
        if case.set_field not in str(e):
            b.fail("object.__setattr__ refused without naming the field", kind_of(e))
        return
    leaves = [
        x
        for p, x in jax.tree_util.tree_flatten_with_path(b.obj)[0]
        if jax.tree_util.keystr(p) == f".{case.set_field}"
    ]
    if len(leaves) != 1 or leaves[0] is not new:
        b.fail(
            "object.__setattr__: the leaf is stale",
            f"{ref.describe(new)} set, flatten gives {leaves}",
        )


def check_construction_calls(case: Case) -> None:
    b = Built(case)
    b.same("construction", b.obj, b.ref)
    b.same_events("construction", b.events, b.ref_events)


def check_replace(case: Case) -> None:
    b = Built(case)
    changes = {k: b.real(v) for k, v in case.changes}
    want, want_events = ref.replace(b.ref, {k: b.model(v) for k, v in case.changes})
    EVENTS.clear()
    try:
        new = b.obj.replace(**changes)
    except Exception as e:  # noqa: BLE001 (any exception here is a disagreement, reported)
        b.fail(f"replace raised {kind_of(e)}")
    got_events = list(EVENTS)
    b.same("replace", new, want)
    b.same_events("replace", got_events, want_events)
    for f in case.module.target.fields:
        if (
            not f.static
            and f.name not in changes
            and getattr(new, f.name) is not getattr(b.obj, f.name)
        ):
            b.fail("replace: an unchanged field was copied", f.name)


def check_jit_round_trip(case: Case) -> None:
    b = Built(case)
    EVENTS.clear()
    out = _identity(b.obj)
    method = b.obj.same()
    if EVENTS:
        b.fail("jit ran user code", f"{EVENTS}")
    b.same("jax.jit(lambda m: m)", out, b.ref, traced)
    b.same("@tc.jit method", method, b.ref, traced)
    if (out == b.obj) is not True:  # a Python bool, for concrete values
        b.fail("jit: == says the round trip differs")


def check_device_put(case: Case) -> None:
    b = Built(case)
    EVENTS.clear()
    out = jax.device_put(b.obj)
    if EVENTS:
        b.fail("device_put ran user code", f"{EVENTS}")
    b.same("device_put", out, b.ref, jax.device_put)


def check_pickle(case: Case) -> None:
    b = Built(case)
    b.same("pickle", pickle.loads(pickle.dumps(b.obj)), b.ref)


def check_deepcopy(case: Case) -> None:
    b = Built(case)
    b.same("deepcopy", copy.deepcopy(b.obj), b.ref)
    b.same("copy", copy.copy(b.obj), b.ref)


def check_cloudpickle(case: Case) -> None:
    b = Built(case)
    b.same("cloudpickle", cloudpickle.loads(cloudpickle.dumps(b.obj)), b.ref)


def check_state_dict(case: Case) -> None:
    b = Built(case)
    state = tc.to_state_dict(b.obj)
    b.same("from_state_dict(obj, to_state_dict(obj))", tc.from_state_dict(b.obj, state), b.ref)
    template = jax.tree.map(jnp.asarray, b.obj)  # Python scalars as 0-d arrays
    b.same(
        "from_state_dict(array template)", tc.from_state_dict(template, state), b.ref, jnp.asarray
    )


def check_save_load(case: Case) -> None:
    b = Built(case)
    template = jax.tree.map(jnp.asarray, b.obj)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.npz"
        tc.save(path, b.obj)
        b.same("load", tc.load(path, b.obj), b.ref)
        b.same("load(array template)", tc.load(path, template), b.ref, jnp.asarray)


def _paths(tree: Any) -> list[str]:
    return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


def check_partition(case: Case) -> None:
    b = Built(case)
    every = [p for p, _, _ in ref.flatten(b.ref)]
    for under in ("", f".{case.where_field}" if case.where_field else None):
        if under is None:
            continue
        where = _where((under[1:],)) if under else None
        want = ref.selected(b.ref, under)
        try:
            with warnings.catch_warnings():
                # A derived array (DERIVED_ARRAY, one module constant) sits at two paths of
                # nested instances: one object, rightly reported; tests/train/test_partition.py pins
                # the warning, and this check compares the selection.
                warnings.simplefilter("ignore", tc.SharedArrayWarning)
                chosen, rest = tc.partition(b.obj, where=where)
        except ValueError as e:  # a `where` that selects nothing trainable is refused
            if want or f"{case.module.target.name}{under}" not in str(e):
                b.fail(f"partition raised {kind_of(e)}")
            continue
        if _paths(chosen) != want:
            b.fail(
                f"partition{'(where=)' if under else ''}: selected leaves",
                f"{_paths(chosen)} != {want}",
            )
        if _paths(rest) != [p for p in every if p not in want]:
            b.fail("partition: the rest", f"{_paths(rest)}")
        b.same("combine(partition)", tc.combine(chosen, rest), b.ref)


def _loss(m: Any) -> jax.Array:
    total = jnp.float32(0)
    for x in jax.tree.leaves(m):
        if ref.is_inexact(x):  # tracers are jax.Arrays
            total = total + jnp.sum(jnp.square(jnp.asarray(x, jnp.float32)))
    return total


def check_grad(case: Case) -> None:
    b = Built(case)
    want_paths = ref.selected(b.ref)
    try:
        grads = tc.grad(_loss)(b.obj)
    except Exception as e:  # noqa: BLE001 (any exception here is a disagreement, reported)
        if want_paths:
            b.fail(f"grad raised {kind_of(e)}")
        if case.module.target.name not in str(e):
            b.fail("grad: nothing to differentiate, message without the class", kind_of(e))
        return
    if not want_paths:
        b.fail("grad: returned with nothing to differentiate")
    flat = {p: x for p, x, _ in ref.flatten(b.ref)}

    def on_selected(chosen: dict[str, Any]) -> jax.Array:
        return _loss([chosen.get(p, x) for p, x in flat.items()])

    want = jax.grad(on_selected)({p: flat[p] for p in want_paths})
    got = {jax.tree_util.keystr(p): g for p, g in jax.tree_util.tree_flatten_with_path(grads)[0]}
    if list(got) != want_paths:
        b.fail("grad: leaves with a gradient", f"{list(got)} != {want_paths}")
    for p in want_paths:
        diff = ref.leaf_diff(got[p], want[p])
        if diff:
            b.fail("grad: value", f"{p}: {diff}")


def check_stack_unstack(case: Case) -> None:
    b = Built(case)
    EVENTS.clear()
    stacked = tc.stack([b.obj, b.obj])
    b.same("stack", stacked, b.ref, lambda x: jnp.stack([jnp.asarray(x)] * 2), weak=False)
    if ref.flatten(b.ref):
        for one in tc.unstack(stacked):
            b.same("unstack", one, b.ref, jnp.asarray, weak=False)
    if EVENTS:
        b.fail("stack/unstack ran user code", f"{EVENTS}")


def check_replace_at(case: Case) -> None:
    if not case.at_path:
        return
    b = Built(case)
    want, want_events = ref.replace_at(b.ref, case.at_path, b.model(case.at_value))
    value = b.real(case.at_value)
    EVENTS.clear()
    try:
        got = tc.replace_at(b.obj, _where(case.at_path), value)
    except Exception as e:  # noqa: BLE001 (any exception here is a disagreement, reported)
        b.fail(f"replace_at raised {kind_of(e)}")
    got_events = list(EVENTS)
    b.same("replace_at", got, want)
    b.same_events("replace_at", got_events, want_events)


CHECKS: dict[str, Callable[[Case], None]] = {
    name.removeprefix("check_"): f for name, f in globals().items() if name.startswith("check_")
}
# object.__setattr__ is tried on every case with a dynamic field: last, so that a case's
# first disagreement names another defect where it has one.
CHECKS["attribute_is_leaf"] = CHECKS.pop("attribute_is_leaf")


# -- the owner rule, against equinox itself ---------------------------------------------
#
# Over `MixedCase`s (tests/class_strategies.py): treeclasses holding equinox layers,
# flax.struct and chex nodes, floats and arrays. Each operation is compared, component
# by component, with what equinox's own filtered transforms make of its Modules
# (`eqx.filter_jit`, `eqx.filter_grad`, `eqx.partition(m, eqx.is_inexact_array)`,
# `eqx.apply_updates`, `eqx.tree_serialise_leaves`) and with plain JAX elsewhere
# (`reference.categories`).

# Float32 through the same operations, eager on both sides or compiled on both: equal but
# for XLA's reassociation of a sum (a few ulps of the largest term, ~1e-6 relative).
_TOL = {"rtol": 1e-5, "atol": 1e-5}


class MixedBuilt:
    """A case's model from seed 0 and from seed 1 (other weights, the same configuration)."""

    def __init__(self, case: Any) -> None:
        import equinox as eqx

        self.case = case
        try:
            module = _mixed_module(case)
            self.obj, self.other = module.build(0), module.build(1)
        except Exception as e:
            kind = f"building the model raised {kind_of(e)}"
            raise Disagreement(kind, "", case) from e
        self.components = case.components()
        self.state = eqx.nn.State(self.obj)
        self.x, self.key = jnp.array([0.5, -1.0]), jax.random.key(7)

    def fail(self, kind: str, detail: str = "") -> NoReturn:
        raise Disagreement(kind, detail, self.case)

    def forward(self, m: Any, state: Any, x: jax.Array, key: jax.Array) -> tuple[jax.Array, Any]:
        total = jnp.zeros(())
        for path, comp in self.components:
            out, state = apply_component(comp.kind, get(m, path), x, state, key)
            total = total + jnp.sum(out)
        return total, state

    def expected(self) -> list[tuple[str, Any, str]]:
        """(key path in the model, leaf, category) of every leaf, by each component's rule."""
        out = []
        for path, comp in self.components:
            prefix = keystr_of(path)
            out += [
                (prefix + p, leaf, c)
                for p, leaf, c in ref.categories(comp.kind, get(self.obj, path))
            ]
        return out


_MIXED_MODULES: dict[int, Any] = {}


def _mixed_module(case: Any) -> Any:
    """The case's source run as a module (kept for the case's few checks)."""
    import types

    if id(case) not in _MIXED_MODULES:
        if len(_MIXED_MODULES) > 8:
            _MIXED_MODULES.clear()
        name = f"mixedgen_{len(sys.modules)}_{id(case)}"
        module = types.ModuleType(name)
        sys.modules[name] = module
        exec(compile(case.source(), f"<{name}>", "exec"), module.__dict__)
        _MIXED_MODULES[id(case)] = (case, module)  # the case kept alive: its id stays its own
    return _MIXED_MODULES[id(case)][1]


def get(tree: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        tree = tree[step] if isinstance(step, int) else getattr(tree, step)
    return tree


def keystr_of(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path)


def apply_component(kind: str, c: Any, x: jax.Array, state: Any, key: jax.Array) -> tuple[Any, Any]:
    """One component's output on `x` (and the equinox State, which BatchNorm updates)."""
    if kind == "batchnorm":
        batch = jnp.stack([x, 2.0 * x, x + 1.0])
        bn = jax.vmap(c, axis_name="batch", in_axes=(0, None), out_axes=(0, None))
        return bn(batch, state)
    calls = {
        "conv": lambda: c(x[None, :]),
        "dropout": lambda: c(x, key=key),
        "embedding": lambda: c(jnp.asarray(1)),
        "gru": lambda: c(x, x),
        "sequential": lambda: c(x, key=key),
        "flax": lambda: c.act(c.w * c.rate * x),
        "chex": lambda: c["w"] * x + c["b"],
        "float": lambda: c * x,
        "array": lambda: c * x,
        "counter": lambda: jnp.asarray(c, x.dtype) * x,
    }
    return calls.get(kind, lambda: c(x))(), state


def _flat(tree: Any) -> dict[str, Any]:
    return {jax.tree_util.keystr(p): x for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _close(a: Any, b: Any) -> bool:
    a, b = jnp.asarray(a), jnp.asarray(b)
    return a.shape == b.shape and bool(jnp.allclose(a, b, **_TOL))


def mixed_check_partition(case: Any) -> None:
    import equinox as eqx

    b = MixedBuilt(case)
    params, rest = tc.partition(b.obj)
    want = [p for p, _, c in b.expected() if c == "param"]
    if list(_flat(params)) != want:
        b.fail("partition: selected leaves", f"{list(_flat(params))} != {want}")
    for path, comp in b.components:
        if comp.kind in ("linear", "mlp", "conv", "gru", "sequential", "embedding", "layernorm"):
            theirs = _flat(eqx.partition(get(b.obj, path), eqx.is_inexact_array)[0])
            ours = _flat(get(params, path))
            if list(theirs) != list(ours) or any(ours[k] is not theirs[k] for k in ours):
                b.fail(
                    "partition: not eqx.partition's",
                    f"{keystr_of(path)}: {list(ours)} != {list(theirs)}",
                )
    both = tc.combine(params, rest)
    if not all(x is y for x, y in zip(jax.tree.leaves(both), jax.tree.leaves(b.obj), strict=True)):
        b.fail("combine(partition): not the leaves")


def mixed_check_grad(case: Any) -> None:
    import equinox as eqx

    b = MixedBuilt(case)
    args = (b.state, b.x, b.key)
    if not any(c == "param" for _, _, c in b.expected()):
        return
    grads, _ = tc.grad(b.forward, has_aux=True)(b.obj, *args)
    ours = _flat(grads)
    want = [p for p, _, c in b.expected() if c == "param"]
    if list(ours) != want:
        b.fail("grad: leaves with a gradient", f"{list(ours)} != {want}")
    for path, comp in b.components:
        c = get(b.obj, path)

        def alone(c: Any, comp: Any = comp) -> jax.Array:
            return jnp.sum(apply_component(comp.kind, c, *args[1:2], b.state, b.key)[0])

        if comp.kind in ref_equinox_kinds():
            theirs = _flat(eqx.filter_grad(alone)(c))
        else:
            leaves, treedef = jax.tree.flatten(c)
            at = [i for i, (_, _, cat) in enumerate(ref.categories(comp.kind, c)) if cat == "param"]

            def on_params(
                ps: list[Any],
                leaves: list[Any] = leaves,
                treedef: Any = treedef,
                at: list[int] = at,
            ) -> jax.Array:
                new = list(leaves)
                for i, p in zip(at, ps, strict=True):
                    new[i] = p
                return alone(jax.tree.unflatten(treedef, new))

            gs = jax.grad(on_params)([leaves[i] for i in at]) if at else []
            paths = [p for p, _, cat in ref.categories(comp.kind, c) if cat == "param"]
            theirs = dict(zip(paths, gs, strict=True))
        prefix = keystr_of(path)
        mine = {
            k[len(prefix) :]: v
            for k, v in ours.items()
            if k.startswith(prefix) and k[len(prefix) : len(prefix) + 1] in ("", ".", "[")
        }
        if list(mine) != list(theirs):
            b.fail(
                "grad: not equinox's / JAX's leaves", f"{prefix}: {list(mine)} != {list(theirs)}"
            )
        for k in mine:
            if not _close(mine[k], theirs[k]):
                b.fail("grad: value", f"{prefix}{k}: {mine[k]} != {theirs[k]}")


def ref_equinox_kinds() -> tuple[str, ...]:
    from class_strategies import EQUINOX_KINDS

    return EQUINOX_KINDS


def mixed_check_jit(case: Any) -> None:
    import equinox as eqx

    b = MixedBuilt(case)
    args = (b.state, b.x, b.key)
    ours = tc.jit(b.forward)
    # New weights, the same configuration (equinox's StateIndex markers included).
    doubled = jax.tree.map(lambda x: x * 2 if eqx.is_inexact_array(x) else x, b.obj)
    try:
        got, _ = ours(b.obj, *args)
        again, _ = ours(doubled, *args)
    except Exception as e:  # noqa: BLE001 (any exception here is a disagreement, reported)
        b.fail(f"tc.jit raised {kind_of(e)}")
    theirs, _ = eqx.filter_jit(b.forward)(b.obj, *args)
    if not _close(got, theirs):
        b.fail("jit: not eqx.filter_jit's value", f"{got} != {theirs}")
    if not _close(again, b.forward(doubled, *args)[0]):
        b.fail("jit: another model's value")
    if ours.trace_log.count != 1:
        b.fail("jit: retraced for new weights", f"{ours.trace_log.count} traces")
    _check_staged(b, ours, args, theirs)
    out = _flat(tc.jit(lambda m: m)(b.obj))
    for path, leaf, category in b.expected():
        if category == "config" and out[path] is not leaf:
            b.fail("jit: configuration not carried", f"{path}: {out[path]!r} for {leaf!r}")
        if category != "config" and not (
            isinstance(out[path], jax.Array) and _close(out[path], leaf)
        ):
            b.fail("jit: a leaf not traced", f"{path}: {out[path]!r} for {leaf!r}")
    for path, comp in b.components:
        if comp.kind in ref_equinox_kinds():
            mine, eqxs = (
                _flat(get(tc.jit(lambda m: m)(b.obj), path)),
                _flat(eqx.filter_jit(lambda m: m)(get(b.obj, path))),
            )
            if {k: type(v) for k, v in mine.items()} != {k: type(v) for k, v in eqxs.items()}:
                b.fail("jit: not eqx.filter_jit's leaves", f"{keystr_of(path)}")


def _check_staged(b: MixedBuilt, ours: Any, args: tuple[Any, ...], theirs: Any) -> None:
    """tc.jit's staged forms take the model as the user holds it: a compiled lowering is
    called with it, `in_avals` has one entry per leaf JAX flattens, jax.export exports it
    (as `eqx.filter_jit(f).lower(...).compile()` is called with the same arguments). On the
    model, and on each equinox layer alone; only where every configuration leaf is a number
    or bool: JAX's own stages flatten the arguments themselves, and a str or function leaf
    is no input they take."""

    def numeric(expected: list[tuple[str, Any, str]]) -> bool:
        return all(c != "config" or isinstance(leaf, int | float) for _, leaf, c in expected)

    if numeric(b.expected()):
        _staged_agree(b, ours, (b.obj, *args), theirs)
    for path, comp in b.components:
        layer = get(b.obj, path)
        if comp.kind in ref_equinox_kinds() and numeric(ref.categories(comp.kind, layer)):

            def alone(c: Any, kind: str = comp.kind) -> jax.Array:
                return jnp.sum(apply_component(kind, c, b.x, b.state, b.key)[0])

            _staged_agree(b, tc.jit(alone), (layer,), alone(layer))


def _staged_agree(b: MixedBuilt, ours: Any, args: tuple[Any, ...], expected: Any) -> None:
    def value(out: Any) -> Any:
        return out[0] if isinstance(out, tuple) else out

    try:
        lowered = ours.lower(*args)
        got = value(lowered.compile()(*args))
        avals = jax.tree.leaves(lowered.in_avals)
        exported = value(jax.export.export(ours)(*args).call(*args))
    except Exception as e:  # noqa: BLE001 (any exception here is a disagreement, reported)
        b.fail(f"tc.jit's staged forms raised {kind_of(e)}", str(e)[:200])
    if len(avals) != len(jax.tree.leaves(args)):
        b.fail("jit: in_avals not one per leaf", f"{len(avals)} avals")
    if not (_close(got, expected) and _close(exported, expected)):
        b.fail("jit: a staged form's value differs", f"{got}, {exported} != {expected}")


def mixed_check_apply_updates(case: Any) -> None:
    import equinox as eqx
    import optax

    b = MixedBuilt(case)
    if not any(c == "param" for _, _, c in b.expected()):
        return
    params = tc.partition(b.obj)[0]
    opt = optax.adamw(0.1)
    grads, _ = tc.grad(b.forward, has_aux=True)(b.obj, b.state, b.x, b.key)
    updates, _ = opt.update(grads, opt.init(params), params)
    new = tc.apply_updates(b.obj, updates)
    got = _flat(new)
    for path, leaf, category in b.expected():
        if category == "config" and got[path] is not leaf:
            b.fail("apply_updates: configuration moved", f"{path}: {got[path]!r} for {leaf!r}")
        if category == "state" and got[path] is not leaf:
            b.fail("apply_updates: state moved", path)
    for path, comp in b.components:
        if comp.kind in ref_equinox_kinds():
            theirs = _flat(eqx.apply_updates(get(b.obj, path), get(updates, path)))
            mine = _flat(get(new, path))
            if list(mine) != list(theirs):
                b.fail("apply_updates: not eqx.apply_updates's leaves", keystr_of(path))
            for k in mine:
                same = mine[k] is theirs[k] or (
                    isinstance(mine[k], jax.Array) and _close(mine[k], theirs[k])
                )
                if not same:
                    b.fail("apply_updates: not eqx.apply_updates's value", f"{keystr_of(path)}{k}")


def mixed_check_summary(case: Any) -> None:
    b = MixedBuilt(case)
    count = sum(int(jnp.size(leaf)) for _, leaf, c in b.expected() if c == "param")
    text = tc.summary(b.obj)
    if f"trainable: {count:,} parameters" not in text.splitlines()[-1]:
        b.fail("summary: parameter count", f"{text.splitlines()[-1]} (expected {count})")


def _same_model(b: MixedBuilt, what: str, got: Any, *, abstract: bool = False) -> None:
    """`got` holds `b.obj`'s leaves: configuration identical, the rest of equal value.
    `abstract`: `got` was restored into an eval_shape template, where a Python number that
    is data (not configuration) was made an array leaf, as `jax.jit` makes it: it comes back
    as a 0-d array of equal value."""
    flat = _flat(got)
    for path, leaf, category in b.expected():
        found = flat.get(path)
        if category == "config":
            if found is not leaf:
                b.fail(f"{what}: configuration", f"{path}: {found!r} for {leaf!r}")
        elif abstract and type(leaf) in (bool, int, float, complex):
            if not isinstance(found, jax.Array) or found.shape != () or not bool(found == leaf):
                b.fail(f"{what}: number leaf", f"{path}: {found!r} for {leaf!r}")
        elif type(found) is not type(leaf) or not _close(found, leaf):
            b.fail(f"{what}: leaf", f"{path}: {flat.get(path)!r} for {leaf!r}")


def mixed_check_state_dict(case: Any) -> None:
    b = MixedBuilt(case)
    try:
        state = tc.to_state_dict(b.obj)
        _same_model(b, "from_state_dict", tc.from_state_dict(b.obj, state))
        _same_model(b, "from_state_dict(other weights)", tc.from_state_dict(b.other, state))
    except Disagreement:
        raise
    except Exception as e:  # noqa: BLE001 (any exception here is a disagreement, reported)
        b.fail(f"state dict raised {kind_of(e)}")


def mixed_check_save_load(case: Any) -> None:
    import equinox as eqx

    b = MixedBuilt(case)
    with tempfile.TemporaryDirectory() as folder:
        path, theirs_path = Path(folder) / "m.npz", Path(folder) / "m.eqx"
        try:
            tc.save(path, b.obj)
            back = tc.load(path, b.other)
        except Exception as e:  # noqa: BLE001 (any exception here is a disagreement, reported)
            b.fail(f"save/load raised {kind_of(e)}")
        _same_model(b, "load", back)
        # The template a model holding layers is built abstractly with: arrays made abstract,
        # the layers' configuration kept as it is (what tc.load's error advises).
        try:
            from_abstract = tc.load(path, tc.jit(lambda: b.other).eval_shape())
        except Exception as e:  # noqa: BLE001 (any exception here is a disagreement, reported)
            b.fail(f"load into tc.jit(make).eval_shape() raised {kind_of(e)}")
        _same_model(b, "load(abstract template)", from_abstract, abstract=True)
        eqx.tree_serialise_leaves(theirs_path, b.obj)
        theirs = _flat(eqx.tree_deserialise_leaves(theirs_path, b.other))
        for p, x in _flat(back).items():
            if isinstance(x, jax.Array) and not bool(jnp.array_equal(x, theirs[p])):
                b.fail("load: not eqx.tree_deserialise_leaves's", p)


def mixed_check_shardings(case: Any) -> None:
    """`tc.shardings` places the arrays only: configuration gets None (no sharding), so the
    arrays `tc.partition` keeps are placed by `jax.device_put` and the configuration is
    combined back untouched (a spec there made `jax.device_put` refuse the arrays' tree)."""
    b = MixedBuilt(case)
    mesh = jax.sharding.Mesh(jax.devices()[:1], ("data",))
    sharded = tc.shardings(b.obj, mesh)
    want = [p for p, _, c in b.expected() if c != "config"]
    if list(_flat(sharded)) != want:
        b.fail("shardings: leaves given a sharding", f"{list(_flat(sharded))} != {want}")
    arrays, rest = tc.partition(b.obj, only_trainable=False)
    try:
        placed = tc.combine(jax.device_put(arrays, sharded), rest)
    except Exception as e:  # noqa: BLE001 (any exception here is a disagreement, reported)
        b.fail(f"shardings: placing raised {kind_of(e)}")
    flat = _flat(placed)
    for path, leaf, category in b.expected():
        if category == "config" and flat.get(path) is not leaf:
            b.fail("shardings: configuration", f"{path}: {flat.get(path)!r} for {leaf!r}")


def mixed_check_stack(case: Any) -> None:
    """`tc.stack` of two copies keeps every configuration leaf once, as it was (a dropout
    rate stacked into an array was a traced float to the layer), stacks the rest, and
    `tc.unstack` gives both copies back."""
    b = MixedBuilt(case)
    try:
        stacked = tc.stack([b.obj, b.obj])
    except Exception as e:  # noqa: BLE001 (any exception here is a disagreement, reported)
        b.fail(f"stack: raised {kind_of(e)}")
    flat = _flat(stacked)
    for path, leaf, category in b.expected():
        if category == "config" and flat.get(path) is not leaf:
            b.fail("stack: configuration", f"{path}: {flat.get(path)!r} for {leaf!r}")
        if category != "config" and jnp.shape(flat.get(path))[:1] != (2,):
            b.fail("stack: leaf not stacked", f"{path}: {flat.get(path)!r}")
    if not all(tc.tree_equal(x, b.obj) for x in tc.unstack(stacked)):
        b.fail("unstack: not the copies stacked")


MIXED_CHECKS: dict[str, Callable[[Any], None]] = {
    name.removeprefix("mixed_check_"): f
    for name, f in globals().items()
    if name.startswith("mixed_check_")
}
