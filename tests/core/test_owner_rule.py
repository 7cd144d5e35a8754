"""The owner rule: a leaf keeps the rules of its owner, the nearest node above it that is a
treeclass, an equinox Module or another library's node (docs/with-other-libraries.md).

Inside an equinox Module every leaf that is not an array is configuration, as equinox's
filtered transforms have it: carried static by `tc.jit`, given no gradient by `tc.grad`,
never selected by `tc.partition` nor moved by `tc.apply_updates`, not counted by
`tc.summary`, left out of state dicts and compared by `tc.load`. One regression test per
defect an adversarial probe found, then the decision itself (`walk.rule_of`).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pytest

import treeclass as tc
from treeclass._core.walk import Visit, rule_of, walk

eqx = pytest.importorskip("equinox")
optax = pytest.importorskip("optax")
flax_struct = pytest.importorskip("flax.struct")

# equinox's layers and optax are written for JAX's default promotion rules.
pytestmark = pytest.mark.usefixtures("jax_defaults")


class Regularised(tc.TreeClass):
    lin: Any
    drop: Any

    def __call__(self, x: jax.Array, key: jax.Array) -> jax.Array:
        return self.drop(self.lin(x), key=key)


def regularised() -> Regularised:
    return Regularised(eqx.nn.Linear(3, 3, key=jax.random.key(0)), eqx.nn.Dropout(0.1))


def loss(m: Regularised) -> jax.Array:
    return jnp.sum(m(jnp.ones(3), jax.random.key(1)) ** 2)


def test_a_dropout_rate_is_configuration_never_trained() -> None:
    # Defect 1: `p` was a parameter: a gradient of 0.0, and AdamW moved it to 0.0905.
    m = regularised()
    params, rest = tc.partition(m)
    assert params.drop.p is None
    assert rest.drop.p == 0.1
    grads = tc.grad(loss)(m)
    assert grads.drop.p is None
    assert grads.drop.inference is None
    theirs = eqx.filter_grad(loss)(m)
    assert theirs.drop.p is None  # equinox's own answer
    opt = optax.adamw(1e-2)
    state = opt.init(tc.partition(m)[0])

    @tc.jit
    def step(m: Regularised, state: Any) -> tuple[Regularised, Any]:
        grads = tc.grad(loss)(m)
        updates, state = opt.update(grads, state, tc.partition(m)[0])
        return tc.apply_updates(m, updates), state

    for _ in range(20):
        m, state = step(m, state)
    assert m.drop.p == 0.1
    assert type(m.drop.p) is float  # not traced into an array either
    assert m.drop.inference is False
    assert step.trace_log.count == 1
    assert "trainable: 12 parameters" in tc.summary(m)


def test_an_update_at_configuration_is_refused_naming_the_path() -> None:
    m = regularised()
    updates = jax.tree.map(lambda _: None, m)
    updates = dataclasses.replace(updates, drop=eqx.nn.Dropout(0.5))
    with pytest.raises(
        ValueError,
        match=r"^Regularised\.drop\.p: an update for a leaf that is not trainable "
        r"\(float, configuration of another library's node\)",
    ):
        tc.apply_updates(m, updates)


def test_summary_shows_configuration_as_static_and_counts_no_parameter() -> None:
    text = tc.summary(regularised())
    assert "Regularised.drop.p          static     0.1" in text
    assert "Regularised.drop.inference  static     False" in text
    assert text.endswith("trainable: 12 parameters, 48 B; non-trainable: 0 elements, 0 B")
    folded = tc.summary(regularised(), depth=1)
    assert "Regularised.drop  static     Dropout             0    0 B" in folded


def test_the_body_runs_once_when_the_first_trace_meets_an_equinox_module() -> None:
    runs: list[int] = []

    @tc.jit
    def forward(m: Regularised, x: jax.Array) -> jax.Array:
        runs.append(1)
        return m(x, jax.random.key(0))

    for _ in range(3):
        forward(regularised(), jnp.ones(3))
    assert len(runs) == forward.trace_log.count == 1


def test_lower_trace_and_eval_shape_hold_the_configuration_as_a_call_does() -> None:
    # First use through each (the trace that meets the equinox Module starts again).
    for staged in ("eval_shape", "lower", "trace"):
        runs: list[int] = []

        def forward(m: Regularised, x: jax.Array, runs: list[int] = runs) -> jax.Array:
            runs.append(1)
            return m(x, jax.random.key(0))

        jitted = tc.jit(forward)
        got = getattr(jitted, staged)(regularised(), jnp.ones(3))
        assert len(runs) == 1  # the body ran once: the restart came before it
        if staged == "eval_shape":
            assert got.shape == (3,)
        if staged == "lower":
            assert got.compile() is not None
        assert jitted(regularised(), jnp.ones(3)).shape == (3,)


class Normed(tc.TreeClass):
    bn: Any
    drop: Any

    @tc.jit
    def __call__(self, x: jax.Array, state: Any, key: jax.Array) -> tuple[jax.Array, Any]:
        batched = jax.vmap(self.bn, axis_name="batch", in_axes=(0, None), out_axes=(0, None))
        y, state = batched(x, state)
        return self.drop(y, key=key), state


def normed() -> tuple[Normed, Any]:
    bn, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")
    return Normed(bn, eqx.nn.Dropout(0.5)), state


def test_batchnorm_and_dropout_run_under_jit_and_grad() -> None:
    # Defect 2: "BatchNorm.axis_name ... cannot trace" from tc.jit and tc.grad, advising
    # `bn: tc.Static[BatchNorm]`, itself refused; `inference` traced into a bool array.
    m, state = normed()
    x, key = jnp.arange(12.0).reshape(4, 3), jax.random.key(0)
    y, state = m(x, state, key)
    assert y.shape == (4, 3)
    y, state = m(x, state, key)
    assert type(m).__call__.trace_log.count == 1
    theirs = eqx.filter_jit(lambda m, x, s, k: m.__call__.__wrapped__(m, x, s, k))
    y_eqx, _ = theirs(m, x, normed()[1], key)
    y_ours, _ = m(x, normed()[1], key)
    assert bool(jnp.allclose(y_ours, y_eqx))
    grads = tc.grad(lambda m: jnp.sum(m(x, state, key)[0]))(m)
    assert grads.bn.axis_name is None
    assert grads.bn.weight.shape == (3,)
    # The switch equinox users flip: a new compile, with the bool as a Python bool.
    evaluating = eqx.nn.inference_mode(m)
    assert bool(jnp.all(evaluating(x, state, key)[0] != 0.0))  # no dropout in inference
    assert type(m).__call__.trace_log.count == 2


class Policy(tc.TreeClass):
    policy: Any
    scale: jax.Array


def policy() -> Policy:
    return Policy(eqx.nn.MLP(2, 1, 8, 1, key=jax.random.key(0)), jnp.ones(1))


def test_an_equinox_mlp_saves_loads_and_summarises(tmp_path: Path) -> None:
    # Defect 3: tc.save advised `activation: tc.Static[custom_jvp]`, an edit to equinox.
    m = policy()
    tc.save(tmp_path / "m.npz", m)
    back = tc.load(tmp_path / "m.npz", m)
    assert back.policy.activation is jax.nn.relu
    assert back == m
    eqx.tree_serialise_leaves(tmp_path / "eqx.eqx", m)  # equinox saves it too
    theirs = eqx.tree_deserialise_leaves(tmp_path / "eqx.eqx", m)
    assert bool(jnp.all(theirs.policy.layers[0].weight == back.policy.layers[0].weight))
    assert "Policy.policy.activation" in tc.summary(m)
    assert "trainable: 34 parameters" in tc.summary(m)


class Named(tc.TreeClass):
    w: jax.Array
    name: str  # a str in a dynamic field: no JAX transform takes it, a state dict does


def test_state_dicts_round_trip_an_equinox_mlp_and_a_str() -> None:
    # Defect 4: a bare AttributeError ("'str' object has no attribute 'dtype'").
    m = policy()
    state = tc.to_state_dict(m)
    assert list(state["policy"]) == ["layers"]  # configuration is left out, as statics are
    back = tc.from_state_dict(m, state)
    assert back.policy.activation is jax.nn.relu
    assert back == m
    named = Named(jnp.ones(2), "encoder")
    assert tc.from_state_dict(named, tc.to_state_dict(named)).name == "encoder"
    with pytest.raises(tc.CheckpointError, match=r"^Named\.name: a str in the template, an int"):
        tc.from_state_dict(named, {"w": jnp.ones(2), "name": 3})


class Imaging(tc.TreeClass):
    conv: Any
    drop: Any


def imaging(mode: str = "ZEROS", p: float = 0.1) -> Imaging:
    conv = eqx.nn.Conv2d(1, 1, 3, padding=1, padding_mode=mode, key=jax.random.key(0))
    return Imaging(conv, eqx.nn.Dropout(p))


def test_load_compares_an_equinox_layers_configuration(tmp_path: Path) -> None:
    # Defect 5: "ZEROS" saved, loaded into a "CIRCULAR" template in silence.
    path = tmp_path / "m.npz"
    tc.save(path, imaging("ZEROS"))
    with pytest.raises(
        tc.CheckpointError,
        match=r"^Imaging\.conv\.padding_mode: static value 'ZEROS' in the file, "
        r"'CIRCULAR' in the template",
    ):
        tc.load(path, imaging("CIRCULAR"))
    with pytest.raises(
        tc.CheckpointError,
        match=r"^Imaging\.drop\.p: configuration 0\.1 in the file, 0\.2 in the template",
    ):
        tc.load(path, imaging(p=0.2))
    back = tc.load(path, imaging())
    assert back.conv.padding_mode == "ZEROS"
    assert bool(jnp.all(back.conv.weight == imaging().conv.weight))


def test_configuration_saved_where_the_template_holds_an_array_names_the_path(
    tmp_path: Path,
) -> None:
    tc.save(tmp_path / "m.npz", imaging())
    # An array `p` is data to equinox too (eqx.is_array): the file holds configuration.
    template = Imaging(imaging().conv, eqx.nn.Dropout(jnp.asarray(0.1)))
    with pytest.raises(
        tc.CheckpointError,
        match=r"^Imaging\.drop\.p: a jax\.Array .*in the template, the configuration 0\.1 in the file",
    ):
        tc.load(tmp_path / "m.npz", template)


def test_configuration_made_abstract_by_eval_shape_advises_the_template_that_keeps_it(
    tmp_path: Path,
) -> None:
    # jax.eval_shape turns Dropout's p into a ShapeDtypeStruct; tc.jit(...).eval_shape keeps it.
    tc.save(tmp_path / "m.npz", imaging())
    with pytest.raises(
        tc.CheckpointError,
        match=r"(?s)^Imaging\.drop\.p: a jax\.ShapeDtypeStruct in the template, the configuration "
        r"0\.1 in the file.*jax\.eval_shape made the template's configuration .* abstract\. "
        r"Build the template with tc\.jit\(lambda: Model\(\.\.\.\)\)\.eval_shape\(\)",
    ):
        tc.load(tmp_path / "m.npz", jax.eval_shape(imaging))
    back = tc.load(tmp_path / "m.npz", tc.jit(imaging).eval_shape())
    assert back.drop.p == 0.1
    assert bool(jnp.all(back.conv.weight == imaging().conv.weight))


class Switch(tc.TreeClass):
    inference: tc.Static[bool] = False


class Holder(eqx.Module):
    w: jax.Array
    switch: Switch = eqx.field(static=True)


class Outer(tc.TreeClass):
    holder: Holder


def test_replace_all_reaches_a_treeclass_in_an_equinox_static_field() -> None:
    # Defect 6: the treeclass in `eqx.field(static=True)` kept inference=False.
    m = Outer(Holder(jnp.ones(2), Switch()))
    evaluating = tc.replace_all(m, inference=True)
    assert evaluating.holder.switch.inference is True
    assert m.holder.switch.inference is False  # the input unchanged
    assert evaluating.holder.w is m.holder.w
    assert type(evaluating.holder) is Holder


# ---------------------------------------------------------------------------------------
# The one decision, and where it does not apply.


@flax_struct.dataclass
class FlaxNode:
    w: jax.Array
    rate: float
    act: Any


class Mixed(tc.TreeClass):
    rate: float  # a treeclass's own float: trainable
    drop: Any  # an equinox Module: its float is configuration
    node: Any  # a flax.struct node: its float is what plain JAX makes of it; a function static


def mixed() -> Mixed:
    return Mixed(0.5, eqx.nn.Dropout(0.1), FlaxNode(jnp.ones(2), 0.25, jax.nn.relu))


def _rules(tree: Any) -> dict[str, tuple[str, bool]]:
    leaves: list[Visit] = [v for v in walk(tree) if v.kind == "leaf"]
    return {jax.tree_util.keystr(v.path): (v.rule, v.config) for v in leaves}


def test_each_leaf_falls_under_its_nearest_owner() -> None:
    assert _rules(mixed()) == {
        ".rate": ("treeclass", False),
        ".drop.p": ("equinox", True),
        ".drop.inference": ("equinox", True),
        ".node.w": ("other", False),
        ".node.rate": ("other", False),
        ".node.act": ("other", True),
    }
    # Tuples, lists and dicts are no owners; a treeclass inside an equinox Module owns its own.
    inner = eqx.nn.Sequential([eqx.nn.Lambda(jnp.tanh), eqx.nn.Dropout(0.2)])
    assert _rules({"seq": inner, "top": (1.5,)}) == {
        "['seq'].layers[0].fn": ("equinox", True),
        "['seq'].layers[1].p": ("equinox", True),
        "['seq'].layers[1].inference": ("equinox", True),
        "['top'][0]": ("plain", False),
    }
    assert rule_of(Holder(jnp.ones(1), Switch()), "plain") == "equinox"
    assert rule_of([1], "equinox") == "equinox"


def test_a_treeclass_float_trains_beside_an_equinox_one() -> None:
    m = mixed()
    grads = tc.grad(lambda m: m.rate * m.drop.p * m.node.rate * jnp.sum(m.node.w))(m)
    assert float(grads.rate) == pytest.approx(0.1 * 0.25 * 2.0)
    assert grads.drop.p is None
    assert float(grads.node.rate) == pytest.approx(0.5 * 0.1 * 2.0)
    assert grads.node.act is None
    out = tc.jit(lambda m: m)(m)
    assert type(out.drop.p) is float  # configuration: carried
    assert isinstance(out.rate, jax.Array)  # data: traced, as jax.jit does
    assert isinstance(out.node.rate, jax.Array)
    assert out.node.act is jax.nn.relu


def test_a_str_inside_another_librarys_node_is_refused_without_advising_its_class() -> None:
    @flax_struct.dataclass
    class Tagged:
        w: jax.Array
        tag: str

    class Model(tc.TreeClass):
        enc: Any

    m = Model(Tagged(jnp.ones(2), "a"))
    match = (
        r"(?s)^Model\.enc\.tag holds a str \('a'\), which JAX cannot trace \(argument 'm'\)\."
        r".*inside Tagged, a node another library registered.*keep it out of Tagged"
    )
    for call in (lambda: tc.jit(lambda m: m.enc.w)(m), lambda: tc.grad(lambda m: m.enc.w.sum())(m)):
        with pytest.raises(TypeError, match=match) as info:
            call()
        assert "enc: tc.Static" not in str(info.value)


def test_equinox_is_never_imported_by_treeclass() -> None:
    code = "import sys, treeclass as tc, jax.numpy as jnp\n"
    code += "tc.summary((1.0,)); tc.jit(lambda x: x)(jnp.ones(1))\n"
    code += "assert 'equinox' not in sys.modules"
    import subprocess

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()


class OldDropout(tc.TreeClass):
    """What a file written before the owner rule held for `eqx.nn.Dropout`: two leaves."""

    p: float
    inference: bool


class OldImaging(tc.TreeClass):
    conv: Any
    drop: Any


def test_a_file_written_before_the_owner_rule_loads_and_is_compared(tmp_path: Path) -> None:
    path = tmp_path / "old.npz"
    tc.save(path, OldImaging(imaging().conv, OldDropout(0.1, False)))
    assert tc.load(path, imaging()).drop.p == 0.1
    with pytest.raises(
        tc.CheckpointError,
        match=r"^Imaging\.drop\.p: configuration 0\.1 in the file, 0\.2 in the template",
    ):
        tc.load(path, imaging(p=0.2))
