"""Train an MLP that keeps its dropout key, step counter and input mask on the model.

What it shows:

- a model is more than its float parameters: `MLP` holds two `Linear` layers in a
  tuple, a `bool[16]` mask of the input features it uses, a `jax.random.key` for
  dropout and an `int32` step counter, all as fields of one treeclass;
- `tc.value_and_grad` differentiates the floating-point leaves only (the gradient is
  an `MLP` with `None` at the mask, key and step), optax's `adamw` updates them
  (`opt.init(tc.partition(model)[0])`), and `tc.apply_updates` adds the updates back,
  all inside one jitted `lax.scan`: no hand-split of the model anywhere;
- dropout is driven by the key field: each step draws its mask from
  `jax.random.fold_in(model.key, model.step)`, so the step counter is state that a
  checkpoint must keep;
- `tc.replace_at` changes one node deep in the model (`m.layers[1].w`), rebuilding the
  path with `replace()`;
- `tc.save` mid-way, `tc.load` into a template, and the resumed run ends on the same
  loss as the uninterrupted one, bit for bit.

The data are synthetic (a fixed seed): 16 features of which the first 12 carry the
signal; the mask switches the other 4 off.

    python examples/mlp.py                       # 600 steps, 512 samples
    python examples/mlp.py --quick               # 100 steps, used by the tests
    python examples/mlp.py --plot loss.png       # and the loss curve as a PNG
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import pathlib
import sys
import tempfile
from typing import TypedDict

import jax
import jax.numpy as jnp
import optax  # type: ignore[import-untyped]  # optax ships no py.typed marker

import treeclass as tc

FEATURES = 16
USED = 12  # the first USED features carry the signal; the mask drops the rest
HIDDEN = 32
LEARNING_RATE = 3e-3
WEIGHT_DECAY = 1e-4
OPTIMIZER = optax.adamw(LEARNING_RATE, weight_decay=WEIGHT_DECAY)


@dataclasses.dataclass(frozen=True)
class Config:
    steps: int
    samples: int


FULL = Config(steps=600, samples=512)
QUICK = Config(steps=100, samples=128)


class Linear(tc.TreeClass):
    w: jax.Array  # (inputs, outputs)
    b: jax.Array  # (outputs,)

    def __call__(self, x: jax.Array) -> jax.Array:
        return x @ self.w + self.b


class MLP(tc.TreeClass):
    layers: tuple[Linear, Linear]
    mask: jax.Array  # bool[FEATURES]: the input features the model reads
    key: jax.Array  # a typed PRNG key (jax.random.key): dropout
    step: jax.Array  # int32[]: optimisation steps taken
    dropout: tc.Static[float] = 0.1

    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        first, last = self.layers
        h = jax.nn.relu(first(jnp.where(self.mask, x, 0.0)))
        if train:
            keep = jax.random.bernoulli(
                jax.random.fold_in(self.key, self.step), 1.0 - self.dropout, h.shape
            )
            h = jnp.where(keep, h / (1.0 - self.dropout), 0.0)
        return last(h)[:, 0]


def init_model(key: jax.Array) -> MLP:
    k1, k2, k_dropout = jax.random.split(key, 3)
    model = MLP(
        layers=(
            Linear(jax.random.normal(k1, (FEATURES, HIDDEN)) / FEATURES**0.5, jnp.zeros(HIDDEN)),
            Linear(jax.random.normal(k2, (HIDDEN, 1)) / HIDDEN**0.5, jnp.zeros(1)),
        ),
        mask=jnp.arange(FEATURES) < USED,
        key=k_dropout,
        step=jnp.array(0, jnp.int32),
    )
    # Start the output layer small: one node, deep in the model, changed in one line.
    return tc.replace_at(model, lambda m: m.layers[1].w, fn=lambda w: 0.1 * w)


def make_data(key: jax.Array, samples: int) -> tuple[jax.Array, jax.Array]:
    """`x` f32[samples, FEATURES], `y` f32[samples]: a smooth function of the first
    USED features plus noise."""
    kx, kw, kn = jax.random.split(key, 3)
    x = jax.random.normal(kx, (samples, FEATURES))
    w = jax.random.normal(kw, (USED,)) / USED**0.5
    y = jnp.sin(2.0 * x[:, :USED] @ w) + 0.05 * jax.random.normal(kn, (samples,))
    return x, y


def loss(model: MLP, x: jax.Array, y: jax.Array) -> jax.Array:
    """Mean squared error of the model in training mode (dropout on)."""
    return jnp.mean((model(x, train=True) - y) ** 2)


def advance(model: MLP) -> MLP:
    """The model after one step: the counter moves on (and with it, dropout)."""
    return model.replace(step=model.step + 1)


@functools.partial(jax.jit, static_argnames="steps")
def train(
    model: MLP, opt_state: optax.OptState, x: jax.Array, y: jax.Array, steps: int
) -> tuple[MLP, optax.OptState, jax.Array]:
    """`steps` adamw steps in one `lax.scan`; returns the model, the optimizer state
    and the loss at each step."""

    def step(carry: tuple[MLP, optax.OptState], _: None) -> tuple[tuple[MLP, optax.OptState], jax.Array]:
        model, opt_state = carry
        value, grads = tc.value_and_grad(loss)(model, x, y)
        updates, opt_state = OPTIMIZER.update(grads, opt_state, tc.partition(model)[0])
        model = advance(tc.apply_updates(model, updates))
        return (model, opt_state), value

    (model, opt_state), losses = jax.lax.scan(step, (model, opt_state), length=steps)
    return model, opt_state, losses


class Results(TypedDict):
    model: MLP  # trained in one go
    resumed: MLP  # trained in two halves, through a checkpoint
    losses: jax.Array
    resumed_losses: jax.Array
    final_loss: float
    resumed_final_loss: float
    same_bits: bool
    eval_loss: float  # without dropout
    baseline_loss: float  # predicting the mean


def run(config: Config, checkpoint: pathlib.Path) -> Results:
    """Trains `config.steps` steps in one go, and again in two halves with a
    checkpoint between them; returns what `main` prints."""
    model = init_model(jax.random.key(0))
    x, y = make_data(jax.random.key(1), config.samples)
    opt_state = OPTIMIZER.init(tc.partition(model)[0])

    whole, _, losses = train(model, opt_state, x, y, config.steps)

    half = config.steps // 2
    first, state, losses_a = train(model, opt_state, x, y, half)
    tc.save(checkpoint, (first, state))
    # The template gives the structure, dtypes and statics; the file gives the values.
    restored, state = tc.load(checkpoint, (model, opt_state))
    resumed, _, losses_b = train(restored, state, x, y, config.steps - half)
    resumed_losses = jnp.concatenate([losses_a, losses_b])

    return {
        "model": whole,
        "resumed": resumed,
        "losses": losses,
        "resumed_losses": resumed_losses,
        "final_loss": float(losses[-1]),
        "resumed_final_loss": float(resumed_losses[-1]),
        "same_bits": bool(jnp.array_equal(losses, resumed_losses)) and whole == resumed,
        "eval_loss": float(jnp.mean((whole(x, train=False) - y) ** 2)),
        "baseline_loss": float(jnp.mean((y - jnp.mean(y)) ** 2)),
    }


def plot(losses: jax.Array, path: str, checkpoint_step: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(jax.device_get(losses), label="training loss (dropout on)")
    ax.axvline(checkpoint_step, color="grey", linestyle=":", label="checkpoint, resumed")
    ax.set(xlabel="step", ylabel="mean squared error", yscale="log", title="MLP, adamw")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Train an MLP holding a dropout key, a step counter and a mask, "
        "with tc.value_and_grad and optax adamw in one jitted lax.scan; checkpoint "
        "mid-way and resume to the same final loss.",
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"a small run for tests: {QUICK.steps} steps"
    )
    parser.add_argument("--steps", type=int, help=f"optimisation steps ({FULL.steps})")
    parser.add_argument("--plot", metavar="PATH", help="save the loss curve as a PNG")
    parser.add_argument(
        "--checkpoint", metavar="PATH", help="where to write the mid-way checkpoint "
        "(default: a temporary directory)"
    )
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 2:
        parser.error("--steps must be at least 2 (the checkpoint is taken half-way)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = QUICK if args.quick else FULL
    if args.steps is not None:
        config = dataclasses.replace(config, steps=args.steps)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = pathlib.Path(args.checkpoint or pathlib.Path(tmp) / "mlp.npz")
        out = run(config, checkpoint)
    model = out["model"]
    print(f"model:      {model}")
    print(f"data:       {config.samples} samples, {FEATURES} features ({USED} used by the mask)")
    print(f"training:   {config.steps} adamw steps in one lax.scan, dropout {MLP.dropout}")
    print(f"loss:       first {float(out['losses'][0]):.4f}, last {out['final_loss']:.4f}")
    print(f"evaluation: {out['eval_loss']:.4f} without dropout (predicting the mean: "
          f"{out['baseline_loss']:.4f})")
    print(f"resumed:    checkpoint at step {config.steps // 2}, final loss "
          f"{out['resumed_final_loss']:.4f}; "
          f"{'bit for bit the same' if out['same_bits'] else 'DIFFERENT'} as without")
    if args.plot:
        plot(out["losses"], args.plot, config.steps // 2)
        print(f"plot:       {args.plot}")
    return 0 if out["same_bits"] else 1


if __name__ == "__main__":
    sys.exit(main())
