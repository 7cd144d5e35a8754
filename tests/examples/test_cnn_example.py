"""examples/cnn.py: a conv net whose BatchNorm running statistics are model state
(`tc.field(trainable=False)`), trained with optax adamw in one jitted lax.scan,
checkpointed and resumed bit for bit, then fine-tuned with everything but a new head
frozen (`where=lambda m: m.head`). Regression: adamw's weight decay used to shrink the
statistics in silence."""

from __future__ import annotations

import ast
import pathlib
import re
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from example_modules import example_module

import treeclass as tc

optax = pytest.importorskip("optax")  # the [examples] extra, not [test]

pytestmark = [
    pytest.mark.newest_jax,  # not run on the jax floor (.ci/run)
    pytest.mark.usefixtures("jax_defaults"),  # the example runs as users run it (conftest.py)
]

STATS = ("norm1", "norm2")
FROZEN = ("conv1", "norm1", "conv2", "norm2", "key")  # all but the head and the counter


@pytest.fixture(scope="module")
def cnn() -> Iterator[ModuleType]:
    with example_module("cnn", "cnn_example") as module:
        yield module


@pytest.fixture(scope="module")
def quick_run(cnn: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out: dict[str, Any] = cnn.run(cnn.QUICK, tmp_path_factory.mktemp("cnn") / "cnn.npz")
    return out


@pytest.fixture(scope="module")
def batch(cnn: ModuleType) -> tuple[jax.Array, jax.Array]:
    x, y = jax.jit(cnn.make_data, static_argnums=1)(jax.random.key(7), cnn.BATCH)
    return x, y


def _stats(model: Any) -> tuple[Any, ...]:
    return tuple(getattr(model, name).stats for name in STATS)


# --- the statistics: state, never parameters -------------------------------------------


def test_the_optimizer_holds_nothing_for_the_statistics(cnn: ModuleType, quick_run: dict[str, Any]) -> None:
    # adamw's state was built on tc.partition(model)[0]: no moment exists for a
    # statistic, so no update can be computed for one, weight decay included.
    model = quick_run["model"]
    state = cnn.OPTIMIZER.init(tc.partition(model)[0])
    for moment in ("mu", "nu"):
        m = optax.tree_utils.tree_get(state, moment)
        for stats in _stats(m):
            assert stats.mean is None
            assert stats.var is None
        assert m.key is None
        assert m.step is None
        assert m.conv1.w.shape == model.conv1.w.shape
    assert quick_run["moments"] == sum(x.size for x in jax.tree.leaves(tc.partition(model)[0]))


# Two compiled programs compute the same mean and variance over a batch of 64 images
# (16,384 or 4,096 values a channel) and may sum them in another order: float32 rounding,
# a few units in the last place of the statistic (6e-8 measured on the variances, which
# are of order 1), so 1e-6 of its magnitude. Weight decay would move it by 1e-4.
RELATIVE = 1e-6


def test_a_weight_decay_step_leaves_the_statistics_as_the_forward_pass_made_them(
    cnn: ModuleType, quick_run: dict[str, Any], batch: tuple[jax.Array, jax.Array]
) -> None:
    model = quick_run["model"]  # trained: statistics far from their initial 0 and 1
    state = cnn.OPTIMIZER.init(tc.partition(model)[0])
    stepped, _, _ = jax.jit(cnn.train_step)(model, state, *batch)
    _, forward = jax.jit(cnn.loss)(model, *batch)  # the forward pass alone: no optimizer
    # What the rule before state was marked non-trainable did: the statistics were floating-point leaves, so
    # adamw held them as parameters and, with a zero gradient, decayed each by
    # learning_rate * weight_decay = 1e-4 of its value, every step.
    old_rule = tc.partition(model, filter=tc.is_inexact_array, only_trainable=False)[0]
    decay, _ = cnn.OPTIMIZER.update(jax.tree.map(jnp.zeros_like, old_rule), cnn.OPTIMIZER.init(old_rule), old_rule)
    for name in STATS:
        ours, theirs = getattr(stepped, name).stats, getattr(forward, name).stats
        old = getattr(model, name).stats
        for field in ("mean", "var"):
            got, want = getattr(ours, field), getattr(theirs, field)
            scale = jnp.maximum(jnp.abs(want), jnp.abs(getattr(old, field)))
            assert bool(jnp.all(jnp.abs(got - want) <= RELATIVE * scale + 1e-7)), (name, field)
            shrink = getattr(getattr(decay, name).stats, field)
            expected = -cnn.LEARNING_RATE * cnn.WEIGHT_DECAY * getattr(old, field)
            assert jnp.allclose(shrink, expected, rtol=1e-3, atol=0.0), (name, field)
    # The test has teeth: the decay is 100 times what the tolerance lets through.
    assert cnn.LEARNING_RATE * cnn.WEIGHT_DECAY >= 100 * RELATIVE


def test_an_update_at_a_statistic_is_refused(cnn: ModuleType, quick_run: dict[str, Any]) -> None:
    model = quick_run["model"]
    params = tc.partition(model, filter=tc.is_inexact_array, only_trainable=False)[0]  # statistics included
    updates = jax.tree.map(jnp.zeros_like, params)
    with pytest.raises(ValueError, match=r"CNN\.norm1\.stats\.mean: an update for a leaf that is not trainable"):
        tc.apply_updates(model, updates)


def test_the_gradient_is_none_at_the_state(
    cnn: ModuleType, quick_run: dict[str, Any], batch: tuple[jax.Array, jax.Array]
) -> None:
    model = quick_run["model"]
    (_, updated), grads = jax.jit(tc.value_and_grad(cnn.loss, has_aux=True))(model, *batch)
    for stats in _stats(grads):
        assert (stats.mean, stats.var) == (None, None)
    assert (grads.key, grads.step) == (None, None)
    assert grads.norm1.scale.shape == model.norm1.scale.shape
    # The forward pass in training mode moved the statistics: they are its output.
    assert not tc.tree_equal(_stats(updated), _stats(model))


def test_eval_mode_uses_the_running_statistics_and_keeps_them(
    cnn: ModuleType, quick_run: dict[str, Any], batch: tuple[jax.Array, jax.Array]
) -> None:
    model, (x, _) = quick_run["model"], batch
    norm = model.norm1
    h = jax.jit(model.conv1.__call__)(x)
    out, after = jax.jit(lambda n, h: n(h, train=False))(norm, h)
    assert tc.tree_equal(after, norm)  # evaluation returns the layer as it was
    by_hand = (h - norm.stats.mean) / jnp.sqrt(norm.stats.var + norm.eps) * norm.scale + norm.bias
    # rsqrt against sqrt-and-divide: 2 or 3 roundings of float32 apart, on values of
    # order 1 to 10: 1e-5 absolute is 10 units in the last place at 10.
    assert jnp.allclose(out, by_hand, rtol=1e-6, atol=1e-5)
    train_out, trained = jax.jit(lambda n, h: n(h, train=True))(norm, h)
    assert not jnp.allclose(train_out, out, atol=1e-3)  # the batch's own statistics
    assert not tc.tree_equal(trained.stats, norm.stats)

    # A whole model in evaluation mode: a sample's logits do not depend on the batch it
    # is in; in training mode they do (batch statistics).
    forward = jax.jit(lambda m, x: m(x, train=False))
    logits, unchanged = forward(model, x)
    alone, _ = forward(model, x[:1])
    assert tc.tree_equal(_stats(unchanged), _stats(model))
    # The same convolutions on a batch of 1 or of 64: XLA may block the work differently
    # (float32 rounding, 1e-6 relative on logits of order 1 to 10).
    assert jnp.allclose(alone[0], logits[0], rtol=1e-5, atol=1e-5)
    train_logits, _ = jax.jit(lambda m, x: m(x, train=True))(model.replace(dropout=0.0), x)
    train_alone, _ = jax.jit(lambda m, x: m(x, train=True))(model.replace(dropout=0.0), x[:2])
    assert not jnp.allclose(train_alone[0], train_logits[0], atol=1e-3)


# --- training, checkpoint, fine-tuning -------------------------------------------------


def test_resumed_run_ends_on_the_same_model_bit_for_bit(quick_run: dict[str, Any]) -> None:
    assert quick_run["same_bits"]
    assert jnp.array_equal(quick_run["losses"], quick_run["resumed_losses"])
    assert tc.tree_equal(quick_run["model"], quick_run["resumed"])
    # The statistics went through the checkpoint too: they are part of the model.
    assert tc.tree_equal(_stats(quick_run["model"]), _stats(quick_run["resumed"]))
    assert not tc.tree_equal(_stats(quick_run["model"]), _stats(quick_run["initial"]))


def test_it_learns(cnn: ModuleType, quick_run: dict[str, Any]) -> None:
    # Chance is 0.25; the quick run reaches 0.77 on this machine after 60 steps, so 0.6
    # leaves room for another CPU's rounding to change the path, not for a broken model.
    assert quick_run["accuracy"] > 0.6
    losses = quick_run["losses"]
    assert float(jnp.mean(losses[-10:])) < 0.6 * float(jnp.mean(losses[:10]))
    model = quick_run["model"]
    assert int(model.step) == cnn.QUICK.steps  # the counter advanced once per step
    assert model.step.dtype == jnp.int32
    assert tc.tree_equal(model.key, quick_run["initial"].key)  # the key is state


def test_fine_tuning_moves_the_head_only(cnn: ModuleType, quick_run: dict[str, Any]) -> None:
    start, tuned = quick_run["start"], quick_run["tuned"]
    assert quick_run["frozen_unchanged"]
    for name in FROZEN:  # parameters and statistics: bit for bit
        assert tc.tree_equal(getattr(tuned, name), getattr(start, name)), name
    assert tc.tree_equal(tuned.conv1, quick_run["model"].conv1)
    assert tuned.head.w.shape == (cnn.CHANNELS[1], 2)
    assert not jnp.array_equal(tuned.head.w, start.head.w)
    assert not jnp.array_equal(tuned.head.b, start.head.b)
    assert int(tuned.step) == cnn.QUICK.steps + cnn.QUICK.fine_tuning_steps
    # Chance is 0.5; the frozen features separate the classes (0.91 after 30 steps
    # here): 0.75 leaves room for another CPU's rounding, not for a head that learns
    # nothing. (The new head's untrained score is luck: 0.5 to 0.9.)
    assert quick_run["tuned_accuracy"] > 0.75
    losses = quick_run["tuning_losses"]
    assert float(jnp.mean(losses[-5:])) < 0.8 * float(jnp.mean(losses[:5]))


def test_the_head_gradient_is_none_elsewhere(
    cnn: ModuleType, quick_run: dict[str, Any], batch: tuple[jax.Array, jax.Array]
) -> None:
    grads = jax.jit(tc.grad(cnn.eval_loss, where=lambda m: m.head))(quick_run["model"], *batch)
    assert grads.head.w.shape == quick_run["model"].head.w.shape
    for name in FROZEN:
        assert jax.tree.leaves(getattr(grads, name)) == [], name  # None flattens to nothing
    opt_state = cnn.FINE_TUNING.init(tc.partition(quick_run["model"], lambda m: m.head)[0])
    mu = optax.tree_utils.tree_get(opt_state, "mu")
    assert mu.conv1.w is None
    assert mu.head.w.shape == quick_run["model"].head.w.shape


def test_summary_lists_the_statistics_as_non_trainable(quick_run: dict[str, Any]) -> None:
    lines = tc.summary(quick_run["model"]).splitlines()
    kinds = {line.split()[0]: line.split()[1] for line in lines[1:-1]}
    for name in STATS:
        assert kinds[f"CNN.{name}.stats.mean"] == "non-trainable"
        assert kinds[f"CNN.{name}.stats.var"] == "non-trainable"
        assert kinds[f"CNN.{name}.scale"] == "trainable"
        assert kinds[f"CNN.{name}.momentum"] == "static"
    assert kinds["CNN.key"] == kinds["CNN.step"] == "non-trainable"
    assert kinds["CNN.conv2.w"] == kinds["CNN.head.b"] == "trainable"
    assert lines[-1] == "trainable: 1,364 parameters, 5.5 kB; non-trainable: 50 elements, 204 B"


def test_plot_writes_a_png(cnn: ModuleType, quick_run: dict[str, Any], tmp_path: pathlib.Path) -> None:
    # The script itself runs with --quick and --help in tests/examples/test_examples.py.
    path = tmp_path / "cnn.png"
    cnn.plot(quick_run, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- docs/training.md compares the CNN in equinox and flax nnx, counting lines ---------

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "training.md"
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
PARTS = {  # the `count=` word of a block's info string -> the table's row
    "layers": "layers written by hand",
    "model": "the model",
    "step": "the training step",
    "fine-tune": "fine-tuning a new head, the rest frozen",
}


def _library(words: list[str]) -> str:
    if "requires=equinox" in words:
        return "equinox"
    return "flax nnx" if "requires=flax" in words else "treeclass"


def counted_lines() -> dict[tuple[str, str], int]:
    """(part, library) -> lines of user code in the page's blocks marked `count=part`:
    the doctest source, blank lines, comments and imports left out."""
    counts: dict[tuple[str, str], int] = {}
    for m in FENCE.finditer(DOC.read_text(encoding="utf-8")):
        words = m["info"].split()
        part = next((w.removeprefix("count=") for w in words if w.startswith("count=")), None)
        if part is None:
            continue
        source = "\n".join(line[4:] for line in m["body"].splitlines() if line.startswith((">>> ", "... ")))
        lines = source.splitlines()
        imports = {
            row
            for node in ast.parse(source).body
            if isinstance(node, ast.Import | ast.ImportFrom)
            for row in range(node.lineno, (node.end_lineno or node.lineno) + 1)
        }
        n = sum(
            1
            for row, line in enumerate(lines, start=1)
            if line.strip() and not line.strip().startswith("#") and row not in imports
        )
        key = (part, _library(words))
        counts[key] = counts.get(key, 0) + n
    return counts


def test_training_page_counts_the_cnn_lines() -> None:
    counts = counted_lines()
    table = DOC.read_text(encoding="utf-8")
    for part, row in PARTS.items():
        cells = [counts.get((part, library), 0) for library in ("treeclass", "equinox", "flax nnx")]
        assert f"| {row} | {cells[0]} | {cells[1]} | {cells[2]} |" in table, (row, cells)
    # Every library has each part but the layers, which equinox and flax ship.
    assert all(counts.get((part, library), 0) > 0 for part in ("model", "step", "fine-tune") for library in ("treeclass", "equinox", "flax nnx"))
