"""examples/mlp.py: an MLP holding a dropout key, a step counter and a mask, trained
with tc.value_and_grad and optax adamw in one jitted lax.scan, checkpointed mid-way and
resumed to the same final loss bit for bit."""

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

pytestmark = [
    pytest.mark.newest_jax,  # not run on the jax floor (.ci/run)
    pytest.mark.usefixtures("jax_defaults"),  # the example runs as users run it (conftest.py)
]


@pytest.fixture(scope="module")
def mlp() -> Iterator[ModuleType]:
    with example_module("mlp", "mlp_example") as module:
        yield module


@pytest.fixture(scope="module")
def quick_run(mlp: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out: dict[str, Any] = mlp.run(mlp.QUICK, tmp_path_factory.mktemp("mlp") / "mlp.npz")
    return out


def test_resumed_run_ends_on_the_same_loss_bit_for_bit(quick_run: dict[str, Any]) -> None:
    assert quick_run["same_bits"]
    assert quick_run["final_loss"] == quick_run["resumed_final_loss"]
    assert jnp.array_equal(quick_run["losses"], quick_run["resumed_losses"])
    assert tc.tree_equal(quick_run["model"], quick_run["resumed"])


def test_the_model_keeps_its_key_step_and_mask(mlp: ModuleType, quick_run: dict[str, Any]) -> None:
    model = quick_run["model"]
    assert int(model.step) == mlp.QUICK.steps  # the counter advanced once per step
    assert model.step.dtype == jnp.int32
    assert model.mask.dtype == jnp.bool_
    assert model.mask.tolist() == [True] * mlp.USED + [False] * (mlp.FEATURES - mlp.USED)
    initial = mlp.init_model(jax.random.key(0))
    assert tc.tree_equal(model.key, initial.key)  # the key is state, not a parameter
    assert not tc.tree_equal(model.layers, initial.layers)  # the parameters moved


def test_it_learns(quick_run: dict[str, Any]) -> None:
    # Without dropout the fit must beat predicting the mean clearly; the quick run
    # reaches about a third of it (0.17 vs 0.49), so a half leaves room for other CPUs.
    assert quick_run["eval_loss"] < 0.5 * quick_run["baseline_loss"]
    losses = quick_run["losses"]
    assert float(jnp.mean(losses[-10:])) < float(jnp.mean(losses[:10]))


def test_the_checkpoint_is_refused_into_a_wrong_template(
    mlp: ModuleType, tmp_path: pathlib.Path
) -> None:
    model = mlp.init_model(jax.random.key(0))
    path = tmp_path / "mlp.npz"
    tc.save(path, model)
    smaller = tc.replace_at(model, lambda m: m.mask, jnp.ones(3, bool))
    with pytest.raises(tc.CheckpointError, match=r"mask"):
        tc.load(path, smaller)


def test_plot_writes_a_png(mlp: ModuleType, quick_run: dict[str, Any], tmp_path: pathlib.Path) -> None:
    # The script itself runs with --quick and --help in tests/examples/test_examples.py.
    path = tmp_path / "loss.png"
    mlp.plot(quick_run["losses"], str(path), mlp.QUICK.steps // 2)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------------
# docs/training.md compares the same program in equinox, counting lines: keep it honest.

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "training.md"


def _blocks() -> list[tuple[str, str]]:
    """(info string, code without prompts) of each python block of the page."""
    fence = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
    found = []
    for m in fence.finditer(DOC.read_text(encoding="utf-8")):
        if m["info"].split()[:1] == ["python"]:
            code = [line[4:] for line in m["body"].splitlines() if line.startswith((">>> ", "... "))]
            found.append((m["info"], "\n".join(code)))
    return found


def _code_lines(source: str, names: set[str]) -> int:
    """Lines of the top-level definitions `names`, blank lines and comments left out."""
    lines = source.splitlines()
    count = 0
    for node in ast.parse(source).body:
        if getattr(node, "name", None) in names:
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            count += sum(1 for line in lines[start - 1 : node.end_lineno] if line.strip() and not line.strip().startswith("#"))
    return count


def test_training_page_counts_its_lines() -> None:
    blocks = _blocks()
    treeclass_model = blocks[0][1]
    treeclass_train = next(code for info, code in blocks if "def train(" in code and "equinox" not in info)
    equinox = next(code for info, code in blocks if "requires=equinox" in info)
    table = DOC.read_text(encoding="utf-8")
    model = (_code_lines(treeclass_model, {"Linear", "MLP"}), _code_lines(equinox, {"Linear", "MLP"}))
    train = (_code_lines(treeclass_train, {"train"}), _code_lines(equinox, {"train"}))
    assert f"| the model (two classes) | {model[0]} | {model[1]} |" in table
    assert f"| the training step and scan | {train[0]} | {train[1]} |" in table
    checkpoint = next(code for _, code in blocks if "tc.save(" in code)
    saves = (
        sum(("tc.save(" in line or "tc.load(" in line) for line in checkpoint.splitlines()),
        sum(line.startswith(("raw =", "eqx.tree_serialise", "like =", "restored")) for line in equinox.splitlines()),
    )
    assert f"| save and restore | {saves[0]} | {saves[1]} |" in table
