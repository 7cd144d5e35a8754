"""Retraces are visible: what changed (old -> new), a guard and a warning."""

import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
import pytest

import treeclass as tc


@tc.treeclass
class Neuron:
    v: jax.Array
    tau: float = tc.static(20.0)


def test_max_traces_guard_names_the_changed_static():
    @tc.jit(max_traces=1)
    def step(n):
        return n.v / n.tau

    step(Neuron(jnp.zeros(3)))
    step(Neuron(jnp.ones(3)))  # same structure: no retrace
    with pytest.raises(tc.RetraceError, match=r"step traced 2 times") as info:
        step(Neuron(jnp.zeros(3), tau=10.0))
    assert "Neuron.tau (static): 20.0 -> 10.0" in str(info.value)
    assert "(max_traces=1)" in str(info.value)


def test_explain_warns_with_shape_change():
    @tc.jit(explain=True)
    def total(n):
        return n.v.sum()

    total(Neuron(jnp.zeros(3)))
    with pytest.warns(tc.RetraceWarning, match=r"\n  Neuron\.v: f32\[3\] -> f32\[4\]$"):
        total(Neuron(jnp.zeros(4)))


def test_dtype_change_is_named():
    @tc.jit(explain=True)
    def f(x):
        return x

    f(jnp.zeros(2, jnp.float32))
    with pytest.warns(tc.RetraceWarning, match=r"x: f32\[2\] -> i32\[2\]"):
        f(jnp.zeros(2, jnp.int32))


def test_weak_type_change_is_named_exactly():
    # A Python float traces as a weakly typed f32[]; a float32 array of shape () does
    # not. Only the weak type differs, and the reason says exactly that.
    @tc.jit
    def f(x):
        return x

    f(jnp.zeros((), jnp.float32))
    f(1.0)
    assert f.trace_log.reasons == [
        "test_weak_type_change_is_named_exactly.<locals>.f traced 2 times; what changed "
        "since the closest earlier trace:\n  x: f32[] -> f32[]{weak}"
    ]


def test_switch_from_positional_to_keyword_is_named():
    # Regression: JAX keys positional and keyword arguments apart, and the reason
    # said "nothing in the arguments ...; a jax config option, a global, ...".
    @tc.jit(explain=True)
    def f(x):
        return x

    f(jnp.ones(2))
    with pytest.warns(tc.RetraceWarning, match=r"\n  argument 'x' passed by keyword now, positionally before$"):
        f(x=jnp.ones(2))


def test_argument_left_to_its_default_is_named():
    @tc.jit(explain=True)
    def f(x, scale=2.0):
        return x * scale

    f(jnp.ones(2), 2.0)
    with pytest.warns(tc.RetraceWarning, match=r"argument 'scale' passed not at all now, positionally before"):
        f(jnp.ones(2))


def test_container_type_change_is_named():
    @tc.jit(explain=True)
    def f(xs):
        return xs

    f([jnp.zeros(1)])
    with pytest.warns(tc.RetraceWarning, match=r"\n  xs: list -> tuple$"):
        f((jnp.zeros(1),))


def test_leaf_in_a_namedtuple_is_named_by_field():
    class Pair(NamedTuple):
        a: jax.Array
        b: jax.Array

    @tc.jit(explain=True)
    def f(p):
        return p

    f(Pair(jnp.zeros(1), jnp.zeros(1)))
    with pytest.warns(tc.RetraceWarning, match=r"\n  p\.b: f32\[1\] -> f32\[2\]$"):
        f(Pair(jnp.zeros(1), jnp.zeros(2)))


def test_trace_log_repr_is_a_summary():
    # Regression: repr was <treeclass._jit.retrace.TraceLog object at 0x...>.
    @tc.jit
    def f(x):
        return x

    assert repr(f.trace_log) == "TraceLog(test_trace_log_repr_is_a_summary.<locals>.f: not traced yet)"
    f(jnp.ones(1))
    f(jnp.ones(2))
    assert repr(f.trace_log) == (
        "TraceLog(test_trace_log_repr_is_a_summary.<locals>.f: traced 2 times; last retrace:\n"
        "  x: f32[1] -> f32[2])"
    )


def test_structure_change_is_named():
    @tc.jit(explain=True)
    def f(xs):
        return xs

    f([jnp.zeros(1)])
    with pytest.warns(tc.RetraceWarning, match=r"xs\[1\]: <absent> -> f32\[1\]"):
        f([jnp.zeros(1), jnp.zeros(1)])


def test_reasons_are_kept():
    @tc.jit
    def f(n):
        return n.v

    f(Neuron(jnp.zeros(1)))
    f(Neuron(jnp.zeros(1), tau=1.0))
    assert f.trace_log.count == 2
    assert f.trace_log.reasons == [
        "test_reasons_are_kept.<locals>.f traced 2 times; what changed since the closest earlier trace:\n"
        "  Neuron.tau (static): 20.0 -> 1.0"
    ]


def test_two_arguments_of_one_class_are_named_by_parameter():
    @tc.jit(explain=True)
    def f(a, b):
        return a.v + b.v

    f(Neuron(jnp.zeros(1)), Neuron(jnp.zeros(1)))
    with pytest.warns(tc.RetraceWarning, match=r"\n  b\.tau \(static\): 20\.0 -> 1\.0$"):
        f(Neuron(jnp.zeros(1)), Neuron(jnp.zeros(1), tau=1.0))


# ---------------------------------------------------------------------------------------
# Static values that print alike but compare unequal.


class Trainer(tc.TreeClass):
    w: jax.Array
    opt: tc.Static[optax.GradientTransformation]

    @tc.jit
    def step(self) -> jax.Array:
        return self.w * 2


def _built(**fields: Any) -> tuple[Trainer, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = Trainer(jnp.ones(2), **fields)
    return made, caught


def test_an_optax_optimizer_in_a_static_field_is_named_as_what_changed() -> None:
    # Regression: a new optax.adam per instance (a NamedTuple of closures, compared by
    # identity) recompiled each time while the reasons said "nothing ... changed".
    for _ in range(3):
        _built(opt=optax.adam(1e-3))[0].step()
    assert Trainer.step.trace_log.count == 3
    for reason in Trainer.step.trace_log.reasons:
        assert "nothing" not in reason
        assert "\n  Trainer.opt (static): GradientTransformationExtraArgs(" in reason
        assert reason.endswith(
            " (Trainer.opt.init is another function chain.<locals>.init_fn, compared by identity: create it once and reuse it)"
        )


def test_the_latest_of_equally_close_traces_explains_a_retrace() -> None:
    # Regression: the earliest of the traces that differ in as many lines was taken, so
    # after a run without an optimizer, a second adam "changed from None" and the
    # identity note (the reason it recompiled) was lost.
    class Run(tc.TreeClass):
        w: jax.Array
        opt: tc.Static[optax.GradientTransformation]

        @tc.jit
        def step(self) -> jax.Array:
            return self.w * 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tc.RecompileWarning)
        for opt in (None, optax.adam(1e-3), optax.adam(1e-3)):  # None: no optimizer yet
            Run(jnp.ones(2), opt).step()  # pyright: ignore[reportArgumentType]
    assert Run.step.trace_log.count == 3
    last = Run.step.trace_log.reasons[-1]
    assert "\n  Run.opt (static): GradientTransformationExtraArgs(" in last
    assert last.endswith(", compared by identity: create it once and reuse it)")


def test_an_optax_optimizer_in_a_static_field_warns_once_naming_the_field_and_the_fix() -> None:
    _, caught = _built(opt=optax.adam(1e-3))
    assert [w.category for w in caught] == [tc.RecompileWarning]  # one warning, not one per closure
    first, *rest = str(caught[0].message).splitlines()
    assert first.startswith("Trainer.opt is a static field holding the function chain.<locals>.init_fn (Trainer.opt.init)")
    assert "    Trainer(..., opt=OPT)" in rest
    shared = optax.adam(1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models = [Trainer(jnp.ones(2), shared) for _ in range(3)]
    assert len({jax.tree.structure(m) for m in models}) == 1  # the fix: one treedef


def test_a_nested_identity_value_in_a_static_argument_is_named_by_its_place() -> None:
    @tc.jit(static_argnames="acts")
    def apply(x: jax.Array, acts: tuple[Any, ...]) -> jax.Array:
        return acts[1](x)

    for _ in range(2):
        apply(jnp.ones(2), acts=(jnp.tanh, lambda v: v))
    (reason,) = apply.trace_log.reasons
    assert "\n  acts[1]: <function " in reason  # the tuple's item that differs, by its place
    lam = apply.__qualname__.replace("apply", "<lambda>")
    assert f"acts[1] is another function {lam}, compared by identity: create it once and reuse it" in reason


def test_static_values_that_compare_equal_do_not_retrace_or_explain() -> None:
    @tc.jit(static_argnames="cfg", max_traces=1)
    def f(x: jax.Array, cfg: tuple[Any, ...]) -> jax.Array:
        return x

    for _ in range(3):
        f(jnp.ones(2), cfg=(1, "a", jnp.tanh))
    assert f.trace_log.reasons == []


# ---------------------------------------------------------------------------------------
# A pickled class carries no trace history.

_DUMP = """\
import sys
import cloudpickle
import jax, jax.numpy as jnp
import treeclass as tc

class Model(tc.TreeClass):
    w: jax.Array

    @tc.jit(max_traces=1)
    def scaled(self, x):
        return self.w * x

m = Model(jnp.arange(3.0))
m.scaled(1.0)  # traced here, in this process
assert Model.scaled.trace_log.count == 1
with open(sys.argv[1], "wb") as f:
    cloudpickle.dump(m, f)
"""

_LOAD = """\
import pickle, sys
with open(sys.argv[1], "rb") as f:
    m = pickle.load(f)
log = type(m).scaled.trace_log
assert (log.count, log.reasons) == (0, []), (log.count, log.reasons)
print(m.scaled(2.0).tolist(), log.count)  # its first trace in this process
"""


def test_a_cloudpickled_class_starts_with_no_trace_history(tmp_path: Any) -> None:
    # Regression: the trace log travelled with the class, so in a
    # fresh worker the first call of a max_traces=1 method raised RetraceError ("nothing
    # in the arguments changed"). Each side runs in a process of its own, the class in
    # its __main__: in one process cloudpickle hands back the class it already has.
    pytest.importorskip("cloudpickle")
    package = str(Path(tc.__file__).parent.parent)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": package}
    pickled = tmp_path / "model.pkl"
    for source in (_DUMP, _LOAD):
        (tmp_path / "script.py").write_text(source)
        run = subprocess.run(
            [sys.executable, "script.py", str(pickled)],
            capture_output=True, text=True, check=False, env=env, cwd=tmp_path,
        )
        assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[0.0, 2.0, 4.0] 1"
